"""The key behind every random choice about held rows: which rows are held, where they sit among the
test rows, which ids they carry. A seed a script could compute (the task's name, say) would let it redo
the draw: with the training file's length it knows which rows were taken, and in a file sorted by its
label their neighbours give their labels away. So the seed is keyed: random bytes made once and kept in
cbr's home, which no sandbox mounts. The same home gives a task the same rows on every run (runs stay
comparable, a resume grades as before); another home draws other rows."""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
from functools import cache
from pathlib import Path

from dsagent_cbr.config import default_home

KEY_FILE = "selection.key"
KEY_BYTES = 32


def task_seed(name: str, stream: int = 0) -> int:
    """A seed for one task's draws; `stream` tells apart draws that must not share one."""
    digest = hmac.new(_key(default_home()), f"{stream}:{name}".encode(), hashlib.sha256)
    return int.from_bytes(digest.digest()[:8], "big")


@cache
def _key(home: Path) -> bytes:
    path = home / KEY_FILE
    if not path.exists():
        _make(path)
    key = path.read_bytes()
    if len(key) != KEY_BYTES:
        raise OSError(f"{path} is not a key cbr made: delete it and cbr makes a new one")
    return key


def _make(path: Path) -> None:
    """Write the key under a name of its own, then link it into place: two processes that make one at
    once both end reading the one that won."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{KEY_FILE}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(secrets.token_bytes(KEY_BYTES))
        fh.flush()
        os.fsync(fh.fileno())
    try:
        os.link(tmp, path)
    except FileExistsError:
        pass
    finally:
        tmp.unlink(missing_ok=True)
