"""Progress while something slow runs: a line every EVERY seconds saying what is awaited, for how
long so far and for how long at most. A small model on two cores takes minutes to answer, and an
analysis silent for minutes looked hung (issue 54)."""

from __future__ import annotations

import contextlib
import math
import threading
import time
from collections.abc import Callable, Iterator

EVERY = 10.0  # seconds: never longer without a line


@contextlib.contextmanager
def waiting(
    say: Callable[[str], None], what: str, limit: float | None = None, every: float | None = None
) -> Iterator[None]:
    """While the block runs, `say` every `every` seconds (EVERY) that `what` is still awaited."""
    every = EVERY if every is None else every
    done = threading.Event()
    start = time.monotonic()
    at_most = f", at most {limit:.0f} s" if limit is not None and math.isfinite(limit) else ""

    def beat() -> None:
        while not done.wait(every):
            say(f"waiting for {what}: {time.monotonic() - start:.0f} s so far{at_most}")

    thread = threading.Thread(target=beat, name="waiting", daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join()
