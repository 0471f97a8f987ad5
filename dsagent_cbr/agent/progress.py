"""Progress of a long run: a live one-line status (rich) on a terminal; off a terminal (CI, a log file, a pipe)
one plain line per finished iteration on stderr, so that `--json` output on stdout stays clean.

`update(**fields)` takes any of: iteration, total, role, attempt, best, tokens, cost, left (seconds of the
budget), and, to say an
iteration has finished, status (with score and metric); `elapsed` says a step is still running. Off a
terminal only the updates that carry a status or an elapsed time print, one line each."""

from __future__ import annotations

import contextlib
import sys
import threading
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, TextIO

if TYPE_CHECKING:
    from dsagent_cbr.agent.seams import Progress

HEARTBEAT = 30.0  # seconds between "still running" updates of a long step


@contextlib.contextmanager
def heartbeat(progress: Progress, every: float = HEARTBEAT, **fields: Any) -> Iterator[None]:
    """While the block runs (a script, a model call), say every `every` seconds how long it has run."""
    done, start = threading.Event(), time.monotonic()

    def beat() -> None:
        while not done.wait(every):
            progress.update(**fields, elapsed=time.monotonic() - start)

    thread = threading.Thread(target=beat, daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join()


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
        self._status = None

    def __enter__(self) -> LiveProgress:
        if self.enabled:
            from rich.console import Console

            self._status = Console().status(self.title)
            self._status.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._status is not None:
            self._status.__exit__(None, None, None)

    def update(self, **fields: Any) -> None:
        self.fields.update({k: v for k, v in fields.items() if v is not None})
        f = self.fields
        best = f.get("best")
        if self._status is None:
            if fields.get("elapsed") is not None and fields.get("status") is None:
                print(
                    f"iteration {f.get('iteration', 0)} ({f.get('role', '')}): still running after "
                    f"{fields['elapsed']:.0f} s",
                    file=self.stream or sys.stderr,
                    flush=True,
                )
            if fields.get("status") is not None:
                line = progress_line(
                    f.get("iteration", 0),
                    f.get("total"),
                    f.get("role"),
                    fields["status"],
                    fields.get("score"),
                    best,
                    str(f.get("metric", "")),
                    f.get("left"),
                )
                print(line, file=self.stream or sys.stderr, flush=True)
            return
        parts = [
            self.title,
            f"iteration {f.get('iteration', '-')}" + (f"/{f['total']}" if f.get("total") else ""),
            f"{f.get('role', '')}",
        ]
        if f.get("attempt"):
            parts.append(f"debug attempt {f['attempt']}")
        if fields.get("elapsed") is not None:
            parts.append(f"running {fields['elapsed']:.0f} s")
        parts.append(f"best {best:.5g}" if isinstance(best, float) else "best —")
        if f.get("left") is not None:
            parts.append(f"{f['left']:.0f} s of the budget left")
        if "tokens" in f:
            parts.append(f"{f['tokens']} tokens, ${f.get('cost', 0.0):.4f}")
        self._status.update(" · ".join(parts))


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
