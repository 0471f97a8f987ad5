"""What develop and deploy print when they end, read from the run's record."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

if TYPE_CHECKING:
    from dsagent_cbr.agent.record import RunRecord


def echo_results(record: RunRecord, width: int) -> None:
    """The last lines: what the run cost and where a user finds its report, solution and submission."""
    lines = [("cost", f"${record.cost_usd:.4f} for {record.tokens} tokens" if record.tokens else None),
             ("report", str(Path(record.run_dir) / "report.md")), ("best solution", record.best_solution),
             ("submission", record.submission)]
    for label, value in lines:
        if value:
            click.echo(f"{label + ':':<{width}}{value}")
