"""Develop, the no-model search and deploy as their algorithms, with in-process fakes of the model, the
executor and the bank (tests/support/fakes.py): each run takes milliseconds. What they check: the loop
body's order, selection by the selection score only, what the model is (never) shown, the record's one schema,
and how each way a run can end is recorded and mapped to an exit code."""

from __future__ import annotations

import json

import pytest
from conftest import prepared
from support.fakes import FakeBank, FakeExecutor, FakeModel, Graded
from support.workspace_rows import noisy_answers

from dsagent_cbr.agent import deploy as deploy_module
from dsagent_cbr.agent.deploy import DeployConfig, deploy
from dsagent_cbr.agent.develop import DevelopConfig, develop_with_model
from dsagent_cbr.agent.record import RunRecord, load_record
from dsagent_cbr.agent.roles import opening
from dsagent_cbr.agent.run import FIRST_GRADED
from dsagent_cbr.bank.cases import Case
from dsagent_cbr.bench import trial
from dsagent_cbr.errors import BudgetExceeded, InfrastructureError, Outcome
from dsagent_cbr.search import operators as search_module
from dsagent_cbr.search.loop import develop_search

PLAN = "Reflection: r\nReasoning: r\nThought: t\nCheck: c\nDecision: {}"
STARTER = Graded(valid=15.0, selection=16.0, test=704.125)
# Test scores no prompt may contain: the model never sees a test score.
SECRET_TESTS = (701.125, 702.125, 703.125)


def code(marker: str) -> str:
    return f"```python\nimport os  # {marker}\nprint('Validation rmse: 1')\n```"


@pytest.fixture(scope="module")
def task():
    return prepared("concrete-strength")


def grades(**extra: Graded) -> dict[str, Graded]:
    return {"def train_model": STARTER, **extra}  # the starter is the only script with that marker


def insight(n: int) -> Case:
    return Case(kind="insight", text=f"insight {n}: use gradient boosting", title=f"case {n}", task_name=f"other-{n}",
                source_kind="writeup")


def test_develop_follows_algorithm_1_and_selects_by_the_selection_score_only(task, tmp_path):
    model = FakeModel({
        "rerank": ["[2] > [1]", "[1] > [2]", "no ranking at all"],
        "plan": [PLAN.format("try v1"), PLAN.format("try v2"), PLAN.format("try v3")],
        "program": [code("v1"), code("broken"), code("v3")],
        "debug": [code("v2")],
        "log": ["Experiment Summary: v1", "Experiment Summary: v2", "Experiment Summary: v3"],
    })
    executor = FakeExecutor(grades(v1=Graded(valid=6.0, selection=6.0, test=SECRET_TESTS[0]),
                                   v2=Graded(valid=5.0, selection=5.0, test=SECRET_TESTS[1]),
                                   v3=Graded(valid=0.5, selection=5.5, test=1.0)))  # v3 claims and tests best
    # v3 must not be chosen: it prints the best validation and tests best, but grades worse on selection
    bank = FakeBank(insights=[insight(1), insight(2)])
    record = develop_with_model(task, DevelopConfig(iterations=3), tmp_path, bank, model, executor)

    assert [r.status for r in record.rows] == ["ok", "ok", "ok"]
    assert record.rows[0].case == "case 2"  # the model's ranking chose the second case
    assert record.rows[1].debug_attempts == 1 and record.rows[1].script == "step-02/debug-1/script.py"
    assert (record.best_iteration, record.best_selection, record.best_test) == (2, 5.0, SECRET_TESTS[1])
    assert record.selected_by == "selection" and record.selection_rows == 50
    assert record.outcome is Outcome.OK and record.outcome.exit_code == 0
    assert [r.retained for r in record.rows] == [True, True, False]
    assert [c.kind for c in bank.added] == ["solution", "insight"] * 2
    assert record.baselines["starter"] == STARTER.selection
    assert [c.selection_score for c in bank.added if c.kind == "solution"] == [6.0, 5.0]
    assert [e["role"] for e in record.model_errors] == ["execute", "rerank"]  # the broken script, the ranking
    assert "v2" in (tmp_path / "best_solution.py").read_text()
    assert not any(str(score) in prompt for score in (*SECRET_TESTS, STARTER.test) for prompt in model.prompts)
    assert load_record(tmp_path) == record
    # DS-Agent's loop has no tuner beside it: its plans keep the paper's rules
    second = model.prompts[model.roles.index("plan", 1 + model.roles.index("plan"))]  # an edit's plan
    plan = " ".join(second.split())
    assert "tune at most two hyper-parameters" in plan and "tuner" not in plan


