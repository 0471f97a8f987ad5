"""`cbr refit RUN_DIR`: finish a run's refit later. A run whose budget ended before its selected solution
was refit on every labelled row submitted its first fit, and said so; this resumes the run with no new
node and no budget (or --budget), refits what its selection was made of, and rewrites its submission."""

from __future__ import annotations

from pathlib import Path

import click

from dsagent_cbr.clock import process_start
from dsagent_cbr.commands.options import budget_seconds, policy_from, sandbox_options
from dsagent_cbr.commands.printing import echo_results
from dsagent_cbr.errors import CbrError


@click.command()
@click.argument("run_dir", type=click.Path(file_okay=False, path_type=Path))
@click.option(
    "--budget",
    default=None,
    metavar="DURATION",
    help="Wall-clock budget for the refit, as 5m (none by default: the refit takes what it needs).",
)
@sandbox_options
def refit(
    run_dir: Path,
    budget: str | None,
    timeout: float,
    memory: float,
    disk: float,
    allow_network: bool,
    no_sandbox: bool,
) -> None:
    """Refit RUN_DIR's selected solution on every labelled row, and make that its submission."""
    started = process_start()
    from dsagent_cbr.agent.record import load_record
    from dsagent_cbr.commands.develop_cmd import _resume, run_develop
    from dsagent_cbr.sandbox.bubblewrap import require_sandbox

    record = load_record(run_dir)  # one sentence when it is no finished run
    if record.kind not in ("develop", "search"):
        raise CbrError(
            f"{run_dir} is a {record.kind} run; cbr refit refits develop runs (a deploy refits unless "
            "--no-refit: run it again)."
        )
    nodes = record.iterations
    policy = policy_from(timeout, memory, disk, allow_network, no_sandbox)
    task, config, settings = _resume(run_dir, {}, policy, None)
    config.iterations, config.refit, config.refit_only = nodes, True, True
    config.budget = None if budget is None else budget_seconds(budget)
    require_sandbox(config.sandbox.isolate)
    record = run_develop(task, config, run_dir, settings, started)
    echo_results(record, 17, str(settings.bank_path))
    if record.refit is None or record.refit.status != "ok":
        raise SystemExit(1)
