"""The on-disk record of a run: one JSON line per completed step, written as the run goes.

A step is keyed by (iteration, role, attempt). `Journal.step` returns a step's recorded output when
the journal already holds it, so a resumed run replays what was done and redoes nothing; a crash
loses at most the step in flight."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from dsagent_cbr.errors import CbrError


def _key(iteration: int, role: str, attempt: int) -> str:
    return f"{iteration}:{role}:{attempt}"


class Journal:
    def __init__(self, run_dir: Path) -> None:
        self.run_dir = run_dir
        self.path = run_dir / "journal.jsonl"
        self.records: list[dict[str, Any]] = []
        self._done: dict[str, dict[str, Any]] = {}
        if self.path.exists():
            self._load()

    def _load(self) -> None:
        for n, line in enumerate(self.path.read_text(encoding="utf-8").splitlines(), 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                # Only a torn last line (the step in flight when the run died) is forgivable.
                if n == len(self.path.read_text(encoding="utf-8").splitlines()):
                    break
                raise CbrError(f"Journal {self.path} is damaged at line {n}.") from None
            self.records.append(record)
            self._done[_key(record["iteration"], record["role"], record.get("attempt", 0))] = record

    def done(self, iteration: int, role: str, attempt: int = 0) -> dict[str, Any] | None:
        return self._done.get(_key(iteration, role, attempt))

    def append(self, iteration: int, role: str, output: Any, *, attempt: int = 0, **info: Any) -> dict[str, Any]:
        record = {"iteration": iteration, "role": role, "attempt": attempt, "time": time.time(),
                  "output": output, **info}
        line = json.dumps(record, default=str)
        with self.path.open("a", encoding="utf-8") as fh:
            fh.write(line + "\n")
            fh.flush()
            os.fsync(fh.fileno())
        self.records.append(record)
        self._done[_key(iteration, role, attempt)] = record
        return record

    def step(self, iteration: int, role: str, fn: Callable[[], Any], *, attempt: int = 0) -> Any:
        """Run fn once per (iteration, role, attempt) across crashes and resumes."""
        previous = self.done(iteration, role, attempt)
        if previous is not None:
            return previous["output"]
        return self.append(iteration, role, fn(), attempt=attempt)["output"]

    def errors(self) -> list[dict[str, Any]]:
        """What the model got wrong: every step whose output says so, with its raw reply."""
        return [{"iteration": r["iteration"], "role": r["role"], "attempt": r.get("attempt", 0),
                 "error": r["output"]["error"]}
                for r in self.records if isinstance(r["output"], dict) and r["output"].get("error")]


def write_bytes_atomic(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(data)
    tmp.replace(path)


def write_text_atomic(path: Path, text: str) -> None:
    write_bytes_atomic(path, text.encode("utf-8"))
