"""The `cbr` command. Subcommands live in dsagent_cbr.commands.* and are imported only when used,
so `cbr --help` never pays for torch, chromadb, sentence-transformers or scrapy."""

from __future__ import annotations

import atexit
import importlib
import os
import sys

import click

from dsagent_cbr import __version__
from dsagent_cbr.commands.printing import printable
from dsagent_cbr.errors import CbrError
from dsagent_cbr.saying import doing

# name -> (module, attribute, one-line help shown by `cbr --help` without importing the module)
COMMANDS: dict[str, tuple[str, str, str]] = {
    "analyze": (
        "dsagent_cbr.commands.analyze_cmd",
        "analyze",
        "Answer a question about data files in a sandboxed notebook.",
    ),
    "tasks": (
        "dsagent_cbr.commands.tasks_cmd",
        "tasks",
        "List, validate, show and prepare task folders.",
    ),
    "run": (
        "dsagent_cbr.commands.tasks_cmd",
        "run",
        "Run a script on a task in a sandbox and grade it.",
    ),
    "bank": ("dsagent_cbr.commands.bank_cmd", "bank", "Build, search and edit the case bank."),
    "develop": (
        "dsagent_cbr.commands.develop_cmd",
        "develop",
        "Develop a solution with the CBR loop.",
    ),
    "deploy": (
        "dsagent_cbr.commands.deploy_cmd",
        "deploy",
        "Adapt the nearest past solution to a task.",
    ),
    "ingest": (
        "dsagent_cbr.commands.ingest_cmd",
        "ingest",
        "Ingest a writeup or notebook file or URL.",
    ),
    "ingest-kaggle": (
        "dsagent_cbr.commands.ingest_cmd",
        "ingest_kaggle",
        "Crawl a Kaggle competition's insights.",
    ),
    "predict": (
        "dsagent_cbr.commands.predict_cmd",
        "predict",
        "Re-run a run's solution on new rows.",
    ),
    "refit": (
        "dsagent_cbr.commands.refit_cmd",
        "refit",
        "Refit a run's solution on every labelled row, later.",
    ),
    "runs": ("dsagent_cbr.commands.runs_cmd", "runs", "List, show and remove past runs."),
    "bench": (
        "dsagent_cbr.commands.bench_cmd",
        "bench",
        "Run experiment grids on Ray; the paper's tables.",
    ),
    "serve-local": (
        "dsagent_cbr.commands.llm_cmd",
        "serve_local",
        "Serve a local GGUF model (llama.cpp).",
    ),
}


class LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name not in COMMANDS:
            return None
        module, attr, _ = COMMANDS[name]
        return getattr(importlib.import_module(module), attr)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = [(name, COMMANDS[name][2]) for name in self.list_commands(ctx)]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


@click.group(cls=LazyGroup)
@click.version_option(__version__, prog_name="cbr")
def cli() -> None:
    """dsagent-cbr: automate data science with a case-based-reasoning LLM agent."""


def main(argv: list[str] | None = None) -> int:
    # the command is a step of its own: no silence over saying.SILENCE, whatever it does
    words = [w for w in (sys.argv[1:] if argv is None else argv)[:2] if not w.startswith("-")]
    try:
        with doing(printable(" ".join(["running cbr", *words])), announce=False):
            cli.main(args=argv, prog_name="cbr", standalone_mode=False)
    except CbrError as exc:
        # its sentence names files and folders from outside, and may quote them
        click.echo(f"Error: {printable(str(exc))}", err=True)
        for line in exc.details:
            click.echo(printable(line), err=True)
        return exc.exit_code
    except click.exceptions.Abort:
        click.echo("Aborted.", err=True)
        return 130
    except click.ClickException as exc:
        exc.show()
        return exc.exit_code
    except click.exceptions.Exit as exc:
        return exc.exit_code
    return 0


def run() -> None:
    """The `cbr` process: main, then the exit handlers (Ray's shutdown, logging's flush), then out at once.
    An interpreter that loaded torch took 2.7 s to tear its modules down on a loaded machine: a tenth of
    a 30-second budget, after the run's last line. Every file cbr writes is closed before that."""
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    atexit._run_exitfuncs()
    os._exit(code)


if __name__ == "__main__":
    run()
