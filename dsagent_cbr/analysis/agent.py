"""The analysis agent: a question about a data file answered by a notebook written cell by cell.

    describe   cbr's own first cell loads the data and describes it (no model)
    plan       the model writes a short numbered plan
    each step  the model writes one cell; it runs in the kernel; a cell that fails goes back to the
               model with its error, at most n_debug times; a step still failing then has the rest of
               the plan written again (at most `replans` times in a run), else it is left undone
    answer     the model answers from the cells' outputs, in the requested @name[value] format, and
               is asked once more when it leaves out a name the format asks for

Every prompt, reply, cell and result is journaled (journal.jsonl); the notebook (analysis.ipynb) keeps
only the cells that ran, so it runs top to bottom. The budget is a wall clock: each call and cell gets
what is left, part of it kept for the answer. The model server failing or the kernel not starting are
ours (outcome infrastructure); the model's cells failing are the model's."""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

from dsagent_cbr.agent.journal import RunJournal
from dsagent_cbr.analysis.answer import answers_of, merged
from dsagent_cbr.analysis.answer_format import missing_names, read_format
from dsagent_cbr.analysis.cells import CellResult, capped
from dsagent_cbr.analysis.describe import data_files, data_line, first_cell
from dsagent_cbr.analysis.kernel import KernelDied
from dsagent_cbr.analysis.notebook import write_notebook
from dsagent_cbr.analysis.steps import (
    notebook_text,
    parse_steps,
    printed,
    say_plan,
)
from dsagent_cbr.analysis.waiting import waiting
from dsagent_cbr.clock import Clock
from dsagent_cbr.errors import CbrError, Outcome, OutOfTime, outcome_of
from dsagent_cbr.llm.parsing import ParseError, extract_code
from dsagent_cbr.llm.prompts import render

NOTEBOOK = "analysis.ipynb"
MIN_CALL_SECONDS = 3.0  # less than this left for a step's call or cell: the steps end
MIN_ANSWER_SECONDS = 5.0  # less than this left: no answer is asked for
NO_CODE = "The reply held no ```python block."
ERROR_CHARS = 4000  # of a failed cell's output and traceback, in a prompt (its head and its tail)
REPLY_TOKENS = {
    "analyze_plan": 400,
    "analyze_replan": 400,
    "analyze_cell": 1200,
    "analyze_debug": 1500,
    "analyze_answer": 600,
}


class Kernel(Protocol):
    """What the agent needs of SandboxedKernel (the fast tests pass a fake)."""

    @property
    def data_names(self) -> list[str]: ...

    @property
    def data_folder(self) -> Path | None: ...

    def run_cell(self, code: str, timeout: float = ...) -> CellResult: ...

    def restart(self) -> None: ...


class Model(Protocol):
    """What the agent needs of LLMClient."""

    def complete(
        self,
        role: str,
        messages: list[dict[str, str]],
        *,
        temperature: float = ...,
        max_tokens: int | None = ...,
        validate: Callable[[str], Any] | None = ...,
        timeout: float | None = ...,
    ) -> Any: ...


@dataclass
class AnalysisConfig:
    question: str
    answer_format: str = ""  # e.g. `@mean_close_price[mean_value], where "mean_value" is ...`
    constraints: str = ""
    n_debug: int = 3  # fixes asked for per step after its first cell fails
    cell_timeout: float = 60.0
    max_steps: int = 6  # of a plan, and of a re-plan
    replans: int = 1
    temperature: float = 0.3
    # similar past analyses for the plan prompt: the seam for the bank's retrieval (empty until then)
    examples: str = ""
    # seconds of the budget kept for the answer (at most a fifth of it)
    answer_reserve: float = 45.0


@dataclass
class Analysis:
    """What a run found and how it ended."""

    outcome: Outcome = Outcome.OK
    stopped: str = "answered"
    answers: list[tuple[str, str]] = field(default_factory=list)
    text: str = ""
    missing: list[str] = field(default_factory=list)
    plan: list[str] = field(default_factory=list)
    steps: list[dict[str, Any]] = field(default_factory=list)  # each step's text and how it went
    kept: list[CellResult] = field(default_factory=list)  # the notebook's cells
    cells_run: int = 0
    cells_failed: int = 0
    error: str | None = None  # infrastructure's or the budget's sentence


class StepsEnd(Exception):
    """No more steps: the budget has too little left for one, or the kernel cannot be revived. The
    run goes on to its answer with the cells it has."""


