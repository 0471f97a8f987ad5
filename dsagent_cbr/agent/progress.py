"""Progress of a long run: a live one-line status (rich) on a terminal; off a terminal (CI, a log file, a pipe)
one plain line per finished iteration on stderr, so that `--json` output on stdout stays clean.

`update(**fields)` takes any of: iteration, total, role, attempt, best, tokens, cost, left (seconds of
the budget, kept as the time the budget ends: a line printed later says what is left then), and,
to say an iteration has finished, status (with score and metric); `elapsed` says a step is still
running; `note` names a step of the run's own (the starter, the refit). Off a terminal only the
updates that carry a status, an elapsed time or a note print, one line each."""

from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, TextIO

from dsagent_cbr.saying import doing, heard, say

if TYPE_CHECKING:
    from dsagent_cbr.agent.seams import Progress


@contextlib.contextmanager
def heartbeat(progress: Progress, every: float | None = None, **fields: Any) -> Iterator[None]:
    """While the block runs (a script, a model call), say how long it has run whenever nothing else
    has been said for a while (saying.py's watch: every `every` seconds of silence, by default most
    of saying.SILENCE)."""

    def speak(took: float) -> None:
        progress.update(**fields, elapsed=took)

    what = f"iteration {fields.get('iteration', '-')} ({fields.get('role', '')})"
    with doing(what, announce=False, speak=speak, every=every):
        yield


class LiveProgress:
    def __init__(
        self,
        title: str,
        enabled: bool | None = None,
        total: int | None = None,
        stream: TextIO | None = None,
    ) -> None:
        self.title = title
        self.enabled = sys.stdout.isatty() if enabled is None else enabled
        self.fields: dict[str, Any] = {"total": total} if total else {}
        self.stream = stream
        self.deadline: float | None = None  # time.monotonic() when the budget ends
        self.elapsed: float | None = None  # how long the step in flight has run, when it last said
        self._status = None

    def __enter__(self) -> LiveProgress:
        if self.enabled:
            from rich.console import Console

            self._status = Console().status(self)
            self._status.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._status is not None:
            self._status.__exit__(None, None, None)

    def update(self, **fields: Any) -> None:
        # kept as a deadline: a line says what is left when it is printed
        if fields.get("left") is not None:
            self.deadline = time.monotonic() + fields.pop("left")
        self.fields.update({k: v for k, v in fields.items() if v is not None and k != "note"})
        if self._status is None:
            line = self.line(fields)
            if line is not None:
                say(line, self.stream)
            return
        self.elapsed = fields.get("elapsed")
        heard()

    def __rich__(self) -> Any:
        """The live line on a terminal, drawn afresh each time the status is: its time left is the
        time left then."""
        from rich.text import Text

        return Text(self.status_line(self.elapsed))

    def left(self) -> float | None:
        return None if self.deadline is None else max(self.deadline - time.monotonic(), 0.0)

    def line(self, fields: dict[str, Any]) -> str | None:
        """Off a terminal: a line for an iteration that ended, or one still running, or a step of
        the run's own (a note); None otherwise."""
        f = self.fields
        if fields.get("note"):
            return str(fields["note"])
        if fields.get("status") is not None:
            return progress_line(
                f.get("iteration", 0),
                f.get("total"),
                f.get("role"),
                fields["status"],
                fields.get("score"),
                f.get("best"),
                str(f.get("metric", "")),
                self.left(),
            )
        if fields.get("elapsed") is not None:
            return (
                f"iteration {f.get('iteration', 0)} ({f.get('role', '')}): still running after "
                f"{fields['elapsed']:.0f} s"
            )
        return None

    def status_line(self, elapsed: float | None) -> str:
        """On a terminal: the live line."""
        f, best = self.fields, self.fields.get("best")
        parts = [
            self.title,
            f"iteration {f.get('iteration', '-')}" + (f"/{f['total']}" if f.get("total") else ""),
            f"{f.get('role', '')}",
        ]
        if f.get("attempt"):
            parts.append(f"debug attempt {f['attempt']}")
        if elapsed is not None:
            parts.append(f"running {elapsed:.0f} s")
        parts.append(f"best {best:.5g}" if isinstance(best, float) else "best —")
        if self.left() is not None:
            parts.append(f"{self.left():.0f} s of the budget left")
        if "tokens" in f:
            parts.append(f"{f['tokens']} tokens, ${f.get('cost', 0.0):.4f}")
        return " · ".join(parts)


def fmt(value: float | None) -> str:
    return "—" if value is None else f"{value:.5g}"


def progress_line(
    iteration: int,
    total: int | None,
    role: str | None,
    status: str | None,
    score: float | None,
    best: float | None,
    metric: str,
    left: float | None = None,
) -> str:
    """One plain line for a finished iteration, e.g. 'iteration 3/8 (execute): ok, rmse 5.1234, best
    4.9876' (the scores the rows are judged by), and ', 95 s left' of a budget."""
    head = (
        f"iteration {iteration}" + (f"/{total}" if total else "") + (f" ({role})" if role else "")
    )
    tail = f", {left:.0f} s left" if left is not None else ""
    return f"{head}: {status or 'done'}, {metric} {fmt(score)}, best {fmt(best)}{tail}"
