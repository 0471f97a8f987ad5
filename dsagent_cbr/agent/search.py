"""`cbr develop --budget` (and `--model none`): a search over solution nodes within a budget. A node is a
script with its parent, the operator that made it, and its selection score; search/policy.py chooses
the operator, the harness grades every node on rows its script never saw labelled.

    l0 = the starter's result
    cases = compatible past solutions, retained first, nearest first
    while nodes < T and the budget has time for one more:
        move = choose(tree)                  draft | transplant | tune | ensemble | plan | improve | debug | stop
        code = draft:      adapt(cbr's general solution, task)
               transplant: adapt(next case, task)
               tune:       the family's script with Optuna's next values for its model literals
               ensemble:   a blend of the best nodes' predictions, judged on rows that did not choose it
               plan, improve, debug: the model's (search_model.py)
        result = execute(code, time limit shrunk to what is left)
    ensemble once more when the tree grew since the last one (a blend on the host: seconds)
    select the last blend, or the best single node when taking it did better on the same cross-fitted rows
    retain (task, best single script) once, when its selection score beats the starter's"""

from __future__ import annotations

import math
import random
import threading
import time
from concurrent.futures import FIRST_COMPLETED, Future, wait
from contextlib import AbstractContextManager, nullcontext
from dataclasses import asdict, replace
from pathlib import Path

from dsagent_cbr.adapter import Adapted, adapt_case
from dsagent_cbr.agent.candidates import solution_candidates
from dsagent_cbr.agent.develop import DevelopConfig, open_run
from dsagent_cbr.agent.record import Refit, Row, RunRecord
from dsagent_cbr.agent.run import REFIT_VARIABLE, Run
from dsagent_cbr.agent.rundir import publish_outputs, step_dir
from dsagent_cbr.agent.seams import Bank, Executor, Model, Progress
from dsagent_cbr.agent.search_model import MIN_CALL_SECONDS, OUT_OF_TIME, ModelMoves
from dsagent_cbr.bank.cases import Case
from dsagent_cbr.errors import Cancelled, OutOfTime
from dsagent_cbr.files import write_text_atomic
from dsagent_cbr.harness.plan import hold_out
from dsagent_cbr.harness.readers import ArtefactError, read_refit_rounds
from dsagent_cbr.harness.result import RunResult
from dsagent_cbr.sandbox.scratch import clear_folder
from dsagent_cbr.search import ensemble, tuning
from dsagent_cbr.search.clock import Clock
from dsagent_cbr.search.drafts import general_cases
from dsagent_cbr.search.parallel import Beside, Pool, node_executor, node_pool
from dsagent_cbr.search.policy import MODEL_OPERATORS, MODEL_SLACK, Family, Move, View, choose, model_share
from dsagent_cbr.tasks.model import Task

MAX_CASES = 20
DRAIN_SECONDS = 10.0  # a stop waits this long for the nodes in flight to end, their scripts killed


def develop_search(task: Task, config: DevelopConfig, run_dir: Path, bank: Bank, executor: Executor | None = None,
                   progress: Progress | None = None, reference: float | None = None, *,
                   model: Model | None = None) -> RunRecord:
    with node_executor(executor, task, config.sandbox, config.parallel, config.address) as (runs, cores):
        run = open_run("search", task, config, run_dir, bank, runs, progress, model, reference)
        if cores is not None:  # what the record's sandbox says: each node's share, and how many ran at once
            run.record.sandbox = {**run.record.sandbox, "cores": cores, "parallel": config.parallel}
        clock, search = Clock(config.budget), None  # no search when the starter's run stopped the run
        with run.stopping():
            run.baseline_run()
            cases = [Case.from_dict(c) for c in run.journal.step(0, "retrieve", lambda: [
                {**c.to_dict(), "score": s} for c, s in solution_candidates(bank, task, min(config.iterations, MAX_CASES))])]
            search = Search(run, cases, clock, config, model)
            run.refit_blend = search.refit_blend
            search.grow()
        best = search.best_single() if search else None
        if best is not None:
            with run.stopping():  # a bank server that died since is ours: the record says so, exit 3
                run.retain(best, search.script(best), f"search node {best.iteration} ({best.step})")
        return run.close()


