"""Selection rows: the harness holds labelled rows back from every script and chooses on its own grade
of them. Real scripts in the real sandbox on real tasks; the model is scripted (FakeModel), since what
is tested is what the loop does with what the scripts print and predict."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from conftest import prepared
from support.fakes import FakeBank, FakeModel
from support.task_copies import dsagent_folder

from dsagent_cbr.agent.develop import DevelopConfig, develop_with_model
from dsagent_cbr.agent.record import overclaims
from dsagent_cbr.agent.seams import SandboxExecutor
from dsagent_cbr.harness import upload, workspace
from dsagent_cbr.harness.plan import hold_out, step_pairs
from dsagent_cbr.harness.run import run_script
from dsagent_cbr.report.observer import ReportWriter
from dsagent_cbr.sandbox.bubblewrap import SandboxPolicy
from dsagent_cbr.tasks.loader import load_task

PLAN = "Reflection: r\nReasoning: r\nThought: t\nCheck: c\nDecision: {}"

# The starter's skeleton with a model; MODEL and FIT are filled in per script.
SCRIPT = """
import numpy as np
import pandas as pd
from sklearn.model_selection import train_test_split
{imports}

data = pd.read_csv("train.csv")
X, y = data.drop(columns=["id", "compressive_strength"]), data["compressive_strength"]
X_train, X_valid, y_train, y_valid = train_test_split(X, y, test_size=0.2, random_state=42)
{fit}
rmse = float(np.sqrt(np.mean((model.predict(X_valid) - y_valid) ** 2)))
print(f"Validation rmse: {{{printed}:.6f}}")
test = pd.read_csv("test.csv")
pd.DataFrame({{"id": test["id"], "compressive_strength": {predict}}}).to_csv("submission.csv", index=False)
"""
HONEST = SCRIPT.format(imports="from sklearn.ensemble import HistGradientBoostingRegressor",
                       fit="model = HistGradientBoostingRegressor(random_state=0).fit(X_train, y_train)",
                       printed="rmse", predict='model.predict(test.drop(columns=["id"]))')
LIAR = SCRIPT.format(imports="from sklearn.dummy import DummyRegressor",  # garbage, and a line that says otherwise
                     fit="model = DummyRegressor().fit(X_train, y_train)", printed="0.0123 + 0 * rmse",
                     predict='np.random.default_rng(0).uniform(0, 100, len(test))')
LEAKY = SCRIPT.format(imports="from sklearn.neighbors import KNeighborsRegressor",  # fitted on its validation rows
                      fit="model = KNeighborsRegressor(n_neighbors=1).fit(pd.concat([X_train, X_valid]), "
                          "pd.concat([y_train, y_valid]))",
                      printed="rmse", predict='model.predict(test.drop(columns=["id"]))')


def fenced(code: str) -> str:
    return f"```python\n{code}\n```"


def develop_two(scripts: tuple[str, str], tmp_path) -> tuple:
    task = prepared("concrete-strength")
    model = FakeModel({"plan": [PLAN.format("first"), PLAN.format("second")],
                       "program": [fenced(s) for s in scripts], "log": ["entry one", "entry two"]})
    bank = FakeBank()
    executor = SandboxExecutor(task, SandboxPolicy(timeout=120))
    record = develop_with_model(task, DevelopConfig(iterations=2, cbr=False), tmp_path, bank, model, executor,
                                observers=(ReportWriter(tmp_path),))
    return record, bank, model


@pytest.mark.integration
def test_a_false_validation_line_is_neither_selected_nor_retained(tmp_path):
    record, bank, model = develop_two((HONEST, LIAR), tmp_path)
    honest, liar = record.rows
    assert liar.status == "ok" and liar.valid == pytest.approx(0.0123)  # it printed the lie, and it ran
    assert liar.selection > 3 * honest.selection  # cbr's own grade of the rows it held back
    assert record.best_iteration == 1 and record.selected_by == "selection"
    assert honest.retained and not liar.retained
    assert [c.extra["iteration"] for c in bank.added] == [1, 1]  # the solution and the insight of iteration 1
    assert (tmp_path / "best_solution.py").read_text().strip() == HONEST.strip()
    task = prepared("concrete-strength")  # the submission to upload holds the test rows and nothing else
    assert pd.read_csv(tmp_path / "submission.csv")["id"].tolist() == pd.read_csv(task.public_dir / "test.csv")["id"].tolist()
    assert overclaims(liar, "minimize")  # a printed line far better than cbr's own grade is flagged
    # The honest line is its own split's score. Whether it falls within GAP of the selection score depends on
    # the draw of selection rows, which each cbr home's key makes: on one machine's key the honest script
    # printed 4.46 and graded 6.37. So only the lie's flag is asserted, and the lie's gap is far the larger.
    gap = {r.iteration: abs(r.valid - r.selection) / r.selection for r in (honest, liar)}
    assert gap[liar.iteration] > 2 * gap[honest.iteration]
    assert "⚠" in (tmp_path / "report.md").read_text()
    # the model is told the selection score of its experiment, never the test score
    assert f"selection rmse {liar.selection:.6g}" in model.prompts[-1]
    assert not any(f"{r.test:.6g}" in prompt for r in record.rows for prompt in model.prompts)


@pytest.mark.integration
def test_an_honest_model_beats_a_1nn_fitted_on_its_own_validation_rows(tmp_path):
    record, _, _ = develop_two((HONEST, LEAKY), tmp_path)
    honest, leaky = record.rows
    assert leaky.valid < 0.5 * honest.valid  # by what the scripts print, the 1-NN wins
    assert record.best_iteration == 1 and honest.selection < leaky.selection
    assert honest.test < leaky.test  # and the test agrees with the selection score (reported only)
    assert not leaky.retained


@pytest.mark.integration
@pytest.mark.parametrize("printed", ["-1e300", "nan"])
def test_an_impossible_printed_score_is_the_scripts_error(concrete, tmp_path, printed):
    result = run_script(concrete, HONEST.replace("{rmse:.6f}", f"{{float('{printed}')}}"), run_dir=tmp_path / "r")
    assert result.status == "impossible_score" and "cannot be" in result.error


def test_selection_rows_are_out_of_the_training_file_and_in_the_test_file(tmp_path):
    task = prepared("pbc-status")
    held = hold_out(task)
    assert held is not None and held.rows >= 100 and held is hold_out(task)  # the same rows for every run
    workspace.build(task, held, tmp_path, "print(1)\n")
    train, test = pd.read_csv(tmp_path / "train.csv"), pd.read_csv(tmp_path / "test.csv")
    full = pd.read_csv(task.public_dir / "train.csv")
    assert len(train) == len(full) - held.rows and len(test) == held.test_rows + held.rows
    labels = held.answers.set_index("id")["status"]
    assert set(labels.index.astype(int)).isdisjoint(train["id"]) and "status" not in test.columns
    assert set(labels) == set(full["status"])  # stratified: every class is among them
    assert (tmp_path / "train.csv").read_text().splitlines()[1] in (task.public_dir / "train.csv").read_text()


def test_forecast_selection_targets_are_nowhere_the_script_looks(tmp_path):
    task = prepared("elec-demand")
    held = hold_out(task)
    workspace.build(task, held, tmp_path, "print(1)\n")
    X, y, X_test = (np.load(tmp_path / n) for n in ("X_train.npy", "y_train.npy", "X_test.npy"))
    assert len(X_test) == held.test_rows + held.rows and len(y) < held.labelled - held.rows
    secret = step_pairs(held.answers)
    assert not secret & (step_pairs(X) | step_pairs(y) | step_pairs(X_test))


@pytest.mark.integration
@pytest.mark.parametrize("two_arguments", [False, True])
def test_a_dsagent_folder_has_its_selection_rows_graded_by_its_own_submission(concrete, tmp_path, two_arguments):
    folder = load_task(dsagent_folder(concrete, tmp_path / "copy", two_arguments=two_arguments))
    result = run_script(folder, folder.starter, run_dir=tmp_path / "run")
    assert result.ok and result.selection_rows == hold_out(concrete).rows
    assert result.selection_metric is not None and result.selection_metric != result.test_metric


# Under CBR_REFIT it answers every row it learned by matching its features, and inverts its predictions
# of the others. When a refit was judged on the selection rows (shown to it beside the test rows, and
# learned), it scored them perfectly and was submitted: real test RMSE 33.6 against the first fit's 5.0.
TWO_FACED = HONEST + '''
import os
if os.environ.get("CBR_REFIT"):
    guess = model.predict(test.drop(columns=["id"]))
    inverted = guess.max() + guess.min() - guess
    features = [c for c in test.columns if c != "id"]
    learned = data.set_index(features)["compressive_strength"]
    learned = learned[~learned.index.duplicated()]
    keys = pd.MultiIndex.from_frame(test[features])
    known = keys.isin(learned.index)
    inverted[known] = learned.reindex(keys[known]).to_numpy()
    pd.DataFrame({"id": test["id"], "compressive_strength": inverted}).to_csv("submission.csv", index=False)
'''


def develop_refit(script: str, tmp_path) -> tuple:
    task = prepared("concrete-strength")
    model = FakeModel({"plan": [PLAN.format("one")], "program": [fenced(script)], "log": ["entry"]})
    executor = SandboxExecutor(task, SandboxPolicy(timeout=120))
    config = DevelopConfig(iterations=1, cbr=False, refit=True)
    return task, develop_with_model(task, config, tmp_path, FakeBank(), model, executor)


@pytest.mark.integration
def test_a_refit_is_judged_on_its_test_predictions_and_refused_when_far_from_the_first_fit(tmp_path):
    task, record = develop_refit(TWO_FACED, tmp_path / "two-faced")
    assert record.best_iteration == 1 and record.refit.status == "refused", record.refit
    assert "behaved otherwise" in record.refit.why and "RMSE" in record.refit.agreement
    submitted = (tmp_path / "two-faced" / "submission.csv").read_bytes()  # the first fit's test predictions stay
    graded = (tmp_path / "two-faced" / "step-01" / "exec" / "workspace" / "submission.csv").read_bytes()
    assert submitted == upload.test_rows_only(task, hold_out(task), graded)
    refit_rows = pd.read_csv(tmp_path / "two-faced" / "refit" / "exec" / "workspace" / "submission.csv")
    assert len(refit_rows) == len(pd.read_csv(task.public_dir / "test.csv"))  # no selection row was shown to it

    _, honest = develop_refit(HONEST.replace("import numpy as np", "import numpy as np  # reads CBR_REFIT"),
                              tmp_path / "honest")
    assert honest.refit.status == "ok" and "from the first fit's test predictions" in honest.refit.agreement
    submitted = pd.read_csv(tmp_path / "honest" / "submission.csv")
    assert submitted["id"].tolist() == pd.read_csv(task.public_dir / "test.csv")["id"].tolist()  # own ids, in order
