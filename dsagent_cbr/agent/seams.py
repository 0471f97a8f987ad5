"""What the agent needs of the world, as Protocols: a model to ask, a bank to search and add to, an
executor that runs a script and grades it, and somewhere to say how far it got.

The CLI passes the real ones (LLMClient, CaseBank, the sandbox); the fast tests pass fakes, so every loop
can be run in milliseconds."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, TypeVar

from dsagent_cbr.harness.readers import FitRounds
from dsagent_cbr.harness.result import RunResult
from dsagent_cbr.harness.run import run_script
from dsagent_cbr.llm.ledger import Usage
from dsagent_cbr.sandbox.bubblewrap import SandboxPolicy
from dsagent_cbr.sandbox.scratch import clear_folder
from dsagent_cbr.tasks.model import Task

if TYPE_CHECKING:
    from dsagent_cbr.agent.record import RunRecord
    from dsagent_cbr.bank.cases import Case

T = TypeVar("T")
T_co = TypeVar("T_co", covariant=True)
Messages = list[dict[str, str]]


class Reply(Protocol[T_co]):
    @property
    def text(self) -> str: ...

    @property
    def parsed(self) -> T_co: ...


class Model(Protocol):
    """An LLM behind one call (LLMClient is one). `validate` parses the text or raises ParseError with the
    raw reply; the budget raises BudgetExceeded, an unreachable server InfrastructureError, and a call
    that outlives its `timeout` (what a search's budget has left) OutOfTime."""

    model: str

    def complete(
        self,
        role: str,
        messages: Messages,
        *,
        temperature: float = ...,
        max_tokens: int | None = ...,
        validate: Callable[[str], T],
        timeout: float | None = ...,
    ) -> Reply[T]: ...

    def usage(self) -> Usage: ...


class Hit(Protocol):
    @property
    def case(self) -> Case: ...

    @property
    def score(self) -> float: ...


class Bank(Protocol):
    def search(
        self,
        text: str,
        kind: str = ...,
        k: int = ...,
        where: dict[str, object] | None = ...,
        exclude_task: str | None = ...,
    ) -> Sequence[Hit]: ...

    def list(self, kind: str = ..., where: dict[str, object] | None = ...) -> list[Case]: ...

    def add(self, cases: list[Case]) -> object: ...


class Executor(Protocol):
    """Runs a script on the task in `folder` and grades it outside the script's reach; `timeout` (seconds)
    shortens the run's own time limit (a search near the end of its budget). When `cancel` is set while
    the script runs (its run stopped), the script is killed and errors.Cancelled raised. A refit is
    given `first_fit`, the rounds its first fit's boosters kept, where they were read back."""

    def run(
        self,
        code: str,
        folder: Path,
        refit: bool = False,
        timeout: float | None = None,
        cancel: threading.Event | None = None,
        first_fit: FitRounds | None = None,
    ) -> RunResult: ...


class Progress(Protocol):
    def update(self, **fields: object) -> None: ...


class Quiet:
    def update(self, **fields: object) -> None:
        pass


class Observer(Protocol):
    """Told each time a run's record is saved (`final`: the last time), outside the loop's concerns: the
    report (report/observer.py) is drawn by one, so the loops and their tests never wait on matplotlib."""

    def saved(self, record: RunRecord, *, final: bool) -> None: ...


@dataclass
class SandboxExecutor:
    task: Task
    policy: SandboxPolicy

    def run(
        self,
        code: str,
        folder: Path,
        refit: bool = False,
        timeout: float | None = None,
        cancel: threading.Event | None = None,
        first_fit: FitRounds | None = None,
    ) -> RunResult:
        clear_folder(folder)  # a run cut off mid-flight is redone from scratch
        limit = self.policy.timeout if timeout is None else min(timeout, self.policy.timeout)
        return run_script(
            self.task,
            code,
            run_dir=folder,
            policy=self.policy,
            refit=refit,
            first_fit=first_fit,
            timeout=limit,
            cancel=cancel,
        )
