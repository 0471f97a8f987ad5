"""The search's pure parts, with plain values: the policy (which move, and whether a node may start),
the tune's proposals, durations and the clock. The loop itself is tested in test_search.py."""

from __future__ import annotations

import math
import random
import subprocess
import sys
import time
from dataclasses import replace

import pytest

from dsagent_cbr.clock import Clock, parse_duration
from dsagent_cbr.harness.run import limit_to_train, predict_room
from dsagent_cbr.search.policy import (
    ENDING,
    FIRST_GRADE_SECONDS,
    FIRST_MODEL_NODE,
    MIN_MODEL_SECONDS,
    MIN_PLAIN_SECONDS,
    REFIT_ROOM,
    Arm,
    Family,
    Move,
    View,
    blend_seconds,
    blends_give_way,
    choose,
    needs,
    out_of_time,
    refit_room,
    reserve,
)


def test_the_policy_drafts_then_alternates_transplants_and_tunes_then_stops():
    rng = random.Random(0)
    best, other = Family(1, 4.0, True), Family(2, 6.0, True)
    assert choose(View(1, 3, [], ""), rng) == Move("draft")
    assert choose(View(0, 3, [best], "draft"), rng) == Move("transplant")
    assert choose(View(0, 2, [best, other], "transplant"), random.Random(1)) == Move("tune", parent=1)
    assert choose(View(0, 2, [best, other], "tune"), rng) == Move("transplant")
    assert choose(View(0, 2, [Family(1, None, True)], "transplant"), rng) == Move("transplant")  # nothing to tune
    assert choose(View(0, 0, [Family(1, 4.0, False)], "transplant"), rng) == Move("stop")
    parents = {choose(View(0, 0, [best, other], "tune"), random.Random(seed)).parent for seed in range(40)}
    assert parents == {1, 2}  # mostly the best family, sometimes the next
    assert choose(View(0, 2, [best, other], "tune", can_ensemble=True, fresh=4), rng) == Move("ensemble")
    assert choose(View(0, 2, [best, other], "tune", can_ensemble=True, fresh=3), rng) == Move("transplant")
    assert choose(View(0, 2, [best, other], "tune", can_ensemble=False, fresh=9), rng) == Move("transplant")


def test_the_model_and_the_plain_moves_take_turns_until_one_gains_more_per_second():
    rng, best = random.Random(0), Family(1, 4.0, True)
    assert choose(View(0, 2, [best], "draft", model=True, adapted=True, graded=[1]), rng) == Move("plan")  # both untried
    asked = View(0, 2, [best], "draft", model=True, adapted=True, plans=1, graded=[1], by_model=Arm(30.0, 0.0, (30.0,), last=True))
    assert choose(asked, rng) == Move("transplant")  # the same rate: the arm that did not move last
    good = Arm(60.0, 3.0, (60.0,), last=True)  # the model's node improved the best by 3 in a minute
    plain = Arm(120.0, 1.0, (60.0, 60.0))
    assert choose(View(0, 1, [best], "transplant", model=True, adapted=True, plans=2, graded=[5, 1], plain=plain, by_model=good),
                  random.Random(1)) == Move("improve", parent=5)  # faster gains: the model again
    poor = Arm(120.0, 0.0, (60.0, 60.0), last=False)
    assert choose(View(0, 1, [best], "tune", model=True, adapted=True, plans=2, graded=[1], plain=Arm(120.0, 1.0, (60.0, 60.0), True),
                       by_model=poor), rng) == Move("transplant")  # two minutes for nothing: the plain moves
    slow_plain = Arm(600.0, 1.0, (60.0,) * 10)
    assert choose(View(0, 1, [best], "tune", model=True, adapted=True, plans=2, graded=[1], plain=slow_plain, by_model=poor),
                  rng).operator == "improve"  # ten minutes of plain moves for one gain: the model's turn again
    broken = View(0, 1, [best], "transplant", model=True, adapted=True, plans=1, graded=[1], broken=[2])
    assert choose(broken, rng) == Move("debug", parent=2)
    nothing_plain = View(0, 0, [Family(1, 4.0, False)], "transplant", model=True, adapted=True, plans=2, graded=[1], by_model=poor)
    assert choose(nothing_plain, rng) == Move("improve", parent=1)  # nothing plain left: the model goes on
    assert choose(View(0, 1, [best], "draft", model=False, plans=1, graded=[1], broken=[2]), rng) == Move("transplant")


