"""The one error policy: what went wrong, whose it was, how a run records it and how `cbr` exits.

    exception              whose                         run outcome       exit
    (none)                 a graded solution was kept    ok                0
    (none)                 the model's: nothing graded   agent_failure     1
    CbrError               the user's input              (no run)          2
    InfrastructureError    ours: server, sandbox         infrastructure    3
    BudgetExceeded         the budget the user set       budget            4
    KeyboardInterrupt      Ctrl-C, SIGTERM               interrupted       130

A run ended by infrastructure, the budget or an interrupt is never counted as the model's: bench reruns
it on resume and reports it apart. The CLI prints the message as one sentence."""

from __future__ import annotations

from enum import StrEnum


class Outcome(StrEnum):
    OK = "ok"
    AGENT_FAILURE = "agent_failure"
    BUDGET = "budget"
    INFRASTRUCTURE = "infrastructure"
    INTERRUPTED = "interrupted"

    @property
    def ours(self) -> bool:
        """The run says nothing about the model: it is rerun, never scored."""
        return self in (Outcome.BUDGET, Outcome.INFRASTRUCTURE, Outcome.INTERRUPTED)

    @property
    def exit_code(self) -> int:
        return EXIT_CODES[self]


EXIT_CODES = {
    Outcome.OK: 0,
    Outcome.AGENT_FAILURE: 1,
    Outcome.INFRASTRUCTURE: 3,
    Outcome.BUDGET: 4,
    Outcome.INTERRUPTED: 130,
}


class CbrError(Exception):
    """A problem with the user's input (bad folder, malformed case, unknown model, bad setting)."""

    exit_code = 2
    outcome: Outcome | None = None  # raised before a run exists

    def __init__(self, message: str, *, details: list[str] | None = None) -> None:
        super().__init__(message)
        self.details = details or []


class InfrastructureError(CbrError):
    """A failure of ours: the model server unreachable or failing, no sandbox, a local server that did not
    start. What the run did so far is kept; the run is not the model's."""

    exit_code = EXIT_CODES[Outcome.INFRASTRUCTURE]
    outcome = Outcome.INFRASTRUCTURE


class BudgetExceeded(CbrError):
    """The run's cost or token budget is spent: a clean stop that keeps everything done so far."""

    exit_code = EXIT_CODES[Outcome.BUDGET]
    outcome = Outcome.BUDGET


class OutOfTime(Exception):
    """A model call the search's wall clock cut short: its node ends, and the search with it. Neither the
    model's failure nor ours, and it never leaves the search (search/loop.py)."""


class Cancelled(Exception):
    """The run stopped while this step ran (the budget, an interrupt, a failure of ours elsewhere): the
    step's script was killed, and the step leaves nothing behind (harness/run.py, search/)."""


def outcome_of(exc: BaseException) -> Outcome | None:
    """The outcome a run ends with when `exc` stops it; None for a user error or a bug (they propagate)."""
    if isinstance(exc, KeyboardInterrupt):
        return Outcome.INTERRUPTED
    return exc.outcome if isinstance(exc, CbrError) else None
