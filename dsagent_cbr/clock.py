"""A run's wall-clock budget, kept across resumes: the time at which each node started and ended is
journaled, and a resumed run continues from the last one it replays. When a node may start is the search
policy's (search/policy.py); this only keeps time."""

from __future__ import annotations

import math
import os
import threading
import time
from pathlib import Path

MIN_NODE_SECONDS = 20.0  # less budget than this left: no node (or develop iteration) starts


class Clock:
    def __init__(self, budget: float | None, start: float | None = None) -> None:
        """`start`: the command's own start (time.monotonic()), so that the budget is its wall clock: the bank,
        the embedding model and the starter's run are spent from it too."""
        self.budget = budget  # seconds; None: no wall-clock budget (the node cap ends the search)
        self._start, self._offset = time.monotonic() if start is None else start, 0.0
        self._lock = threading.Lock()  # nodes stamp their replayed times from their own threads

    def now(self) -> float:
        """Seconds the run has spent, earlier legs included."""
        return self._offset + time.monotonic() - self._start

    def at_least(self, spent: float) -> None:
        """A replayed step ended `spent` seconds into the run: the clock goes on from there."""
        with self._lock:
            self._offset += max(0.0, spent - self.now())

    def left(self, reserve: float = 0.0) -> float:
        """Seconds of the budget left, `reserve` of them kept for what follows (the refit at the end)."""
        return math.inf if self.budget is None else self.budget - self.now() - reserve

    def limit(self, reserve: float = 0.0) -> float | None:
        """A script's own time limit from the budget: what it has left; None without a budget."""
        # a script that started gets a second
        return None if self.budget is None else max(self.left(reserve), 1.0)

    def exhausted(self) -> bool:
        """Too little left for a develop iteration to start (the search's nodes: search/policy.py)."""
        return self.left() < MIN_NODE_SECONDS

    def spent(self) -> str:
        return f"the budget of {say_duration(self.budget or 0)} spent"


def process_start() -> float:
    """time.monotonic() at this process's start (Linux's /proc), so that a budget counts the interpreter's
    start and imports too; now where /proc cannot say."""
    try:
        fields = Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()
        ticks = int(fields[19])  # starttime, the stat file's 22nd field: clock ticks after boot
        uptime = float(Path("/proc/uptime").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return time.monotonic()
    return time.monotonic() - max(0.0, uptime - ticks / os.sysconf("SC_CLK_TCK"))


def parse_duration(text: str) -> float:
    """'90', '90s', '15m', '1.5h' as seconds; a ValueError in one sentence otherwise."""
    units = {"s": 1, "m": 60, "h": 3600}
    value, unit = (text[:-1], units[text[-1]]) if text and text[-1] in units else (text, 1)
    try:
        seconds = float(value) * unit
    except ValueError:
        raise ValueError(
            f"{text!r} is not a duration: write seconds or a number with s, m or h, as 15m"
        ) from None
    if not math.isfinite(seconds) or seconds <= 0:
        raise ValueError(f"{text!r} is not a duration: it must be more than zero")
    return seconds


def say_duration(seconds: float, exact: bool = True) -> str:
    """'2m', '90s'; not `exact`: a measured time, to the second ('2m 03s', '47s')."""
    if exact:
        return f"{seconds / 60:g}m" if seconds >= 60 and seconds % 60 == 0 else f"{seconds:g}s"
    whole = round(seconds)
    return f"{whole // 60}m {whole % 60:02d}s" if whole >= 60 else f"{whole}s"


def say_time_of(took: float, budget: float | None) -> str:
    """A run's time and its budget: '56s of a 1m budget', '1m 04s of a 1m budget: 4 s over'."""
    said = say_duration(took, exact=False)
    if not budget:
        return said
    over = round(took - budget)
    return f"{said} of a {say_duration(budget)} budget" + (f": {over} s over" if over >= 1 else "")
