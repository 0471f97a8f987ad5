"""The fakes the search's loop tests share (test_search.py, test_search_refits.py, test_search_model.py,
test_search_prompts.py): the adapter, the executor's grades, the bank's cases, the model's replies, a clock
that the model's calls and the scripts move, an executor whose scripts overlap, and blends that turn slow
once the nodes end."""

from __future__ import annotations

import dataclasses
import threading
import time

from dsagent_cbr import clock as clock_module
from dsagent_cbr.bank.cases import Case
from dsagent_cbr.search.drafts import general_cases
from dsagent_cbr.search.loop import Search
from dsagent_cbr.search.tree import Tree
from support.fakes import FakeExecutor, FakeModel, Graded
from support.workspace_rows import noisy_answers

STARTER = Graded(selection=16.0, test=16.0)


def boosters(task) -> list[Case]:
    """The first two drafts without the floor (LightGBM's defaults): LightGBM and XGBoost."""
    return [c for c in general_cases(task) if c.task_name != "general-default"][:2]


def fake_adapter(case: Case, task: object) -> dict:
    if case.task_name == "unadaptable":
        return {"error": "no rule for this pair"}
    model = {"general": "LGBMRegressor(num_leaves=31, learning_rate=0.05)",
             "general-xgboost": "XGBRegressor(max_depth=6, learning_rate=0.1)"}.get(case.task_name, "Ridge(alpha=1.0)")
    return {"code": f"import os  # {case.task_name}\nmodel = {model}\n", "notes": []}


def solution(name: str) -> Case:
    return Case(kind="solution", text=f"{name} task", task_name=name, source_kind="reference",
                script=f"model = Ridge(alpha=0.1)  # {name}\n", modality="tabular", task_type="regression")


def executor(predictions: object = None) -> FakeExecutor:
    """The first draft as adapted grades 5; any tuned first draft 4 (better: rmse); the second draft 7; the
    cases 9 and 6."""
    return FakeExecutor({"def train_model": STARTER, "num_leaves=31,": Graded(selection=5.0, test=5.5),
                         "# general-xgboost": Graded(selection=7.0, test=7.5),
                         "# general": Graded(selection=4.0, test=4.5), "# first": Graded(selection=9.0),
                         "# good": Graded(selection=6.0)}, predictions=predictions)


PLAN = "Reflection: a start.\nDecision: {}"


def fenced(marker: str) -> str:
    return f"Here it is.\n```python\nimport os  # {marker}\nprint('ok')\n```\n"


def insight(n: int) -> Case:
    return Case(kind="insight", text=f"insight {n}: boosted trees with early stopping", title=f"case {n}",
                task_name=f"other-{n}", source_kind="kaggle")


class Taking:
    """A fake clock for the search: the model's calls and the scripts take the seconds they are given."""

    def __init__(self, monkeypatch, call: float, script: float, by_marker: dict[str, float] | None = None) -> None:
        from types import SimpleNamespace

        self.now, self.call, self.script = 0.0, call, script
        self.by_marker = by_marker or {}  # a script holding one of these markers takes its seconds instead
        monkeypatch.setattr(clock_module, "time", SimpleNamespace(monotonic=lambda: self.now))

    def model(self, replies: dict) -> FakeModel:
        clock = self

        class Timed(FakeModel):
            def complete(self, role, messages, **options):
                clock.now += clock.call
                return super().complete(role, messages, **options)

        return Timed(replies)

    def executor(self, inner: FakeExecutor) -> FakeExecutor:
        clock, run = self, inner.run

        def timed(code, *args, **kwargs):
            took = next((t for marker, t in clock.by_marker.items() if marker in code), clock.script)
            clock.now += took
            return dataclasses.replace(run(code, *args, **kwargs), wall_time=took)

        inner.run = timed
        return inner


class Overlapping(FakeExecutor):
    """A fake whose scripts take a moment (`pause` seconds), counting how many run at once."""

    def __init__(self, task, pause: float, **more: Graded) -> None:
        super().__init__({**executor().grades, **more}, predictions=noisy_answers(task))
        self.pause, self.now, self.most, self.lock = pause, 0, 0, threading.Lock()

    def run(self, *args, **kwargs):
        with self.lock:
            self.now += 1
            self.most = max(self.most, self.now)
        time.sleep(self.pause)
        try:
            return super().run(*args, **kwargs)
        finally:
            with self.lock:
                self.now -= 1


def slow_blends_once_the_nodes_end(monkeypatch) -> None:
    """Blends take no time while nodes run, and more than any budget once the search's nodes are done."""
    ended = threading.Event()
    nodes = Search.nodes

    def then_slow_blends(self, *args):
        try:
            return nodes(self, *args)
        finally:
            ended.set()

    monkeypatch.setattr(Search, "nodes", then_slow_blends)
    monkeypatch.setattr(Tree, "blend_seconds", lambda self: 1e6 if ended.is_set() else 0.0)
