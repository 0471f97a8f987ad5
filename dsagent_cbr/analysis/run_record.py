"""An analysis run's summary.json as `cbr runs` reads it: a file from outside (anyone may have
edited it), read through bounded.py and checked for its shape. `kind: analyze` tells it from the
record of a develop or deploy run, which has the same name (agent/record.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from dsagent_cbr.bounded import Absent, Unreadable, read_json
from dsagent_cbr.errors import CbrError

SUMMARY = "summary.json"
KIND = "analyze"


class AnalysisRecord(BaseModel):
    model_config = ConfigDict(extra="ignore")

    kind: Literal["analyze"]
    question: str
    data: list[str] | str = []
    model: str = ""
    outcome: str = ""
    exit_code: int | None = None
    stopped: str = ""
    answers: list[tuple[str, str]] = []
    seconds: float | None = None
    cells_run: int = 0
    cells_failed: int = 0
    calls: int = 0
    tokens: int = 0
    # false while the run goes on (its summary written as it began); a summary without it is final
    final: bool = True

    @property
    def files(self) -> list[str]:
        return [
            Path(path).name for path in ([self.data] if isinstance(self.data, str) else self.data)
        ]


def is_analysis(summary: Any) -> bool:
    return isinstance(summary, dict) and summary.get("kind") == KIND


def load_analysis(run_dir: Path) -> AnalysisRecord | None:
    """The analysis summary of `run_dir`; None when its summary.json is another run's record or
    there is none; one sentence when it cannot be read or is not one cbr wrote."""
    path = Path(run_dir) / SUMMARY
    try:
        summary = read_json(path)
    except Absent:
        return None
    except Unreadable as exc:
        raise CbrError(f"{exc}.") from None
    if not is_analysis(summary):
        return None
    try:
        return AnalysisRecord.model_validate(summary)
    except ValidationError as exc:
        first = str(exc).splitlines()[0]
        raise CbrError(f"{path} is not an analysis summary cbr can read ({first}).") from None
