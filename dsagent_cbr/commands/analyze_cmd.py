"""`cbr analyze DATA... QUESTION --model M`: a question about data files (tables, JSON, their
documentation, or a folder of them) answered by a notebook that the model writes cell by cell, in a
sandboxed kernel (dsagent_cbr/analysis/)."""

from __future__ import annotations

import contextlib
import functools
import json
import re
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from dsagent_cbr.clock import process_start
from dsagent_cbr.commands.options import (
    bank_options,
    budget_seconds,
    examples_option,
    interrupt_once,
    json_option,
    model_option,
    no_cache_option,
    runs_dir_option,
    seed_option,
    settings_flags,
    trial_seed,
)
from dsagent_cbr.commands.printing import printable
from dsagent_cbr.config import load_settings
from dsagent_cbr.errors import CbrError

if TYPE_CHECKING:  # the kernel's and the model's imports stay lazy: `cbr --help` is instant
    from collections.abc import Callable

    from dsagent_cbr.analysis.agent import Analysis, AnalysisConfig
    from dsagent_cbr.analysis.cases import Example
    from dsagent_cbr.clock import Clock
    from dsagent_cbr.config import Settings
    from dsagent_cbr.llm.client import LLMClient
    from dsagent_cbr.sandbox.bubblewrap import SandboxPolicy

NEEDS_MODEL = (
    "Analysis needs a model: give --model (local for the bundled SmolLM2 server, gpt-4o with "
    "OPENAI_API_KEY set, or any model of a server at CBR_BASE_URL), or set CBR_MODEL."
)
# the kernel's own time limit: the budget and this, for starting and stopping it
KERNEL_SLACK = 120.0
# the budget's last seconds, kept from the steps and the answer for the run's end: the kernel's and the
# local server's shutdown, the notebook and the summary (on DABench with SmolLM2 and 45 s, runs whose
# budget ended in a model call took up to 55 s without them)
ENDING_SECONDS = 8.0
WIDTH = 10
PROBE_SECONDS = 30.0  # at most, for the local model's speed probe (a fifth of the budget at most)


def _duration(option: str, text: str) -> float:
    from dsagent_cbr.clock import parse_duration

    try:
        return parse_duration(text)
    except ValueError as exc:
        raise CbrError(f"{option}: {exc}.") from None


@click.command()
@click.argument("data", nargs=-1, required=True)
@click.argument("question")
@click.option(
    "--format",
    "answer_format",
    default="",
    help='The answer\'s format, as @name[value] items: e.g. "@mean_price[value], where value is '
    'rounded to two decimals".',
)
@click.option(
    "--constraints", default="", help="How the question must be answered (methods, rules)."
)
@model_option
@click.option(
    "--budget",
    default="5m",
    show_default=True,
    metavar="DURATION",
    help="Wall-clock budget of the whole command, as 5m, 90s or 1h.",
)
@click.option(
    "--cell-timeout",
    default="60s",
    show_default=True,
    metavar="DURATION",
    help="Time limit of one cell.",
)
@click.option(
    "--n-debug", type=click.IntRange(min=0), default=3, show_default=True, help="Fixes per step."
)
@click.option(
    "--max-steps", type=click.IntRange(min=1), default=6, show_default=True, help="Steps of a plan."
)
@click.option("--temperature", type=float, default=0.3, show_default=True)
@click.option(
    "--memory",
    type=float,
    default=4096.0,
    show_default=True,
    help="Memory limit of the kernel (MB; every process a cell starts included).",
)
@click.option(
    "--disk",
    type=float,
    default=1024.0,
    show_default=True,
    help="Largest file a cell may write, and how much the kernel's workspace may grow (MB).",
)
@click.option(
    "--no-sandbox",
    is_flag=True,
    help="Run the kernel without bubblewrap isolation (only where it is unavailable; recorded).",
)
@examples_option
@bank_options
@seed_option
@runs_dir_option
@click.option("--max-cost", type=float, default=None, help="Refuse calls beyond this many dollars.")
@no_cache_option
@json_option
def analyze(data: tuple[str, ...], question: str, **options: Any) -> None:
    """Answer QUESTION about the DATA (one or more files: tables, JSON, documentation; or a folder
    of them) with a notebook the model writes and runs, cell by cell, in a sandboxed Jupyter
    kernel."""
    started = process_start()  # the budget is the command's wall clock, from the process's start
    interrupt_once()
    summary, run_dir, text = answer_question(data, question, options, started)
    if options["as_json"]:
        click.echo(json.dumps(summary, indent=2))
    else:
        _print(summary, run_dir, text)
    if summary["exit_code"]:
        # errors.py: the model's (1), ours (3), budget (4)
        raise SystemExit(summary["exit_code"])


