"""One cbr run as MLflow runs: a parent run for the run, a child run for each of its finished rows.

`Tracker.log(record, run_dir, final=...)` logs what is new in a record since the tracker last logged it, or
since the parent was last logged by anyone (a resumed run, a folder logged again): a live run calls it at
each save of its record, a folder logged after the fact once. What is there already is read back from
MLflow when the tracker opens: children by their tag `cbr.iteration`, the parent's per-iteration metrics by
the steps of its `failed` metric, its parameters and the latest value of each metric."""

from __future__ import annotations

import hashlib
import json
import math
import re
import time
from pathlib import Path
from typing import Any

from dsagent_cbr.agent.record import Row, RunRecord, Status
from dsagent_cbr.errors import CbrError, Outcome
from dsagent_cbr.tracking.store import artifact_root

ARTIFACTS = (
    "report.md",
    "report.html",
    "tree.png",
    "metrics.png",
    "importance.png",
    "best_solution.py",
    "summary.json",
    "config.json",
    "rows.json",
)
MAX_PARAM_LENGTH = 500  # what every MLflow store accepts (newer ones take more)
BATCH = 100  # MLflow's limit of parameters (and tags) in one log_batch
PARENT = "mlflow.parentRunId"
ITERATION = "cbr.iteration"
RUN_KEY = "cbr.run_key"
# how the parent run ends: a budget spent is a clean stop; no graded solution, or a failure of ours, failed
END_STATUS = {
    Outcome.OK: "FINISHED",
    Outcome.BUDGET: "FINISHED",
    Outcome.INTERRUPTED: "KILLED",
    Outcome.AGENT_FAILURE: "FAILED",
    Outcome.INFRASTRUCTURE: "FAILED",
}


def metric_name(name: str) -> str:
    return "".join(c if c.isalnum() or c in "_-." else "_" for c in name) or "metric"


def number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and math.isfinite(value) else None


def ranked(row: Row) -> bool:
    """The row is a result: scores of failed rows are not, as the report shows them."""
    return row.status == Status.OK and number(row.score) is not None


