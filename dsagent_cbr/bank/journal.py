"""The bank's durable record: an append-only journal of the cases users add and remove, and the lock
that serialises every write to a bank folder.

The vector store is derived data: the seed files (casebank/) plus this journal say exactly what the bank
holds, so `cbr bank rebuild` can always make the store again. One JSON object a line:

    {"op": "journal", "id": "<random>", "version": 1}     first line: names this journal
    {"op": "add", "case": {...}}                            a case a user added or a run retained
    {"op": "remove", "ids": [...]}                          cases (seed ones too) a user removed
    {"op": "reseed"}                                        `cbr bank build`: removed seed cases come back

A line is written whole and fsynced before the store is touched. A crash can leave at most one torn last
line (no newline): it is ignored on reading and cut off before the next append; its write never returned,
so nothing reported as added is lost."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dsagent_cbr.bank.cases import Case
from dsagent_cbr.errors import CbrError
from dsagent_cbr.files import append_lines, fsync_dir, json_line, whole_lines, write_bytes_atomic

JOURNAL_NAME = "journal.jsonl"
LOCK_NAME = ".bank.lock"


@dataclass
class JournalState:
    """What the journal says: the user's cases (in the order added) and the ids removed since the last
    reseed (seed cases among them stay out of the bank)."""

    cases: dict[str, Case] = field(default_factory=dict)
    removed: set[str] = field(default_factory=set)

    def apply(self, op: dict[str, Any]) -> None:
        kind = op.get("op")
        if kind == "add":
            case = Case.from_dict(op["case"])
            self.cases[case.id] = case
            self.removed.discard(case.id)
        elif kind == "remove":
            for case_id in op["ids"]:
                self.cases.pop(case_id, None)
                self.removed.add(case_id)
        elif kind == "reseed":
            self.removed.clear()


class CaseJournal:
    """The bank's journal of user cases (not the run journal of agent/journal.py)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def exists(self) -> bool:
        return self.path.is_file()

    def size(self) -> int:
        return self.path.stat().st_size if self.path.is_file() else 0

    @property
    def next_path(self) -> Path:
        """Where a compacted journal waits (during a rebuild) until it replaces this one."""
        return self.path.with_name(self.path.name + ".next")

    def create(
        self, ops: list[dict[str, Any]] | None = None, *, staged: bool = False
    ) -> tuple[str, int]:
        """A new journal holding `ops`, replacing any old one atomically (or, when staged, written to
        next_path for `commit_staged`); returns its id and size."""
        journal_id = uuid.uuid4().hex[:16]
        data = b"".join(
            [
                json_line({"op": "journal", "id": journal_id, "version": 1}),
                *(json_line(op) for op in ops or []),
            ]
        )
        write_bytes_atomic(self.next_path if staged else self.path, data)
        return journal_id, len(data)

    def commit_staged(self) -> None:
        os.replace(self.next_path, self.path)
        fsync_dir(self.path.parent)

    @staticmethod
    def compacted(state: JournalState) -> list[dict[str, Any]]:
        """The ops of a journal that says what `state` says and no more: texts of removed cases are gone."""
        ops: list[dict[str, Any]] = [
            {"op": "add", "case": c.to_dict()} for c in state.cases.values()
        ]
        return ops + ([{"op": "remove", "ids": sorted(state.removed)}] if state.removed else [])

    def ident(self) -> str:
        with self.path.open("rb") as fh:
            first = fh.readline()
        try:
            head = json.loads(first)
            return str(head["id"]) if head.get("op") == "journal" else ""
        except (ValueError, KeyError, AttributeError):
            raise CbrError(
                f"The bank journal {self.path} does not start with its header line; it is not a "
                "journal this version wrote (move it aside and run `cbr bank rebuild`)."
            ) from None

    def append(self, ops: list[dict[str, Any]]) -> int:
        """Append whole lines and fsync; returns the journal's size after them. Call under the bank lock."""
        # append_lines would create it; a journal without its header is not one
        if not self.path.is_file():
            raise FileNotFoundError(self.path)
        return append_lines(self.path, [json_line(op) for op in ops])

    def ops(self, start: int = 0) -> Iterator[tuple[int, dict[str, Any]]]:
        """(offset after the line, op) for every whole line from byte `start` on; a torn last line is skipped."""
        for number, at, raw in whole_lines(self.path, start):
            try:
                op = json.loads(raw)
            except ValueError:
                raise CbrError(
                    f"Line {number} after byte {start} of the bank journal {self.path} is not "
                    "JSON; the journal was edited or damaged, fix or remove that line."
                ) from None
            yield at, op

    def state(self) -> JournalState:
        state = JournalState()
        for _, op in self.ops():
            state.apply(op)
        return state


class BankLock:
    """An exclusive lock on the bank folder (flock on a lock file), re-entrant within one process.

    Every write (add, remove, seeding, rebuild, recovery of an interrupted rebuild) runs under it, so two
    processes never interleave their writes and each one's report is what it wrote."""

    _held: dict[str, tuple[Any, int]] = {}
    _guard = threading.RLock()

    def __init__(self, bank_dir: Path) -> None:
        self.path = bank_dir / LOCK_NAME
        self.key = str(self.path.resolve())

    @contextlib.contextmanager
    def __call__(self) -> Iterator[None]:
        with self._guard:
            handle, depth = self._held.get(self.key, (None, 0))
            if handle is None:
                handle = self.path.open("a")
                fcntl.flock(handle, fcntl.LOCK_EX)
            self._held[self.key] = (handle, depth + 1)
            try:
                yield
            finally:
                handle, depth = self._held[self.key]
                if depth == 1:
                    del self._held[self.key]
                    fcntl.flock(handle, fcntl.LOCK_UN)
                    handle.close()
                else:
                    self._held[self.key] = (handle, depth - 1)