def test_no_node_starts_with_less_left_than_a_node_of_its_kind_needs():
    rng, best = random.Random(0), Family(1, 4.0, True)
    assert needs(Arm()) == MIN_PLAIN_SECONDS and needs(Arm(), by_model=True) == FIRST_MODEL_NODE
    assert needs(Arm(9.0, 0.0, (3.0, 6.0))) == MIN_PLAIN_SECONDS  # scripts of seconds: ten seconds will do
    assert needs(Arm(300.0, 0.0, (100.0, 200.0))) == 225.0  # half again the median of its kind's times
    assert needs(Arm(9.0, 0.0, (3.0, 6.0)), by_model=True) == MIN_MODEL_SECONDS == 20.0  # a model's node: 20 s
    assert needs(Arm(300.0, 0.0, (100.0, 200.0)), by_model=True) == 150.0  # or its nodes' median
    view = View(0, 2, [best], "draft", model=True, adapted=True, graded=[1], left=45.0)
    assert choose(view, rng) == Move("transplant")  # no room for a model's first node
    slow = View(0, 2, [best], "draft", model=True, adapted=True, graded=[1], left=45.0, plain=Arm(80.0, 0.0, (20.0, 20.0)),
                by_model=Arm(100.0, 0.0, (100.0,)))
    assert choose(slow, rng) == Move("transplant")  # the model's nodes took 100 s
    assert choose(replace(slow, left=29.0), rng) == Move("stop") and out_of_time(replace(slow, left=29.0))
    done = View(0, 0, [Family(1, 4.0, False)], "transplant", left=100.0)
    assert choose(done, rng) == Move("stop") and not out_of_time(done)  # time left, nothing to try
    assert choose(View(1, 2, [], "", left=2.0), rng) == Move("stop")  # not even a draft
    assert choose(View(1, 2, [], "", left=4.0), rng) == Move("draft")  # a short budget still gets its draft


def test_while_no_node_has_graded_a_plain_node_starts_with_a_few_seconds_left():
    """Any graded node is a submission: before one, a draft needs FIRST_GRADE_SECONDS; after, a draft
    MIN_PLAIN_SECONDS and any other plain node its kind's need."""
    rng, timed_out = random.Random(0), Arm(8.0, 0.0, (8.0,))
    first = View(1, 2, [Family(1, None, True)], "draft", plain=timed_out, left=FIRST_GRADE_SECONDS)
    assert choose(first, rng) == Move("draft") and not out_of_time(first)
    assert out_of_time(replace(first, left=FIRST_GRADE_SECONDS - 0.5))
    graded = replace(first, families=[Family(1, 4.0, True)], graded=[1], left=MIN_PLAIN_SECONDS - 1)
    assert choose(graded, rng) == Move("stop") and out_of_time(graded)
    # a draft needs MIN_PLAIN_SECONDS however long the first took: the next may take a fraction of its time
    assert choose(replace(graded, left=MIN_PLAIN_SECONDS), rng) == Move("draft")
    # the drafts done, a tune needs half again the median its kind took (the slow draft's 8 s)
    drafted = replace(graded, drafts_left=0, cases_left=0, left=MIN_PLAIN_SECONDS)
    assert choose(drafted, rng) == Move("stop") and out_of_time(drafted)
    assert choose(replace(drafted, left=1.5 * 8.0 + 1), rng) == Move("tune", parent=1)


def test_beside_a_running_node_only_the_other_kind_of_move_starts():
    rng, best = random.Random(0), Family(1, 4.0, True)
    assert choose(View(0, 2, [best], "draft", model=True, adapted=True, graded=[1], room="plain"), rng) == Move("transplant")
    assert choose(View(1, 2, [best], "draft", model=True, adapted=True, graded=[1], room="model"), rng) == Move("plan")  # not a draft
    assert choose(View(1, 2, [best], "draft", model=True, room="model"), rng) == Move("adapt")  # the model's first: a deploy
    behind = Arm(120.0, 0.0, (60.0, 60.0), last=True)
    assert choose(View(0, 2, [best], "draft", model=True, adapted=True, graded=[1], by_model=behind, room="model"), rng) == \
        Move("plan")  # in a place of its own, however far behind its arm is: it costs the plain moves none
    assert choose(View(0, 2, [best], "draft", model=True, adapted=True, graded=[1], by_model=behind, room="any"), rng) == \
        Move("transplant")  # sharing the places, the better rate takes one
    assert choose(View(0, 2, [best], "draft", model=False, graded=[1], room="model"), rng) == Move("stop")
    assert choose(View(0, 0, [Family(1, 4.0, False)], "transplant", model=True, adapted=True, graded=[1], room="plain"),
                  rng) == Move("stop")  # nothing plain left: wait for the model's node


