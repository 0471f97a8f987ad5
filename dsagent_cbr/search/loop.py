"""`cbr develop --budget` (and `--model none`): a search over solution nodes within a budget. A node is a
script with its parent, the operator that made it, and its selection score; policy.py chooses the
operator and whether a node may start, the harness grades every node on rows its script never saw
labelled.

    l0 = the starter's result
    cases = compatible past solutions, retained first, nearest first
    while nodes < T:
        move = choose(tree)      draft | transplant | tune | ensemble (operators.py)
                                 plan | improve | debug (the model's, model_moves.py) | stop
        start the node, --parallel of them at once and MODEL_IN_FLIGHT of the model's beside them;
        each stamps its own start and end
        meanwhile, the leading nodes are refit on every labelled row (refits.py)
    ensemble once more when the tree grew since the last one (a blend on the host: seconds)
    select the last blend, or the best single node when taking it did better on the same cross-fitted rows;
        the floor (LightGBM's defaults) when its own selection score beats that choice's
    retain (task, best single script) once, when its selection score beats the starter's

The loop is a scheduler: choose, begin, submit, collect. A stop (the budget, --max-cost, an interrupt, a
failure of ours) cancels the nodes in flight and waits for them before it goes up."""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, wait
from dataclasses import asdict
from pathlib import Path

from dsagent_cbr.agent.candidates import solution_candidates
from dsagent_cbr.agent.develop import DevelopConfig, open_run
from dsagent_cbr.agent.record import Operator, Row, RunRecord, Status, asks_model
from dsagent_cbr.agent.run import Run
from dsagent_cbr.agent.seams import Bank, Executor, Model, Observer, Progress
from dsagent_cbr.bank.cases import Case
from dsagent_cbr.clock import Clock
from dsagent_cbr.errors import Cancelled, OutOfTime
from dsagent_cbr.search.model_moves import ModelMoves
from dsagent_cbr.search.operators import Operators
from dsagent_cbr.search.parallel import Beside, Pool, node_executor, node_pool
from dsagent_cbr.search.policy import Move, View, choose, out_of_time
from dsagent_cbr.search.refits import Refits
from dsagent_cbr.search.tree import Tree
from dsagent_cbr.tasks.model import Task

MAX_CASES = 20
# the model's nodes in flight at once beside the plain ones: while one's script runs, the next is being
# written (a server that answers requests together, as vLLM and the hosted APIs do, answers both at once)
MODEL_IN_FLIGHT = 2
DRAIN_SECONDS = 10.0  # a stop waits this long for the nodes in flight to end, their scripts killed


def develop_search(
    task: Task,
    config: DevelopConfig,
    run_dir: Path,
    bank: Bank,
    executor: Executor | None = None,
    progress: Progress | None = None,
    reference: float | None = None,
    *,
    model: Model | None = None,
    observers: Sequence[Observer] = (),
    clock: Clock | None = None,
    tasks_dir: Path | None = None,
) -> RunRecord:
    """The search; `clock`: the command's, started when it was (its budget is the command's wall clock);
    `tasks_dir`: where past solutions' task folders are, for the model's adapt prompt."""
    clock = clock or Clock(config.budget)
    with node_executor(executor, task, config.sandbox, config.parallel, config.address) as (
        runs,
        cores,
    ):
        run = open_run(
            "search",
            task,
            config,
            run_dir,
            bank,
            runs,
            progress,
            model,
            reference,
            observers,
            clock,
        )
        # what the record's sandbox says: each node's share, and how many ran at once
        if cores is not None:
            run.record.sandbox = {**run.record.sandbox, "cores": cores, "parallel": config.parallel}
        search = None  # no search when the starter's run stopped the run
        with run.stopping():
            run.baseline_run()
            search = Search(
                run, past_solutions(run, bank, task, config), clock, config, model, tasks_dir
            )
            search.grow()
        if search is not None:
            retain_best(run, search)
        return run.close(search.refits.submit if search else None)


