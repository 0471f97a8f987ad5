"""The on-disk record of a run's steps: one JSON line per completed step, written as the run goes.

A step is keyed by (iteration, role, attempt). `RunJournal.step` returns a step's recorded output when
the journal already holds it, so a resumed run replays what was done and redoes nothing; a crash loses at
most the step in flight (its torn line is dropped on reading and cut off before the next append)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from dsagent_cbr.bounded import Unreadable, parse_json
from dsagent_cbr.errors import Cancelled, CbrError
from dsagent_cbr.files import append_lines, json_line, whole_lines

T = TypeVar("T")
JOURNAL = "journal.jsonl"


def _key(iteration: int, role: str, attempt: int) -> str:
    return f"{iteration}:{role}:{attempt}"


def _shape_problem(record: object) -> str | None:
    """What keeps a parsed line from being a step as `step` writes it, or None. Only the keys every step
    has are checked: what a step's output holds is its role's own."""
    if not isinstance(record, dict):
        return "not a JSON object"
    if "output" not in record:
        return 'no "output"'
    for key, kind, required in (
        ("iteration", int, True),
        ("role", str, True),
        ("attempt", int, False),
    ):
        if key not in record:
            if required:
                return f'no "{key}"'
        elif type(record[key]) is not kind:  # not isinstance: a JSON true is no iteration
            return f'"{key}" is not a {"whole number" if kind is int else "string"}'
    return None


SCRIPT_ROLES = ("execute", "refit")  # the steps whose output is a script's RunResult


class RunJournal:
    def __init__(self, run_dir: Path) -> None:
        self.path = run_dir / JOURNAL
        self.records: list[dict[str, object]] = []
        self._done: dict[str, dict[str, object]] = {}
        # nodes of a --parallel search journal their steps from their own threads
        self._lock = threading.Lock()
        self._closed = False
        if self.path.exists():
            self._load()

    def close(self) -> None:
        """The run's record is final: a step that ends after it (a node's thread that outlived its run's
        stop) is not written."""
        with self._lock:
            self._closed = True

    def _load(self) -> None:
        """Read back every whole line; a torn last one (a crash mid-write) is not one, and is dropped.
        Any other line that is not a step as `step` writes it is damage no crash makes: refused, in one
        sentence."""
        try:
            for number, _, raw in whole_lines(self.path):
                self._remember(self._parsed(number, raw))
        except OSError as exc:
            raise CbrError(f"Journal {self.path} cannot be read ({exc.strerror or exc}).") from None

    def _parsed(self, number: int, raw: bytes) -> dict[str, object]:
        try:
            record = parse_json(raw, "the line")
        except Unreadable:  # not JSON, not UTF-8, nested past json's recursion or bounded.MAX_DEPTH
            raise CbrError(f"Journal {self.path} is damaged at line {number} (not JSON).") from None
        problem = _shape_problem(record)
        if problem:
            raise CbrError(f"Journal {self.path} is damaged at line {number} ({problem}).")
        return record

    def _remember(self, record: dict[str, object]) -> None:
        self.records.append(record)
        self._done[
            _key(int(record["iteration"]), str(record["role"]), int(record.get("attempt", 0)))
        ] = record

    def step(self, iteration: int, role: str, fn: Callable[[], T], *, attempt: int = 0) -> T:
        """Run fn once per (iteration, role, attempt) across crashes and resumes; its output must be JSON."""
        previous = self._done.get(_key(iteration, role, attempt))
        if previous is not None:
            return previous["output"]  # type: ignore[return-value]
        record = {
            "iteration": iteration,
            "role": role,
            "attempt": attempt,
            "time": time.time(),
            "output": fn(),
        }
        with self._lock:
            if self._closed:
                raise Cancelled(
                    f"step {iteration} ({role}) ended after its run's record was closed"
                )
            append_lines(self.path, [json_line(record)])
            self._remember(record)
        return record["output"]  # type: ignore[return-value]

    def check_results(self) -> None:
        """Every recorded script run is one a resume can take back, or the resume is refused now, in one
        sentence, before it prints or starts anything (a replay would otherwise stop at the step)."""
        from dsagent_cbr.harness.result import RunResult

        for record in self.records:
            if record.get("role") in SCRIPT_ROLES and isinstance(record.get("output"), dict):
                try:
                    RunResult.from_dict(record["output"])  # type: ignore[arg-type]
                except ValueError as exc:
                    raise self.damaged(record["iteration"], str(record["role"]), exc) from None  # type: ignore[arg-type]

    def damaged(self, iteration: int, role: str, why: object) -> CbrError:
        """A recorded step whose output its role cannot take back (a result lacking a field)."""
        return CbrError(
            f"Journal {self.path} is damaged: the {role} record of step {iteration} is not one "
            f"({why})."
        )

    def recorded(self, iteration: int, role: str, attempt: int = 0) -> object | None:
        """A completed step's output, or None when the journal does not hold it."""
        previous = self._done.get(_key(iteration, role, attempt))
        return None if previous is None else previous["output"]

    def errors(self) -> list[dict[str, object]]:
        """What the model got wrong: every step whose output records an error, a reply it could not use
        (its raw text stays in the journal's line) or a script of its that failed."""
        return [
            {
                "iteration": r["iteration"],
                "role": r["role"],
                "attempt": r.get("attempt", 0),
                "error": r["output"]["error"],
            }  # type: ignore[index]
            for r in self.records
            if isinstance(r["output"], dict) and r["output"].get("error")
        ]