def test_prompts_hold_the_output_tail_the_budget_and_each_case_once(task, tmp_path):
    long = "gradient boosting with target encoding of the rare categories " * 10
    twins = [Case(kind="insight", text=long, title=f"twin {n}", task_name=f"other-{n}", source_kind="retained",
                  extra={"run": f"run-{n}"}) for n in (1, 2)]
    model = FakeModel({"rerank": ["[1] > [2]"], "plan": [PLAN.format("try v1")], "program": [code("v1")],
                       "log": ["Experiment Summary: v1"]})
    printed = "fold 1 lgbm 4.21\nfold 2 lgbm 4.35\nbest n_estimators: 812\n"
    executor = FakeExecutor(grades(v1=Graded(valid=6.0, selection=6.0, stdout="x" * 5000 + printed)))
    develop_with_model(task, DevelopConfig(iterations=1), tmp_path, FakeBank(insights=[*twins, insight(3)]),
                       model, executor)
    rerank, plan, log = (next(p for r, p in zip(model.roles, model.prompts, strict=True) if r == role)
                         for role in ("rerank", "plan", "log"))
    assert rerank.count(opening(long)) == 1 and len(opening(long)) <= 302  # one opening of 300 characters
    assert "\n[2] " in rerank and "\n[3] " not in rerank  # the twin is shown once
    assert "(retained, task other-1, run run-1)" in rerank
    assert " …" in rerank and "categories gradient boosting" in rerank  # cut between words
    assert "Compute budget: each run of the script gets at most" in plan and "the starter 0.1 s" in plan
    assert printed.strip() in log and "x" * 2100 not in log  # the end of the output, bounded
    assert "Decision: try v1" in log  # the plan that was carried out


def test_a_resumed_develop_run_repeats_no_completed_step(task, tmp_path):
    def model() -> FakeModel:
        return FakeModel({"plan": [PLAN.format("try v1")], "program": [code("v1")], "log": ["entry"]})

    executor = FakeExecutor(grades(v1=Graded(selection=6.0)))
    first = develop_with_model(task, DevelopConfig(iterations=1, cbr=False), tmp_path, FakeBank(), model(), executor)
    again = FakeExecutor(grades(v1=Graded(selection=6.0)))
    silent = FakeModel({})  # any question would fail: everything is replayed from the journal
    replayed = develop_with_model(task, DevelopConfig(iterations=1, cbr=False), tmp_path, FakeBank(), silent, again)
    assert again.runs == [] and replayed.rows == first.rows and replayed.best_selection == 6.0


def test_a_budget_stop_keeps_the_best_and_still_refits(task, tmp_path):
    refittable = "```python\nimport os  # v1\nos.environ.get('CBR_REFIT')\n```"
    model = FakeModel({"plan": [PLAN.format("v1"), BudgetExceeded("token budget 100 spent (120)")],
                       "program": [refittable], "log": ["entry"]})
    executor = FakeExecutor(grades(v1=Graded(selection=6.0, test=5.0)), predictions=noisy_answers(task))
    record = develop_with_model(task, DevelopConfig(iterations=3, cbr=False, refit=True), tmp_path, FakeBank(), model,
                                executor)
    assert record.outcome is Outcome.BUDGET and record.outcome.exit_code == 4 and record.outcome.ours
    assert record.stopped.startswith("budget: token budget") and record.best_iteration == 1
    assert [r.iteration for r in record.rows] == [1]  # the iteration the budget cut short left no row
    assert executor.runs[-1] == (refittable.split("\n", 1)[1].rsplit("```", 1)[0], True)
    assert record.refit is not None and record.refit.status == "ok"


@pytest.mark.parametrize("failure, outcome", [
    (InfrastructureError("Cannot reach the model server at http://x (is it running?)."), Outcome.INFRASTRUCTURE),
    (KeyboardInterrupt(), Outcome.INTERRUPTED),
])
def test_a_failure_of_ours_saves_the_record_and_goes_up(task, tmp_path, failure, outcome):
    model = FakeModel({"plan": [PLAN.format("v1"), failure], "program": [code("v1")], "log": ["entry"]})
    executor = FakeExecutor(grades(v1=Graded(selection=6.0)))
    with pytest.raises(type(failure)):
        develop_with_model(task, DevelopConfig(iterations=3, cbr=False), tmp_path, FakeBank(), model, executor)
    saved = load_record(tmp_path)
    assert saved.outcome is outcome and saved.outcome.ours and saved.best_iteration == 1
    assert [r.iteration for r in saved.rows] == [1]  # the iteration in flight left no row
    assert not (tmp_path / "step-02").exists()


def solution(name: str, source: str = "reference") -> Case:
    return Case(kind="solution", text=f"{name} task", task_name=name, source_kind=source, script=f"# {name}\n",
                modality="tabular", task_type="regression")


def fake_adapter(case: Case, task: object) -> dict:
    if case.task_name == "unadaptable":
        return {"error": "no rule for this pair"}
    return {"code": f"import os  # {case.task_name}\n", "notes": [f"from {case.task_name}"]}


def adapt_example(name: str) -> Case:
    return Case(kind="solution", text="an example", task_name=name, source_kind="reference",
                script=f"print('{name}')\n", modality="tabular", task_type="regression")


