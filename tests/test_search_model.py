"""The model's moves in the budgeted search, with in-process fakes: adapt, plan, debug and improve nodes, how
much of the budget the model gets for what its nodes gain, and its nodes written beside the plain ones
(the loop's plain moves are test_search.py's; what the prompts say is test_search_prompts.py's)."""

from __future__ import annotations

import threading
import time

import pytest
from conftest import prepared
from support.fakes import FakeBank, FakeExecutor, FakeModel, Graded
from support.search_fakes import (
    PLAN,
    STARTER,
    Overlapping,
    Taking,
    executor,
    fake_adapter,
    fenced,
    insight,
    solution,
)
from support.workspace_rows import noisy_answers

from dsagent_cbr.agent.develop import DevelopConfig
from dsagent_cbr.search import operators as search_module
from dsagent_cbr.search.drafts import general_cases
from dsagent_cbr.search.loop import develop_search
from dsagent_cbr.search.policy import MIN_PLAIN_SECONDS


@pytest.fixture(scope="module")
def task():
    return prepared("concrete-strength")


def test_the_model_plans_debugs_and_improves_nodes_beside_the_plain_moves(task, tmp_path, monkeypatch):
    monkeypatch.setattr(search_module, "adapt_case", fake_adapter)
    monkeypatch.setattr(search_module, "general_cases", lambda task: general_cases(task)[:1])  # the model's moves
    model = FakeModel({"adapt": [fenced("adapted")], "rerank": ["[2] > [1]"] * 9,
                       "plan": [PLAN.format("ridge"), PLAN.format("trees"),
                                                             *[PLAN.format("deeper trees")] * 7],
                       "program": [fenced("broken"), fenced("trees"), *[fenced("deeper")] * 7],
                       "debug": [fenced("fixed")] * 3})
    runs = FakeExecutor({"def train_model": STARTER, "num_leaves=31,": Graded(selection=5.0, test=5.751),
                         "# general": Graded(selection=4.0, test=4.7451, stdout="printed by the draft"),
                         "# first": Graded(selection=9.0, test=9.7251), "# good": Graded(selection=6.0, test=6.7251),
                         "# fixed": Graded(selection=3.5, test=3.7751, stdout="printed by the fix"),
                         "# trees": Graded(selection=3.0, test=3.7251, stdout="printed by the trees"),
                         "# deeper": Graded(selection=2.5, test=2.7751), "# adapted": Graded(selection=4.5, test=4.9751)},
                        predictions=noisy_answers(task))
    bank = FakeBank(insights=[insight(1), insight(2)], solutions=[solution("first"), solution("good")])
    record = develop_search(task, DevelopConfig(iterations=9, in_turn=True), tmp_path, bank, runs, model=model)
    by = {r.iteration: r for r in record.rows}
    # the model's first node is a deploy's adaptation; its nodes improved the best faster than the plain ones:
    # it was asked more (policy.py's arms)
    assert [r.operator for r in record.rows] == ["draft", "adapt", "plan", "debug", "plan", "ensemble", "improve",
                                                 "improve", "improve", "ensemble"]
    assert by[2].score == 4.5 and by[2].step == "the nearest past solution, adapted in one call"
    assert by[3].status == "error" and by[4].parent == 3 and by[4].score == 3.5  # the fix is a node of its own
    assert by[9].score == 2.5
    assert record.best_score == min(r.score for r in by.values() if r.score is not None)
    prompts = dict(zip(model.roles, model.prompts, strict=True))  # each role's last prompt
    assert "NameError" in prompts["debug"] and "# broken" in prompts["debug"]
    improve_plan, improve_program = prompts["plan"], prompts["program"]
    parent = (tmp_path / by[by[9].parent].script).read_text()
    assert by[9].parent == 5 and parent in improve_plan and "printed by the trees" in improve_plan  # its own
    assert parent in improve_program and "change nothing else" in improve_program
    assert "Node 4 (debug of node 3)" in improve_plan and "selection rmse 3.5" in improve_plan
    # the tuner beside it: the model is asked for what it cannot reach, and for the largest expected gain
    rules = " ".join(improve_plan.split())
    assert "where a tuner cannot reach" in rules and "tune at most two" not in rules
    assert "the candidate with the largest expected gain" in rules
    first_plan = model.prompts[model.roles.index("plan")]  # a draft: the starter is a frame, not the current script
    assert "new solution written from scratch" in first_plan and "Current script" not in first_plan
    secret = {str(g.test) for g in runs.grades.values() if g.test is not None} - {"16.0"}
    assert not any(s in p for s in secret for p in model.prompts)  # no test score reaches the model
    assert [r["iteration"] for r in record.retained] == [7]  # the best single script, once


