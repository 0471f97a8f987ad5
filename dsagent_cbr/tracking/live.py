"""`--mlflow` while a run goes on (MlflowObserver, attached by the commands), and after it (a folder)."""

from __future__ import annotations

import atexit
import contextlib
import sys
from pathlib import Path

from dsagent_cbr.agent.record import RunRecord
from dsagent_cbr.errors import CbrError
from dsagent_cbr.tracking.store import (
    bound_retries,
    check_server,
    mlflow_client,
    require_mlflow,
    resolve_tracking_uri,
)
from dsagent_cbr.tracking.tracker import Tracker


def _reason(exc: BaseException) -> str:
    """An exception in one line: MLflow's messages can run to pages (a server's whole HTML reply)."""
    first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
    return first if len(first) <= 200 else first[:199] + "…"


class MlflowObserver:
    """agent/seams.py's Observer: each save of the run's record logged to MLflow as it comes. MLflow is never
    why a run stops: whatever it raises (a server gone down, a store that refuses) is said in one line on
    stderr, and the run goes on without it."""

    def __init__(self, run_dir: Path, uri: str) -> None:
        self.run_dir, self.uri = run_dir, uri
        self.tracker: Tracker | None = None  # None: not started, given up, or ended

    def start(self, task: str) -> None:
        """The parent run opened (RUNNING) before the run's first step, and one line saying where."""
        bound_retries()
        try:
            check_server(self.uri)
            self.tracker = Tracker.open(
                mlflow_client(self.uri), self.uri, self.run_dir, task, live=True
            )
        except Exception as exc:  # whatever MLflow or its store raises: the run goes on untracked
            self.give_up(exc)
            return
        print(
            f"mlflow:          run {self.tracker.run_id} in {self.uri}", file=sys.stderr, flush=True
        )
        atexit.register(self.abandon)

    def saved(self, record: RunRecord, *, final: bool) -> None:
        if self.tracker is None:
            return
        try:
            self.tracker.log(record, self.run_dir, final=final)
        except Exception as exc:  # as in start: a failure of MLflow's must not become the run's
            self.give_up(exc)
            return
        if final:
            self.tracker = None

    def give_up(self, exc: BaseException) -> None:
        print(
            f"mlflow: no longer logging this run to {self.uri} ({_reason(exc).rstrip('.')}); the run goes on",
            file=sys.stderr,
            flush=True,
        )
        self.tracker = None

    def abandon(self) -> None:
        """At exit, a parent run whose record never had its last save (cbr itself failed) ends FAILED rather
        than RUNNING for ever."""
        if self.tracker is not None:
            with contextlib.suppress(Exception):  # the process is ending: nothing is left to tell
                self.tracker.client.set_terminated(self.tracker.run_id, "FAILED")
            self.tracker = None


def live_tracking(run_dir: Path, uri: str | None, task: str) -> tuple[MlflowObserver, ...]:
    """--mlflow [URI] (None: not given; "": the default store) as the observers to attach to a run of
    `task` in `run_dir`. mlflow not installed is one sentence before the run, not a run left untracked."""
    if uri is None:
        return ()
    uri = resolve_tracking_uri(uri or None)
    require_mlflow()
    observer = MlflowObserver(Path(run_dir).resolve(), uri)
    observer.start(task)
    return (observer,)


def log_run_to_mlflow(run_dir: Path, uri: str | None = None) -> str:
    """A run folder logged after the fact: what MLflow does not have of it yet, and its end; the parent
    run's id. Unlike a live run's, a failure here is the command's: one sentence (CbrError)."""
    from dsagent_cbr.agent.record import load_record

    run_dir = Path(run_dir).resolve()
    record = load_record(run_dir)
    uri = resolve_tracking_uri(uri)
    client = mlflow_client(uri)
    check_server(uri)
    from mlflow.exceptions import MlflowException

    try:
        tracker = Tracker.open(client, uri, run_dir, record.task, live=False)
        tracker.log(record, run_dir, final=True)
    except MlflowException as exc:
        raise CbrError(
            f"MLflow at {uri} did not take the run: {_reason(exc).rstrip('.')}."
        ) from exc
    return tracker.run_id