def past_solutions(
    run: Run, bank: Bank, task: Task, config: DevelopConfig
) -> Callable[[], list[Case]]:
    """The past solutions compatible with the task, nearest first, as a call that retrieves them (once
    across resumes, in the journal)."""

    # retrieved when a transplant or tune first needs them, after the drafts: loading the
    # embedding model and searching took 5 s of a 30-second budget, before any node
    def retrieve() -> list[Case]:
        found = run.journal.step(
            0,
            "retrieve",
            lambda: [
                {**c.to_dict(), "score": s}
                for c, s in solution_candidates(bank, task, min(config.iterations, MAX_CASES))
            ],
        )
        return [Case.from_dict(c) for c in found]

    return retrieve


def retain_best(run: Run, search: Search) -> None:
    """The search's best single node and its script go to the bank, when the run retains and the node
    beat the starter (Run.retain)."""
    best = search.tree.best_single()
    if best is not None:
        # a bank server that died since is ours: the record says so, exit 3
        with run.stopping():
            run.retain(
                best, search.tree.script(best), f"search node {best.iteration} ({best.step})"
            )


class Search:
    def __init__(
        self,
        run: Run,
        cases: Callable[[], list[Case]],
        clock: Clock,
        config: DevelopConfig,
        model: Model | None = None,
        tasks_dir: Path | None = None,
    ) -> None:
        self.run = run
        self.clock = clock
        self.config = config
        self.tree = Tree(run)
        # the model's nodes are written beside the plain ones (parallel.py): its calls take no cores. With
        # --parallel 1 the scripts take turns on all the cores; with more, Ray gives each its share
        self.beside = model is not None and not config.in_turn
        self.operators = Operators(
            self.tree, cases, clock, config, scripts_take_turns=self.beside and config.parallel <= 1
        )
        self.model = (
            ModelMoves(
                self.tree,
                self.operators.execute,
                clock,
                config,
                model,
                cases=lambda: self.operators.cases,
                tasks_dir=tasks_dir,
            )
            if model
            else None
        )
        held = self.operators.held
        self.tree.blend_rows = held.test_rows + held.rows if held is not None else 0
        self.refits = Refits(self.operators)
        self.refitting: dict[Future[None], Row] = {}  # the leading nodes being refit meanwhile

    def grow(self) -> None:
        """Nodes until the cap, the budget or the policy says stop; each node journaled, so a resumed run
        replays the tree and goes on from its last node."""
        running: dict[Future[None], Row] = {}
        with node_pool(self.config.parallel, MODEL_IN_FLIGHT if self.beside else 0) as pool:
            try:
                t, why = self.nodes(pool, running)
            except BaseException:
                self.drain(running)
                raise
        no_blend = self.last_ensemble(t + 1)
        self.final_choice()
        if self.config.refit_only:
            why = "refit later by cbr refit"
        self.run.record.stopped = f"{why} after {len(self.run.rows)} node(s)"
        left = self.clock.left()
        # the budget stopped it with seconds left: the end kept for the refit and the record did
        if why == self.clock.spent() and left >= 1:
            self.run.record.stopped += f" ({left:.0f} s left: too few for a node and the run's end)"
        self.run.record.stopped += no_blend

    def nodes(self, pool: Pool, running: dict[Future[None], Row]) -> tuple[int, str]:
        """Start what the policy chooses while there is room, collect what ends. Returns the last node's
        number and why no more were started."""
        t, why = 0, ""
        while True:
            started: int | None = 0
            while started is not None:  # nothing more to start now; with nodes running, perhaps once they end
                started, why = self.start_one(pool, running, t + 1)
                t += started or 0
            if not running and not self.refitting:
                return t, why
            done, _ = wait([*running, *self.refitting], return_when=FIRST_COMPLETED)
            for future in sorted(
                done, key=lambda f: (running.get(f) or self.refitting[f]).iteration
            ):
                future.result()  # the budget, an interrupt or a failure of ours ends the run here
                if future in self.refitting:
                    self.refitting.pop(future)
                else:
                    self.run.end(running.pop(future))

    def drain(self, running: dict[Future[None], Row]) -> None:
        """A stop: the nodes in flight are cancelled (their scripts killed, Run.halt) and waited for, so that
        none changes the run once it is recorded; one still waiting on a model after DRAIN_SECONDS can
        change nothing either (Run.open_for)."""
        self.run.halt.set()
        wait([*running, *self.refitting], timeout=DRAIN_SECONDS)

    def start_one(
        self, pool: Pool, running: dict[Future[None], Row], t: int
    ) -> tuple[int | None, str]:
        """Start node t, or a leader's refit, where there is room: (1 or 0: the nodes started, ""), or
        (None, why none could start)."""
        why = ""
        for room in self.rooms(running):
            if room != "model" and (leader := self.refits.next()) is not None:
                self.refitting[pool.submit(self.refits.refit, leader)] = leader
                return 0, ""
            move, why = self.next_move(t, room)
            if move is None:  # the other kind may still start
                continue
            row = self.run.begin(t, operator=move.operator, parent=move.parent)
            beside = asks_model(move.operator) and isinstance(pool, Beside)
            start = pool.beside if beside else pool.submit  # type: ignore[union-attr]
            running[start(self.node, row)] = row
            return 1, ""
        return None, why

    def rooms(self, running: dict[Future[None], Row]) -> list[str]:
        """The kinds of node that may start now (policy.View.room), the model's first: --parallel nodes at
        once, and MODEL_IN_FLIGHT model nodes beside them when they are written beside them, so that the
        model always has a request in flight while the scripts run."""
        busy = len(running) + len(self.refitting)  # a refit takes a plain node's place
        if not self.beside:
            return ["any"] if busy < self.config.parallel else []
        by_model = sum(asks_model(r.operator) for r in running.values())
        plain, model = busy - by_model < self.config.parallel, by_model < MODEL_IN_FLIGHT
        return ["model"] * model + ["plain"] * plain

    def next_move(self, t: int, room: str) -> tuple[Move | None, str]:
        """Node t's move, or None and why there is none (no reason when the move it replays waits for room
        of its kind). The policy's move is journaled, so that a resumed run grows the same tree; a stop is
        not: with nodes still running, the next to end may give the policy something to do."""
        if t > self.config.iterations:
            return None, f"the cap of {self.config.iterations} nodes reached"
        recorded = self.run.journal.recorded(t, "choose")
        if isinstance(recorded, dict):
            move = Move(**recorded)
            if room != "any" and asks_model(move.operator) != (room == "model"):
                return None, ""
            return move, ""
        view = self.view(room)
        # per node: a replay draws the same
        move = choose(view, random.Random(f"{self.config.seed}-{t}"))
        if move.operator == "stop":
            return None, self.clock.spent() if out_of_time(view) else "nothing left to try"
        return Move(**self.run.journal.step(t, "choose", lambda: asdict(move))), ""

    def node(self, row: Row) -> None:
        """Make node `row` with its operator and run it (in a thread of its own with --parallel, or beside);
        it stamps its own start and end, as journaled, so that its time is its own."""
        t = row.iteration
        row.started = self.stamp(t, "started")
        try:
            (self.model if asks_model(row.operator) else self.operators).make(row)  # type: ignore[union-attr]
        except OutOfTime as exc:  # the budget ended during one of its model calls: the node ends
            row.status, row.error = Status.OUT_OF_TIME, str(exc)
        # the run stopped while the node ran: it leaves nothing (Run.discard_in_flight)
        except Cancelled:
            return
        row.ended = self.stamp(t, "clock")

    def stamp(self, t: int, role: str) -> float:
        """Seconds into the run, journaled: a replayed node's clock goes on from when it ran."""
        spent = self.run.journal.step(t, role, lambda: round(self.clock.now(), 1))
        self.clock.at_least(spent)
        return spent

    def last_ensemble(self, t: int) -> str:
        """The search ends with a blend of what it found, when nodes graded since the last one and the
        budget has the time the nodes left it (Tree.reserve). Returns why there was none, if it was the
        budget, for the record of why the run stopped."""
        if self.operators.held is None or len(self.tree.singles()) < 2 or not self.tree.fresh():
            return ""
        needs, left = self.tree.blend_seconds(), self.clock.left()
        replayed = self.run.journal.recorded(t, "choose") is not None
        if needs > left and not replayed:
            return f"; no last blend: it needs about {needs:.0f} s and {max(left, 0):.0f} s were left"
        if self.tree.blends_give_way(self.clock) and not replayed:
            return f"; no last blend: the leading node's refit needs the {max(left, 0):.0f} s left"
        move = self.run.journal.step(t, "choose", lambda: asdict(Move(Operator.ENSEMBLE)))
        row = self.run.begin(t, **move)
        self.node(row)
        self.run.end(row)
        return ""

    def final_choice(self) -> None:
        """The run's solution: the last blend, or the best single node, or the floor (drafts.py), by
        scores that are fair to each (submitted_choice)."""
        blends = [
            r for r in self.run.rows if r.operator == Operator.ENSEMBLE and r.score is not None
        ]
        single = self.tree.best_single()
        if not blends or single is None:
            return
        made = self.run.journal.recorded(blends[-1].iteration, "ensemble")
        made = made if isinstance(made, dict) else {}
        # a run journaled before the bootstrap took the single node on its score alone
        alone = made.get("single") if made.get("single_sure", True) else None
        better = self.run.task.metric.better
        pick = submitted_choice(blends[-1], single, alone, self.tree.floor(), better)
        if pick is not self.run.best:
            self.run.select(pick, self.tree.script(pick), self.tree.workspace(pick))

    def view(self, room: str) -> View:
        tree = self.tree
        plain, by_model = tree.arms(self.clock.now())
        singles = tree.singles()
        drafts_left = len(self.operators.general) - tree.taken(Operator.DRAFT)
        return View(
            drafts_left=drafts_left,
            # the drafts come first: the cases are retrieved only once they are done
            cases_left=len(self.operators.cases) - tree.taken(Operator.TRANSPLANT)
            if not drafts_left
            else 0,
            families=tree.families(),
            last=next(
                (
                    r.operator
                    for r in reversed(self.run.rows)
                    if r.operator in (Operator.TRANSPLANT, Operator.TUNE)
                ),
                "",
            ),
            can_ensemble=self.operators.held is not None and len(singles) >= 2,
            fresh=tree.fresh(),
            model=self.model is not None,
            adapted=bool(tree.taken(Operator.ADAPT)),
            plans=tree.taken(Operator.PLAN),
            graded=tree.graded(),
            broken=tree.broken(self.config.n_debug),
            plain=plain,
            by_model=by_model,
            left=self.clock.left(tree.reserve(self.clock)),
            room=room,
        )


def submitted_choice(
    blend: Row,
    single: Row,
    alone: float | None,
    floor: Row | None,
    better: Callable[[float | None, float | None], bool],
) -> Row:
    """The last blend, unless taking the best single node did better on the same cross-fitted folds of
    the selection rows (`alone`: a single node's own selection score is the best of many on the rows that
    chose it, so it cannot be set against a blend's: ensemble.py), beyond the rows' noise (else `alone`
    is None: Blend.single_sure). On credit at five minutes one XGBoost tune, the best of 87 single
    nodes on the 534 selection rows, was the best on every fold too; taken, it scored test AUROC 0.836,
    the blend 0.854 (docs/decisions/single-or-blend.md). Then the floor, LightGBM's defaults, when its
    own selection score beats that choice's: it was drafted, not chosen by its score, so that
    score is as fair as the blend's. On military-gender at five minutes the floor scored 0.66996 on the
    selection rows and the blend 0.66936; the blend's test AUROC was 0.66200, the floor's refit 0.66212."""
    pick, fair = (single, alone) if better(alone, blend.score) else (blend, blend.score)
    if floor is not None and better(floor.score, fair):
        return floor
    return pick