def answer_question(
    data: tuple[str, ...], question: str, options: dict[str, Any], started: float
) -> tuple[dict[str, Any], Path, str]:
    """The analysis of DATA (files or folders), checked before its folder is made, run and saved: (its
    summary, its folder, the model's answer as it wrote it). `options` are the command's, by their
    parameters' names."""
    paths, settings, policy, clock = _checked(data, question, options, started)
    config = _config(question, options)
    seed = trial_seed(options["seed"])
    run_dir = _new_run_dir(settings, paths)
    _save_start(run_dir, paths, config, settings.model)
    examples = _retrieve(settings, config, options["k"], clock)
    result, usage = _run(paths, config, settings, policy, clock, run_dir, seed)
    budget = budget_seconds(options["budget"])
    facts = {"budget_s": budget, "examples": [asdict(e) for e in examples]}
    summary = _save(run_dir, paths, config, result, usage, settings, policy, seed, clock, facts)
    return summary, run_dir, result.text


def _data_paths(data: tuple[str, ...]) -> list[Path]:
    """The data the user named: files or folders, each there, no two by the same name (the kernel
    shows each under its own name)."""
    paths = [Path(name).expanduser() for name in data]
    for name, path in zip(data, paths, strict=True):
        if not (path.is_file() or path.is_dir()):
            raise CbrError(f"No data file or folder at {name}.")
    names = [path.resolve().name for path in paths]
    twice = sorted({name for name in names if names.count(name) > 1})
    if twice:
        raise CbrError(f"Two data files or folders share the name {twice[0]}: rename one.")
    return paths


def _checked(
    data: tuple[str, ...], question: str, options: dict[str, Any], started: float
) -> tuple[list[Path], Settings, SandboxPolicy, Clock]:
    """Everything the run needs, checked before its folder is made: one sentence and exit 2 for a
    missing file, an empty question, a bad duration, no model, a server that does not answer."""
    from dsagent_cbr.bounded import is_unicode
    from dsagent_cbr.clock import Clock
    from dsagent_cbr.llm.models import check_reachable, settings_model
    from dsagent_cbr.sandbox.bubblewrap import SandboxPolicy, require_sandbox

    paths = _data_paths(data)
    if not question.strip():
        raise CbrError("The question is empty: give it as the second argument, in quotes.")
    texts = {"question": question, "--format": options["answer_format"]}
    for name, text in (texts | {"--constraints": options["constraints"]}).items():
        if not is_unicode(text):  # its bytes were not UTF-8: no prompt, record or bank takes it
            raise CbrError(f"The {name} is not UTF-8 text: give it again as plain text.")
    budget = budget_seconds(options["budget"])
    named = ("model", "store", "bank_dir", "chroma_url", "runs_dir", "max_cost", "no_cache")
    settings = load_settings(**settings_flags(*(options[name] for name in named)))
    if settings.model == "none":
        raise CbrError(NEEDS_MODEL)
    check_reachable(settings_model(settings))
    policy = SandboxPolicy(
        timeout=budget + KERNEL_SLACK,
        memory_mb=options["memory"],
        disk_mb=options["disk"],
        isolate=not options["no_sandbox"],
    )
    require_sandbox(policy.isolate)
    return paths, settings, policy, Clock(max(budget - ENDING_SECONDS, budget / 2), started)


