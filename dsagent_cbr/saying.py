"""What a command is doing, said on stderr as it goes, so that no command is silent for more than
SILENCE seconds: a slow step says what it is as it begins (`doing`), and while any step runs a
watch (one daemon thread) speaks for the newest of them whenever nothing has been said for most of
SILENCE: "still indexing the seed bank: 19s". `cbr` runs each command as a step (cli.py), and so
do the Python API's calls, so a step nobody named is still covered.

A line said otherwise (a live status line on a terminal, a progress line) tells the watch with
`heard()`, so that it speaks only into silence. A step may speak for itself when the watch finds it
silent (`speak`): the search's nodes say it through their progress (agent/progress.py)."""

from __future__ import annotations

import contextlib
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TextIO

from dsagent_cbr.clock import say_duration

SILENCE = 10.0  # the longest a command goes without a line, in seconds
SHARE = 0.8  # the watch speaks this share of SILENCE after the last line: the rest is its margin


@dataclass(eq=False)
class Step:
    what: str
    speak: Callable[[float], None] | None = None  # given the seconds it has run
    every: float | None = None  # seconds of silence before it is spoken for (SHARE of SILENCE)
    started: float = field(default_factory=time.monotonic)


class _Watch:
    """The steps running, the time of the last line, and the thread that speaks into silence while
    any step runs."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.steps: list[Step] = []
        self.last = time.monotonic()
        self.stop: threading.Event | None = None  # set: the watch's thread ends

    def enter(self, step: Step) -> None:
        with self.lock:
            self.steps.append(step)
            if self.stop is None:  # the first step: silence is counted from here
                self.last = time.monotonic()
                self.stop = threading.Event()
                threading.Thread(
                    target=self.run, args=(self.stop,), name="saying", daemon=True
                ).start()

    def leave(self, step: Step) -> None:
        with self.lock:
            self.steps.remove(step)
            if not self.steps and self.stop is not None:
                self.stop.set()
                self.stop = None

    def run(self, stop: threading.Event) -> None:
        poll = 0.0
        while not stop.wait(poll):
            with self.lock:
                step = self.steps[-1] if self.steps else None
                quiet = time.monotonic() - self.last  # a step that just began does not reset it
            every = (step.every if step else None) or SHARE * SILENCE
            if step is not None and quiet >= every:
                self.speak_for(step)
            poll = every / 40  # it speaks within a fortieth of its time

    def speak_for(self, step: Step) -> None:
        took = time.monotonic() - step.started
        heard()  # before it speaks: a speaker that says nothing is not asked again at once
        if step.speak is not None:
            step.speak(took)
        else:
            say(f"still {step.what}: {say_duration(took, exact=False)}")


_WATCH = _Watch()


def heard() -> None:
    """A line was said, or a live status line changed: the watch waits its time again."""
    _WATCH.last = time.monotonic()


def say(line: str, stream: TextIO | None = None) -> None:
    """One line on stderr (stdout stays the command's result, as --json prints it), or `stream`."""
    print(line, file=stream or sys.stderr, flush=True)
    heard()


@contextlib.contextmanager
def doing(
    what: str,
    *,
    announce: bool = True,
    speak: Callable[[float], None] | None = None,
    every: float | None = None,
) -> Iterator[Step]:
    """A step: said as it begins (unless not `announce`), and spoken for while it runs and nothing
    else is said (`speak`, else "still WHAT: N s")."""
    step = Step(what, speak, every)
    if announce:
        say(what)
    _WATCH.enter(step)
    try:
        yield step
    finally:
        _WATCH.leave(step)