def test_durations_read_as_a_user_writes_them():
    assert [parse_duration(d) for d in ("90", "90s", "15m", "1.5h")] == [90, 90, 900, 5400]
    for bad in ("soon", "-5m", "0"):
        with pytest.raises(ValueError, match="duration"):
            parse_duration(bad)


def test_a_script_that_does_not_parse_has_no_knobs_to_tune():
    from dsagent_cbr.search.tuning import knobs

    assert knobs("model = LGBMRegressor(num_leaves=31\nprint 'x'") == []
    assert knobs("model = LGBMRegressor(num_leaves=31)")[0].name == "num_leaves"


def test_a_tune_moves_each_literal_within_a_band_around_its_root_s_value():
    from dsagent_cbr.search.tuning import BAND, SHIFT, knobs, propose

    found = knobs("model = LGBMRegressor(learning_rate=0.1, num_leaves=31, subsample=0.8, max_depth=6)  # early_stopping")
    tried: list = [({k.name: k.value for k in found}, 5.0)]
    for seed in range(12):
        values = propose(found, tried, [], "minimize", seed)
        assert 0.1 / BAND <= values["learning_rate"] <= 0.1 * BAND and 31 / BAND <= values["num_leaves"] <= 31 * BAND
        assert 0.8 - SHIFT <= values["subsample"] <= 1.0 and 2 <= values["max_depth"] <= 12  # and in range
        tried.append((values, 5.0 + seed % 3))


def test_a_depth_written_as_no_limit_stays_so_while_the_leaves_are_tuned():
    from dsagent_cbr.search.tuning import distributions, knobs, propose

    found = knobs('model = XGBRegressor(grow_policy="lossguide", max_leaves=31, max_depth=0)  # early_stopping')
    assert {k.name for k in found} == {"max_leaves", "max_depth"} and set(distributions(found)) == {"max_leaves"}
    values = propose(found, [({"max_leaves": 31}, 5.0)], [], "minimize", 0)
    assert set(values) == {"max_leaves"} and 7 <= values["max_leaves"] <= 124


def test_each_neighbour_s_values_are_tried_once_then_optuna_proposes():
    from dsagent_cbr.search.tuning import knobs, propose

    found = knobs("model = LGBMRegressor(learning_rate=0.1, num_leaves=31)")
    neighbours = [{"num_leaves": 63}, {"num_leaves": 15, "learning_rate": 0.05}]
    tried: list = [({"learning_rate": 0.1, "num_leaves": 31}, 5.0)]
    proposed = []
    for seed in range(4):
        values = propose(found, tried, neighbours, "minimize", seed)
        proposed.append(values)
        tried.append((values, 4.0))
    # each neighbour once, in order (Optuna's own check would queue the first again on every call)
    assert proposed[0]["num_leaves"] == 63 and (proposed[1]["num_leaves"], proposed[1]["learning_rate"]) == (15, 0.05)


def test_a_small_space_is_tuned_without_repeats_until_it_is_spent_and_then_no_longer_tuned():
    """The forest draft's one knob has eight values; TPE wants the same one again however often it is asked,
    and a one-minute run on a 6%-positive table tuned min_samples_leaf=1 twice."""
    from dsagent_cbr.search.tree import _tunable
    from dsagent_cbr.search.tuning import knobs, propose, space_size

    script = "model = ExtraTreesClassifier(n_estimators=step, min_samples_leaf=2, max_features=0.7)"
    found = knobs(script)
    assert space_size(found) == 8 and space_size(knobs("LGBMRegressor(learning_rate=0.1)")) == math.inf
    tried: list = [({"min_samples_leaf": 2}, 0.71)]
    for seed in range(7):
        running = [tried.pop()[0]] if seed == 3 else []  # one still running: neither repeated nor told
        values = propose(found, tried, [{"min_samples_leaf": 1}], "maximize", seed, running)
        assert all(values != params for params, _ in tried) and values not in running
        tried += [(v, 0.7 - seed / 100) for v in [*running, values]]
        assert _tunable(script, len(tried)) == (len(tried) < 8)
    assert sorted(v["min_samples_leaf"] for v, _ in tried) == list(range(1, 9))
    assert not _tunable(script, 8) and _tunable("model = LGBMRegressor(subsample=0.8)", 1000)  # never spent