def _config(question: str, options: dict[str, Any]) -> AnalysisConfig:
    from dsagent_cbr.analysis.agent import AnalysisConfig

    return AnalysisConfig(
        question=question.strip(),
        answer_format=options["answer_format"].strip(),
        constraints=options["constraints"].strip(),
        n_debug=options["n_debug"],
        cell_timeout=_duration("--cell-timeout", options["cell_timeout"]),
        max_steps=options["max_steps"],
        temperature=options["temperature"],
    )


def _retrieve(settings: Settings, config: AnalysisConfig, k: int, clock: Clock) -> list[Example]:
    """Past analyses of other questions into config.examples. The bank is an aid: when it cannot be
    read the analysis goes on without it, and says so."""
    from dsagent_cbr.analysis.cases import examples_text, retrieve
    from dsagent_cbr.analysis.waiting import waiting
    from dsagent_cbr.bank import open_bank

    if k == 0:
        return []
    try:
        with waiting(functools.partial(_say, clock), "the bank's past analyses"):
            bank = open_bank(settings, seed=False)  # the seed files hold insights, never analyses
            try:
                cases, examples = retrieve(bank, config.question, config.constraints, k)
            finally:
                bank.close()
    except CbrError as exc:
        _say(clock, f"no past analyses: the bank failed ({exc})")
        return []
    config.examples = examples_text(cases)
    said = "; ".join(f"{e.score:.2f} {e.question[:60]}" for e in examples) or "none in the bank"
    _say(clock, f"past analyses: {said}")
    return examples


def _say(clock: Clock, line: str) -> None:
    """A progress line on stderr, after the seconds the budget has left; it quotes the model's plan
    and the cells' output, shown escaped."""
    from dsagent_cbr.saying import say

    say(f"[{clock.left():4.0f} s left] {printable(line)}")


def _new_run_dir(settings: Settings, paths: list[Path]) -> Path:
    """runs_dir/analyze/<the data's name>/<run-id>/, noted in the index of runs for `cbr runs`; the
    name is the first file's or folder's, with how many more there are."""
    from dsagent_cbr.agent.rundir import new_run_dir

    name = re.sub(r"[^\w.-]+", "-", paths[0].resolve().stem).strip("-.")[:60] or "data"
    name += f"-and-{len(paths) - 1}-more" if len(paths) > 1 else ""
    return new_run_dir(settings.runs_dir / "analyze", name, settings.home)


def _run(
    paths: list[Path],
    config: AnalysisConfig,
    settings: Settings,
    policy: SandboxPolicy,
    clock: Clock,
    run_dir: Path,
    seed: int,
) -> tuple[Analysis, dict[str, Any]]:
    """The analysis with its model and kernel; a failure of ours before it begins (the local server,
    the kernel not starting) or an interrupt then still leave a run that says so."""
    from dsagent_cbr.analysis import SandboxedKernel, write_notebook
    from dsagent_cbr.analysis.agent import NOTEBOOK, Analysis, analyze
    from dsagent_cbr.analysis.kernel import START_TIMEOUT
    from dsagent_cbr.analysis.waiting import waiting
    from dsagent_cbr.errors import InfrastructureError, outcome_of
    from dsagent_cbr.llm import open_llm

    say = functools.partial(_say, clock)
    usage: dict[str, Any] = {"tokens": 0, "cost_usd": 0.0, "calls": 0}
    client = None
    try:
        with contextlib.ExitStack() as stack:
            with waiting(say, f"the model {settings.model} to be ready"):
                client = stack.enter_context(open_llm(settings, run_dir=run_dir, seed=seed))
            _say_speed(client, clock, say)
            say(f"starting the kernel in the sandbox with {', '.join(p.name for p in paths)}")
            with waiting(say, "the kernel to start", START_TIMEOUT):
                kernel = stack.enter_context(SandboxedKernel(paths, policy=policy))
            result = analyze(config, kernel, client, run_dir, clock, say)
    except (InfrastructureError, KeyboardInterrupt) as exc:
        outcome = outcome_of(exc)
        assert outcome is not None
        stopped = (
            "interrupted" if isinstance(exc, KeyboardInterrupt) else f"a failure of ours: {exc}"
        )
        result = Analysis(outcome=outcome, stopped=stopped, error=str(exc) or None)
        write_notebook([], run_dir / NOTEBOOK)
    if client is not None:
        usage = dict(client.usage())
    return result, usage


