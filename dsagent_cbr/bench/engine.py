"""Fan trials out on Ray: a local Ray on this machine's cores, or an existing cluster (--address).

Concurrency is Ray's: each trial is a task asking for its share of the cores (trial_cores), and at
most `parallel` tasks are in flight (the pattern Ray's docs give for bounding pending tasks, with ray.wait). A local Ray started
here is shut down when the grid ends, however it ends; if the driver itself is SIGKILLed, Ray's
processes share its fate and the trials die with their workers (trial.py)."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from dsagent_cbr.bench.trial import TrialJob, execute
from dsagent_cbr.errors import CbrError

OBJECT_STORE_BYTES = 80 * 1024 * 1024  # trials return small dicts; Ray's minimum is 75 MiB


@contextmanager
def ray_session(address: str | None, cpus: int | None = None) -> Iterator[Any]:
    """Ray with its dashboard and usage statistics off; yields the ray module."""
    os.environ["RAY_USAGE_STATS_ENABLED"] = "0"
    import ray

    options: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False, "configure_logging": False}
    try:
        if address:
            pythonpath = os.environ.get("PYTHONPATH")
            env = {"env_vars": {"PYTHONPATH": pythonpath}} if pythonpath else None
            ray.init(address=address, runtime_env=env, **options)
        else:
            ray.init(num_cpus=cpus or os.cpu_count() or 1, object_store_memory=OBJECT_STORE_BYTES, **options)
    except (ConnectionError, ValueError, RuntimeError) as exc:
        raise CbrError(f"Could not start or join Ray{f' at {address}' if address else ''}: {exc}") from exc
    try:
        yield ray
    finally:
        ray.shutdown()


def run_jobs(jobs: list[TrialJob], parallel: int, address: str | None,
             on_record: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
    """Run every job, at most `parallel` at once; on_record gets each trial's record as it lands."""
    with ray_session(address) as ray:
        cluster_cpus = int(ray.cluster_resources().get("CPU", 0))
        cores = trial_cores(ray, cluster_cpus, parallel)
        remote = ray.remote(num_cpus=cores, max_retries=0)(execute)
        waiting = list(jobs)
        running: dict[Any, TrialJob] = {}
        while waiting or running:
            while waiting and len(running) < parallel:
                job = waiting.pop(0)
                running[remote.remote(job, cores)] = job
            ready, _ = ray.wait(list(running), num_returns=1)
            for ref in ready:
                job = running.pop(ref)
                try:
                    record = ray.get(ref)
                except ray.exceptions.RayError as exc:  # a worker that died is ours, not the model's
                    record = {"id": job.trial_id, "task": job.task, "agent": job.agent, "kind": job.kind,
                              "trial": job.index, "outcome": "infrastructure",
                              "reason": f"the Ray task failed: {str(exc).splitlines()[0]}"}
                on_record(record)
    return {"cluster_cpus": cluster_cpus, "parallel": parallel, "trial_cores": cores}


def trial_cores(ray: Any, cluster_cpus: int, parallel: int) -> int:
    """Each trial's share of the cluster's cores, never more than its smallest node has (so every trial can
    be placed); Ray reserves it, and the trial's run keeps its threads to it (CBR_CORES)."""
    nodes = [int(n["Resources"].get("CPU", 0)) for n in ray.nodes() if n.get("Alive")]
    smallest = min((c for c in nodes if c > 0), default=1)
    return max(1, min(smallest, cluster_cpus // max(1, parallel)))
