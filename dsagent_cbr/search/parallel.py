"""--parallel N: a search's nodes N at a time.

A node's body (its model calls, the adapter, Optuna's proposal) runs in a thread of cbr's process, so the
model is asked for several nodes at once; its script runs as a Ray task that reserves the node's share of
the cores (cores / N, as `cbr bench` gives its trials theirs), in the sandbox, with its threads kept to
that share and OpenMP told to wait passively. `--address` joins a Ray cluster instead (its nodes need
the project at the same path and the run folder on a shared filesystem).

With --parallel 1 and no --address a node runs in the loop's own thread, as it always did: Ctrl-C reaches
its script at once, and no Ray starts. A model's nodes (unless --in-turn) run beside it (`Beside`): their
calls wait on the model, not on our cores, so the plain nodes go on meanwhile; the scripts still take
turns (operators.py's lock). With more, the model's nodes have threads of their own in the pool, and their
scripts wait for their share of the cores in Ray's queue."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Protocol, TypeVar

from dsagent_cbr.agent.seams import Executor, SandboxExecutor
from dsagent_cbr.cores import ENV as CORES_ENV
from dsagent_cbr.errors import Cancelled
from dsagent_cbr.harness.readers import FitRounds
from dsagent_cbr.harness.result import RunResult
from dsagent_cbr.sandbox.bubblewrap import SandboxPolicy
from dsagent_cbr.tasks.model import Task

T = TypeVar("T")
CANCEL_POLL = 0.2  # seconds between two looks at a Ray-run script and at its run's cancel event
CANCEL_WAIT = 5.0  # seconds a cancelled script's worker is given to die


class Pool(Protocol):
    def submit(self, fn: Callable[..., T], /, *args: Any) -> Future[T]: ...


class Inline:
    """One node at a time, in the caller's thread: what it raises, it raises at once."""

    def submit(self, fn: Callable[..., T], /, *args: Any) -> Future[T]:
        future: Future[T] = Future()
        future.set_result(fn(*args))
        return future


class Beside(Inline):
    """One node at a time in the caller's thread, as Inline, and a model's node beside it in a thread of
    its own. Daemon: an interrupted run does not wait for it, and its script dies with cbr (the sandbox's
    --die-with-parent)."""

    def beside(self, fn: Callable[..., T], /, *args: Any) -> Future[T]:
        future: Future[T] = Future()

        def body() -> None:
            try:
                future.set_result(fn(*args))
            # the loop's thread raises it, as it would an inline node's
            except BaseException as exc:
                future.set_exception(exc)

        threading.Thread(target=body, name="model-node", daemon=True).start()
        return future


class Turns:
    """The cores, one script at a time, when scripts take turns (--parallel 1 with the model's nodes beside
    the plain ones). A model node's script goes before the plain ones waiting: its node has waited on the
    model already, and the plain loop would otherwise take the cores back as soon as they are free."""

    def __init__(self, taking: bool = True) -> None:
        self.taking = taking
        self._changed = threading.Condition()
        self._busy = False
        self._first = 0  # model nodes' scripts waiting

    @contextmanager
    def turn(self, first: bool = False) -> Iterator[None]:
        if not self.taking:
            yield
            return
        with self._changed:
            self._first += first
            self._changed.wait_for(lambda: not self._busy and (first or not self._first))
            self._first -= first
            self._busy = True
        try:
            yield
        finally:
            with self._changed:
                self._busy = False
                self._changed.notify_all()


@contextmanager
def node_pool(parallel: int, beside: int = 0) -> Iterator[Pool]:
    """Threads for `parallel` plain nodes and `beside` model nodes at once."""
    if parallel <= 1:
        yield Beside() if beside else Inline()
        return
    pool = ThreadPoolExecutor(parallel + beside, thread_name_prefix="node")
    try:
        yield pool
    finally:  # a run that stopped does not wait for its other nodes: Ray's end stops their scripts
        pool.shutdown(wait=False, cancel_futures=True)


def _run_node(
    inner: Executor,
    code: str,
    folder: str,
    refit: bool,
    timeout: float | None,
    cores: int,
    first_fit: FitRounds | None,
) -> RunResult:
    # the sandbox's thread pools and OpenMP's wait policy (cores.shared)
    os.environ[CORES_ENV] = str(cores)
    return inner.run(code, Path(folder), refit, timeout, first_fit=first_fit)


@dataclass
class RayExecutor:
    """Runs each script as a Ray task holding `cores` CPUs."""

    inner: Executor
    ray: Any
    cores: int

    def __post_init__(self) -> None:
        self._remote = self.ray.remote(num_cpus=self.cores, max_retries=0)(_run_node)

    def run(
        self,
        code: str,
        folder: Path,
        refit: bool = False,
        timeout: float | None = None,
        cancel: threading.Event | None = None,
        first_fit: FitRounds | None = None,
    ) -> RunResult:
        """The script as a Ray task; when `cancel` is set meanwhile, the task's worker is killed (its sandbox
        dies with it) and Cancelled raised."""
        ref = self._remote.remote(
            self.inner, code, str(folder), refit, timeout, self.cores, first_fit
        )
        while not self.ray.wait([ref], timeout=CANCEL_POLL)[0]:
            if cancel is not None and cancel.is_set():
                self.ray.cancel(ref, force=True)
                # until its worker is gone: what it mounted is then a dead process's, which the discard
                # of the node's folder unmounts (sandbox/scratch.py)
                self.ray.wait([ref], timeout=CANCEL_WAIT)
                raise Cancelled("the run stopped while this script ran")
        return self.ray.get(ref)


@contextmanager
def node_executor(
    given: Executor | None, task: Task, policy: SandboxPolicy, parallel: int, address: str | None
) -> Iterator[tuple[Executor | None, int | None]]:
    """(the executor for the run's scripts, each node's cores): Ray's, or `given` (a test's), or (None,
    None) when nodes run one at a time here (the run's own sandbox executor then)."""
    if given is not None or (parallel <= 1 and not address):
        yield given, None
        return
    from dsagent_cbr.cluster import ray_session, share_of_cores

    with ray_session(address) as ray:
        cores = share_of_cores(ray, int(ray.cluster_resources().get("CPU", 0)), parallel)
        yield RayExecutor(SandboxExecutor(task, replace(policy, cores=cores)), ray, cores), cores