def _say_speed(client: LLMClient, clock: Clock, say: Callable[[str], None]) -> None:
    """The local model's speed, measured as the run begins: on a CPU a call takes minutes, which the
    user should know before waiting, and whether the budget holds an analysis at that speed."""
    from dsagent_cbr.analysis.waiting import waiting
    from dsagent_cbr.llm.local_speed import analysis_note

    if client.spec.provider != "local":
        return
    left = clock.left()
    limit = min(PROBE_SECONDS, max(left / 5, 5.0))
    with waiting(say, "the local model's answer to a speed probe", limit):
        note = analysis_note(client.spec.base_url or "", left, limit)
    if note:
        say(note)


def _save_start(run_dir: Path, paths: list[Path], config: AnalysisConfig, model: str) -> None:
    from dsagent_cbr.analysis.summary import save_start

    data = [str(path.resolve()) for path in paths]
    save_start(run_dir, config, {"data": data, "model": model, "run_dir": str(run_dir)})


def _save(
    run_dir: Path,
    paths: list[Path],
    config: AnalysisConfig,
    result: Analysis,
    usage: dict[str, Any],
    settings: Settings,
    policy: SandboxPolicy,
    seed: int,
    clock: Clock,
    given: dict[str, Any],
) -> dict[str, Any]:
    """summary.json; `given` holds the user's budget (the clock's is that less ENDING_SECONDS) and
    the past analyses retrieved."""
    from dsagent_cbr.analysis.summary import save_run, summary_of

    facts = {
        "data": [str(path.resolve()) for path in paths],
        "model": settings.model,
        "seed": seed,
        **given,
        "seconds": round(clock.now(), 1),
        "tokens": usage.get("tokens", 0),
        "cost_usd": usage.get("cost_usd", 0.0),
        "calls": usage.get("calls", 0),
        "sandbox": policy.describe(),
        "run_dir": str(run_dir),
    }
    summary = summary_of(config, result, facts)
    save_run(run_dir, summary, result)
    return summary


def _print(summary: dict[str, Any], run_dir: Path, text: str) -> None:
    """What the run did, then its answer, then where its notebook and folder are (the last lines)."""
    from dsagent_cbr.analysis.agent import NOTEBOOK
    from dsagent_cbr.analysis.answer import say_answers
    from dsagent_cbr.clock import say_time_of

    if summary["error"]:
        click.echo(f"Error: {printable(summary['error'])}", err=True)
    took = say_time_of(summary["seconds"], summary.get("budget_s"))
    cells = f"{summary['cells_run']} cells run, {summary['cells_failed']} failed"
    cost = f"{summary['tokens']} tokens, ${summary['cost_usd']:.4f}"
    rows = [
        ("outcome", f"{summary['outcome']} ({summary['stopped']})"),
        ("work", f"{cells}; {summary['calls']} calls, {cost}; {took}"),
        ("answer", say_answers(summary["answers"]) or _short(text) or "none"),
        ("notebook", str(run_dir / NOTEBOOK)),
        ("run", str(run_dir)),
    ]
    if summary["exit_code"] == 0:
        click.echo(
            f"To keep it as an example for other questions: cbr bank keep {run_dir}", err=True
        )
    for label, value in rows:  # the answer is the model's text
        click.echo(f"{label + ':':<{WIDTH}}{printable(value)}")


def _short(text: str) -> str:
    """A free answer (no format was given) on its line: its text, up to 400 characters."""
    flat = " ".join(text.split())
    return flat if len(flat) <= 400 else flat[:400] + " ... (answer.md has it all)"
