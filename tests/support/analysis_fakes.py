"""A fake kernel and clock for the analysis agent's loop (analysis/agent.py), and a helper that runs
it with the fake model of support/fakes.py: a whole analysis in milliseconds."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from dsagent_cbr.analysis import CellResult
from dsagent_cbr.analysis.agent import Analysis, AnalysisConfig, analyze
from dsagent_cbr.clock import Clock
from support.fakes import FakeModel

QUESTION = "What is the mean of sales?"


class FakeClock(Clock):
    def __init__(self, budget: float) -> None:
        super().__init__(budget)
        self.spent = 0.0

    def now(self) -> float:
        return self.spent


@dataclass
class FakeKernel:
    """Runs nothing: a cell holding a key of `errors` fails with its error; the others print `out`.
    `clock` (when given) advances `seconds` per cell, as a budget sees it."""

    errors: dict[str, str] = field(default_factory=dict)
    clock: FakeClock | None = None
    seconds: float = 0.0
    data_names: list[str] = field(default_factory=lambda: ["sales.csv"])
    data_folder: Path | None = None
    runs: list[str] = field(default_factory=list)
    timeouts: list[float] = field(default_factory=list)
    restarts: int = 0

    def run_cell(self, code: str, timeout: float = 60.0) -> CellResult:
        self.runs.append(code)
        self.timeouts.append(timeout)
        if self.clock is not None:
            self.clock.spent += self.seconds
        error = next((e for key, e in self.errors.items() if key in code), None)
        if error == "die":
            return CellResult(code, ok=False, error="the kernel died", kernel_died=True)
        if error:
            return CellResult(code, ok=False, error=error)
        return CellResult(code, ok=True, stdout=f"out of {code.splitlines()[0]}\n")

    def restart(self) -> None:
        self.restarts += 1


def cell(code: str) -> str:
    return f"Here it is.\n```python\n{code}\n```"


def run(tmp_path: Path, replies, kernel=None, clock=None, answer_format="@mean_sales[value]",
        **config) -> tuple[Analysis, FakeModel, FakeKernel]:
    """The analysis of QUESTION with the fake model's `replies` (by role); its progress lines are
    kept in result.lines."""
    model = FakeModel(replies)
    kernel = kernel or FakeKernel()
    config = AnalysisConfig(QUESTION, answer_format=answer_format, **config)
    lines: list[str] = []
    tmp_path.mkdir(parents=True, exist_ok=True)
    result = analyze(config, kernel, model, tmp_path, clock, lines.append)
    result.lines = lines  # type: ignore[attr-defined]
    return result, model, kernel
