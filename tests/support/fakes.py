"""In-process fakes of the agent's Protocols (agent/seams.py): a model that answers by role from a
script of replies, an executor that grades a script by looking it up, and a bank of given cases. With
them a whole develop, search or deploy run takes milliseconds; the real parts are tested elsewhere."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dsagent_cbr.bank.cases import Case
from dsagent_cbr.harness.result import RunResult


@dataclass
class Reply:
    text: str
    parsed: Any


@dataclass
class FakeModel:
    """Replies by role, in order; a reply that is an exception is raised instead (the budget, a dead
    server, Ctrl-C). Every prompt is kept, to check what the model was shown."""

    replies: dict[str, list[str | BaseException]]
    model: str = "fake"
    prompts: list[str] = field(default_factory=list)
    roles: list[str] = field(default_factory=list)  # the role of each prompt
    timeouts: list[float | None] = field(default_factory=list)  # each call's time limit
    tokens: int = 0

    def complete(self, role: str, messages: list[dict[str, str]], *, temperature: float = 0.5,
                 max_tokens: int | None = None, validate: Callable[[str], Any] | None = None,
                 timeout: float | None = None) -> Reply:
        self.timeouts.append(timeout)
        self.prompts.append("\n".join(m["content"] for m in messages))
        self.roles.append(role)
        queue = self.replies.get(role) or []
        if not queue:
            raise AssertionError(f"the fake model has no reply left for {role}")
        reply = queue.pop(0)
        if isinstance(reply, BaseException):
            raise reply
        self.tokens += 10
        return Reply(reply, validate(reply) if validate else None)

    def usage(self) -> dict[str, Any]:
        return {"tokens": self.tokens, "cost_usd": self.tokens / 1000}


@dataclass
class Graded:
    status: str = "ok"
    valid: float | None = None  # what the script printed
    selection: float | None = None  # cbr's grade of its selection rows; None: a task without them
    test: float | None = None
    error: str | None = None
    stdout: str = ""


@dataclass
class FakeExecutor:
    """Grades a script by the first marker (a comment such as `# v1`) it holds; unknown scripts fail."""

    grades: dict[str, Graded]
    metric: str = "rmse"
    runs: list[tuple[str, bool]] = field(default_factory=list)  # (code, refit), in order
    timeouts: list[float | None] = field(default_factory=list)
    predictions: Callable[[str, Path], None] | None = None  # writes a graded script's predictions file

    def run(self, code: str, folder: Path, refit: bool = False, timeout: float | None = None,
            cancel: threading.Event | None = None, first_fit: dict | None = None) -> RunResult:
        self.runs.append((code, refit))
        self.timeouts.append(timeout)
        grade = next((g for marker, g in self.grades.items() if marker in code), Graded("error", error="NameError: x"))
        (folder / "workspace").mkdir(parents=True, exist_ok=True)
        if self.predictions is not None and grade.status == "ok":
            self.predictions(code, folder / "workspace")
        return RunResult(task="t", status=grade.status, exit_code=0 if grade.status == "ok" else 1, metric=self.metric,
                         direction="minimize", valid_metric=grade.valid, test_metric=grade.test, error=grade.error,
                         selection_metric=grade.selection, selection_rows=0 if grade.selection is None else 50,
                         stdout=grade.stdout, stderr=grade.error or "", wall_time=0.1, peak_memory_mb=1.0,
                         workspace=str(folder / "workspace"), isolated=True)


@dataclass
class FakeHit:
    case: Case
    score: float


@dataclass
class FakeBank:
    insights: list[Case] = field(default_factory=list)
    solutions: list[Case] = field(default_factory=list)
    added: list[Case] = field(default_factory=list)

    def search(self, text: str, kind: str = "insight", k: int = 5, where: dict[str, Any] | None = None,
               exclude_task: str | None = None) -> list[FakeHit]:
        pool = self.insights if kind == "insight" else self.solutions
        source = (where or {}).get("kind")
        found = [c for c in pool if c.task_name != exclude_task and (source is None or c.source_kind == source)]
        return [FakeHit(c, 1.0 - i / 10) for i, c in enumerate(found[:k])]

    def list(self, kind: str = "insight", where: dict[str, Any] | None = None) -> list[Case]:
        return list(self.insights if kind == "insight" else self.solutions)

    def add(self, cases: list[Case]) -> None:
        self.added += cases
