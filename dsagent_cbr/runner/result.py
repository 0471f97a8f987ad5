"""RunResult: everything one sandboxed run of a script produced, serialisable to JSON."""

from __future__ import annotations

import json
import math
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from dsagent_cbr.files import write_text_atomic
from dsagent_cbr.tasks.metrics import names_metric

_NUMBER = r"([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|nan|inf)"
# The documented line, "Validation <metric>: <value>", and DS-Agent's "final <METRIC> on validation set: <value>".
_VALIDATION = re.compile(
    rf"^[ \t]*(?:validation[ \t]+(?P<ours>[^:=\n]+?)|final[ \t]+(?P<theirs>[^:=\n]+?)[ \t]+on[ \t]+(?:the[ \t]+)?"
    rf"valid(?:ation)?[ \t]+set)[ \t]*[:=][ \t]*{_NUMBER}[ \t]*\.?[ \t]*$", re.IGNORECASE | re.MULTILINE)


def parse_validation_metric(stdout: str, metric: str) -> float | None:
    """The value of the last line that reports this metric on the validation set; other numbers that
    mention validation ("Validation set size: 206") are not scores."""
    value = None
    for match in _VALIDATION.finditer(stdout):
        if names_metric(match.group("ours") or match.group("theirs"), metric):
            value = float(match.group(3))
    return value if value is not None and math.isfinite(value) else None


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
    status: str  # ok | error | timeout | memory_limit | disk_limit | output_limit | process_limit | grading_error
    exit_code: int | None
    metric: str
    direction: str
    valid_metric: float | None
    test_metric: float | None
    error: str | None
    stdout: str
    stderr: str
    wall_time: float
    peak_memory_mb: float
    workspace: str
    isolated: bool  # ran under the bubblewrap sandbox (false only with --no-sandbox)
    network: bool = False
    test_answers: bool = True  # false: the task has no test answers; graded on validation only
    script: str | None = None  # the script as cbr kept it before the run (never the workspace's copy)
    limits: dict[str, str] = field(default_factory=dict)  # how memory, processes and disk were bounded

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
    def from_dict(cls, data: dict[str, Any]) -> RunResult:
        return cls(**{k: v for k, v in data.items() if k in cls.__dataclass_fields__})

    def feedback(self) -> str:
        """What the model may learn of a run: the outcome, the validation score, the error. Never the
        test score: validation picks, test only reports."""
        if self.ok:
            return f"Ran in {self.wall_time:.1f}s; validation {self.metric} {self.valid_metric}."
        return f"Failed ({self.status}): {self.error}\n{head_tail(self.stderr, 3000)}"
