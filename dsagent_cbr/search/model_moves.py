"""The search's operators that ask a model: DS-Agent's loop step, grown into moves on a tree.

    plan     the model's draft: cases retrieved by the task and the tree's log, reranked by the model, a
             step planned from the first, and a new solution written from scratch in the starter's frame
    improve  the same for a graded node: its own script, its description and what it printed
    debug    a broken node's script and error, fixed by the model; the fix is a node of its own

An adapted script (the structural adapter's) is shown without its shim, and what the model returns for it
is wrapped again (adapter/edit.py).

Every prompt carries the tree's log: each node by its model family, features and key parameters and its
selection score (an ensemble by its members and its own), never a test score. A reply the model got wrong
leaves a node with no score, and the policy's gain per second (policy.py) gives the model less time.
Every call is cut off where the budget ends (OutOfTime): a slow model cannot carry a search past its wall
clock."""

from __future__ import annotations

import contextlib
import math
import re
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from dsagent_cbr.adapter import AdapterError
from dsagent_cbr.adapter.edit import Editable, editable, rewrapped
from dsagent_cbr.agent import roles
from dsagent_cbr.agent.context import Context
from dsagent_cbr.agent.deploy import adapt_examples
from dsagent_cbr.agent.develop import (
    Asking,
    DevelopConfig,
    best_case,
    case_name,
    plan_and_program,
)
from dsagent_cbr.agent.record import Operator, Row, Status
from dsagent_cbr.agent.script_summary import summarise_script
from dsagent_cbr.agent.seams import Messages, Model, Reply
from dsagent_cbr.bank.cases import Case
from dsagent_cbr.bank.doctext import task_query
from dsagent_cbr.clock import MIN_NODE_SECONDS, Clock
from dsagent_cbr.errors import OutOfTime
from dsagent_cbr.harness.result import RunResult
from dsagent_cbr.llm.ledger import Usage
from dsagent_cbr.llm.parsing import extract_code
from dsagent_cbr.search.tree import Tree

LOG_NODES = 12  # the tree's log in a prompt: the best nodes and the last ones, so that a long search's stays bounded
# nodes whose step is the model's own instruction, worth repeating
ASKED = (Operator.PLAN, Operator.IMPROVE)
# "node 20", "nodes 4, 7 and 9"
NODE_MENTION = re.compile(r"\bnodes?\s+(\d+(?:\s*(?:,|and|&)\s*\d+)*)", re.IGNORECASE)
NAMED = 3  # the scripts a plan names, shown to the coder: at most this many
MIN_CALL_SECONDS = 5.0  # less of the budget left than this: no call starts
T = TypeVar("T")


class Deadlined:
    """The model, each call given as its time limit what is left of the search's budget."""

    def __init__(self, inner: Model, clock: Clock, reserve: Callable[[Clock], float]) -> None:
        self.inner = inner
        self.clock = clock
        self.reserve = reserve
        self.model = inner.model

    def complete(
        self, role: str, messages: Messages, *, validate: Callable[[str], T], **options: object
    ) -> Reply[T]:
        left = self.clock.left(self.reserve(self.clock))
        if left < MIN_CALL_SECONDS:
            raise OutOfTime(
                f"{max(left, 0):.0f} s of the budget left: too little for a call of {self.model}"
            )
        timeout = None if math.isinf(left) else left
        options = {**options, "timeout": timeout}
        return self.inner.complete(role, messages, validate=validate, **options)  # type: ignore[arg-type]

    def usage(self) -> Usage:
        return self.inner.usage()


