"""The search's operators that ask a model: DS-Agent's loop step, grown into moves on a tree.

    plan     retrieve cases by the task and the tree's log, let the model rerank them, plan one step from
             the first for the starter, program it (DS-Agent's first iteration: a draft)
    improve  the same for a graded node: its script, with the tree's log and what the node printed
    debug    a broken node's script and error, fixed by the model; the fix is a node of its own

A reply the model got wrong leaves a node with no score; search/policy.py stops asking the model after a
few such nodes in a row, and the search goes on with the operators that need none. Every call is cut off
where the budget ends, or sooner where the model's share of it does (OutOfTime): a slow model can carry
a search neither past its wall clock nor, before it has written a graded script, past its share of it."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

from dsagent_cbr.agent import roles
from dsagent_cbr.agent.context import Context
from dsagent_cbr.agent.develop import best_case, case_name, plan_and_program
from dsagent_cbr.agent.record import Row
from dsagent_cbr.agent.seams import Messages, Model, Reply
from dsagent_cbr.bank.doctext import task_query
from dsagent_cbr.errors import OutOfTime
from dsagent_cbr.llm.ledger import Usage
from dsagent_cbr.search.clock import Clock
from dsagent_cbr.search.policy import GIVE_UP, MODEL_OPERATORS

if TYPE_CHECKING:
    from dsagent_cbr.agent.search import Search

OUT_OF_TIME = "out of time"  # a model node's status when the budget ended during one of its calls
LOG_NODES = 10  # the tree's log in a prompt: its last nodes, so that a long search's prompt stays bounded
MIN_CALL_SECONDS = 5.0  # less of the budget left than this: no call starts
T = TypeVar("T")


class Deadlined:
    """The model, each call given as its time limit what is left of the search's budget or, sooner, of
    the time its node may take (`until`, on the search's clock: the model's share, search/policy.py)."""

    def __init__(self, inner: Model, clock: Clock, until: float = math.inf) -> None:
        self.inner, self.clock, self.until, self.model = inner, clock, until, inner.model

    def complete(self, role: str, messages: Messages, *, validate: Callable[[str], T], **options: object) -> Reply[T]:
        left, share = self.clock.left(), self.until - self.clock.now()
        limit = min(left, share)
        if limit < MIN_CALL_SECONDS:
            what = "the model's share" if share < left else "the budget"
            raise OutOfTime(f"{max(limit, 0):.0f} s of {what} left: too little for a call of {self.model}")
        try:
            return self.inner.complete(role, messages, validate=validate,
                                       timeout=None if math.isinf(limit) else limit, **options)  # type: ignore[arg-type]
        except OutOfTime as exc:
            if share < left:  # the client says the budget ended; here it was the model's share of it
                raise OutOfTime(f"the model's share of the budget ended {limit:.0f} s into a call of {self.model}") from exc
            raise

    def usage(self) -> Usage:
        return self.inner.usage()


class ModelMoves:
    def __init__(self, search: Search, model: Model) -> None:
        self.search, self.model, self.config = search, model, search.config
        self.ctx = Context.of(search.run.task, search.config.sandbox)
        self.query = task_query(search.run.task.description, search.run.task.modality)

    def move(self, operator: str, row: Row, until: float) -> None:
        """Node `row` made by `operator`, its model calls done by `until` (on the search's clock)."""
        getattr(self, operator)(row, Deadlined(self.model, self.search.clock, until))

    def trusted(self) -> bool:
        """Fewer than GIVE_UP model nodes in a row have come to nothing (a node the budget cut short aside)."""
        recent = [r for r in self.search.run.rows if r.operator in MODEL_OPERATORS and r.status != OUT_OF_TIME]
        recent = recent[-GIVE_UP:]
        return len(recent) < GIVE_UP or any(r.score is not None for r in recent)

    def plan(self, row: Row, model: Deadlined) -> None:
        self.step(row, model, self.search.run.task.starter.read_text(encoding="utf-8"), self.tree_log())

    def improve(self, row: Row, model: Deadlined) -> None:
        parent = self.search.row(row.parent)
        printed = self.search.results[parent.iteration].stdout[-roles.OUTPUT_CHARS:].strip() or "(nothing)"
        log = f"{self.tree_log()}\n\nWhat node {parent.iteration}'s script printed (its end):\n{printed}"
        self.step(row, model, self.search.script(parent), log)

    def step(self, row: Row, model: Deadlined, script: str, log: str) -> None:
        """Case, plan, program, run: one node."""
        run, t = self.search.run, row.iteration
        case = best_case(run, model, self.ctx, self.config, t, self.query, log)
        row.case = case_name(case)
        planned = plan_and_program(run, row, model, self.ctx, self.config, log, script, case)
        if planned is not None:
            self.run_node(row, planned[1])

    def debug(self, row: Row, model: Deadlined) -> None:
        """The broken node's script and error to the model; what it returns runs as this node."""
        run, search, t = self.search.run, self.search, row.iteration
        broken = search.row(row.parent)
        origin = broken
        while origin.operator == "debug":  # the chain's first node: what was asked of it, and of what script
            origin = search.row(origin.parent)
        before = search.script(search.row(origin.parent)) if origin.operator == "improve" else \
            run.task.starter.read_text(encoding="utf-8")
        row.case, row.step = broken.case, f"debug node {broken.iteration} ({origin.step})"
        error, failing = search.results[broken.iteration].feedback(), search.script(broken)
        fixed = run.ask(t, "debug", lambda: roles.debug(model, self.ctx, before, origin.step, failing, error,
                                                       self.tree_log(), self.config.temperature))
        if fixed is None:
            row.status = "no script"
            return
        self.run_node(row, fixed)

    def run_node(self, row: Row, code: str) -> None:
        result = self.search.execute(row.iteration, code)
        row.log = f"Experiment Summary: {row.step}\nExperiment Result: {result.feedback().splitlines()[0]}"
        self.search.run.consider(row, code, result)

    def tree_log(self) -> str:
        """The last nodes as the model is told of them: what each tried and how it scored (never a test score)."""
        lines = []
        ended = [r for r in self.search.run.rows if r.status != "not run"]  # this node and others in flight aside
        for r in ended[-LOG_NODES:]:
            grown = f" of node {r.parent}" if r.parent is not None else ""
            lines.append(f"Node {r.iteration} ({r.operator}{grown}): {r.log or r.step or r.status}")
        start = self.search.run.baseline
        head = f"Node 0 (the starter, a random guess): selection score {start:.6g}" if start is not None else ""
        return "\n\n".join([head, *lines]).strip() or "(no experiments yet)"