class Search:
    def __init__(self, run: Run, cases: list[Case], clock: Clock, config: DevelopConfig,
                 model: Model | None = None) -> None:
        self.run, self.cases, self.clock, self.config = run, cases, clock, config
        self.general = general_cases(run.task)  # drafted first, in this order
        held = hold_out(run.task)
        self.held = held if ensemble.possible(run.task, held) else None
        self.results: dict[int, RunResult] = {}  # each node's run, for the model's improve and debug
        self.model = ModelMoves(self, model) if model is not None else None
        # with --parallel 1 a model node is written beside the plain ones (search/parallel.py's Beside); the
        # scripts take turns on all the cores
        self.beside = model is not None and config.parallel <= 1 and not config.address and not config.in_turn
        self.cores: AbstractContextManager[object] = threading.Lock() if self.beside else nullcontext()

    def grow(self) -> None:
        """Nodes until the cap, the budget or the policy says stop, --parallel of them at once; each node
        journaled, so a resumed run replays the tree and goes on from its last node. A stop (the budget,
        an interrupt, a failure of ours) cancels the nodes in flight before it goes up."""
        running: dict[Future[None], Row] = {}
        with node_pool(self.config.parallel, self.beside) as pool:
            try:
                t, why = self.nodes(pool, running)
            except BaseException:
                self.drain(running)
                raise
        self.last_ensemble(t + 1)
        self.final_choice()
        self.run.record.stopped = f"{why} after {len(self.run.rows)} node(s)"

    def nodes(self, pool: Pool, running: dict[Future[None], Row]) -> tuple[int, str]:
        """The loop: start what the policy chooses while there is room, collect what ends. Returns the last
        node's number and why no more were started."""
        t, why = 0, ""
        while True:
            while (room := self.room(running)) is not None:
                move, why = self.next_move(t + 1, room)
                if move is None:  # nothing to start now; with nodes running, perhaps once they end
                    break
                t += 1
                row = self.begin(t, move)
                by_model = move.operator in MODEL_OPERATORS
                submit = pool.beside if by_model and isinstance(pool, Beside) else pool.submit
                running[submit(self.node, row, self.model_until() if by_model else math.inf)] = row
            if not running:
                return t, why
            done, _ = wait(running, return_when=FIRST_COMPLETED)
            for future in sorted(done, key=lambda f: running[f].iteration):
                future.result()  # the budget, an interrupt or a failure of ours ends the run here
                self.ended(running.pop(future))

    def drain(self, running: dict[Future[None], Row]) -> None:
        """A stop: the nodes in flight are cancelled (their scripts killed, Run.halt) and waited for, so that
        none changes the run once it is recorded; one still waiting on a model after DRAIN_SECONDS can
        change nothing either (Run.open_for)."""
        self.run.halt.set()
        wait(running, timeout=DRAIN_SECONDS)

    def room(self, running: dict[Future[None], Row]) -> str | None:
        """The kind of node that may start now (policy.View.room), None when none may: --parallel nodes at
        once, and one model node beside them when it is written beside them."""
        by_model = sum(r.operator in MODEL_OPERATORS for r in running.values())
        if not self.beside:
            return "any" if len(running) < self.config.parallel else None
        plain, model = len(running) - by_model < self.config.parallel, by_model < 1
        return "any" if plain and model else "plain" if plain else "model" if model else None

    def next_move(self, t: int, room: str = "any") -> tuple[Move | None, str]:
        """Node t's move, or None and why there is none (none, and no reason, when the move it replays
        waits for room of its kind)."""
        why = self.stop_reason(t)
        move = self.choose(t, room) if why is None else None
        if move is None or move.operator == "stop":
            return None, why or "nothing left to try"
        if room != "any" and (move.operator in MODEL_OPERATORS) != (room == "model"):
            return None, ""
        return move, ""

    def choose(self, t: int, room: str = "any") -> Move:
        """The policy's move for node t, journaled: a resumed run grows the same tree. A stop is not
        journaled: with nodes still running, the next to end may give the policy something to do."""
        recorded = self.run.journal.recorded(t, "choose")
        if isinstance(recorded, dict):
            return Move(**recorded)
        view = replace(self.view(), room=room)
        move = choose(view, random.Random(f"{self.config.seed}-{t}"))  # per node: a replay draws the same
        return move if move.operator == "stop" else Move(**self.run.journal.step(t, "choose", lambda: asdict(move)))

    def stop_reason(self, t: int) -> str | None:
        if t > self.config.iterations:
            return f"the cap of {self.config.iterations} nodes reached"
        return self.clock.spent() if self.clock.exhausted() else None

    def begin(self, t: int, move: Move) -> Row:
        """Node t's row, in the loop's thread: the next move is chosen seeing it in flight."""
        started = self.run.journal.step(t, "started", lambda: round(self.clock.now(), 1))
        self.clock.at_least(started)
        return self.run.begin(t, operator=move.operator, parent=move.parent, started=started)

    def ended(self, row: Row) -> None:
        """A node is over: the clock goes on from when it ended (as journaled), and learns its time."""
        self.clock.at_least(self.run.journal.step(row.iteration, "clock", self.clock.now))
        self.clock.took(self.took(row) if row.operator != "ensemble" else None)
        self.run.end(row)

    def took(self, row: Row) -> float:
        """A node's seconds, from its start to its end as journaled (so far, while it runs)."""
        end = self.run.journal.recorded(row.iteration, "clock")
        return (float(end) if isinstance(end, int | float) else self.clock.now()) - (row.started or 0.0)

    def last_ensemble(self, t: int) -> None:
        """The search ends with a blend of what it found, when nodes graded since the last one: it
        costs seconds on the host, so it comes after the budget and the node cap."""
        view = self.view()
        if view.can_ensemble and view.fresh:  # journaled as a move: a resumed run replays it as node t
            row = self.begin(t, Move(**self.run.journal.step(t, "choose", lambda: asdict(Move("ensemble")))))
            self.node(row)
            self.run.end(row)

    def final_choice(self) -> None:
        """The run's solution: the last blend, unless taking the best single node did better on the same
        cross-fitted halves of the selection rows (a single node's own selection score is the best of
        many on the rows that chose it, so it cannot be set against a blend's: search/ensemble.py)."""
        blends, single = [r for r in self.run.rows if r.operator == "ensemble" and r.score is not None], self.best_single()
        if not blends or single is None:
            return
        made = self.run.journal.recorded(blends[-1].iteration, "ensemble")
        alone = made.get("single") if isinstance(made, dict) else None
        pick = single if self.run.task.metric.better(alone, blends[-1].score) else blends[-1]
        if pick is not self.run.best:
            self.run.select(pick, self.script(pick), self.workspace(pick))

    def singles(self) -> list[Row]:
        """The graded nodes that are one script each (an ensemble's script only runs others)."""
        return [r for r in self.run.rows if r.operator != "ensemble" and r.score is not None and r.script]

    def best_single(self) -> Row | None:
        """The best single-script node: what the bank retains."""
        best = max if self.run.task.direction == "maximize" else min
        return best(self.singles(), key=lambda r: r.score, default=None)  # singles are graded

    def taken(self, operator: str, up_to: int | None = None) -> int:
        """How many drafts or transplants the search has made (the next takes the next general solution or
        the next nearest case), by node `up_to` when given."""
        return sum(r.operator == operator for r in self.run.rows if up_to is None or r.iteration <= up_to)

    def view(self) -> View:
        rows, maximize = self.run.rows, self.run.task.direction == "maximize"
        since = next((i for i in range(len(rows) - 1, -1, -1) if rows[i].operator == "ensemble"), -1)
        nodes, singles = [r for r in rows if r.operator != "ensemble"], self.singles()
        graded = sorted(singles, key=lambda r: r.score, reverse=maximize)  # type: ignore[arg-type,return-value]
        return View(drafts_left=len(self.general) - self.taken("draft"),
                    cases_left=len(self.cases) - self.taken("transplant"), families=self.families(),
                    last=next((r.operator for r in reversed(nodes) if r.operator not in MODEL_OPERATORS), ""),
                    can_ensemble=self.held is not None and len(singles) >= 2,
                    fresh=sum(r.score is not None for r in rows[since + 1:]),
                    model=self.model is not None and self.model.trusted(), graded=[r.iteration for r in graded],
                    plans=sum(r.operator == "plan" for r in rows), broken=self.broken(),
                    last_by_model=bool(nodes) and nodes[-1].operator in MODEL_OPERATORS,
                    model_due=self.model_time() >= MIN_CALL_SECONDS)

    def model_time(self) -> float:
        """The seconds the model's nodes may still take (search/policy.py): until one of them has graded,
        what is left of the model's share of the budget; after, MODEL_SLACK more than the other nodes took."""
        by_model = [r for r in self.run.rows if r.operator in MODEL_OPERATORS]
        if self.clock.budget is not None and not any(r.score is not None for r in by_model):
            return model_share(self.clock.budget) - sum(self.took(r) for r in by_model)
        return MODEL_SLACK - sum(self.took(r) * (1 if r.operator in MODEL_OPERATORS else -1) for r in self.run.rows)

    def model_until(self) -> float:
        """When a model node starting now must have its calls done, on the search's clock. One the policy
        chose with the model's time spent was chosen because nothing else was left: it has the budget."""
        allowed = self.model_time()
        return self.clock.now() + allowed if allowed >= MIN_CALL_SECONDS else math.inf

    def families(self) -> list[Family]:
        """Each node that is not a tune, with the tuned nodes grown from it: best first, ungraded last."""
        rows, maximize = self.run.rows, self.run.task.direction == "maximize"
        found = []
        for root in (r for r in rows if r.operator not in ("tune", "ensemble") and r.script):
            scores = [r.score for r in rows if r.score is not None and (r is root or self.tuned_from(r, root))]
            best = (max if maximize else min)(scores, default=None)
            found.append(Family(root.iteration, best, bool(tuning.knobs(self.script(root)))))
        graded = sorted((f for f in found if f.best is not None), key=lambda f: f.best, reverse=maximize)
        return graded + [f for f in found if f.best is None]

    @staticmethod
    def tuned_from(row: Row, root: Row) -> bool:
        return row.operator == "tune" and row.parent == root.iteration

    def broken(self) -> list[int]:
        """Nodes whose script ran and failed, not debugged yet, at the end of a chain of fewer than
        --n-debug debug nodes: newest first."""
        rows = {r.iteration: r for r in self.run.rows}
        debugged = {r.parent for r in rows.values() if r.operator == "debug"}

        def depth(row: Row) -> int:
            return 1 + depth(rows[row.parent]) if row.operator == "debug" and row.parent in rows else 0

        return [r.iteration for r in reversed(rows.values())
                if r.iteration in self.results and not self.results[r.iteration].ok and r.operator != "tune"
                and r.iteration not in debugged and depth(r) < self.config.n_debug]

    def row(self, iteration: int | None) -> Row:
        return next(r for r in self.run.rows if r.iteration == iteration)

    def execute(self, t: int, code: str) -> RunResult:
        """Node t's script, run within what is left of the budget; killed if the run stops meanwhile."""
        with self.cores:  # the limit is worked out once the script has the cores
            self.run.open_for(t, halted=True)
            result = self.run.execute(t, 0, code, timeout=self.clock.limit(), cancel=self.run.halt)
            self.results[t] = result
        return result

    def script(self, row: Row) -> str:
        return (self.run.run_dir / row.script).read_text(encoding="utf-8") if row.script else ""

    def node(self, row: Row, until: float = math.inf) -> None:
        """Make node `row` with its operator and run it (in a thread of its own with --parallel); a model's
        node has its calls done by `until`."""
        t, operator = row.iteration, row.operator
        try:
            if operator in MODEL_OPERATORS:
                assert self.model is not None
                self.model.move(operator, row, until)
            elif operator in ("tune", "ensemble"):
                (self.tune if operator == "tune" else self.ensemble)(t, row)
            else:  # the nth draft takes the nth general solution, the nth transplant the nth nearest case
                case = (self.general if operator == "draft" else self.cases)[self.taken(operator, t) - 1]
                self.transplant(t, row, case)
        except OutOfTime as exc:  # the budget or the model's share: the node ends, the policy goes on
            row.status, row.error = OUT_OF_TIME, str(exc)
        except Cancelled:  # the run stopped while the node ran: it leaves nothing (Run.discard_in_flight)
            return

    def transplant(self, t: int, row: Row, case: Case) -> None:
        """Draft or transplant: a case fitted to the task by the structural adapter, then run."""
        run = self.run
        row.case = case.task_name or case.id
        row.step = f"{row.operator} {row.case}"
        run.say(t, "adapt")
        adapted: Adapted = run.journal.step(t, "adapt", lambda: adapt_case(case, run.task))
        if "error" in adapted:
            row.status, row.error = "not adaptable", adapted["error"]
            return
        result = self.execute(t, adapted["code"])
        row.log = f"Adapted {row.case} ({'; '.join(adapted['notes']) or 'same task type'}): {result.feedback().splitlines()[0]}"
        run.consider(row, adapted["code"], result)

    def tune(self, t: int, row: Row) -> None:
        """The family root's script with Optuna's next values for its model literals."""
        run = self.run
        root = self.row(row.parent)
        row.case = root.case
        code = self.script(root)
        found = tuning.knobs(code)
        tried = [({k.name: k.value for k in found}, root.score)]
        tried += [(r.tuned or {}, r.score) for r in run.rows if self.tuned_from(r, root) and r.tuned is not None
                  and r.status != "not run"]  # a tune still running has no score yet, nor a failure
        run.say(t, "tune")
        row.tuned = run.journal.step(t, "tune", lambda: tuning.propose(
            found, tried, tuning.warm_values(found, [c.script for c in self.cases]), run.task.direction,
            self.config.seed + t))
        row.step = "tune " + ", ".join(f"{k}={v:.3g}" for k, v in row.tuned.items())
        code = tuning.with_values(code, found, row.tuned)
        result = self.execute(t, code)
        row.log = f"Tuned node {root.iteration}'s model: {result.feedback().splitlines()[0]}"
        run.consider(row, code, result)

    def ensemble(self, t: int, row: Row) -> None:
        """A blend of the graded single-script nodes (search/ensemble.py says how it is judged)."""
        run, held = self.run, self.held
        assert held is not None
        run.say(t, "ensemble")
        folder = step_dir(run.run_dir, t)
        made = run.journal.step(t, "ensemble", lambda: self.blend(folder))
        if "error" in made:
            row.status, row.error = "not blended", str(made["error"])
            return
        mean, one, other = ({int(k): v for k, v in w.items()} for w in (made["weights"], *made["halves"]))
        row.members, row.step = mean, "ensemble of " + ", ".join(f"node {k} ({w:g})" for k, w in mean.items())
        row.log = (f"Blended {len(mean)} node(s): weights chosen on one half of the selection rows ({one}) and "
                   f"on the other ({other}), each half graded with the other's weights; the best single node "
                   f"of each half, graded on the other, scores {made.get('single')}")
        result = RunResult.from_dict(made["result"])
        run.consider(row, (folder / "script.py").read_text(encoding="utf-8"), result)

    def blend(self, folder: Path) -> dict[str, object]:
        """The single-script nodes' predictions, read back and blended (once across resumes)."""
        run, held, started = self.run, self.held, time.monotonic()
        assert held is not None
        workspace = folder / "exec" / "workspace"
        clear_folder(folder / "exec")
        ids = ensemble.row_ids(run.task, held)
        members = [m for r in self.singles() if (m := ensemble.load(run.task, ids, held.test_rows + held.rows,
                                                                    r.iteration, self.workspace(r), self.script(r)))]
        if len(members) < 2:
            return {"error": "fewer than two nodes' predictions could be read back as they were graded"}
        try:
            made = ensemble.make(run.task, held, ids, members, self.config.seed, workspace)
        except ArtefactError as exc:  # the blend is graded like a script's predictions
            return {"error": str(exc)}
        write_text_atomic(folder / "script.py", ensemble.script(run.task, members, made.weights))
        task = run.task
        result = RunResult(task=task.name, status="ok", exit_code=0, metric=task.metric_name,
                           direction=task.direction, valid_metric=None, test_metric=made.grades.test,
                           selection_metric=made.grades.selection, selection_rows=held.rows, error=None,
                           stdout="", stderr="", wall_time=round(time.monotonic() - started, 3), peak_memory_mb=0.0,
                           workspace=str(workspace), isolated=False, test_answers=task.has_answers)
        return {"weights": made.weights, "halves": made.halves, "single": made.single, "result": result.to_dict()}

    def workspace(self, row: Row) -> Path:
        """What a node's script left, as the harness harvested it."""
        return self.run.run_dir / Path(row.script or "").parent / "exec" / "workspace"

    def refit_blend(self, row: Row) -> Refit:
        """--refit of the selected blend: each member once more on every labelled row (in the sandbox, its
        early-stopped models keeping their stopping points, as a single script's refit does), then their
        predictions blended with the weights the search chose, and judged on the selection rows as a
        single script's refit is (agent/refit.py)."""
        run, held = self.run, self.held
        assert held is not None and row.members
        ids, rows, members, rounds = ensemble.row_ids(run.task, held), held.test_rows + held.rows, [], []
        for node in (self.row(i) for i in row.members):
            code = self.script(node)
            if REFIT_VARIABLE not in code:
                return Refit(status="skipped", why=f"member node {node.iteration} does not read {REFIT_VARIABLE}")
            result = run.execute(node.iteration, 0, code, refit=True, folder=run.run_dir / "refit" / f"node-{node.iteration:02d}")
            workspace = Path(result.workspace)
            member = ensemble.load(run.task, ids, rows, node.iteration, workspace, code) if result.ok else None
            if member is None:
                return Refit(status=result.status if not result.ok else "failed", error=f"member node {node.iteration}'s "
                             f"refit: {result.error or 'its predictions could not be read back'}")
            members.append(member)
            rounds += read_refit_rounds(workspace) or []
        workspace = run.run_dir / "refit" / "exec" / "workspace"
        try:
            grades = ensemble.refit(run.task, held, ids, members, row.members, workspace)
        except ArtefactError as exc:
            return Refit(status="failed", error=f"the refit members' blend: {exc}")
        judged = run.judged_refit(row.selection, grades.selection, grades.test, rounds or None)
        if judged.status == "ok":
            publish_outputs(run.run_dir, run.task, self.script(row), workspace, held)
        return judged
