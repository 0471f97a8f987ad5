"""The LLM roles of the agent, each a small function: build the prompt, ask the model, parse.

Prompts live in dsagent_cbr/llm/prompts/<role>.md; parsing is in dsagent_cbr.llm.parsing. As in the
paper, the programmer, the debugger and the logger work from the instruction, the scripts and the
log, not from the task's description (the programmer gets the data card and the budget instead). A reply
that cannot be parsed raises ParseError carrying the raw reply, which the loop journals before going
on; the client never caches such a reply, so asking again is a new request."""

from __future__ import annotations

import difflib
from collections.abc import Callable
from typing import TypeVar

from dsagent_cbr.agent.context import Context
from dsagent_cbr.agent.seams import Model, Reply
from dsagent_cbr.bank.cases import Case
from dsagent_cbr.harness.run import REFIT_VARIABLE
from dsagent_cbr.llm import parsing
from dsagent_cbr.llm.prompts import render

CASE_CHARS = 3000  # the chosen case, cut to this length: every token is paid for on every call
# what rerank sees of each case: its opening, enough to judge it, cut between words
SUMMARY_CHARS = 300
PLAN_CHARS = 3000  # the plan the logger is told was carried out
OUTPUT_CHARS = 2000  # the end of what a script printed, for the logger (per-model scores, warnings)
# Replies longer than these are rambling (small models run on to the end of their context); scripts
# are bounded by the client's default.
# The plan prompt asks for under 300 words (about 400 tokens): 900 leaves room for a model that runs over.
MAX_REPLY_TOKENS = {"rerank": 64, "plan": 900, "log": 300}
T = TypeVar("T")
NO_CODE_NUDGE = "Your reply had no Python code. Return the full script in one ```python block."


def _ask(
    model: Model, role: str, temperature: float, validate: Callable[[str], T], **variables: object
) -> Reply[T]:
    messages = [{"role": "user", "content": render(role, **variables)}]
    return model.complete(
        role,
        messages,
        temperature=temperature,
        max_tokens=MAX_REPLY_TOKENS.get(role),
        validate=validate,
    )


def opening(text: str, limit: int = SUMMARY_CHARS) -> str:
    """The first `limit` characters of `text`, cut at the last word boundary before it."""
    flat = " ".join(text.split())
    if len(flat) <= limit:
        return flat
    cut = flat[:limit].rsplit(" ", 1)[0]
    return f"{cut} …"


def summary(case: Case) -> str:
    """A case as rerank lists it: what tells it apart (where it comes from), then its opening."""
    where = [
        case.source_kind or "case",
        f"competition {case.competition}" if case.competition else "",
        f"task {case.task_name}" if case.task_name and case.task_name != case.competition else "",
        f"run {case.extra['run']}" if case.extra.get("run") else "",
    ]
    title = case.title or case.competition or case.id
    return f"{title} ({', '.join(w for w in where if w)}): {opening(case.text)}"


def rerank(
    model: Model, ctx: Context, log: str, cases: list[Case], temperature: float
) -> list[int]:
    """Indices into `cases`, most useful first (the model answers '[2] > [1] > [3]')."""
    listing = "\n".join(f"[{i}] {summary(c)}" for i, c in enumerate(cases, 1))
    reply = _ask(
        model,
        "rerank",
        temperature,
        lambda text: parsing.parse_ranking(text, len(cases)),
        task=ctx.description,
        log=log,
        cases=listing,
        n=len(cases),
    )
    return [i - 1 for i in reply.parsed]


def plan(
    model: Model,
    ctx: Context,
    log: str,
    best: str,
    script: str,
    case: Case | None,
    simpler: bool,
    temperature: float,
    timings: str = "",
    *,
    draft: bool = False,
    searching: bool = False,
) -> dict[str, str]:
    """The next step; `draft`: a new solution in the frame of `script` (the starter), not an edit of it.
    `searching`: a node of the search, whose plain moves draft and tune beside the model: the step is
    asked of what they cannot reach, with its expected gain (DS-Agent's loop keeps the paper's rules)."""
    case_text = case.text[:CASE_CHARS] if case else "(no case: plan from your own knowledge)"
    reply = _ask(
        model,
        "plan",
        temperature,
        parsing.parse_plan,
        task=ctx.description,
        data_card=ctx.data_card,
        metric=ctx.metric,
        best=best,
        log=log,
        script=script,
        case=case_text,
        simpler=simpler,
        budget=ctx.budget,
        timings=timings or "none yet",
        draft=draft,
        searching=searching,
    )
    return {"decision": reply.parsed["decision"], "raw": reply.text}


