"""An adapted script as a model edits it (adapter/edit.py): the case's code in the task's starter without the
adapter's shim, and the edit wrapped again under the same rules. Fast, but one real run of an edit (slow)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from conftest import REPO, prepared

from dsagent_cbr.adapter import CaseSolution, adapt_solution
from dsagent_cbr.adapter.edit import editable, rewrapped
from dsagent_cbr.agent.record import Row
from dsagent_cbr.bank.casefiles import solution_from_folder
from dsagent_cbr.harness.run import run_script
from dsagent_cbr.search import model_moves
from dsagent_cbr.search.model_moves import ModelMoves
from dsagent_cbr.tasks.export import dsagent_copy

# (case, target): a regression case on a binary task, text, multi-label, multi-class on binary, the same
# modality in DS-Agent's layout
PAIRS = [("diamonds-price", "mlc-churn"), ("movie-snippets-sentiment", "rotten-tomatoes"),
         ("yeast-multilabel", "yeast-multilabel"), ("pbc-status", "smoke-ban")]


def reference_case(name: str) -> CaseSolution:
    return CaseSolution.from_case(solution_from_folder(REPO / "casebank" / "solutions" / name))


def adapted(case: str, target) -> str:
    return adapt_solution(reference_case(case), target).code


@pytest.mark.parametrize("case,target", PAIRS)
def test_an_adapted_script_is_read_without_its_shim_and_an_unchanged_edit_wraps_back_to_it(case, target):
    task = prepared(target)
    script = adapted(case, task)
    edit = editable(script, task)
    assert edit is not None and edit.case == case
    assert "_cbr" not in edit.view and "_CBR_TASK" not in edit.view and "_case_" not in edit.view
    assert "def train_model(" in edit.view and "def predict(" in edit.view
    assert "# cbr's adapter wraps train_model and predict below" in edit.view
    assert len(edit.view.splitlines()) * 3 < len(script.splitlines())  # the shim was most of it
    assert rewrapped(edit.view, edit, task) == script


def test_an_unchanged_edit_wraps_back_in_dsagent_s_layout_too(tmp_path):
    task = dsagent_copy(prepared("smoke-ban"), tmp_path / "smoke-ban")
    script = adapted("diamonds-price", task)
    assert rewrapped(editable(script, task).view, editable(script, task), task) == script


def test_an_edit_keeps_the_shim_s_account_of_the_case_and_its_change():
    task = prepared("mlc-churn")
    script = adapted("diamonds-price", task)
    edit = editable(script, task)
    changed = edit.view.replace("num_leaves=31", "num_leaves=63")
    assert changed != edit.view
    again = rewrapped(changed, edit, task)
    assert "num_leaves=63" in again and "num_leaves=31" not in again
    assert editable(again, task).account == {**edit.account, "named": editable(again, task).account["named"]}
    assert edit.account["case"] == "regression" and edit.account["output"] == "proba"


def test_the_contract_says_what_the_shim_hands_the_case_s_code():
    churn = prepared("mlc-churn")
    said = editable(adapted("diamonds-price", churn), churn).view
    assert "come as a pandas DataFrame" in said and "integer codes of the training categories" in said
    assert "class codes 0 to k-1" in said and ".predict_proba(" in said
    hotels = prepared("hotel-rates")
    said = editable(adapted("diamonds-price", hotels), hotels).view
    assert "predict returns the predicted values" in said and "class codes" not in said


def test_a_script_the_adapter_did_not_make_is_edited_as_it_is():
    task = prepared("concrete-strength")
    assert editable(task.starter.read_text(encoding="utf-8"), task) is None
    assert editable("def broken(:\n", task) is None


def test_the_model_improves_an_adapted_node_from_its_view_and_its_edit_runs_wrapped(monkeypatch):
    task = prepared("mlc-churn")
    script = adapted("diamonds-price", task)
    edit = editable(script, task)
    shown, ran = [], []

    def planned(asking, row, log, script, case, **kwargs):
        shown.append(script)
        return "plan", script.replace("num_leaves=31", "num_leaves=15")

    monkeypatch.setattr(model_moves, "plan_and_program", planned)
    monkeypatch.setattr(model_moves, "best_case", lambda *args: None)
    parent = Row(iteration=1, operator="transplant", status="ok", score=0.7, script="step-01/script.py")
    moves = ModelMoves.__new__(ModelMoves)  # only what improve reads
    moves.run, moves.config = SimpleNamespace(task=task), None
    moves.tree = SimpleNamespace(row=lambda k: parent, script=lambda row: script,
                                 results={1: SimpleNamespace(stdout="Validation auroc: 0.7")})
    moves.tree_log, moves.describe = (lambda: "Node 1 (transplant)"), (lambda row: "a LightGBM")
    moves.model = moves.ctx = moves.query = None
    moves.run_node = lambda row, code: ran.append(code)
    moves.improve(Row(iteration=2, operator="improve", parent=1))
    assert shown == [edit.view]
    assert len(ran) == 1 and "num_leaves=15" in ran[0] and "def _cbr_plan(" in ran[0]
    assert ran[0] == script.replace("num_leaves=31", "num_leaves=15")


def test_a_broken_edit_of_an_adapted_node_is_debugged_from_its_view_and_the_fix_runs_wrapped(monkeypatch):
    task = prepared("mlc-churn")
    script = adapted("diamonds-price", task)
    edit = editable(script, task)
    broken_view = edit.view.replace("num_leaves=31", "num_leaves=undefined_name")
    broken = rewrapped(broken_view, edit, task)
    asked, ran = [], []

    def fix(model, ctx, original, instruction, failing, error, log, temperature):
        asked.append((original, failing))
        return failing.replace("undefined_name", "15")

    monkeypatch.setattr(model_moves.roles, "debug", fix)
    rows = {1: Row(iteration=1, operator="transplant", status="ok", score=0.7, script="step-01/script.py"),
            2: Row(iteration=2, operator="improve", parent=1, status="error", step="fewer leaves",
                   script="step-02/script.py")}
    moves = ModelMoves.__new__(ModelMoves)  # only what debug reads
    moves.run = SimpleNamespace(task=task, ask=lambda t, role, call: call())
    moves.config, moves.model, moves.ctx = SimpleNamespace(temperature=0.0), None, None
    moves.tree = SimpleNamespace(row=rows.get, script=lambda row: {1: script, 2: broken}[row.iteration],
                                 results={2: SimpleNamespace(feedback=lambda: "NameError: undefined_name")})
    moves.tree_log = lambda: "Node 1 (transplant)"
    moves.run_node = lambda row, code: ran.append(code)
    moves.debug(Row(iteration=3, operator="debug", parent=2))
    assert asked == [(edit.view, broken_view)]  # the script it was asked to edit, and its broken edit
    assert ran == [script.replace("num_leaves=31", "num_leaves=15")]


@pytest.mark.slow
def test_an_edited_adaptation_runs_and_is_graded(tmp_path):
    task = prepared("mlc-churn")
    edit = editable(adapted("diamonds-price", task), task)
    code = rewrapped(edit.view.replace("n_estimators=3000", "n_estimators=200"), edit, task)
    result = run_script(task, code, run_dir=tmp_path / "edited", timeout=300)
    assert result.status == "ok", result.error
    assert result.test_metric is not None and result.test_metric > 0.75  # AUROC, the starter's is about 0.5
