"""Reading a file that comes from outside cbr (a run folder's record, a benchmark's questions, a
folder a user points at) as hostile input: through no link, a regular file only (a pipe would block,
a device never end), never more than a cap, and JSON never nested past a limit nor holding text that
is not Unicode. Whatever is wrong is an Unreadable: one sentence naming the file and what is wrong
with it, never quoting what it holds."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

from dsagent_cbr.errors import CbrError

# a run's summary.json or config.json: a search of a thousand nodes writes some 500 kB
MAX_RECORD_BYTES = 8 * 2**20
# cbr's own records nest five deep; json itself stops near a thousand, with a RecursionError
MAX_DEPTH = 64


class Unreadable(CbrError):
    """A file from outside that cbr will not take as it is; the message says why, in a sentence."""


class Absent(Unreadable):
    """There is no such file."""


def megabytes(size: int) -> str:
    return f"{size / 2**20:.1f} MB"


def read_open(fd: int, name: str, limit: int) -> bytes:
    """The bytes of the open file `fd` (closed here): a regular file of at most `limit` bytes."""
    with os.fdopen(fd, "rb") as fh:
        info = os.fstat(fh.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise Unreadable(f"{name} is not a regular file")
        if info.st_size > limit:
            raise Unreadable(
                f"{name} is {megabytes(info.st_size)}; at most {megabytes(limit)} is read"
            )
        data = fh.read(limit + 1)
    if len(data) > limit:  # grew while being read
        raise Unreadable(f"{name} is over {megabytes(limit)}")
    return data


def read_capped(path: Path, limit: int) -> bytes:
    """The bytes of the file at `path`, refused when it is a link, not a regular file, or over
    `limit` bytes (the folders above it are the caller's to trust)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except FileNotFoundError:
        raise Absent(f"There is no {path}") from None
    except OSError as exc:
        why = "a link, which cbr does not follow" if os.path.islink(path) else exc.strerror
        raise Unreadable(f"{path} cannot be read ({why})") from None
    return read_open(fd, str(path), limit)


def parse_json(raw: bytes, name: str, max_depth: int = MAX_DEPTH) -> Any:
    """JSON whose every level and every text was checked: deeper than `max_depth`, or text with a
    lone surrogate (which no UTF-8 file, prompt or terminal takes), is refused like JSON that does
    not parse."""
    try:
        value = json.loads(raw)
    # a decoding error is a ValueError, so is an integer of more than 4300 digits; nesting that
    # json's own recursion cannot follow is a RecursionError
    except (ValueError, RecursionError) as exc:
        why = exc.msg if isinstance(exc, json.JSONDecodeError) else type(exc).__name__
        raise Unreadable(f"{name} is not JSON cbr can read ({why})") from None
    _check_tree(value, name, max_depth)
    return value


def _check_tree(value: Any, name: str, max_depth: int) -> None:
    """Walked without recursion: a tree json took may still be too deep for what reads it next."""
    stack = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, str):
            if not is_unicode(item):
                raise Unreadable(f"{name} holds text that is not Unicode (a lone surrogate)")
            continue
        if isinstance(item, dict):
            children = [*item.keys(), *item.values()]
        elif isinstance(item, list):
            children = item
        else:
            continue
        if depth >= max_depth:
            raise Unreadable(f"{name} nests deeper than the {max_depth} levels cbr reads")
        stack.extend((child, depth + 1) for child in children)


def is_unicode(text: str) -> bool:
    """No lone surrogate: what Python makes of bytes that are not UTF-8 (an argument, a name)."""
    if text.isascii():
        return True
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def read_json(path: Path, limit: int = MAX_RECORD_BYTES, max_depth: int = MAX_DEPTH) -> Any:
    """A JSON file from outside, read and checked as above."""
    return parse_json(read_capped(path, limit), str(path), max_depth)