def test_a_model_whose_nodes_come_to_nothing_gets_less_of_the_budget_and_the_search_ends_graded(
        task, tmp_path, monkeypatch):
    monkeypatch.setattr(search_module, "adapt_case", fake_adapter)
    taking = Taking(monkeypatch, call=30.0, script=10.0)
    model = taking.model({"adapt": ["no code here either"], "plan": ["Decision: something"] * 9,
                          "program": ["no code here, sorry"] * 30})
    bank = FakeBank(solutions=[solution("first"), solution("good")])
    record = develop_search(task, DevelopConfig(iterations=19, cbr=False, in_turn=True), tmp_path, bank,
                            taking.executor(executor()), model=model)
    asked = [r for r in record.rows if r.operator in ("adapt", "plan", "improve", "debug")]
    # an adapt call, then a plan and three program calls: two and a half minutes for nothing, against ten
    # seconds a plain node
    assert [(r.operator, r.status, r.ended - r.started) for r in asked] == [("adapt", "no script", 30.0),
                                                                            ("plan", "no script", 120.0)]
    after = [r.operator for r in record.rows if r.iteration > asked[-1].iteration]
    assert len(after) >= 8 and not set(after) & {"adapt", "plan", "improve", "debug"}  # the plain moves alone
    assert record.best_score <= 5.0 and record.outcome == "ok"  # at least the general draft


def test_no_node_starts_with_less_than_a_node_needs_and_a_model_node_is_charged_its_own_time(
        task, tmp_path, monkeypatch):
    monkeypatch.setattr(search_module, "adapt_case", fake_adapter)
    taking = Taking(monkeypatch, call=25.0, script=7.0)
    model = taking.model({"adapt": [fenced("trees")], "plan": [PLAN.format("trees")] * 9,
                          "program": [fenced("trees")] * 9})
    runs = taking.executor(executor())
    runs.grades["# trees"] = Graded(selection=3.0, test=3.5)
    bank = FakeBank(solutions=[solution("first"), solution("good")])
    budget = 240.0
    record = develop_search(task, DevelopConfig(iterations=50, budget=budget, cbr=False, in_turn=True), tmp_path, bank, runs,
                            model=model)
    nodes = [r for r in record.rows if r.operator != "ensemble"]
    assert record.stopped.startswith("the budget of 4m spent")
    by_model = [r for r in nodes if r.operator in ("adapt", "plan", "improve")]
    assert all(budget - r.started >= 60.0 for r in by_model[:1])  # a model's first node: a minute
    assert all(budget - r.started >= 20.0 for r in by_model)  # none began with under 20 s of the budget left
    assert all(budget - r.started >= MIN_PLAIN_SECONDS for r in nodes)
    ran = [r for r in by_model if r.status == "ok"]
    calls = {"adapt": 1, "plan": 2, "improve": 2}  # a rerank is not asked with cbr off
    assert ran and all(r.ended - r.started == 25.0 * calls[r.operator] + 7.0 for r in ran)  # its own time
    cut = [r for r in by_model if r.status != "ok"]  # after its calls, too little left for its script
    assert all(r.status == "out of time" and "too little for its script" in r.error for r in cut)
    assert record.best_score == 3.0 and record.rows[record.best_iteration - 1].operator in ("adapt", "plan",
                                                                                            "improve", "ensemble")


