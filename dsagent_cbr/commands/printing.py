"""What develop and deploy print when they end, read from the run's record."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

if TYPE_CHECKING:
    from dsagent_cbr.agent.record import RunRecord


def say_score(value: float | None, missing: str = "none") -> str:
    """A score as a user reads it: five significant digits (the selection rows cannot tell more apart),
    and a word where there is none, never `None`."""
    return missing if value is None else f"{value:.5g}"


def echo_results(record: RunRecord, width: int, bank: str = "the bank") -> None:
    """The last lines: what the run retained and cost, where a user finds its report, solution and
    submission, and what the submission learned from."""
    from dsagent_cbr.agent.refit import submission_line

    kept = (
        (
            f"{len(record.retained)} solution(s) and their insights into {bank} (iteration "
            f"{', '.join(str(r['iteration']) for r in record.retained)}; `cbr bank list --retained` shows them, "
            "`cbr bank remove ID` takes one out)"
        )
        if record.retained
        else None
    )
    lines = [
        ("retained", kept),
        ("cost", f"${record.cost_usd:.4f} for {record.tokens} tokens" if record.tokens else None),
        ("report", str(Path(record.run_dir) / "report.md")),
        ("best solution", record.best_solution),
        ("submission", record.submission),
        (
            "learned",
            submission_line(record.refit, record.submission_from) if record.submission else None,
        ),
    ]
    for label, value in lines:
        if value:
            click.echo(f"{label + ':':<{width}}{value}")
