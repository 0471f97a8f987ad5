"""A run, as the Python API returns it: its folder, what it submitted, its leaderboard and report,
and its solution on new rows. Everything is read from the folder the run left (summary.json, the
report, the submission), so a past run opens the same way: Run("runs/credit/<run-id>")."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from dsagent_cbr.agent.record import RunRecord

# the leaderboard's columns: a graded node's own, then its selection score's interval where known
COLUMNS = ["iteration", "operator", "learner", "selection", "low", "high", "seconds", "status"]


class Markdown(str):
    """Text a notebook shows as Markdown (a run's report)."""

    def _repr_markdown_(self) -> str:
        return str(self)


class Run:
    def __init__(self, folder: str | Path) -> None:
        self.folder = Path(folder)

    @property
    def record(self) -> RunRecord:
        """summary.json, read again each time: a run still going saves it after every node."""
        from dsagent_cbr.agent.record import load_record

        return load_record(self.folder)

    @property
    def submission(self) -> Any:
        """The file to upload, as a DataFrame; None when the run wrote none."""
        import pandas as pd

        path = self.record.submission
        return pd.read_csv(path) if path and Path(path).is_file() else None

    @property
    def leaderboard(self) -> Any:
        """One row per graded node, best first: how it was made (operator), its model (learner), its
        selection score and that score's 90% interval where known, and its seconds."""
        import pandas as pd

        from dsagent_cbr.report.run_report import completed_rows, leaderboard, ranked

        record = self.record
        rows = [r for r in completed_rows(self.folder, record) if ranked(r)]
        bounds = self._intervals(record)
        board = [
            {
                "iteration": r["iteration"],
                "operator": r["operator"] or r["candidate"] or "",
                "learner": r["model"],
                "selection": r["score"],
                "low": bounds.get(r["iteration"], (None, None))[0],
                "high": bounds.get(r["iteration"], (None, None))[1],
                "seconds": r["wall_time"],
                "status": r["status"],
            }
            for r in leaderboard(rows, record.direction)
        ]
        return pd.DataFrame(board, columns=COLUMNS).set_index("iteration")

    def _intervals(self, record: RunRecord) -> dict[int, tuple[float, float]]:
        """Each graded script's interval, when the run's task is still where it was."""
        from dsagent_cbr.agent.estimate import intervals
        from dsagent_cbr.commands.predict_cmd import run_task_dir
        from dsagent_cbr.config import load_settings
        from dsagent_cbr.errors import CbrError
        from dsagent_cbr.tasks.loader import load_task

        try:
            task = load_task(run_task_dir(self.folder, load_settings().tasks_dir, None))
        except CbrError:
            return {}
        return intervals(task, record.rows, self.folder, record.seed)

    @property
    def report(self) -> Markdown:
        """report.md: the search tree, every node's score and time, and why the winner won."""
        return Markdown((self.folder / "report.md").read_text(encoding="utf-8"))

    def predict(self, rows: Any) -> Any:
        """The run's solution on new rows (a DataFrame with the test file's columns, or a CSV file's
        path), run in the sandbox as `cbr predict` runs it; the predictions as a DataFrame."""
        import pandas as pd

        from dsagent_cbr.api.tables import is_frame, write_frame
        from dsagent_cbr.commands.predict_cmd import predict_rows
        from dsagent_cbr.saying import doing, say

        with doing("running dsagent_cbr predict", announce=False):
            with tempfile.TemporaryDirectory(prefix="cbr-rows-") as scratch:
                given = (
                    write_frame(rows, Path(scratch) / "rows.csv") if is_frame(rows) else Path(rows)
                )
                path, notes = predict_rows(self.folder, given)
            for note in notes:
                say(f"note: {note}")
        return pd.read_csv(path)

    def __repr__(self) -> str:
        from dsagent_cbr.errors import CbrError

        try:
            record = self.record
        except CbrError:  # a folder that is not (yet) a run's: still a Run to look at
            return f"Run({str(self.folder)!r})"
        score = (
            "no graded solution"
            if record.best_score is None
            else (f"{record.selected_by} {record.metric} {record.best_score:.5g}")
        )
        return f"Run({str(self.folder)!r}: {record.task}, {score}, {record.outcome})"
