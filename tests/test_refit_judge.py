"""How a refit is judged (agent/refit.py): on its test predictions against the first fit's, since it
learned every labelled row. Fast: the rule on arrays."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from dsagent_cbr.agent.refit import cut, cut_short, judge, stopping_note
from dsagent_cbr.agent.run_refit import RunRefit
from dsagent_cbr.clock import Clock
from dsagent_cbr.tasks.metrics import get_metric

RNG = np.random.default_rng(0)
TRUTH = RNG.normal(30, 10, 400)
FIRST = (TRUTH + RNG.normal(0, 5, 400))[:, None]  # a first fit whose selection RMSE is about 5


def test_an_honest_refit_near_the_first_fit_is_submitted():
    refit = FIRST + RNG.normal(0, 2, FIRST.shape)
    why, said = judge(get_metric("rmse"), 5.0, FIRST, refit)
    assert why is None and "RMSE" in said and "selection error 5" in said


def test_a_refit_farther_from_the_first_fit_than_twice_its_error_is_refused():
    inverted = FIRST.max() + FIRST.min() - FIRST
    why, said = judge(get_metric("rmse"), 5.0, FIRST, inverted)
    assert why is not None and "behaved otherwise" in why and "more than twice" in why
    shifted = FIRST + 12  # every row moved by more than twice the first fit's error: worse, whatever the truth
    assert judge(get_metric("rmse"), 5.0, FIRST, shifted)[0] is not None
    assert judge(get_metric("mse"), 25.0, FIRST, shifted)[0] is not None  # a squared distance, by its root


def test_labels_are_judged_by_the_share_of_rows_they_change():
    first = np.where(TRUTH > 30, "yes", "no")[:, None]
    flipped = first.copy()
    flipped[:40] = np.where(first[:40] == "yes", "no", "yes")  # 10% of rows changed
    assert judge(get_metric("accuracy"), 0.9, first, flipped)[0] is None  # within twice its 10% error
    assert judge(get_metric("accuracy"), 0.97, first, flipped)[0] is not None  # not within twice 3%


def test_probabilities_must_rank_the_rows_as_the_first_fit_does():
    first = (1 / (1 + np.exp(-(TRUTH - 30) / 5)))[:, None]
    assert judge(get_metric("auroc"), 0.8, first, first ** 2)[0] is None  # the same ranking
    why, said = judge(get_metric("auroc"), 0.8, first, 1 - first)
    assert why is not None and "Spearman" in why and "-1.000" in said


def test_a_rare_class_weighs_in_log_loss_as_little_as_it_is_predicted():
    common = RNG.uniform(0.3, 0.6, 400)
    rare = RNG.uniform(0.0, 0.04, 400)
    first = np.stack([common, 1 - common - rare, rare], axis=1)
    refit = np.stack([common, 1 - common - rare, RNG.permutation(rare)], axis=1)  # the rare column reshuffled
    why, _ = judge(get_metric("logloss"), 0.5, first, refit)
    assert why is None


def test_predictions_that_cannot_be_set_side_by_side_are_refused():
    assert judge(get_metric("rmse"), 5.0, FIRST, None)[0] is not None
    assert judge(get_metric("rmse"), 5.0, FIRST, FIRST[:10])[0] is not None
    assert "one constant" in judge(get_metric("auroc"), 0.8, np.full((5, 1), 0.5), np.full((5, 1), 0.5))[0]


def test_a_refit_starts_only_with_its_first_fit_s_time_before_its_training_deadline():
    """The deadline keeps time to predict: 27 s left, 5 of them kept, leaves the refit 22 s and its
    training 12 (a 1M-row refit so started, its first fit 14 s, was cut short at its deadline)."""
    run = SimpleNamespace(clock=Clock(27.0))
    late = RunRefit.too_late_to_refit(run, 14.4, "the first fit", keep=5.0)
    assert late is not None and late.status == "skipped" and "the first fit took 14 s" in late.why
    assert RunRefit.too_late_to_refit(run, 11.0, "the first fit", keep=5.0) is None
    assert RunRefit.too_late_to_refit(run, 14.4, "the first fit") is None  # 27 s: 17 to train


def test_a_refit_cut_short_is_submitted_only_when_its_boosters_kept_half_their_rounds():
    """At its deadline LightGBM stops where it is: 2,080 of 3,738 rounds still beat the first fit on
    flights-late, where 2 of 423 lost by far on crash-severity, and 7 of 61 on a 5M-row table. A limit of
    60 s keeps 15 s to predict: the deadline is 45 s in."""
    assert not cut_short(40.0, 60.0, None)  # it ended before its deadline
    assert not cut_short(45.0, 60.0, [[3738, 2080]])  # judged like any refit
    assert cut_short(45.0, 60.0, [[423, 2]])
    record = cut(1.49, [[423, 2]])
    assert record.status == "cut" and record.rounds == [[423, 2]] and "half" in record.why
    assert cut_short(45.0, 60.0, [[100, 100], [300, 120]])  # every booster counts
    assert cut_short(45.0, 60.0, None)  # no count of its rounds: not trusted
    # stopped early so as to predict in time: 7 rounds of 61 on a 5M-row table, before its deadline
    assert cut_short(21.7, 60.0, [[61, 7]])
    assert not cut_short(1e6, None, None)  # no limit, no deadline


def test_the_refit_s_note_says_how_many_rounds_each_model_kept():
    note = stopping_note([[3738, 2080], [296, 296], [10, 12]])
    assert "2080 of 3738 rounds (cut short at its deadline)" in note
    assert "296 rounds," in note and "10 rounds (it built 12)" in note
