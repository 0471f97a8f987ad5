"""Ray, on this machine's cores or joining a cluster (--address): what `cbr bench` fans trials out on and
a `cbr develop --parallel` search runs its nodes' scripts on."""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from dsagent_cbr.errors import CbrError
from dsagent_cbr.saying import doing

OBJECT_STORE_BYTES = 80 * 1024 * 1024  # trials return small dicts; Ray's minimum is 75 MiB


@contextmanager
def ray_session(address: str | None, cpus: int | None = None) -> Iterator[Any]:
    """Ray with its dashboard and usage statistics off; yields the ray module."""
    os.environ["RAY_USAGE_STATS_ENABLED"] = "0"
    where = f"joining the Ray cluster at {address}" if address else "starting Ray on this machine"
    # importing Ray and starting its processes took 10-30 s on a loaded machine, before any node
    ours = _handlers()
    with doing(where):
        ray = _started(address, cpus, ours)
    try:
        yield ray
    finally:
        ray.shutdown()
        _restore(ours)


def _started(address: str | None, cpus: int | None, ours: dict[int, Any]) -> Any:
    """The ray module, initialised on this machine's cores or joined to the cluster at `address`;
    cbr's signal handlers (`ours`) put back after."""
    import ray

    options: dict[str, Any] = {
        "include_dashboard": False,
        "log_to_driver": False,
        "configure_logging": False,
    }
    try:
        if address:
            pythonpath = os.environ.get("PYTHONPATH")
            env = {"env_vars": {"PYTHONPATH": pythonpath}} if pythonpath else None
            ray.init(address=address, runtime_env=env, **options)
        else:
            ray.init(
                num_cpus=cpus or os.cpu_count() or 1,
                object_store_memory=OBJECT_STORE_BYTES,
                **options,
            )
    except (ConnectionError, ValueError, RuntimeError) as exc:
        raise CbrError(
            f"Could not start or join Ray{f' at {address}' if address else ''}: {exc}"
        ) from exc
    finally:
        _restore(ours)
    return ray


_SIGNALS = (signal.SIGINT, signal.SIGTERM)


def _handlers() -> dict[int, Any]:
    if threading.current_thread() is not threading.main_thread():
        return {}
    return {sig: signal.getsignal(sig) for sig in _SIGNALS}


def _restore(handlers: dict[int, Any]) -> None:
    """ray.init installs a SIGTERM handler of Ray's, which exits the process from under cbr (the run's
    record would say it completed); cbr's own handlers (an interrupt that stops the run cleanly) go back."""
    for sig, handler in handlers.items():
        if handler is not None:
            signal.signal(sig, handler)


def share_of_cores(ray: Any, cluster_cpus: int, parallel: int) -> int:
    """Each of `parallel` runs' share of the cluster's cores (a bench trial, a search node), never more than
    its smallest node has (so every run can be placed); Ray reserves it, and the run keeps its threads to
    it (CBR_CORES)."""
    nodes = [int(n["Resources"].get("CPU", 0)) for n in ray.nodes() if n.get("Alive")]
    smallest = min((c for c in nodes if c > 0), default=1)
    return max(1, min(smallest, cluster_cpus // max(1, parallel)))