def program(
    model: Model,
    ctx: Context,
    script: str,
    instruction: str,
    temperature: float,
    retries: int = 2,
    *,
    draft: bool = False,
    named: str = "",
) -> str:
    """The new or edited script; a reply with no code is answered with a nudge, up to `retries` times.
    `named`: the scripts of the nodes the instruction names, each under its node's heading."""
    content = render(
        "program",
        named=named,
        data_card=ctx.data_card,
        budget=ctx.budget,
        instruction=instruction,
        script=script,
        validation_line=ctx.validation_line,
        prediction=ctx.prediction,
        draft=draft,
        refit=refit_rule(script),
    )
    messages = [{"role": "user", "content": content}]
    for attempt in range(retries + 1):
        try:
            return model.complete(
                "program", messages, temperature=temperature, validate=parsing.extract_code
            ).parsed
        except parsing.ParseError as exc:
            if attempt == retries:
                raise
            messages = [
                *messages,
                {"role": "assistant", "content": exc.raw},
                {"role": "user", "content": NO_CODE_NUDGE},
            ]
    raise AssertionError("unreachable")


def debug(
    model: Model,
    ctx: Context,
    original: str,
    instruction: str,
    failing: str,
    error: str,
    log: str,
    temperature: float,
) -> str:
    reply = _ask(
        model,
        "debug",
        temperature,
        parsing.parse_debug,
        budget=ctx.budget,
        original=original,
        instruction=instruction,
        script=failing,
        error=error,
        log=log,
    )
    return reply.parsed["code"]


def summarize(
    model: Model,
    ctx: Context,
    log: str,
    best: str,
    plan_text: str,
    before: str,
    after: str,
    observation: str,
    output: str,
    temperature: float,
) -> str:
    """The log entry of one experiment, from its plan, the change, the outcome and the end of what the
    script printed (as DS-Agent's logger reads the execution output)."""
    diff = "\n".join(
        difflib.unified_diff(
            before.splitlines(), after.splitlines(), "before.py", "after.py", lineterm="", n=1
        )
    )
    reply = _ask(
        model,
        "log",
        temperature,
        parsing.parse_log,
        metric=ctx.metric,
        best=best,
        log=log,
        instruction=plan_text[-PLAN_CHARS:],
        diff=diff[:6000],
        observation=observation,
        output=output[-OUTPUT_CHARS:].strip() or "(nothing)",
    )
    return reply.parsed


def adapt_messages(ctx: Context, examples: list[tuple[str, str, str]]) -> list[dict[str, str]]:
    """The deployment prompt: example tasks with their starters and solutions, then the new task."""
    shown = "\n\n".join(
        f"## Example task {i}\n{desc}\n\n### Its starter train.py\n```python\n{starter}\n```\n\n"
        f"### Its solution\n```python\n{solution}\n```"
        for i, (desc, starter, solution) in enumerate(examples, 1)
    )
    starter = ctx.task.starter.read_text(encoding="utf-8")
    content = render(
        "adapt",
        examples=shown or "(no example)",
        task=ctx.description,
        data_card=ctx.data_card,
        metric=ctx.metric,
        budget=ctx.budget,
        starter=starter,
        prediction=ctx.prediction,
        refit=refit_rule(starter),
    )
    return [{"role": "user", "content": content}]


# what a script's refit block asks of it, said wherever a model writes one that has it
REFIT_RULE = (
    f'The script\'s `if os.environ.get("{REFIT_VARIABLE}")` block stays: when cbr sets {REFIT_VARIABLE}, the '
    "script trains its model once more on every labelled row (X, y) before it predicts the test file. The "
    "validation rows are then among the training rows: cbr makes an early-stopped LightGBM, XGBoost or "
    "CatBoost model keep the rounds its first fit stopped at, and any other model that stops on the "
    "validation rows must reuse what its first fit found."
)


def refit_rule(script: str) -> str:
    """REFIT_RULE when `script` has a refit block, else nothing."""
    return REFIT_RULE if REFIT_VARIABLE in script else ""