def test_a_clock_started_with_the_command_counts_what_came_before():
    started = time.monotonic() - 30.0
    assert Clock(60.0, start=started).left() == pytest.approx(30.0, abs=1.0)
    assert Clock(60.0, start=started).limit(reserve=25.0) == pytest.approx(5.0, abs=1.0)
    assert Clock(None).left() == math.inf and Clock(None).limit() is None


def test_a_budget_counts_from_the_process_s_start():
    """The clock starts before the interpreter's imports: a second slept first is spent."""
    code = "import time; time.sleep(1.0); from dsagent_cbr.clock import process_start; "
    code += "print(time.monotonic() - process_start())"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert 1.0 <= float(out) < 30.0


def test_a_refit_that_no_longer_fits_leaves_its_room_to_nodes():
    """A refit of a 44 s fit needs 66 s: kept while 71 s or more are left, given to nodes below that."""
    assert reserve(44.0, left=120.0) == pytest.approx(ENDING + REFIT_ROOM * 44.0)
    assert reserve(44.0, left=53.0) == ENDING
    assert reserve(None, left=53.0) == ENDING


def test_the_room_kept_for_a_refit_lets_the_refit_at_the_end_train_as_long_as_its_first_fit():
    """The end's refit must have its first fit's time before its deadline for training (the limit less
    predict_room): a short fit needs more than REFIT_ROOM times it, a long one no more."""
    for first_fit in (0.5, 3.0, 6.26, 20.0, 56.0, 300.0):
        room = refit_room(first_fit)
        assert room >= REFIT_ROOM * first_fit and room - predict_room(room) >= first_fit - 1e-6
    assert refit_room(6.26) > REFIT_ROOM * 6.26 + 3.0  # 9.4 s would leave the refit 4.4 s to train
    assert refit_room(56.0) == REFIT_ROOM * 56.0
    assert limit_to_train(6.26) - 0.01 - predict_room(limit_to_train(6.26) - 0.01) < 6.26  # the shortest


def test_the_last_blend_s_time_is_kept_at_the_end_and_grows_with_the_rows():
    """A few thousand rows blend in milliseconds; a million in seconds, more with more nodes, and never
    less than a blend of the run took. The refit's room goes first when both no longer fit."""
    assert blend_seconds(2_000, 5) < 0.1
    assert 8.0 < blend_seconds(1_010_000, 2) < blend_seconds(1_010_000, 6)
    assert blend_seconds(2_000, 5, taken=4.0) == 4.0
    assert reserve(None, left=100.0, blend=12.0) == ENDING + 12.0
    assert reserve(20.0, left=100.0, blend=12.0) == pytest.approx(ENDING + 12.0 + REFIT_ROOM * 20.0)
    assert reserve(20.0, left=40.0, blend=12.0) == ENDING + 12.0


def test_a_leading_node_s_refit_that_fits_only_without_the_blends_goes_first():
    """military-gender at one minute: the floor (an 8.4 s first fit) led with 25 s left, its refit needs
    16.8 s and the two blends to come 8.8 s. The refit keeps its room and no node nor blend starts; where
    a blend leads, or both fit, or the refit fits in no case, the rule is as it was."""
    room = refit_room(8.4)
    assert ENDING + room <= 25.0 < ENDING + 8.8 + room
    assert blends_give_way(8.4, left=25.0, blend=8.8)
    assert reserve(8.4, left=25.0, blend=8.8, refit_first=True) == pytest.approx(ENDING + room)
    assert reserve(8.4, left=25.0, blend=8.8) == ENDING + 8.8  # a blend leads: its members' refits wait
    assert not blends_give_way(8.4, left=40.0, blend=8.8)  # both fit
    assert reserve(8.4, left=40.0, blend=8.8, refit_first=True) == pytest.approx(ENDING + 8.8 + room)
    assert not blends_give_way(8.4, left=ENDING + room - 1.0, blend=8.8)  # the refit does not fit at all
    assert reserve(8.4, left=ENDING + room - 1.0, blend=8.8, refit_first=True) == ENDING + 8.8
    assert not blends_give_way(None, left=25.0, blend=8.8)
