"""The search's ensemble: its blend, each fold of the selection rows judged with weights chosen on the
others (real grading on a real task's held-back rows), and its script run in the real sandbox."""

from __future__ import annotations

import dataclasses
import io

import numpy as np
import pandas as pd
import pytest
from conftest import prepared

from dsagent_cbr.harness.plan import hold_out
from dsagent_cbr.harness.run import run_script
from dsagent_cbr.search import ensemble
from dsagent_cbr.tasks.metrics import rmse
from dsagent_cbr.untrusted.blend import blend


@pytest.fixture(scope="module")
def task():
    return prepared("concrete-strength")


def truth(task, held) -> np.ndarray:
    answers = pd.read_csv(task.private_dir / task.answers)["compressive_strength"].to_numpy(float)
    return np.concatenate([answers, held.answers["compressive_strength"].astype(float).to_numpy()])


def members(task, held) -> list[ensemble.Member]:
    """Two noisy copies of the answers (independent noise: their mean is better than either) and a constant."""
    y, rng = truth(task, held), np.random.default_rng(0)
    return [ensemble.Member(1, "", (y + rng.normal(0, 4, len(y)))[:, None]),
            ensemble.Member(2, "", (y + rng.normal(0, 4, len(y)))[:, None]),
            ensemble.Member(3, "", np.full((len(y), 1), y.mean()))]


def test_a_vote_and_a_mean_blend_cell_by_cell():
    assert list(blend([np.array(["a", "b"]), np.array(["a", "a"]), np.array(["b", "b"])], [0.5, 0.3, 0.2], True)) \
        == ["a", "b"]
    voted = blend([np.array([1, 0]), np.array([0, 0]), np.array([1, 1])], [0.2, 0.4, 0.4], True)
    assert voted.dtype.kind == "i" and list(voted) == [1, 0]  # a tie goes to the heavier member
    assert np.allclose(blend([np.array([[1.0], [2.0]]), np.array([[3.0], [6.0]])], [3, 1], False), [[1.5], [3.0]])


def test_the_blend_is_graded_on_rows_that_did_not_choose_its_weights(task, tmp_path):
    held = hold_out(task)
    assert held is not None and ensemble.possible(task, held)
    found = members(task, held)
    ids = ensemble.row_ids(task, held)
    made = ensemble.make(task, held, ids, found, seed=0, workspace=tmp_path / "a")
    assert set(made.weights) <= {1, 2} and len(made.weights) == 2  # the constant is left out
    y = truth(task, held)[held.test_rows:]
    alone = [rmse(y, m.values[held.test_rows:, 0]) for m in found[:2]]
    assert made.grades.selection < min(alone)
    written = pd.read_csv(tmp_path / "a" / task.predictions)["compressive_strength"].to_numpy()[held.test_rows:]
    # few selection rows: more folds, so that each fold's weights are chosen on more of them
    folds = ensemble.split(held.rows, 0, ensemble.FEW_FOLDS)
    assert held.rows < ensemble.FEW_ROWS and len(made.folds) == ensemble.FEW_FOLDS
    for rows, weights in zip(folds, made.folds, strict=True):  # each fold by the weights the others chose
        mixed = sum(w * found[k - 1].values[held.test_rows:, 0][rows] for k, w in weights.items())
        assert np.allclose(written[rows], mixed)
    assert made.grades.selection == pytest.approx(rmse(y, written))
    # taking the best single node instead, cross-fitted on the same folds: the best on the others predicts each
    taken = np.empty(held.rows)
    for rows in folds:
        others = np.setdiff1d(np.arange(held.rows), rows)
        best = min(found[:2], key=lambda m: rmse(y[others], m.values[held.test_rows:, 0][others]))
        taken[rows] = best.values[held.test_rows:, 0][rows]
    assert made.single == pytest.approx(rmse(y, taken)) and made.single > made.grades.selection
    assert not made.single_sure  # the blend scores better: the final choice takes it
    # a fold's weights do not move when its own labels change; the other folds' do
    answers = held.answers.copy()
    answers.loc[folds[1], "compressive_strength"] = "0"
    again = ensemble.make(task, dataclasses.replace(held, answers=answers), ids, found, seed=0,
                          workspace=tmp_path / "b")
    assert again.folds[1] == made.folds[1] and again.folds[0] != made.folds[0]
    assert ensemble.fold_count(ensemble.FEW_ROWS) == 2  # many selection rows: two folds, a quarter of the scoring


