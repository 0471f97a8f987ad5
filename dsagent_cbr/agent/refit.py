"""The refit: the selected script once more on every labelled row, so that the submission learns from
all of them. It learns the selection rows too, so no labelled row is left to judge it: its test file holds
the test rows alone (harness/plan.py's for_refit), and it is judged on what it cannot have learned, its
test predictions against the first fit's. Two honest fits of one script predict alike; one that behaved
otherwise under CBR_REFIT (or broke) does not, and the first fit's predictions stay the submission:

- where the metric is a distance (accuracy's share of rows wrong, RMSE, MAE, RMSLE, MCRMSE), a refit as
  good as the first fit lies within the first fit's selection error of the truth, so within twice that
  of the first fit's predictions (the triangle inequality); one further is worse than the first fit;
- where it is not (AUROC, log loss, the median error), the refit's predictions must rank the test rows
  as the first fit's do (Spearman's correlation, averaged over the prediction columns).
A script that predicts its learned rows by their features and inverts every test row scored 1.0 on the
selection rows when the refit was judged there, and was submitted (real AUROC 0.153)."""

from __future__ import annotations

import math
import shlex

import numpy as np

from dsagent_cbr.agent.record import Refit
from dsagent_cbr.harness.run import predict_room
from dsagent_cbr.tasks.metrics import Metric

REFIT_NOTE = (
    "the submitted model also learned the selection rows, which stop being a fair judge of it: the "
    "selection score judged the script before the refit"
)
CUT_NOTE = (
    "the refit's boosting was cut short by its deadline: a model of less than half its first fit's "
    "rounds is not submitted"
)
FALL = 0.1  # of a score's lead over the prior baseline: how much worse it may come out again
DISTANCES = ("accuracy", "rmse", "mse", "mae", "rmsle", "mcrmse")
# the first fit's selection error is a sample's: twice it, and this much more, before a refit is refused
SLACK = 0.1
# of its first fit's rounds each booster of a refit cut short at its deadline must have built
KEPT = 0.5
RANK_FLOOR = (
    0.5  # Spearman's correlation of the two fits' test predictions, below which they differ
)


def stopping_note(rounds: list[list[int]] | None) -> str:
    """What the refit's early stopping did: it kept the first fit's stopping point (it would otherwise
    stop on rows it learns, which never stop improving). Its boosters stop there as they train
    (untrusted/bootstrap.py); one trained out of train_model's order may have built more rounds, and one
    cut short at its deadline fewer."""
    if not rounds:
        return ""
    kept = ", ".join(_kept(first, built) for first, built in rounds)
    return f"; its early-stopped models kept the first fit's stopping points: {kept}"


def _kept(first: int, built: int) -> str:
    if built > first:
        return f"{first} rounds (it built {built})"
    if built < first:
        return f"{built} of {first} rounds (cut short at its deadline)"
    return f"{first} rounds"


def cut_short(wall_time: float, limit: float | None, rounds: list[list[int]] | None) -> bool:
    """Whether a refit is not submitted, its boosting cut short: it ran past its deadline (the seconds of
    its time `limit` it was given to train in, harness/run.py's predict_room kept), or its count of
    rounds says so. It reads neither fit's score. At the deadline its LightGBM and XGBoost stopped
    where they were (untrusted/bootstrap.py).

    In the ten-table suite's runs (issue 52), the refits so cut that kept 56% and 57% of their first fit's
    rounds scored better on the test rows than their first fits (flights-late AUROC 0.7808 -> 0.7862,
    doctor-visits RMSE 3.634 -> 3.590), as did one that kept 92%. One that kept 2 rounds of 423 scored
    log loss 1.491 against 1.262, and one round on caravan AUROC 0.644 against 0.727. So a cut refit is
    judged like any other when every booster in it built at least KEPT of its first fit's rounds; without
    a count of its rounds (`rounds` None: no booster, or one the deadline cut with no first fit's count to
    hold it to), a refit that reached its deadline is not submitted.

    A booster also stops before the deadline when predicting with its trees would not end in time. On a
    5M-row table a quick draft's refit built 7 rounds where its validation fit had built 61, ended before
    its deadline, and was submitted: AUROC 0.774 where its first fit scored 0.802. So a count short of
    KEPT refuses a refit whatever the clock says. The count is the script's bootstrap's, so it can only
    keep a refit from the judge of its test predictions or let a late one on to it."""
    deadline = math.inf if limit is None else limit - predict_room(limit)
    short = bool(rounds) and any(built < KEPT * first for first, built in rounds)
    return short or (wall_time >= deadline and rounds is None)


def cut(test: float | None, rounds: list[list[int]] | None) -> Refit:
    """The record of a refit cut_short refused: its test score only reported."""
    return Refit(status="cut", why=CUT_NOTE, test_after_refit=test, rounds=rounds)


