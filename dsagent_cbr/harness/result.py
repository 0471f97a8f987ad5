"""RunResult: everything one sandboxed run of a script produced, serialisable to JSON."""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from dsagent_cbr.files import write_text_atomic
from dsagent_cbr.tasks.metrics import names_metric

_NUMBER = r"([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|nan|inf)"
# The documented line, "Validation <metric>: <value>", and DS-Agent's "final <METRIC> on validation set: <value>".
_VALIDATION = re.compile(
    rf"^[ \t]*(?:validation[ \t]+(?P<ours>[^:=\n]+?)|final[ \t]+(?P<theirs>[^:=\n]+?)[ \t]+on[ \t]+(?:the[ \t]+)?"
    rf"valid(?:ation)?[ \t]+set)[ \t]*[:=][ \t]*{_NUMBER}[ \t]*\.?[ \t]*$",
    re.IGNORECASE | re.MULTILINE,
)


def parse_validation_metric(stdout: str, metric: str) -> float | None:
    """The value of the last line that reports this metric on the validation set; other numbers that
    mention validation ("Validation set size: 206") are not scores."""
    value = None
    for match in _VALIDATION.finditer(stdout):
        if names_metric(match.group("ours") or match.group("theirs"), metric):
            value = float(match.group(3))
    return value


def head_tail(text: str, limit: int = 6000) -> str:
    """Keep the start (imports, first errors) and the end (the traceback) of long output."""
    if len(text) <= limit:
        return text
    half = limit // 2
    cut = len(text) - 2 * half
    return f"{text[:half]}\n... [{cut} characters cut] ...\n{text[-half:]}"


@dataclass
class RunResult:
    task: str
    # ok | error | timeout | memory_limit | disk_limit | output_limit | process_limit | grading_error
    # | impossible_score
    status: str
    exit_code: int | None
    metric: str
    direction: str
    valid_metric: float | None  # what the script printed of itself: a diagnostic, never a choice
    test_metric: float | None
    error: str | None
    stdout: str
    stderr: str
    wall_time: float
    peak_memory_mb: float
    workspace: str
    isolated: bool  # ran under the bubblewrap sandbox (false only with --no-sandbox)
    network: bool = False
    test_answers: bool = True  # false: the task has no test answers; no test score
    # the script as cbr kept it before the run (never the workspace's copy)
    script: str | None = None
    # how memory, processes and disk were bounded
    limits: dict[str, str] = field(default_factory=dict)
    # graded by cbr on the rows it held back: what choices are made on
    selection_metric: float | None = None
    # 0: the task has none (then choices fall back to the printed validation)
    selection_rows: int = 0
    # a refit: it learned the selection rows too, so its selection score only checks it
    refit: bool = False

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def timed_out(self) -> bool:
        return self.status == "timeout"

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "ok": self.ok, "timed_out": self.timed_out}

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2)

    def save(self, path: Path) -> None:
        write_text_atomic(path, self.to_json())

    @classmethod
    def from_dict(cls, data: Any) -> RunResult:
        """The result a dict records (a journal's line, which anyone may have edited): a ValueError
        in one line when it is not one, so a replay never fails later on a missing or odd field."""
        from pydantic import ValidationError

        if not isinstance(data, dict):
            raise ValueError(f"a {type(data).__name__}, not a result")
        try:
            return _schema().validate_python(
                {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
            )
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(part) for part in first["loc"]) or "the result"
            raise ValueError(f"{where}: {first['msg'][:1].lower()}{first['msg'][1:]}") from None

    @property
    def score(self) -> float | None:
        """What every choice is made on: the selection score where the task has selection rows; only
        where it has none, the validation score the script printed."""
        return self.selection_metric if self.selection_rows else self.valid_metric

    def feedback(self) -> str:
        """What the model may learn of a run: the outcome, the selection score it is judged by (as a
        public leaderboard shows it), its own validation line, the error. Never the test score."""
        if not self.ok:
            return f"Failed ({self.status}): {self.error}\n{head_tail(self.stderr, 3000)}"
        printed = f"the script's own validation {self.metric} {self.valid_metric}"
        if self.selection_rows:
            return (
                f"Ran in {self.wall_time:.1f}s; selection {self.metric} {self.selection_metric:.6g} (graded by "
                f"cbr on {self.selection_rows} held-back rows; what the run is judged by); {printed}."
            )
        return f"Ran in {self.wall_time:.1f}s; {printed}."


@cache
def _schema() -> Any:
    from pydantic import TypeAdapter

    return TypeAdapter(RunResult)
