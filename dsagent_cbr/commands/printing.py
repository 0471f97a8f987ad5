"""What develop and deploy print when they end, read from the run's record; and text from outside (a
record, a reply, a folder's name) made safe for a terminal."""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING

import click

if TYPE_CHECKING:
    from dsagent_cbr.agent.record import RunRecord


# C0 and C1 controls (ESC starts a sequence that sets a window's title or clears the screen; a bare
# CR rewrites the line) and lone surrogates (a file name that is not UTF-8), none of which a
# terminal should be handed
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\ud800-\udfff]")


def printable(text: str, *, lines: bool = False) -> str:
    """`text` with each control character shown as its escape (\\x1b), so nothing from outside
    drives the terminal; with `lines`, line breaks and tabs stay."""

    def escaped(match: re.Match[str]) -> str:
        char = match.group()
        if lines and char in "\n\t":
            return char
        return ascii(char)[1:-1]

    return _CONTROL.sub(escaped, text)


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
            submission_line(record.refit, record.submission_from, record.run_dir)
            if record.submission
            else None,
        ),
    ]
    for label, value in lines:
        if value:
            click.echo(f"{label + ':':<{width}}{value}")
