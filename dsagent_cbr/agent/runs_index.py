"""The index of runs in cbr's home: `<home>/runs.jsonl`, one JSON line per run folder made, so that
`cbr runs` finds a run whatever folder its command ran in (and whatever --runs-dir it was given).

The index is append-only and only a pointer: the run folder is the truth. An entry whose folder is gone
is passed over when read, and a line that is not an entry (a torn write, a hand edit) is skipped."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from dsagent_cbr.bounded import Unreadable, parse_json
from dsagent_cbr.files import append_lines, exclusive, json_line, whole_lines, write_bytes_atomic

INDEX = "runs.jsonl"


@dataclass(frozen=True)
class Entry:
    run_dir: Path  # absolute
    task: str
    started: datetime  # aware: entries written in another time zone still sort right

    def as_json(self) -> dict[str, str]:
        return {
            "run_dir": str(self.run_dir),
            "task": self.task,
            "started": self.started.isoformat(),
        }


def index_path(home: Path) -> Path:
    return Path(home) / INDEX


@contextlib.contextmanager
def _locked(home: Path) -> Iterator[None]:
    """One writer at a time: runs start in parallel (a bench, two terminals), and `remove` rewrites the
    file, which an append in between would lose. The lock is a file of its own, since the rewrite
    replaces runs.jsonl and a lock held on the old file would guard nothing."""
    Path(home).mkdir(parents=True, exist_ok=True)
    with exclusive(Path(home) / f".{INDEX}.lock"):
        yield


def register(home: Path, run_dir: Path, task: str) -> Entry:
    """Note a new run folder in the index; the time is now, to the second, with its time zone."""
    started = datetime.fromtimestamp(time.time()).astimezone().replace(microsecond=0)
    entry = Entry(Path(run_dir).resolve(), task, started)
    with _locked(home):
        append_lines(index_path(home), [json_line(entry.as_json())])
    return entry


def _parse(raw: bytes) -> Entry | None:
    """An index line as an entry, or None for anything else."""
    try:
        data = parse_json(raw, INDEX)
        run_dir = data["run_dir"]
        task = data["task"]
        started = data["started"]
        if not (isinstance(run_dir, str) and isinstance(task, str) and isinstance(started, str)):
            return None
        # a naive time (a hand-written line) is taken as local, so that it compares with the others
        return Entry(Path(run_dir), task, datetime.fromisoformat(started).astimezone())
    except (Unreadable, ValueError, TypeError, KeyError):  # a decoding error is a ValueError too
        return None


def _entries(home: Path) -> list[Entry]:
    path = index_path(home)
    if not path.is_file():
        return []
    return [entry for _, _, raw in whole_lines(path) if (entry := _parse(raw)) is not None]


def read(home: Path) -> list[Entry]:
    """The index's entries whose folder still exists, newest first, one per folder (its latest line)."""
    latest: dict[Path, Entry] = {}
    for entry in _entries(home):
        if not entry.run_dir.is_absolute():
            continue  # register writes absolute paths; a relative one would depend on where cbr runs
        latest[entry.run_dir] = entry
    found = [entry for entry in latest.values() if entry.run_dir.is_dir()]
    return sorted(found, key=lambda entry: entry.started, reverse=True)


def remove(home: Path, run_dir: Path) -> int:
    """Drop every line of `run_dir` from the index (the others kept byte for byte); how many went."""
    path, gone = index_path(home), Path(run_dir).resolve()
    with _locked(home):
        if not path.is_file():
            return 0
        kept, dropped = [], 0
        for _, _, raw in whole_lines(path):
            entry = _parse(raw)
            if entry is not None and entry.run_dir == gone:
                dropped += 1
            else:
                kept.append(raw)
        if dropped:
            write_bytes_atomic(path, b"".join(kept))
    return dropped
