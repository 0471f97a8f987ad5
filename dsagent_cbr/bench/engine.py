"""Fan trials out on Ray: a local Ray on this machine's cores, or an existing cluster (--address).

Concurrency is Ray's: each trial is a task asking for its share of the cores (cluster.share_of_cores), and at
most `parallel` tasks are in flight (the pattern Ray's docs give for bounding pending tasks, with ray.wait). A local Ray started
here is shut down when the grid ends, however it ends; if the driver itself is SIGKILLed, Ray's
processes share its fate and the trials die with their workers (trial.py)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from dsagent_cbr.bench.trial import TrialJob, execute
from dsagent_cbr.cluster import ray_session, share_of_cores


def run_jobs(
    jobs: list[TrialJob],
    parallel: int,
    address: str | None,
    on_record: Callable[[dict[str, Any]], None],
) -> dict[str, Any]:
    """Run every job, at most `parallel` at once; on_record gets each trial's record as it lands."""
    with ray_session(address) as ray:
        cluster_cpus = int(ray.cluster_resources().get("CPU", 0))
        cores = share_of_cores(ray, cluster_cpus, parallel)
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
                # a worker that died is ours, not the model's
                except ray.exceptions.RayError as exc:
                    record = {
                        "id": job.trial_id,
                        "task": job.task,
                        "agent": job.agent,
                        "kind": job.kind,
                        "trial": job.index,
                        "test_answers": job.test_answers,
                        "outcome": "infrastructure",
                        "reason": f"the Ray task failed: {str(exc).splitlines()[0]}",
                    }
                on_record(record)
    return {"cluster_cpus": cluster_cpus, "parallel": parallel, "trial_cores": cores}