class Said:
    """A progress that keeps each update's fields as the line would read them."""

    def __init__(self) -> None:
        self.fields, self.lines = {}, []

    def update(self, **fields) -> None:
        self.fields.update({k: v for k, v in fields.items() if v is not None})
        self.lines.append(dict(self.fields, status=fields.get("status")))


def test_a_model_node_is_written_beside_the_plain_ones_whose_scripts_keep_their_turns(task, tmp_path, monkeypatch):
    monkeypatch.setattr(search_module, "adapt_case", fake_adapter)

    class Slow(FakeModel):  # a model that takes a moment to answer, as a real one takes seconds
        def complete(self, role, messages, **options):
            time.sleep(0.4)
            return super().complete(role, messages, **options)

    model = Slow({"adapt": [fenced("good")], "rerank": ["[1]"] * 9, "plan": [PLAN.format("trees")] * 9,
                  "program": [fenced("trees")] * 9})
    bank = FakeBank(insights=[insight(1)], solutions=[solution("first"), solution("good")])
    runs = Overlapping(task, 0.05, **{"# trees": Graded(selection=3.0, test=3.5)})
    said = Said()
    record = develop_search(task, DevelopConfig(iterations=10), tmp_path, bank, runs, model=model, progress=said)
    plan = next(r for r in record.rows if r.operator == "plan")
    # each node's last line names its own operator, though the model's roles were said in between
    ended = {f["iteration"]: f["role"] for f in said.lines if f.get("status")}
    assert ended == {r.iteration: r.operator for r in record.rows}
    ran = [next(m for m in ("# trees", "# first", "# good", "# general") if m in code) for code, _ in runs.runs
           if "def train_model" not in code]
    after = [r for r in record.rows if r.iteration > plan.iteration and r.operator in ("transplant", "tune")]
    # plain nodes started after the model's node ran their scripts while it was being written, one at a time
    assert after and ran.index("# trees") > 1 + sum(r.operator == "draft" for r in record.rows) and runs.most == 1
    assert plan.score == 3.0 and record.best_score <= 3.0 and record.outcome == "ok"
    again = Overlapping(task, 0.05)
    resumed = develop_search(task, DevelopConfig(iterations=10), tmp_path, bank, again, model=model)
    assert [r.model_dump() for r in resumed.rows] == [r.model_dump() for r in record.rows] and not again.runs


def test_a_model_call_the_budget_cuts_short_ends_its_node_but_is_not_held_against_the_model(task, tmp_path,
                                                                                         monkeypatch):
    from dsagent_cbr.errors import OutOfTime

    monkeypatch.setattr(search_module, "adapt_case", fake_adapter)
    model = FakeModel({"adapt": [OutOfTime("the budget ended 12 s into a call")],
                       "plan": [OutOfTime("the budget ended 12 s into a call")]})  # two in flight at once
    bank = FakeBank(solutions=[solution("first"), solution("good")])
    record = develop_search(task, DevelopConfig(iterations=3, budget=600.0, cbr=False), tmp_path, bank, executor(),
                            model=model)
    cut = next(r for r in record.rows if r.operator == "adapt")
    assert cut.status == "out of time" and "budget ended" in cut.error and record.outcome == "ok"
    assert model.timeouts and all(t is not None and 0 < t <= 600 for t in model.timeouts)  # each call's limit
    assert record.best_score is not None


def test_a_model_nodes_script_takes_the_cores_before_the_plain_scripts_waiting():
    from dsagent_cbr.search.parallel import Turns

    turns, order, running = Turns(), [], threading.Event()

    def take(name: str, first: bool) -> None:
        with turns.turn(first):
            order.append(name)

    with turns.turn():  # a plain script has the cores
        waiting = [threading.Thread(target=take, args=("plain", False))]
        waiting[0].start()
        time.sleep(0.1)  # the plain one waits first
        waiting.append(threading.Thread(target=take, args=("model", True)))
        waiting[1].start()
        time.sleep(0.1)
        running.set()
    for thread in waiting:
        thread.join(5)
    assert order == ["model", "plain"]