def analyze(
    config: AnalysisConfig,
    kernel: Kernel,
    model: Model,
    run_dir: Path,
    clock: Clock | None = None,
    say: Callable[[str], None] = lambda _line: None,
) -> Analysis:
    """Answer config.question on the kernel's data; the notebook is kept in run_dir as it grows. Never
    raises for what the model or its cells did, nor for the budget, infrastructure or an interrupt: the
    outcome says which (a bug still propagates)."""
    return _Run(config, kernel, model, run_dir, clock or Clock(None), say).go()


class _Run:
    def __init__(
        self,
        config: AnalysisConfig,
        kernel: Kernel,
        model: Model,
        run_dir: Path,
        clock: Clock,
        say: Callable[[str], None],
    ) -> None:
        self.config = config
        self.kernel = kernel
        self.model = model
        self.clock = clock
        self.say = say
        self.run_dir = run_dir
        self.journal = RunJournal(run_dir)
        self.result = Analysis()
        self.iteration = 0  # the journal's step number: 0 the data and the plan, then one per step
        self.step = 0  # the plan's step being done, as progress lines number it
        self.intro: list[CellResult] = []  # a first cell that failed: shown, never in the notebook
        self.cut_short = False
        self.files = data_files(kernel.data_names, kernel.data_folder)
        self.data = data_line(self.files)
        # the first cell as it runs, and as prompts show it (without cbr's helpers)
        self.first_code, self.first_shown = first_cell(self.files)

    # ---- the run ----

    def go(self) -> Analysis:
        result = self.result
        try:
            self._steps()
            self._answer()
        except (CbrError, KeyboardInterrupt) as exc:
            outcome = outcome_of(exc)
            if outcome is None:  # a user error, never raised past the command's own checks
                raise
            result.outcome, result.error = outcome, str(exc) or type(exc).__name__
            result.stopped = {
                Outcome.BUDGET: "the cost or token budget was spent",
                Outcome.INFRASTRUCTURE: f"a failure of ours: {exc}",
                Outcome.INTERRUPTED: "interrupted",
            }[outcome]
        finally:
            self.journal.close()
            write_notebook(result.kept, self.run_dir / NOTEBOOK)
        return result

    def _steps(self) -> None:
        """The data described, the plan, its steps, until they are done or the time is."""
        try:
            self._describe()
            self.result.plan = self._plan()
            done = 0
            while done < len(self.result.plan):
                done = self._step(done)
        except StepsEnd as exc:
            self.result.stopped, self.cut_short = str(exc), True

    def _describe(self) -> None:
        cell = self._run_cell(self.first_code, "describe", 0)
        self.say(f"cell 1 (cbr describes the data): {'ok' if cell.ok else 'failed'}")
        if cell.ok:
            self._keep(cell)
        else:  # the prompts show its error, and the model loads the data itself
            self.intro = [cell]

    def _plan(self) -> list[str]:
        prompt = render(
            "analyze_plan",
            question=self.config.question,
            answer_format=self.config.answer_format,
            constraints=self.config.constraints,
            data=self.data,
            notebook=self._shown(),
            examples=self.config.examples,
            max_steps=self.config.max_steps,
        )
        steps = self._ask("analyze_plan", prompt, validate=parse_steps)
        if not steps:
            steps = ["Compute what the question asks and print every value the answer needs."]
        steps = steps[: self.config.max_steps]
        self.say(f"plan: {_listed(steps)}")
        return steps

    def _step(self, done: int) -> int:
        """Step done+1 of the plan; how many steps are done after it (a re-plan renumbers them)."""
        self.iteration += 1
        plan, number = self.result.plan, done + 1
        self.step = number
        step = plan[done]
        head = f"step {number}/{len(plan)}"
        cell, attempt, errors = self._write_cell(number, step), 0, []
        while not cell.ok and attempt < self.config.n_debug:
            attempt += 1
            errors.append(_first_line(cell))
            self.say(f"{head}: the cell failed ({errors[-1]}); fix {attempt}")
            cell = self._fix(number, step, cell, attempt)
        if not cell.ok:
            errors.append(_first_line(cell))
        # the errors are what a case of this analysis says went wrong (analysis/cases.py)
        self.result.steps.append(
            {"step": step, "ok": cell.ok, "attempts": attempt + 1, "errors": errors}
        )
        if cell.ok:
            self.say(f"{head}: ok ({_first_line(cell, printed)})")
            self._keep(cell)
            return number
        self.say(f"{head}: failed after {attempt + 1} attempt(s) ({_first_line(cell)})")
        if self.config.replans > sum(1 for s in self.result.steps if s.get("replanned")):
            self.result.steps[-1]["replanned"] = True
            self.result.plan = plan[:done] + self._replan(number, cell)
            self.say(f"re-plan: {_listed(self.result.plan[done:], done)}")
            return done
        return number

    # ---- the model's replies ----

    def _write_cell(self, number: int, step: str) -> CellResult:
        prompt = render(
            "analyze_cell",
            **self._context(),
            plan=say_plan(self.result.plan, number - 1),
            step=f"{number}: {step}",
            cell_timeout=f"{self.config.cell_timeout:g}",
        )
        return self._try_code("analyze_cell", prompt, 0)

    def _fix(self, number: int, step: str, failed: CellResult, attempt: int) -> CellResult:
        prompt = render(
            "analyze_debug",
            question=self.config.question,
            data=self.data,
            step=f"{number}: {step}",
            notebook=self._shown(),
            code=failed.code.rstrip() or "(no code)",
            error=capped(printed(failed), ERROR_CHARS),
            cell_timeout=f"{self.config.cell_timeout:g}",
        )
        return self._try_code("analyze_debug", prompt, attempt, failed)

    def _try_code(
        self, role: str, prompt: str, attempt: int, failed: CellResult | None = None
    ) -> CellResult:
        """The reply's cell, run. A reply with no code is a failed attempt of its own, which leaves
        the cell that `failed` before it to be fixed (the next fix still sees its code and error)."""
        code = self._ask(role, prompt, attempt=attempt, validate=lambda r: extract_code(r, role))
        if code is None:
            before = f"\nThe cell before it failed with:\n{failed.error}" if failed else ""
            return CellResult(
                code=failed.code if failed else "",
                ok=False,
                error=f"{NO_CODE}{before}",
            )
        return self._run_cell(code.rstrip(), "cell", attempt)

    def _replan(self, number: int, failed: CellResult) -> list[str]:
        prompt = render(
            "analyze_replan",
            **self._context(),
            plan=say_plan(self.result.plan, number - 1),
            failed_step=number,
            error=capped(printed(failed), ERROR_CHARS),
            max_steps=self.config.max_steps,
        )
        return (self._ask("analyze_replan", prompt, validate=parse_steps) or [])[
            : self.config.max_steps
        ]

    def _context(self) -> dict[str, str]:
        return {
            "question": self.config.question,
            "answer_format": self.config.answer_format,
            "constraints": self.config.constraints,
            "data": self.data,
            "notebook": self._shown(),
        }

    def _ask(
        self,
        role: str,
        prompt: str,
        *,
        attempt: int = 0,
        validate: Callable[[str], Any] | None = None,
        reserve: bool = True,
    ) -> Any:
        """One model call, journaled; what `validate` made of the reply, None when it refused it."""
        timeout = self._time_left(reserve, MIN_CALL_SECONDS if reserve else MIN_ANSWER_SECONDS)

        def call() -> dict[str, Any]:
            try:
                reply = self.model.complete(
                    role,
                    [{"role": "user", "content": prompt}],
                    temperature=self.config.temperature,
                    max_tokens=REPLY_TOKENS[role],
                    validate=validate,
                    timeout=None if math.isinf(timeout) else timeout,
                )
            except ParseError as exc:
                return {"prompt": prompt, "reply": exc.raw, "parsed": None, "error": exc.reason}
            return {"prompt": prompt, "reply": reply.text, "parsed": reply.parsed}

        try:
            with waiting(self.say, self._awaited(role, attempt), timeout):
                done = self.journal.step(self.iteration, role, call, attempt=attempt)
        except OutOfTime as exc:
            raise StepsEnd(f"the time budget ended during a call ({exc})") from None
        return done["parsed"] if validate else done["reply"]

    def _awaited(self, role: str, attempt: int) -> str:
        """What a call of `role` waits for, in a progress line."""
        step = f"step {self.step}/{len(self.result.plan)}"
        return {
            "analyze_plan": "the model's plan",
            "analyze_replan": "the model's new plan",
            "analyze_cell": f"the model's cell for {step}",
            "analyze_debug": f"the model's fix {attempt} for {step}",
            "analyze_answer": "the model's answer",
        }[role]

    # ---- the kernel ----

    def _run_cell(self, code: str, role: str, attempt: int) -> CellResult:
        limit = min(self.config.cell_timeout, self._time_left(True, MIN_CALL_SECONDS))
        what = "cbr's first cell" if role == "describe" else f"the cell of step {self.step}"
        try:
            with waiting(self.say, f"{what} to run", limit):
                cell = self.kernel.run_cell(code, timeout=limit)
        except KernelDied as exc:
            cell = CellResult(code=code, ok=False, error=str(exc), kernel_died=True)
        self.result.cells_run += 1
        self.result.cells_failed += 0 if cell.ok else 1
        record = {"code": code, "ok": cell.ok, "printed": printed(cell), "seconds": cell.seconds}
        if not cell.ok:
            record["error"] = cell.error or "failed"
        self.journal.step(self.iteration, role, lambda: record, attempt=attempt)
        if cell.kernel_died:
            self._revive()
        return cell

    def _revive(self) -> None:
        """A fresh kernel (the last cell killed its own), its state rebuilt by the kept cells."""
        self.say("the kernel died: restarting it and running the kept cells again")
        self.kernel.restart()
        for cell in self.result.kept:
            limit = min(self.config.cell_timeout, self._time_left(True, MIN_CALL_SECONDS))
            try:
                again = self.kernel.run_cell(cell.code, timeout=limit)
            except KernelDied:
                again = CellResult(code=cell.code, ok=False, kernel_died=True)
            if again.kernel_died:
                raise StepsEnd("the kernel died again while the kept cells ran")

    def _shown(self) -> str:
        cells = [
            replace(cell, code=self.first_shown) if cell.code == self.first_code else cell
            for cell in self.intro + self.result.kept
        ]
        return notebook_text(cells, files=len(self.files))

    def _keep(self, cell: CellResult) -> None:
        self.result.kept.append(cell)
        write_notebook(self.result.kept, self.run_dir / NOTEBOOK)

    def _time_left(self, reserve: bool, least: float) -> float:
        """Seconds a call or a cell may take now: what the budget has left, less the answer's
        reserve for a step's; StepsEnd when that is less than `least`."""
        budget = self.clock.budget
        kept = min(self.config.answer_reserve, budget / 5) if budget and reserve else 0.0
        left = self.clock.left(kept)
        if left < least:
            raise StepsEnd(f"the time budget ended after {len(self.result.steps)} step(s)")
        return left

    # ---- the answer ----

    def _answer(self) -> None:
        result, answer_format = self.result, self.config.answer_format
        self.iteration += 1
        note = (
            "The analysis was cut short (its time budget): answer from what its cells computed."
            if self.cut_short
            else ""
        )
        try:
            text = self._ask_answer(note, "", [])
        except StepsEnd as exc:
            result.outcome, result.stopped = Outcome.BUDGET, f"{exc}, before an answer"
            return
        result.text, result.answers = text, answers_of(text, answer_format)
        missing = missing_names(result.answers, answer_format)
        if missing:
            self.say(f"answer: it lacks {', '.join(missing)}; asking again")
            with contextlib.suppress(StepsEnd):  # no time to ask again: the first answer stands
                text = self._ask_answer(note, text, missing)
                result.text = text
                result.answers = merged(result.answers, answers_of(text, answer_format))
        result.missing = missing_names(result.answers, answer_format)
        if result.missing or not result.text.strip():
            result.outcome = Outcome.AGENT_FAILURE
            lacks = ", ".join(result.missing) if result.missing else "any text"
            result.stopped = f"the answer lacks {lacks}"

    def _ask_answer(self, note: str, previous: str, missing: list[str]) -> str:
        asked = read_format(self.config.answer_format)
        prompt = render(
            "analyze_answer",
            question=self.config.question,
            constraints=self.config.constraints,
            answer_format=self.config.answer_format,
            **asked.for_prompt(),
            notebook=self._shown(),
            note=note,
            previous=previous,
            missing=", ".join(missing),
        )
        attempt = 1 if missing else 0
        return str(self._ask("analyze_answer", prompt, attempt=attempt, reserve=False) or "")


def _listed(steps: list[str], before: int = 0) -> str:
    """Steps in a progress line: each numbered and cut to its first 80 characters."""
    return " ".join(f"{n}. {step[:80]}" for n, step in enumerate(steps, start=before + 1))


def _first_line(cell: CellResult, show: Callable[[CellResult], str] | None = None) -> str:
    """A cell's outcome in a progress line: the first line of its error, or of what it printed."""
    text = show(cell) if show else (cell.error or "failed")
    return next((line.strip() for line in text.splitlines() if line.strip()), "")[:100]