class ModelMoves:
    def __init__(
        self,
        tree: Tree,
        execute: Callable[..., RunResult],
        clock: Clock,
        config: DevelopConfig,
        model: Model,
        *,
        cases: Callable[[], list[Case]] = list,
        tasks_dir: Path | None = None,
    ) -> None:
        self.tree = tree
        self.run = tree.run
        self.execute = execute
        self.config = config
        self.clock = clock
        self.model = Deadlined(model, clock, tree.reserve)
        self.ctx = Context.of(self.run.task, config.sandbox)
        self.query = task_query(self.run.task.description, self.run.task.modality)
        self.cases = cases  # past solutions, nearest first (retrieved when first asked for)
        self.tasks_dir = tasks_dir

    def make(self, row: Row) -> None:
        """Node `row` by its model operator."""
        {
            Operator.ADAPT: self.adapt,
            Operator.PLAN: self.plan,
            Operator.IMPROVE: self.improve,
            Operator.DEBUG: self.debug,
        }[row.operator](row)

    def adapt(self, row: Row) -> None:
        """cbr deploy's one call inside the search: the nearest past solution, its task and starter shown
        as the example, adapted to this task by the model; what it returns runs as this node."""
        nearest = self.cases()[:1]
        row.case = case_name(nearest[0]) if nearest else "(no case)"
        row.step = "the nearest past solution, adapted in one call"
        messages = roles.adapt_messages(self.ctx, adapt_examples(nearest, self.tasks_dir))
        code = self.run.ask(
            row.iteration,
            "adapt",
            lambda: self.model.complete(
                "adapt", messages, temperature=self.config.temperature, validate=extract_code
            ).parsed,
        )
        if code is None:  # the model answered without a script
            row.status = Status.NO_SCRIPT
            return
        self.run_node(row, code)

    def plan(self, row: Row) -> None:
        """A new solution: the starter is shown as the frame every solution keeps, not as a script to edit."""
        self.step(
            row, self.run.task.starter.read_text(encoding="utf-8"), self.tree_log(), draft=True
        )

    def improve(self, row: Row) -> None:
        parent = self.tree.row(row.parent)
        printed = (
            self.tree.results[parent.iteration].stdout[-roles.OUTPUT_CHARS :].strip() or "(nothing)"
        )
        log = (
            f"{self.tree_log()}\n\n"
            f"The script to improve is node {parent.iteration}'s: {self.describe(parent)}\n"
            f"What it printed (its end):\n{printed}"
        )
        script, edit = self.readable(parent)
        self.step(row, script, log, draft=False, edit=edit)

    def readable(self, row: Row) -> tuple[str, Editable | None]:
        """A node's script as the model reads it: an adapted one as the case's code in the starter, without
        the adapter's shim (and how to wrap an edit of it again); any other as it is."""
        script = self.tree.script(row)
        edit = editable(script, self.run.task)
        return (edit.view if edit else script), edit

    def step(
        self, row: Row, script: str, log: str, *, draft: bool, edit: Editable | None = None
    ) -> None:
        """Case, plan, program, run: one node. `edit`: `script` is an adapted script's view, and the
        model's edit of it is wrapped by the adapter's shim again before it runs."""
        asking = Asking(self.run, self.model, self.ctx, self.config)
        case = best_case(asking, row.iteration, self.query, log)
        row.case = case_name(case)
        named = lambda decision: self.named_scripts(decision, row.parent)  # noqa: E731
        planned = plan_and_program(
            asking, row, log, script, case, draft=draft, named=named, searching=True
        )
        if planned is None:
            return
        self.run_node(row, self.wrapped(planned[1], edit))

    def wrapped(self, code: str, edit: Editable | None) -> str:
        """The model's edit of an adapted script's view, wrapped by the adapter's shim again; a reply with
        no train_model/predict to wrap runs as the model wrote it, and its error says why."""
        if edit is not None:
            with contextlib.suppress(AdapterError):
                return rewrapped(code, edit, self.run.task)
        return code

    def named_scripts(self, decision: str, editing: int | None) -> str:
        """The scripts of the nodes a plan's decision names ("keep node 20's LightGBM"), the first NAMED of
        them, whole: the coder sees only the prompt, and a node it cannot read it can only guess at. The node
        being edited is shown as the script to edit already."""
        known = {r.iteration: r for r in self.tree.rows if r.script}
        mentions = NODE_MENTION.findall(decision)
        named = dict.fromkeys(int(n) for listed in mentions for n in re.findall(r"\d+", listed))
        shown = [known[n] for n in named if n in known and n != editing][:NAMED]
        return "\n\n".join(
            f"Node {r.iteration} ({r.operator}):\n```python\n{self.readable(r)[0]}\n```"
            for r in shown
        )

    def debug(self, row: Row) -> None:
        """The broken node's script and error to the model; what it returns runs as this node."""
        tree, t = self.tree, row.iteration
        broken = origin = tree.row(row.parent)
        # the chain's first node: what was asked of it, of what script
        while origin.operator == Operator.DEBUG:
            origin = tree.row(origin.parent)
        before = (
            self.readable(tree.row(origin.parent))[0]
            if origin.operator == Operator.IMPROVE
            else self.run.task.starter.read_text(encoding="utf-8")
        )
        row.case, row.step = broken.case, f"debug node {broken.iteration} ({origin.step})"
        # an adapted script is fixed in its view, as it was edited, and its fix wrapped again
        (failing, edit), error = self.readable(broken), tree.results[broken.iteration].feedback()
        fixed = self.run.ask(
            t,
            "debug",
            lambda: roles.debug(
                self.model,
                self.ctx,
                before,
                origin.step,
                failing,
                error,
                self.tree_log(),
                self.config.temperature,
            ),
        )
        if fixed is None:
            row.status = Status.NO_SCRIPT
            return
        self.run_node(row, self.wrapped(fixed, edit))

    def run_node(self, row: Row, code: str) -> None:
        left = self.clock.left(self.tree.reserve(self.clock))
        if left < MIN_NODE_SECONDS:  # the model's calls took the time its script needed
            raise OutOfTime(
                f"{max(left, 0):.0f} s of the budget left after the model's calls: too "
                f"little for its script"
            )
        result = self.execute(row.iteration, code, first=True)
        row.log = f"Experiment Summary: {row.step}\nExperiment Result: {result.feedback().splitlines()[0]}"
        self.run.consider(row, code, result)

    def describe(self, row: Row) -> str:
        """A node as the model is told of it: what it trains, and how it scored (never a test score)."""
        if row.operator == Operator.ENSEMBLE and row.members:
            members = ", ".join(f"node {k} ({w:g})" for k, w in row.members.items())
            what = f"a blend of {members}"
        else:
            what = (
                summarise_script(self.tree.script(row)) if row.script else (row.step or "no script")
            )
        asked = (
            f"; asked: {roles.opening(row.step, 200)}" if row.operator in ASKED and row.step else ""
        )
        if row.score is not None:
            return f"{what}{asked} — selection {self.run.task.metric_name} {row.score:.6g}"
        why = (row.error or "").strip().splitlines()[-1:] or [""]
        return f"{what}{asked} — {row.status}{': ' + roles.opening(why[0], 160) if why[0] else ''}"

    def tree_log(self) -> str:
        """The nodes the model is told of: the run's best so far and, when it is a blend, its members; the
        best graded single nodes; and the last ones that ended."""
        # this node and others in flight aside
        ended = [r for r in self.tree.rows if r.status != Status.NOT_RUN]
        lead = self.run.best
        leading = {lead.iteration, *(lead.members or {})} if lead is not None else set()
        best = leading | set(self.tree.graded()[: LOG_NODES // 2])
        recent = ended[len(ended) - max(LOG_NODES - len(best), 0) :]  # none when the best fill the log
        shown = [r for r in ended if r.iteration in best or r in recent]
        lines = []
        for r in shown:
            grown = f" of node {r.parent}" if r.parent is not None else ""
            lines.append(f"Node {r.iteration} ({r.operator}{grown}): {self.describe(r)}")
        start = self.run.baseline
        head = (
            f"Node 0 (the starter, a random guess): selection score {start:.6g}"
            if start is not None
            else ""
        )
        more = (
            f"({len(ended) - len(shown)} other nodes not shown)" if len(ended) > len(shown) else ""
        )
        best_line = f"The best so far: node {lead.iteration}." if lead is not None else ""
        return "\n".join(x for x in [head, *lines, more, best_line] if x) or "(no experiments yet)"
