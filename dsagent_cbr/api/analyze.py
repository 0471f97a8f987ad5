"""dsagent_cbr.analyze: `cbr analyze` as a call. The data is a CSV file, or a DataFrame written as
one; the answer comes back with its items and the notebook the model wrote."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class Answer:
    answer: str  # the model's answer as it wrote it
    items: dict[str, str] = field(default_factory=dict)  # the @name[value] items read from it
    notebook: Path | None = None  # analysis.ipynb: the cells that answered, to open and run again
    folder: Path | None = None  # the run's folder
    outcome: str = ""  # ok, or why there is no answer (errors.py's outcomes)

    def __str__(self) -> str:
        return self.answer


def analyze(
    data: Any,
    question: str,
    *,
    format: str = "",
    constraints: str = "",
    model: str | None = None,
    budget: str | float = "5m",
    name: str = "table",
    runs_dir: str | Path | None = None,
    **options: Any,
) -> Answer:
    """Answer `question` about `data` (a CSV file's path or a DataFrame) with a notebook the model
    writes and runs cell by cell in a sandboxed kernel: what `cbr analyze DATA QUESTION` does.
    `options`: the command's other options by name (cell_timeout="60s", max_steps=6, k=2, ...)."""
    from dsagent_cbr.analysis.agent import NOTEBOOK
    from dsagent_cbr.api.tables import data_file
    from dsagent_cbr.commands.analyze_cmd import analyze as command
    from dsagent_cbr.commands.analyze_cmd import answer_question
    from dsagent_cbr.config import load_settings
    from dsagent_cbr.saying import doing

    started = time.monotonic()  # the budget is this call's wall clock
    # the command's own defaults, then what was given
    chosen = {p.name: p.default for p in command.params}
    given = {"answer_format": format, "constraints": constraints, "model": model}
    chosen.update(given, budget=str(budget), runs_dir=runs_dir, **options)
    with doing("running dsagent_cbr.analyze", announce=False):
        tables = load_settings(runs_dir=runs_dir).runs_dir / "analyze" / "tables"
        path = data_file(data, tables, name)
        summary, run_dir, text = answer_question((str(path),), question, chosen, started)
    return Answer(
        answer=text,
        items=dict(summary["answers"]),
        notebook=run_dir / NOTEBOOK,
        folder=run_dir,
        outcome=summary["outcome"],
    )
