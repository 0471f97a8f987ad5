"""Writing files that a crash must not leave half-written: whole-file replacement and JSON-lines logs.

Every file cbr writes for a user (a run's summary, a bank's journal, a trial's record, a submission) goes
through here, so all of them get the same guarantee: a reader sees the old file or the new one, and what
a call returned is on disk (fsynced, the folder too) before the caller goes on."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import secrets
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO


def fsync_dir(folder: Path) -> None:
    """Make a rename or a new file in `folder` survive a power cut, not only a killed process."""
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_bytes_atomic(path: Path, data: bytes) -> None:
    """Write to a temporary name beside `path`, fsync, rename over it."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    # per process: two writers never share one
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with tmp.open("wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    fsync_dir(path.parent)


def fresh_folder(parent: Path, prefix: str = "") -> Path:
    """parent/<prefix><time>-<4 random hex digits>, made by this call and no other: mkdir without
    exist_ok claims the name atomically, so two commands started in the same second (which once
    shared one predict folder) each get their own, and a name taken already is drawn again."""
    while True:
        stamp = time.strftime("%Y%m%d-%H%M%S")
        path = Path(parent) / f"{prefix}{stamp}-{secrets.token_hex(2)}"
        try:
            path.mkdir(parents=True, exist_ok=False)
        except FileExistsError:
            continue
        return path


def write_text_atomic(path: Path, text: str) -> None:
    write_bytes_atomic(path, text.encode("utf-8"))


def write_json_atomic(path: Path, data: Any) -> None:
    write_text_atomic(path, json.dumps(data, indent=2, default=str))


def json_line(record: Any) -> bytes:
    return (json.dumps(record, ensure_ascii=False, default=str) + "\n").encode("utf-8")


def append_lines(path: Path, lines: list[bytes]) -> int:
    """Append whole lines to a JSON-lines log and fsync; returns the log's size after them. A torn last
    line (its writer died mid-write, so its call never returned) is cut off first: appending after it
    would glue the new line to it."""
    with Path(path).open("a+b") as fh:
        end = fh.seek(0, os.SEEK_END)
        if end:
            fh.seek(end - 1)
            if fh.read(1) != b"\n":
                fh.truncate(_after_last_newline(fh, end))
        fh.write(b"".join(lines))
        fh.flush()
        os.fsync(fh.fileno())
        return fh.tell()


def whole_lines(path: Path, start: int = 0) -> Iterator[tuple[int, int, bytes]]:
    """(line number, offset after the line, line) for every whole line from byte `start` on; a torn last
    line is not one."""
    with Path(path).open("rb") as fh:
        fh.seek(start)
        at = start
        for number, raw in enumerate(fh, 1):
            if not raw.endswith(b"\n"):
                return
            at += len(raw)
            yield number, at, raw


def _after_last_newline(fh: BinaryIO, end: int) -> int:
    """Offset just after the last newline before `end` (0 when there is none)."""
    at = end
    while at > 0:
        step = min(65536, at)
        fh.seek(at - step)
        block = fh.read(step)
        found = block.rfind(b"\n")
        if found >= 0:
            return at - step + found + 1
        at -= step
    return 0


@contextlib.contextmanager
def exclusive(lock: Path) -> Iterator[None]:
    """Held by one process at a time: an flock on the file `lock` (made if missing), a file of its own so
    that what it guards may be replaced meanwhile."""
    with Path(lock).open("a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)
