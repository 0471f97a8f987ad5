"""dsagent_cbr.runs and dsagent_cbr.predict: `cbr runs list` and `cbr predict` as calls."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from dsagent_cbr.api.run import Run


def runs(
    task: str | None = None, limit: int | None = None, runs_dir: str | Path | None = None
) -> Any:
    """Past runs, newest first, as a DataFrame (the columns `cbr runs list --json` prints); a run's
    folder opens as Run(folder)."""
    import pandas as pd

    from dsagent_cbr.commands.runs_cmd import run_views
    from dsagent_cbr.config import load_settings

    views = run_views(load_settings(runs_dir=runs_dir), task, limit)
    return pd.DataFrame([v.as_json() for v in views])


def predict(run: str | Path | Run, rows: Any) -> Any:
    """A finished run's solution on new rows (a DataFrame or a CSV file), as `cbr predict` runs
    it."""
    return (run if isinstance(run, Run) else Run(run)).predict(rows)
