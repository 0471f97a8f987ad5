"""The on-disk record of a run's steps: one JSON line per completed step, written as the run goes.

A step is keyed by (iteration, role, attempt). `RunJournal.step` returns a step's recorded output when
the journal already holds it, so a resumed run replays what was done and redoes nothing; a crash loses at
most the step in flight (its torn line is dropped on reading and cut off before the next append)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from dsagent_cbr.errors import CbrError
from dsagent_cbr.files import append_lines, json_line, whole_lines

T = TypeVar("T")
JOURNAL = "journal.jsonl"


def _key(iteration: int, role: str, attempt: int) -> str:
    return f"{iteration}:{role}:{attempt}"


class RunJournal:
    def __init__(self, run_dir: Path) -> None:
        self.path = run_dir / JOURNAL
        self.records: list[dict[str, object]] = []
        self._done: dict[str, dict[str, object]] = {}
        self._lock = threading.Lock()  # nodes of a --parallel search journal their steps from their own threads
        if self.path.exists():
            self._load()

    def _load(self) -> None:
        for number, _, raw in whole_lines(self.path):
            try:
                record = json.loads(raw)
            except ValueError:
                raise CbrError(f"Journal {self.path} is damaged at line {number}.") from None
            self._remember(record)

    def _remember(self, record: dict[str, object]) -> None:
        self.records.append(record)
        self._done[_key(int(record["iteration"]), str(record["role"]), int(record.get("attempt", 0)))] = record

    def step(self, iteration: int, role: str, fn: Callable[[], T], *, attempt: int = 0) -> T:
        """Run fn once per (iteration, role, attempt) across crashes and resumes; its output must be JSON."""
        previous = self._done.get(_key(iteration, role, attempt))
        if previous is not None:
            return previous["output"]  # type: ignore[return-value]
        record = {"iteration": iteration, "role": role, "attempt": attempt, "time": time.time(), "output": fn()}
        with self._lock:
            append_lines(self.path, [json_line(record)])
            self._remember(record)
        return record["output"]  # type: ignore[return-value]

    def recorded(self, iteration: int, role: str, attempt: int = 0) -> object | None:
        """A completed step's output, or None when the journal does not hold it."""
        previous = self._done.get(_key(iteration, role, attempt))
        return None if previous is None else previous["output"]

    def errors(self) -> list[dict[str, object]]:
        """What the model got wrong: every step whose output records an error, a reply it could not use
        (its raw text stays in the journal's line) or a script of its that failed."""
        return [{"iteration": r["iteration"], "role": r["role"], "attempt": r.get("attempt", 0),
                 "error": r["output"]["error"]}  # type: ignore[index]
                for r in self.records if isinstance(r["output"], dict) and r["output"].get("error")]