def flatten(data: dict[str, Any], prefix: str = "") -> dict[str, str]:
    out: dict[str, str] = {}
    for key, value in data.items():
        if isinstance(value, dict):
            out.update(flatten(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = str(value)
    return out


def _read_config(run_dir: Path) -> dict[str, Any]:
    path = run_dir / "config.json"
    if not path.is_file():
        return {}
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise CbrError(f"{path} is not valid JSON ({exc}).") from exc


def _now() -> int:
    return int(time.time() * 1000)


def log_batch(
    client: Any,
    run_id: str,
    metrics: list[Any],
    params: dict[str, Any] | None = None,
    tags: dict[str, Any] | None = None,
) -> None:
    from mlflow.entities import Param, RunTag

    param_list = [Param(k, str(v)[:MAX_PARAM_LENGTH]) for k, v in (params or {}).items()]
    tag_list = [RunTag(k, str(v)) for k, v in (tags or {}).items()]
    for start in range(0, max(len(metrics), len(param_list), len(tag_list)), BATCH):
        client.log_batch(
            run_id,
            metrics=metrics[start : start + BATCH],
            params=param_list[start : start + BATCH],
            tags=tag_list[start : start + BATCH],
        )


def described(line: str) -> dict[str, str]:
    """summarise_script's line as parameters, for MLflow's compare view: the model family, each of its key
    parameters, the wrappers and the feature steps (`Ridge (alpha=2.0); features: scaled`)."""
    if line.startswith("Blend of "):
        return {"model_family": "Blend", "blend": line.partition(": ")[2]}
    head, _, features = line.partition("; features")
    family, params, via = re.fullmatch(r"(.*?)(?: \(([^()]*)\))?(?: via (.*))?", head).groups()  # type: ignore[union-attr]
    out = {"model_family": family, "model_via": via, "features": features.lstrip(": ") or None}
    # "…": the line had no room
    for pair in re.split(r", (?=\w+=)", (params or "").removesuffix(", …")):
        key, equals, value = pair.partition("=")
        if equals and re.fullmatch(r"\w+", key):
            out[f"model.{key}"] = value.strip("'\"")  # a string literal's value, as it is compared
    return {k: v for k, v in out.items() if v}


def row_params(row: Row, line: str | None) -> dict[str, Any]:
    """What a child run compares by: how the node was made, from which, and the model its script fits."""
    out: dict[str, Any] = {
        "iteration": row.iteration,
        "operator": row.operator,
        "parent": row.parent,
        "case": row.case,
        "candidate": row.candidate,
        "script": line,
    }
    out |= described(line) if line else {}
    out |= {f"tuned.{k}": v for k, v in (row.tuned or {}).items()}
    if row.members:
        out["members"] = ", ".join(f"{i}: {w:.3g}" for i, w in row.members.items())
    return {k: v for k, v in out.items() if v not in (None, "")}


def row_scores(record: RunRecord, row: Row, metric: str) -> dict[str, float | None]:
    """A row's scores as the record has them: none for a failed row, a test score only with test answers."""
    good = ranked(row)
    return {
        f"selection_{metric}": row.selection if good else None,
        f"valid_{metric}": row.valid if good else None,
        f"test_{metric}": row.test if good and record.test_answers else None,
        "wall_time_s": row.wall_time,
    }


def script_line(run_dir: Path, row: Row) -> str | None:
    from dsagent_cbr.agent.script_summary import summarise_script

    path = run_dir / row.script if row.script else None
    return (
        summarise_script(path.read_text(encoding="utf-8", errors="replace"))
        if path and path.is_file()
        else None
    )


class Tracker:
    """A cbr run's parent run in MLflow, and what of its record is logged there already."""

    def __init__(self, client: Any, run: Any, experiment_id: str) -> None:
        self.client = client
        self.experiment_id = experiment_id
        self.run_id = run.info.run_id
        # a parameter keeps its first value: MLflow refuses a change
        self.params = set(run.data.params)
        # a total logged again only when it changes
        self.last: dict[str, float] = dict(run.data.metrics)
        # rows on the parent
        self.steps = {m.step for m in client.get_metric_history(self.run_id, "failed")}
        self.children = self._children()

    @classmethod
    def open(cls, client: Any, uri: str, run_dir: Path, task: str, *, live: bool) -> Tracker:
        """The run folder's parent run in experiment `cbr/<task>`: found by the folder's key (a resumed run, a
        folder logged again) or created, with config.json's values as parameters. `live`: the run goes on
        now, so its parent says RUNNING until the record's last save."""
        name = f"cbr/{task}"
        experiment = client.get_experiment_by_name(name)
        root = artifact_root(uri)
        experiment_id = (
            experiment.experiment_id
            if experiment
            else client.create_experiment(
                name, artifact_location=root and f"{root}/{name.replace('/', '-')}"
            )
        )
        key = hashlib.sha256(str(run_dir).encode()).hexdigest()[:20]
        found = client.search_runs(
            [experiment_id], filter_string=f"tags.`{RUN_KEY}` = '{key}'", max_results=1
        )
        if found:
            run = found[0]
            if live and run.info.status != "RUNNING":
                client.update_run(run.info.run_id, status="RUNNING")
        else:
            run = client.create_run(
                experiment_id,
                run_name=run_dir.name,
                tags={RUN_KEY: key, "cbr.run_dir": str(run_dir)},
            )
        tracker = cls(client, run, experiment_id)
        tracker.log_params(flatten(_read_config(run_dir)))
        return tracker

    def _children(self) -> set[int]:
        """The iterations logged as child runs already. A child cut off while it was being logged (still
        RUNNING, its metrics perhaps missing) is deleted, to be logged again whole."""
        found: set[int] = set()
        token = None
        while True:
            page = self.client.search_runs(
                [self.experiment_id],
                filter_string=f"tags.`{PARENT}` = '{self.run_id}'",
                max_results=1000,
                page_token=token,
            )
            for child in page:
                if child.info.status == "RUNNING" or ITERATION not in child.data.tags:
                    self.client.delete_run(child.info.run_id)
                else:
                    found.add(int(child.data.tags[ITERATION]))
            token = page.token
            if not token:
                return found

    def log_params(self, params: dict[str, Any]) -> None:
        new = {k: v for k, v in params.items() if k not in self.params}
        if new:
            log_batch(self.client, self.run_id, [], new)
            self.params |= new.keys()

    def log(self, record: RunRecord, run_dir: Path, *, final: bool) -> None:
        """Log what is new in `record`: its finished rows not yet logged (a child run each, and their metrics
        on the parent at step = iteration), the totals that changed; on `final`, the artifacts and the
        parent's end."""
        metric = metric_name(record.metric)
        done = [r for r in record.rows if r.status != Status.NOT_RUN]
        for row in done:
            if row.iteration not in self.children:
                self._child(record, run_dir, row, metric)
                self.children.add(row.iteration)
        self.log_params(
            {
                "task": record.task,
                "kind": record.kind,
                "model": record.model,
                "metric": record.metric,
                "direction": record.direction,
            }
        )
        metrics = self._row_metrics(record, done, metric) + self._totals(
            record, done, metric, final
        )
        log_batch(self.client, self.run_id, metrics)
        if final:
            self._end(record, run_dir)

    def _child(self, record: RunRecord, run_dir: Path, row: Row, metric: str) -> None:
        from mlflow.entities import Metric

        line = script_line(run_dir, row)
        params = row_params(row, line)
        label = row.operator or row.candidate or record.kind
        end = _now()
        tags = {PARENT: self.run_id, ITERATION: str(row.iteration), "cbr.status": str(row.status)}
        tags |= {"cbr.error": row.error} if row.error else {}
        tags |= {"mlflow.note.content": row.step} if row.step else {}
        child = self.client.create_run(
            self.experiment_id,
            start_time=end - int((row.wall_time or 0) * 1000),
            run_name=f"{row.iteration:02d} {label}: {params.get('model_family', '-')}",
            tags=tags,
        )
        metrics = [
            Metric(k, v, end, row.iteration)
            for k, value in row_scores(record, row, metric).items()
            if (v := number(value)) is not None
        ]
        log_batch(self.client, child.info.run_id, metrics, params)
        self.client.set_terminated(
            child.info.run_id, "FINISHED" if row.status == Status.OK else "FAILED", end_time=end
        )

    def _row_metrics(self, record: RunRecord, done: list[Row], metric: str) -> list[Any]:
        """The rows' scores on the parent too, at step = iteration: its charts show the run's progress."""
        from mlflow.entities import Metric

        now, out = _now(), []
        for row in (r for r in done if r.iteration not in self.steps):
            values = row_scores(record, row, metric) | {"failed": 0.0 if ranked(row) else 1.0}
            out += [
                Metric(k, v, now, row.iteration)
                for k, value in values.items()
                if (v := number(value)) is not None
            ]
            self.steps.add(row.iteration)
        return out

    def _totals(self, record: RunRecord, done: list[Row], metric: str, final: bool) -> list[Any]:
        """The run's totals, logged as they change at step = the last finished iteration (which only grows,
        so MLflow's latest value is the run's latest): the best improving shows as a curve."""
        from mlflow.entities import Metric

        refit = (
            record.refit.test_after_refit
            if final and record.refit and record.refit.status == "ok"
            else None
        )
        totals = {
            f"best_selection_{metric}": record.best_selection,
            f"best_valid_{metric}": record.best_valid,
            f"best_test_{metric}": record.best_test if record.test_answers else None,
            f"refit_test_{metric}": refit if record.test_answers else None,
            "best_iteration": record.best_iteration,
            "failed_iterations": sum(not ranked(r) for r in done),
            "cost_usd": record.cost_usd,
            "tokens": record.tokens,
        }
        step = max((r.iteration for r in done), default=0)
        now = _now()
        out = []
        for key, value in totals.items():
            if (v := number(value)) is not None and self.last.get(key) != v:
                out.append(Metric(key, v, now, step))
                self.last[key] = v
        return out

    def _end(self, record: RunRecord, run_dir: Path) -> None:
        """The run's files as artifacts (replaced when logged again), its end in words, and its status."""
        names = [*ARTIFACTS, *([Path(record.submission).name] if record.submission else [])]
        for name in names:
            if (run_dir / name).is_file():
                self.client.log_artifact(self.run_id, str(run_dir / name))
        log_batch(
            self.client,
            self.run_id,
            [],
            tags={"cbr.stopped": record.stopped, "cbr.outcome": record.outcome},
        )
        self.client.set_terminated(self.run_id, END_STATUS.get(Outcome(record.outcome), "FAILED"))
