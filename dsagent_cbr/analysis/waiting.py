"""Progress while something slow runs: a line every EVERY seconds saying what is awaited, for how
long so far and for how long at most. A small model on two cores takes minutes to answer, and an
analysis silent for minutes looked hung (issue 54). The beat itself is the agent's heartbeat
(agent/progress.py); this says it as an analysis's line."""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from dsagent_cbr.agent.progress import heartbeat

EVERY = 10.0  # seconds: never longer without a line


@dataclass
class _Line:
    """A Progress (agent/seams.py) that says the heartbeat's elapsed time as one line."""

    say: Callable[[str], None]
    what: str
    at_most: str

    def update(self, elapsed: float = 0.0, **_fields: Any) -> None:
        self.say(f"waiting for {self.what}: {elapsed:.0f} s so far{self.at_most}")


def waiting(
    say: Callable[[str], None], what: str, limit: float | None = None, every: float | None = None
) -> contextlib.AbstractContextManager[None]:
    """While the block runs, `say` every `every` seconds (EVERY) that `what` is still awaited."""
    at_most = f", at most {limit:.0f} s" if limit is not None and math.isfinite(limit) else ""
    return heartbeat(_Line(say, what, at_most), EVERY if every is None else every)