@pytest.mark.integration
def test_the_ensemble_script_runs_its_members_and_blends_them_in_the_sandbox(task, tmp_path):
    def constant(value: float) -> str:
        return ("import pandas as pd\nt = pd.read_csv('test.csv')\n"
                f"pd.DataFrame({{'id': t['id'], 'compressive_strength': {value}}}).to_csv('submission.csv', index=False)\n")

    parts = [ensemble.Member(4, constant(30.0), np.zeros(1)), ensemble.Member(7, constant(40.0), np.zeros(1))]
    result = run_script(task, ensemble.script(task, parts, {4: 0.75, 7: 0.25}), run_dir=tmp_path)
    assert result.ok, result.stderr
    made = pd.read_csv(tmp_path / "workspace" / task.predictions)
    assert np.allclose(made["compressive_strength"], 32.5) and len(made) == held_rows(task)


def held_rows(task) -> int:
    held = hold_out(task)
    return held.test_rows + held.rows


def test_each_family_s_best_node_is_a_candidate_before_the_next_best_tunes():
    """Twenty tunes of one model must not fill the pool the blend picks from: a draft that learns
    differently stays a candidate however its score ranks."""
    alone = [0.80, *(0.85 + k / 1000 for k in range(10)), 0.70]  # a draft, ten tunes of node 2, a forest
    families = [1, *([2] * 10), 12]
    pool = ensemble._pool(alone, "maximize", families)
    assert pool[:3] == [10, 0, 11] and len(pool) == ensemble.POOL  # each family's best, best first
    assert pool[3:] == [9, 8, 7, 6, 5]  # then the best of the rest
    assert ensemble._pool(alone, "maximize", list(range(12)))[:3] == [10, 9, 8]  # no families: by score
    assert ensemble._pool([None, 3.0, 2.0], "minimize", [1, 1, 3]) == [2, 1, 0]  # unscored last


def test_a_single_node_beats_the_blend_only_beyond_the_selection_rows_noise(task):
    held = hold_out(task)
    y = truth(task, held)[held.test_rows:, None]
    noisy = y + np.random.default_rng(2).normal(0, 4, y.shape)
    assert ensemble.beyond_noise(task, held, 0, y, noisy)  # exact against noisy: far apart
    assert not ensemble.beyond_noise(task, held, 0, noisy, y)  # worse
    alike = y + np.random.default_rng(3).normal(0, 4, y.shape)  # as noisy, by other draws
    nearer, further = sorted([noisy, alike], key=lambda v: rmse(y[:, 0], v[:, 0]))
    assert rmse(y[:, 0], nearer[:, 0]) < rmse(y[:, 0], further[:, 0])
    assert not ensemble.beyond_noise(task, held, 0, nearer, further)  # better, within the noise


def test_labels_blend_by_their_mean_probability_when_every_member_wrote_them():
    classes = ("no", "yes")
    sure = ensemble.Member(1, "", np.array([["no"], ["yes"]], dtype=object), np.array([[0.95, 0.05], [0.1, 0.9]]), classes)
    unsure = [ensemble.Member(k, "", np.array([["yes"], ["no"]], dtype=object), np.array([[0.45, 0.55], [0.52, 0.48]]),
                              classes) for k in (2, 3)]
    weights, rows = np.array([0.4, 0.3, 0.3]), np.arange(2)
    # two unsure members outvote the sure one, but its probabilities outweigh theirs
    assert blend([m.values for m in [sure, *unsure]], weights, True)[:, 0].tolist() == ["yes", "no"]
    assert ensemble.combine([sure, *unsure], weights, rows, True)[:, 0].tolist() == ["no", "yes"]
    # a member without probabilities, or with other classes, and the blend counts votes
    bare = dataclasses.replace(unsure[0], scores=None, classes=())
    assert ensemble.combine([sure, bare, unsure[1]], weights, rows, True)[:, 0].tolist() == ["yes", "no"]
    # a single member keeps its own labels; members without weight are left out
    assert ensemble.combine([sure, bare], np.array([1.0, 0.0]), rows, True)[:, 0].tolist() == ["no", "yes"]


