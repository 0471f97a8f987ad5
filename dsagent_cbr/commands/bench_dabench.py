"""`cbr bench dabench FOLDER`: `cbr analyze` over every question of a DABench-format folder, graded apart.

Each question is a trial of its own: a `cbr analyze` process with its own seed, budget and run folder,
handed the question, its format and constraints, and a copy of its table (analysis/dabench_run.py keeps
the labels from it). Its answer.md is the response the benchmark grades. A trial that ends by a failure
of ours (exit 3) or by a bad setting (exit 2) stops the bench, which the same command resumes; any other
end is the agent's answer, an empty one when it wrote none.

Every trial reads the bank as it was when the bench began: the analyses graded right become cases
(analysis/cases.py) only once every question is answered, so no trial learns from another of its bench."""

from __future__ import annotations

import contextlib
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from dsagent_cbr.commands.options import budget_seconds, examples_option, model_option
from dsagent_cbr.config import load_settings
from dsagent_cbr.errors import CbrError, InfrastructureError

if TYPE_CHECKING:
    from dsagent_cbr.analysis.dabench import Answerer, Graded, Question
    from dsagent_cbr.config import Settings

# the exit codes a trial may end with that are not the agent's answer: ours, and a bad setting
NOT_THE_AGENTS = (InfrastructureError.exit_code, CbrError.exit_code)


@click.command("dabench")
@click.argument("folder", type=click.Path(exists=True, file_okay=False, path_type=Path))
@model_option
@click.option(
    "--budget",
    default="3m",
    show_default=True,
    metavar="DURATION",
    help="Each question's wall-clock budget (its `cbr analyze` command's).",
)
@click.option("--seed", type=int, default=0, show_default=True, help="Question i runs with seed+i.")
@click.option(
    "--out",
    "out_dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Where answers, figures and the table go (default: RUNS_DIR/bench/dabench-MODEL); "
    "the same folder again resumes.",
)
@examples_option
@click.option(
    "--no-retain",
    is_flag=True,
    help="Do not add the analyses graded right to the bank when the bench ends.",
)
def dabench(
    folder: Path,
    model: str | None,
    budget: str,
    seed: int,
    out_dir: Path | None,
    k: int,
    no_retain: bool,
) -> None:
    """Answer every question of a DABench-format FOLDER (questions.jsonl, labels.jsonl, tables/) with
    `cbr analyze`, and grade the answers by the benchmark's rule: accuracy by question, and
    proportional and uniform accuracy by sub-question, by level and concept. The analyses graded
    right then enter the bank as cases."""
    from dsagent_cbr.analysis.dabench import run_benchmark

    settings = load_settings(model=model)
    if settings.model == "none":
        raise CbrError("The DABench bench runs cbr analyze, which needs a model: give --model.")
    seconds = budget_seconds(budget)
    out = out_dir or settings.runs_dir / "bench" / f"dabench-{settings.model}"
    runs = out / "runs"
    answer = analyze_answerer(settings.model, seconds, seed, runs, k)
    label = f"cbr analyze ({settings.model}, k={k}, {_bank_analyses(settings, k)} past analyses)"
    result = run_benchmark(folder, answer, out, _progress, label=label)
    overall = result["overall"]
    click.echo(
        f"{overall['questions']} questions: accuracy by question {overall['ABQ']:.2%}, by sub-question "
        f"{overall['PASQ']:.2%} (proportional), {overall['UASQ']:.2%} (uniform)"
    )
    if not no_retain:
        _retain(settings, out, runs, folder)
    click.echo(f"table:   {out / 'table.md'}")
    click.echo(f"answers: {out / 'answers.jsonl'}")


def _bank_analyses(settings: Settings, k: int) -> int:
    """How many analyses the bank holds as the bench begins (what its trials may be shown)."""
    from dsagent_cbr.bank import open_bank

    if k == 0:
        return 0
    bank = open_bank(settings, seed=False)
    try:
        return bank.count("analysis")
    finally:
        bank.close()


def _retain(settings: Settings, out: Path, runs: Path, folder: Path) -> None:
    """The analyses graded right, as cases of the bank (duplicates of an earlier end are skipped)."""
    from dsagent_cbr.analysis.cases import analysis_case
    from dsagent_cbr.analysis.dabench import ANSWERS, load_questions, read_records
    from dsagent_cbr.bank import open_bank

    known = {q.id for q in load_questions(folder)}
    cases = []
    for record in read_records(out / ANSWERS, known).values():
        run = run_folder(runs, record["id"])
        if record.get("right") and all(record["right"]) and run is not None:
            with contextlib.suppress(CbrError):  # a run folder damaged since: not kept
                cases.append(
                    analysis_case(run, "graded", bench=folder.name, question_id=record["id"])
                )
    if not cases:
        return
    bank = open_bank(settings, seed=False)
    try:
        report = bank.add(cases)
    finally:
        bank.close()
    click.echo(
        f"bank:    {len(report.added)} analyses graded right added as cases "
        f"({len(report.duplicates)} were there already)"
    )


def run_folder(runs: Path, question_id: int) -> Path | None:
    """The folder of the question's last `cbr analyze` run (a resumed bench may have run it twice)."""
    from dsagent_cbr.analysis.answer import ANSWER_MD

    found = sorted((runs / f"q{question_id}").glob(f"analyze/*/*/{ANSWER_MD}"))
    return found[-1].parent if found else None


def analyze_answerer(model: str, budget: float, seed: int, runs: Path, k: int = 2) -> Answerer:
    """An answerer that runs `cbr analyze` on the question's files, as a process of its own."""

    from dsagent_cbr.analysis.answer import ANSWER_BYTES, ANSWER_MD
    from dsagent_cbr.bounded import read_capped

    def answer(question: Question, tables: list[Path]) -> str:
        command = [sys.executable, "-m", "dsagent_cbr.cli", "analyze"]
        command += [*map(str, tables), question.question]
        command += ["--format", question.format, "--constraints", question.constraints]
        command += ["--model", model, "--budget", f"{budget:g}s", "--seed", str(seed + question.id)]
        command += ["--runs-dir", str(runs / f"q{question.id}"), "-k", str(k)]
        try:  # the trial's own budget, and a minute for its start and its record
            done = subprocess.run(command, capture_output=True, text=True, timeout=budget + 60)
        except subprocess.TimeoutExpired:
            raise InfrastructureError(
                f"question {question.id}: cbr analyze ran a minute past its budget of {budget:g} s"
            ) from None
        if done.returncode in NOT_THE_AGENTS:
            raise InfrastructureError(
                f"question {question.id}: cbr analyze ended with exit {done.returncode}: "
                f"{_last_line(done.stderr)}"
            )
        run = run_folder(runs, question.id)
        # the trial's own answer.md, a bounded read all the same (bounded.py)
        raw = read_capped(run / ANSWER_MD, ANSWER_BYTES) if run else b""
        return raw.decode("utf-8", errors="replace")

    return answer


def _last_line(text: str) -> str:
    lines = [line for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else "it printed nothing"


def _progress(graded: Graded, done: int, total: int) -> None:
    right = sum(graded.right)
    click.echo(
        f"[{done}/{total}] question {graded.id} ({graded.level}): {right}/{len(graded.right)} right",
        err=True,
    )
