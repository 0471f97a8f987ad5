"""RunResult: everything one sandboxed run of a script produced, serialisable to JSON."""

from __future__ import annotations

import json
import math
import re
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

_NUMBER = r"([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|nan|inf)"
_VALIDATION = re.compile(rf"valid(?:ation)?(?![a-z])[^\n:=]*[:=]\s*{_NUMBER}", re.IGNORECASE)


def parse_validation_metric(stdout: str) -> float | None:
    """The last 'Validation <metric>: <number>' line (DS-Agent's 'on validation set: x' works too)."""
    matches = _VALIDATION.findall(stdout)
    if not matches:
        return None
    value = float(matches[-1])
    return value if math.isfinite(value) else None


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
    status: str  # ok | error | timeout | memory_limit | output_limit | grading_error
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
    isolated: bool

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
        tmp = path.with_suffix(path.suffix + ".tmp")
        tmp.write_text(self.to_json(), encoding="utf-8")
        tmp.replace(path)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RunResult:
        return cls(**{k: v for k, v in data.items() if k in cls.__dataclass_fields__})

    @classmethod
    def load(cls, path: Path) -> RunResult:
        return cls.from_dict(json.loads(path.read_text(encoding="utf-8")))

    def feedback(self) -> str:
        """A short account for an LLM or a person: what happened and the error, if any."""
        if self.ok:
            return f"Ran in {self.wall_time:.1f}s; validation {self.metric} {self.valid_metric}; test {self.test_metric}."
        return f"Failed ({self.status}): {self.error}\n{head_tail(self.stderr, 3000)}"
