"""Every command in the ```bash blocks of the README and then of the docs pages (in docs/README.md's order),
as written, from the repository root, in order.

Commands that run here, offline, are run for real and must exit 0. Placeholders are filled with what
the earlier commands made (`<run-id>`: that task's newest run; `<id>`: a case id), optional `[...]`
parts are run as given without the brackets. Commands that need what this machine cannot have (a
cloud model's key, a model server, the Kaggle API, vLLM) or that take tens of minutes are parsed
instead, through the same click parser `cbr` uses (a wrong option or argument fails the test); each
such command is named below with the reason."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
import warnings
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
# What the commands create in the repository root; removed afterwards. runs/ goes only at the very end:
# a page's commands may name a run an earlier page made.
MADE = ["tasks/feedback", "tasks/new_task", "tasks/credit", "tasks/credit-holdout", "feedback-ell",
        "credit", "mlflow.db", "mlartifacts", "bank.jsonl", "predictions.csv", "writeup.md",
        "concrete-dsagent", "flights"]
WRITEUP = REPO.parent / "shared" / "reference" / "dsagent-human-insights" / "tabular_cases"
# Parsed, not run: why each cannot run here (or would take too long for CI).
PARSE_ONLY = {
    "--model gpt-4o": "needs an OpenAI key", "--model gpt-4o-mini": "needs an OpenAI key",
    "--model mixtral": "needs a Mixtral server", "--kaggle ": "downloads from Kaggle",
    "ingest-kaggle": "crawls Kaggle", "cbr ingest ": "reads files and pages the reader has",
    "--model local": "runs the local model (tests/test_develop.py runs it)",
    "cbr serve-local": "serves until stopped (tests/test_llm_client.py starts the server)",
    "cbr bench ": "runs grids of many trials (tests/test_bench.py and tests/test_bench_ray.py run small ones)",
    "cbr bank keep ": "keeps an analysis, which needs a model (tests/test_analysis_cases.py keeps one)",
}
EXTERNAL = ("vllm ", "apt-get ", "pip ", "ray ", "python -m pytest", "bash setup.sh")  # not ours to run (set-up, other programs)
SLOW_SCRIPTS = ("benchmarks/deploy_suite.py", "benchmarks/store_latency.py", "benchmarks/retrieval_quality.py",
                "benchmarks/baselines.py", "benchmarks/bench_parallel.py", "benchmarks/suite.py",
                "benchmarks/flights_set.py scripted", "benchmarks/dabench_answer_rules.py")


def commands_of(page: Path) -> list[str]:
    """Every command in a page's ```bash blocks: a trailing backslash continues the line, `# ...` comments
    are left out, `;` separates commands."""
    commands = []
    for block in re.findall(r"```bash\n(.*?)```", page.read_text(encoding="utf-8"), re.S):
        for line in re.sub(r"\\\n\s*", "", block).splitlines():
            line = re.sub(r"\s+#.*$", "", line).strip()
            if line and not line.startswith("#"):
                commands += [part.strip() for part in line.split(";") if part.strip()]
    return commands


def doc_pages() -> list[Path]:
    """The docs pages in the order docs/README.md lists them (their commands build on earlier pages')."""
    index = (REPO / "docs" / "README.md").read_text(encoding="utf-8")
    return [REPO / "docs" / name for name in re.findall(r"^- \[[^\]]+\]\(([\w.-]+\.md)\)", index, re.M)]


def _rest(ctx: object) -> list[str]:
    with warnings.catch_warnings():  # click 8.2+ keeps a group's subcommand here, deprecated for 9.0
        warnings.simplefilter("ignore", DeprecationWarning)
        return [*ctx.protected_args, *ctx.args]  # type: ignore[attr-defined]


def parse(args: list[str]) -> None:
    """Parse a cbr command line with cbr's own click commands, without running it."""
    import click

    from dsagent_cbr.cli import cli

    ctx = cli.make_context("cbr", list(args), resilient_parsing=False)
    command, rest = cli, _rest(ctx)
    while isinstance(command, click.Group) and rest:
        sub = command.get_command(ctx, rest[0])
        assert sub is not None, f"no command {rest[0]!r}"
        ctx = sub.make_context(rest[0], rest[1:], parent=ctx)
        command, rest = sub, _rest(ctx)


def fill(command: str, home: Path) -> str:
    command = re.sub(r"\s*\[([^\]]*)\]", r" \1", command)
    for task in re.findall(r"runs/([\w-]+)/<run-id>", command):
        newest = sorted((REPO / "runs" / task).iterdir(), key=lambda p: p.stat().st_mtime)[-1]
        command = command.replace(f"runs/{task}/<run-id>", str(newest.relative_to(REPO)))
    if "<id>" in command:
        listing = subprocess.run([sys.executable, "-m", "dsagent_cbr.cli", "bank", "list", "--kind", "insight",
                                  "--json"], capture_output=True, text=True, cwd=REPO, env=env_for(home))
        case_id = json.loads(listing.stdout.splitlines()[-1])["id"]
        command = command.replace("<id> ...", "<id>").replace("<id>", case_id)
    return command


def env_for(home: Path) -> dict[str, str]:
    return {**os.environ, "CBR_HOME": str(home)}


def run_page(commands: list[str], home: Path) -> tuple[list[str], list[str]]:
    """Each command run (or parsed, with the reason) as the reader would; returns (run, parsed)."""
    done, parsed = [], []
    for command in commands:
        if command.startswith(EXTERNAL):
            continue
        words = shlex.split(command.removeprefix("export "))
        env = dict(env_for(home))
        while words and re.match(r"^[A-Z_]+=", words[0]):
            key, _, value = words.pop(0).partition("=")
            env[key] = value
        if not words:
            continue
        reason = next((why for key, why in PARSE_ONLY.items() if key in command), None)
        if words[0] == "python" and " ".join(words[1:]).startswith(SLOW_SCRIPTS):
            proc = subprocess.run([sys.executable, words[1], "--help"], cwd=REPO, capture_output=True, text=True)
            assert proc.returncode == 0, (command, proc.stderr[-2000:])
            parsed.append(command)
            continue
        assert words[0] in ("cbr", "python"), command
        started = time.monotonic()
        if words[0] == "python":  # a quick script, run as written
            proc = subprocess.run([sys.executable, *words[1:]], cwd=REPO, capture_output=True, text=True, env=env)
            assert proc.returncode == 0, (command, proc.stderr[-2000:])
            done.append(said(command, started))
            continue
        if reason:
            parse(words[1:])
            parsed.append(f"{command}  ({reason})")
            continue
        argv = [sys.executable, "-m", "dsagent_cbr.cli", *shlex.split(fill(command, home))[1:]]
        proc = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, env=env, timeout=1500)
        assert proc.returncode == 0, (command, proc.stdout[-2000:], proc.stderr[-3000:])
        done.append(said(command, started))
    return done, parsed