def test_deploy_one_pass_failed_then_the_adapter_solves_it(task, tmp_path, monkeypatch):
    monkeypatch.setattr(deploy_module, "adapt_case", fake_adapter)
    model = FakeModel({"adapt": [code("llm")]})
    executor = FakeExecutor({"good": Graded(selection=4.0, test=3.0)})  # the model's script fails
    bank = FakeBank(solutions=[adapt_example("unadaptable"), adapt_example("good")])
    record = deploy(task, DeployConfig(), tmp_path, bank, model, tmp_path, executor)
    facts = record.deploy
    assert facts and facts.one_pass is False and facts.solved_by == "adapter" and facts.llm_error.startswith("error")
    assert [(r.candidate, r.status) for r in record.rows] == [("llm", "error"), ("adapter", "ok")]
    assert record.best_iteration == 2 and record.outcome is Outcome.OK and record.selected_by == FIRST_GRADED
    assert (tmp_path / "prompt.md").is_file() and (tmp_path / "reply.md").read_text() == code("llm")


def test_deploy_takes_nothing_worse_than_the_starters_guess(task, tmp_path, monkeypatch):
    monkeypatch.setattr(deploy_module, "adapt_case", fake_adapter)
    model = FakeModel({"adapt": [code("llm")]})
    executor = FakeExecutor(grades(llm=Graded(valid=1.0, selection=40.0), worse=Graded(selection=17.0),
                                   good=Graded(selection=4.0, test=3.0)))  # the starter scores 16
    bank = FakeBank(solutions=[adapt_example("worse"), adapt_example("good")])
    record = deploy(task, DeployConfig(), tmp_path, bank, model, tmp_path, executor)
    facts = record.deploy
    assert facts.one_pass is True and "no better than the starter's random guess (16)" in facts.llm_error
    assert [(r.candidate, r.case, r.status) for r in record.rows] == [
        ("llm", "worse", "worse than the starter"), ("adapter", "worse", "worse than the starter"),
        ("adapter", "good", "ok")]
    assert record.best_iteration == 3 and facts.solved_by == "adapter" and record.baselines["starter"] == 16.0
    assert "worse: graded rmse 17" not in (facts.adapter_error or "")  # the walk went on and succeeded


def test_deploy_reply_without_code_is_a_failed_one_pass(task, tmp_path):
    record = deploy(task, DeployConfig(fallback=False), tmp_path, FakeBank(), FakeModel({"adapt": ["no code here"]}),
                    tmp_path, FakeExecutor({}))
    assert record.deploy and record.deploy.one_pass is False and "no Python code" in record.deploy.llm_error
    assert record.rows == [] and record.outcome is Outcome.AGENT_FAILURE and record.outcome.exit_code == 1


def test_deploy_with_the_server_down_is_ours_and_tries_no_fallback(task, tmp_path, monkeypatch):
    monkeypatch.setattr(deploy_module, "adapt_case", fake_adapter)
    model = FakeModel({"adapt": [InfrastructureError("Cannot reach the model server at http://x.")]})
    executor = FakeExecutor({"good": Graded(selection=4.0)})
    with pytest.raises(InfrastructureError):
        deploy(task, DeployConfig(), tmp_path, FakeBank(solutions=[adapt_example("good")]), model, tmp_path, executor)
    saved = load_record(tmp_path)
    assert saved.outcome is Outcome.INFRASTRUCTURE and saved.deploy.one_pass is None
    assert [code for code, _ in executor.runs] == [task.starter.read_text()]  # the starter only: no candidate


def test_every_run_kind_writes_one_schema_that_bench_classifies_by_outcome(task, tmp_path, monkeypatch):
    monkeypatch.setattr(search_module, "adapt_case", fake_adapter)
    monkeypatch.setattr(deploy_module, "adapt_case", fake_adapter)
    folders = {kind: tmp_path / kind for kind in ("develop", "search", "deploy")}
    develop_with_model(task, DevelopConfig(iterations=1, cbr=False), folders["develop"], FakeBank(),
                       FakeModel({"plan": [BudgetExceeded("cost budget $0.01 spent")]}), FakeExecutor(grades()))
    develop_search(task, DevelopConfig(iterations=1), folders["search"], FakeBank(solutions=[solution("good")]),
                          FakeExecutor(grades(general=Graded(selection=4.0, test=3.0))))  # node 1: the draft
    deploy(task, DeployConfig(), folders["deploy"], FakeBank(), None, tmp_path, FakeExecutor({}))
    records = {kind: RunRecord.model_validate(json.loads((folder / "summary.json").read_text()))
               for kind, folder in folders.items()}
    assert {k: r.kind for k, r in records.items()} == {"develop": "develop", "search": "search", "deploy": "deploy"}
    expected = {"develop": "infrastructure", "search": "ok", "deploy": "failed"}  # budget: ours; no candidate: failed
    for kind, record in records.items():
        data = json.loads((folders[kind] / "summary.json").read_text())
        summary = trial.summarise("develop" if kind == "search" else kind, data)
        assert trial.classify(kind, data, summary, record.outcome.exit_code, False, "", 60)[0] == expected[kind]