def refitted(test: float | None, rounds: list[list[int]] | None, agreement: str) -> Refit:
    """A refit that ran and was submitted: its test score (only reported), how it agreed with the first
    fit, and what its early stopping kept."""
    return Refit(
        status="ok",
        test_after_refit=test,
        agreement=agreement,
        rounds=rounds,
        why=REFIT_NOTE + stopping_note(rounds),
    )


def judge(
    metric: Metric,
    first_selection: float | None,
    first: np.ndarray | None,
    refit: np.ndarray | None,
) -> tuple[str | None, str]:
    """(why the refit is not submitted or None, how its test predictions `refit` agreed with the first
    fit's `first`, in words); `first_selection` is the first fit's selection score."""
    if first is None or refit is None or first.shape != refit.shape:
        return "its test predictions could not be read back beside the first fit's", ""
    if metric.name in DISTANCES and first_selection is not None:
        return _distance(metric, first_selection, first, refit)
    return _ranks(metric, first, refit)


def _distance(
    metric: Metric, error: float, first: np.ndarray, refit: np.ndarray
) -> tuple[str | None, str]:
    if metric.name == "accuracy":
        apart, error = 1 - metric.fn(first, refit), 1 - error
    else:
        apart = metric.fn(*(_one(a.astype(float)) for a in (first, refit)))
    if metric.name == "mse":  # a squared distance: the inequality holds for its root
        apart, error = apart**0.5, error**0.5
    said = f"{_what(metric)} {apart:.4g} from the first fit's test predictions (its selection error {error:.4g})"
    if apart <= (2 + SLACK) * error:
        return None, said
    return (
        f"the refit's test predictions lie {_what(metric)} {apart:.4g} from the first fit's, more than twice "
        f"the first fit's own error ({error:.4g}): a refit that far is worse than the first fit, so the "
        "script behaved otherwise when refit; the first fit's predictions are submitted"
    ), said


def _what(metric: Metric) -> str:
    return "a share of rows" if metric.name == "accuracy" else metric.name.upper()


def _ranks(metric: Metric, first: np.ndarray, refit: np.ndarray) -> tuple[str | None, str]:
    """Spearman's correlation of the two fits' test predictions, column by column; for log loss the
    class columns weigh as much as the classes are predicted (a rare class's small probabilities rank
    noisily: 0.68 on pbc-status's rarest class where the others gave 0.88 and 0.90)."""
    from scipy.stats import spearmanr

    first, refit = first.astype(float), refit.astype(float)
    varied = [
        j for j in range(first.shape[1]) if np.ptp(first[:, j]) > 0 and np.ptp(refit[:, j]) > 0
    ]
    if not varied:
        return (
            "its test predictions or the first fit's are one constant: they cannot be compared",
            "",
        )
    each = [spearmanr(first[:, j], refit[:, j]).statistic for j in varied]
    weights = first[:, varied].mean(axis=0) if metric.name == "logloss" else np.ones(len(varied))
    low = float(np.average(each, weights=np.maximum(weights, 1e-9)))
    said = f"Spearman's correlation {low:.3f} with the first fit's test predictions"
    if low >= RANK_FLOOR:
        return None, said
    return (
        f"the refit ranks the test rows unlike the first fit (Spearman's correlation {low:.3f}, below "
        f"{RANK_FLOOR}): the script behaved otherwise when refit; the first fit's predictions are submitted"
    ), said


def _one(a: np.ndarray) -> np.ndarray:
    return a[:, 0] if a.ndim == 2 and a.shape[1] == 1 else a


def fell(direction: str, before: float, now: float, prior: float | None) -> bool:
    """Whether a score went from `before` to `now` worse by more than FALL of its lead over the prior
    baseline (of half its size where no prior is known): further than noise moves it."""
    lead = abs(before - prior) if prior is not None else abs(before) * 0.5
    worse = now - before if direction == "minimize" else before - now
    return worse > FALL * lead


def _shown(value: float | None) -> str:
    return "unknown" if value is None else f"{value:.4g}"


def submission_line(refit: Refit | None, source: str = "selected", run_dir: str = "RUN") -> str:
    """What the submission learned from, in one line, for the summary and the report; `source` is the
    record's submission_from."""
    if source == "starter":
        return (
            "the task's starter script, as it ran first (no node graded within the budget); "
            "it learned from the training rows the selection rows left"
        )
    if refit is None:
        return "the first fit, which learned from the training rows the selection rows left (--no-refit)"
    if refit.status == "ok" and refit.share is not None and refit.share < 1:
        return (
            f"a blend whose members weighing {refit.share:.0%} were refit on every labelled row, the "
            "others submitted as their first fits; the selection score judged it before the refit"
        )
    if refit.status == "ok":
        return "refit on every labelled row; the selection score judged the script before the refit"
    reason = refit.why or refit.error or refit.status
    later = ""
    if refit.status in ("skipped", "cut", "timeout"):  # what more time would have made
        later = f"; `cbr refit {shlex.quote(run_dir)}` refits it later"
    return f"the first fit: the refit was not submitted ({refit.status}: {reason}){later}"