def said(command: str, started: float) -> str:
    """The command with its seconds, printed as it ends (with -s): the slow ones are where CI's time goes."""
    line = f"{command}  ({time.monotonic() - started:.0f} s)"
    print(line, flush=True)
    return line


def clear_made() -> None:
    for made in MADE:
        path = REPO / made
        shutil.rmtree(path, ignore_errors=True) if path.is_dir() else path.unlink(missing_ok=True)


def set_the_stage() -> None:
    """What the prose before the commands makes: the example folder, and the reader's own write-up."""
    clear_made()
    subprocess.run([sys.executable, "-m", "dsagent_cbr.cli", "tasks", "kaggle-example", "feedback", "feedback-ell/"],
                   cwd=REPO, check=True, capture_output=True)
    # `cbr bank add writeup.md` adds the reader's write-up: a real one from DS-Agent's cases stands in.
    shutil.copyfile(sorted(WRITEUP.glob("*.case"))[0], REPO / "writeup.md")


@pytest.mark.slow
def test_every_readme_and_docs_command_runs_as_written(tmp_path):
    """The README as a new reader follows it; then the docs pages, one after another, from a clean folder
    (a page may make what the README made: tasks/credit, say), in one home, so the bank they grow is one."""
    for made in [*MADE, "runs"]:
        assert not (REPO / made).exists(), f"{made} is in the way; remove it first"
    home, done, parsed = tmp_path / "home", [], []
    try:
        for commands in ([commands_of(REPO / "README.md")], [commands_of(page) for page in doc_pages()]):
            set_the_stage()
            ran, read = run_page([c for page in commands for c in page], home)
            done, parsed = done + ran, parsed + read
    finally:
        clear_made()
        shutil.rmtree(REPO / "runs", ignore_errors=True)
    assert len(done) >= 30, done
    print("\nran:\n  " + "\n  ".join(done) + "\nparsed:\n  " + "\n  ".join(parsed))
