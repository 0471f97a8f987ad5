"""The refit: the selected script once more on every labelled row, so that the submission learns from
all of them. It still predicts the selection rows, and is judged on them: rows it learned, so the score
is no fair estimate (the record keeps the first fit's for that), but a model that learned rows rarely
predicts them worse. A refit that does, by more than a tenth of what the first fit gained over the prior
baseline (harness/baseline.py), is not submitted: the script behaved otherwise under CBR_REFIT, or the
refit broke, and the first fit's predictions stay the submission."""

from __future__ import annotations

from dsagent_cbr.agent.record import Refit
from dsagent_cbr.tasks.metrics import Metric

REFIT_NOTE = (
    "the submitted model also learned the selection rows, which stop being a fair judge of it: the "
    "selection score judged the script before the refit"
)
FALL = 0.1  # of a score's lead over the prior baseline: how much worse it may come out again


def stopping_note(rounds: list[list[int]] | None) -> str:
    """What the refit's early stopping did: it kept the first fit's stopping point (it would otherwise
    stop on rows it learns, which never stop improving)."""
    if not rounds:
        return ""
    kept = ", ".join(
        f"{first} rounds (alone it ran {had})" if had > first else f"{had} rounds"
        for first, had in rounds
    )
    return f"; its early-stopped models kept the first fit's stopping points: {kept}"


def refitted(
    test: float | None, rounds: list[list[int]] | None, selection: float | None = None
) -> Refit:
    """A refit that ran and was submitted: its test score (only reported), its score on the selection rows
    it learned (a check), and what its early stopping kept."""
    return Refit(
        status="ok",
        test_after_refit=test,
        selection_after_refit=selection,
        rounds=rounds,
        why=REFIT_NOTE + stopping_note(rounds),
    )


def fall(
    metric: Metric, first: float | None, refit: float | None, prior: float | None
) -> str | None:
    """Why the refit is not submitted, or None. `first` is the first fit's selection score, `refit` the
    refit's on the same rows, `prior` the prior baseline's there."""
    if first is None:
        return None  # no selection rows: nothing to check the refit on
    if refit is None:
        return "the refit's predictions of the selection rows could not be graded"
    if not fell(metric.direction, first, refit, prior):
        return None
    return (
        f"on the selection rows, which it learned, the refit scored {metric.name} {refit:.4g} against "
        f"the first fit's {first:.4g} (the prior baseline: {_shown(prior)}): a model rarely predicts rows "
        "it learned worse, so the script behaved otherwise when refit; the first fit's predictions are "
        "submitted"
    )


def fell(direction: str, before: float, now: float, prior: float | None) -> bool:
    """Whether a score went from `before` to `now` worse by more than FALL of its lead over the prior
    baseline (of half its size where no prior is known): further than noise moves it."""
    lead = abs(before - prior) if prior is not None else abs(before) * 0.5
    worse = now - before if direction == "minimize" else before - now
    return worse > FALL * lead


def _shown(value: float | None) -> str:
    return "unknown" if value is None else f"{value:.4g}"


def submission_line(refit: Refit | None, source: str = "selected") -> str:
    """What the submission learned from, in one line, for the summary and the report; `source` is the
    record's submission_from."""
    if source == "starter":
        return (
            "the task's starter script, as it ran first (no node graded within the budget); "
            "it learned from the training rows the selection rows left"
        )
    if refit is None:
        return "the first fit, which learned from the training rows the selection rows left (--no-refit)"
    if refit.status == "ok":
        return "refit on every labelled row; the selection score judged the script before the refit"
    reason = refit.why or refit.error or refit.status
    return f"the first fit: the refit was not submitted ({refit.status}: {reason})"