def test_class_scores_are_read_only_where_they_agree_with_the_labels(tmp_path):
    frame = pd.DataFrame({"id": ["a", "b", "c"], "label": [1, 0, 1]})
    (tmp_path / "cbr_class_scores.csv").write_text("0,1\n0.2,0.8\n0.7,0.3\n0.4,0.6\n")
    scores, classes = ensemble.class_scores(tmp_path, frame, ["label"])
    assert classes == ("0", "1") and np.allclose(scores[:, 1], [0.8, 0.3, 0.6])
    (tmp_path / "cbr_class_scores.csv").write_text("0,1\n0.8,0.2\n0.3,0.7\n0.6,0.4\n")  # another file's rows
    assert ensemble.class_scores(tmp_path, frame, ["label"]) == (None, ())
    for bad in ("nan", "-1", "1e309"):  # not probabilities
        (tmp_path / "cbr_class_scores.csv").write_text(f"0,1\n0.2,0.8\n0.7,{bad}\n0.4,0.6\n")
        assert ensemble.class_scores(tmp_path, frame, ["label"]) == (None, ()), bad
    (tmp_path / "cbr_class_scores.csv").write_text("0,1\n2,8\n7,3\n4,6\n")  # scaled: each row is made to sum to one
    assert np.allclose(ensemble.class_scores(tmp_path, frame, ["label"])[0][:, 1], [0.8, 0.3, 0.6])
    (tmp_path / "cbr_class_scores.csv").write_text("0,1\n0.2,0.8\n")  # too few rows
    assert ensemble.class_scores(tmp_path, frame, ["label"]) == (None, ())


@pytest.mark.slow
def test_adapted_nodes_write_probabilities_that_the_blend_and_its_script_average_alike(tmp_path):
    """Accuracy on titanic-survival: both general drafts run in the sandbox and write class probabilities
    beside their labels; the host blends them by mean probability, and the ensemble's script, run in the
    sandbox, writes the same test labels."""
    from dsagent_cbr.adapter import adapt_case
    from dsagent_cbr.search.drafts import general_cases

    titanic = prepared("titanic-survival")
    held = hold_out(titanic)
    ids = ensemble.row_ids(titanic, held)
    found = []
    for k, case in enumerate(general_cases(titanic)[:2], start=1):  # the two boosters
        code = adapt_case(case, titanic)["code"]
        result = run_script(titanic, code, run_dir=tmp_path / f"node-{k}", timeout=300)
        assert result.ok, result.stderr[-2000:]
        found.append(ensemble.load(titanic, held, ids, k, tmp_path / f"node-{k}" / "workspace", code))
    assert all(m is not None and m.scores is not None and m.scores.shape == (len(ids), 2) for m in found)
    made = ensemble.make(titanic, held, ids, found, seed=0, workspace=tmp_path / "blend")
    weights = {1: 0.5, 2: 0.5}
    view = held.for_refit()  # the members' test rows alone, blended as a refit's are
    ensemble.refit(titanic, view, ensemble.row_ids(titanic, view), found, weights, tmp_path / "host")
    host = pd.read_csv(tmp_path / "host" / titanic.predictions)
    rerun = run_script(titanic, ensemble.script(titanic, found, weights), run_dir=tmp_path / "script", timeout=600)
    assert rerun.ok, rerun.stderr[-2000:]
    script = pd.read_csv(tmp_path / "script" / "workspace" / titanic.predictions).set_index("id")
    assert "'classes': ['died', 'survived']" in ensemble.script(titanic, found, weights)  # the script averages them too
    assert (script.loc[host["id"], "survived"].to_numpy() == host["survived"].to_numpy()).all()
    assert made.grades.selection is not None


@pytest.mark.parametrize("name", ["concrete-strength", "titanic-survival", "trump-tweets-device", "tweet-sentiment"])
def test_a_selection_score_without_the_merge_is_the_grader_s(name):
    """The ensemble scores hundreds of blends on parts of the selection rows: predictions it made in the
    answers' order skip the merge by id, and score what the merge would."""
    from dsagent_cbr.harness.grading import KEY, _score_csv, prediction_columns, score_selection

    task = prepared(name)
    held, rng = hold_out(task), np.random.default_rng(0)
    rows = ensemble.split(held.rows, 0)[0]
    columns = prediction_columns(task)
    if task.metric.name == "accuracy":
        values = rng.choice(held.answers[task.target[0]].unique(), (len(rows), 1))
    else:
        values = rng.random((len(rows), len(columns))) + (0 if task.task_type != "regression" else
                                                         held.answers[list(task.target)].astype(float).to_numpy()[rows])
    answers = pd.read_csv(io.StringIO(held.answers.iloc[rows].to_csv(index=False)))
    shuffled = rng.permutation(len(rows))
    sub = pd.DataFrame(values, columns=columns).assign(**{KEY: [held.ids[r] for r in rows]}).iloc[shuffled]
    merged = _score_csv(task, answers, sub.assign(**{task.id_column: sub[KEY]}), "selection")
    assert score_selection(task, held, values, rows) == pytest.approx(merged)
