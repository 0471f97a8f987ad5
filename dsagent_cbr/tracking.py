"""Log a run folder to MLflow: its parameters, the metrics of every iteration, the report and the best script.

Contract, for the commands that call it (`--mlflow [URI]`):

`log_run_to_mlflow(run_dir, uri=None) -> str` logs one finished (or interrupted) run folder and returns the
MLflow run id. It reads the run's record (`summary.json`, agent/record.py: required) and `config.json`
(optional), and changes nothing in the folder.
- Where: `resolve_tracking_uri(uri)`: the URI given, else $MLFLOW_TRACKING_URI, else the SQLite store
  `./mlflow.db` in the current folder. A local SQLite store keeps artifacts beside it in `mlartifacts/`,
  so `mlflow ui` (or `mlflow server`) started in that folder shows everything. Any tracking URI MLflow
  takes works: http(s)://host:port of a tracking server, sqlite:///path, postgresql://..., databricks.
  MLflow 3.7+ refuses its old plain-folder store (`./mlruns`, `file:` URIs) unless MLFLOW_ALLOW_FILE_STORE
  is true, hence SQLite by default.
- What: experiment `cbr/<task>`; run named after the run folder, tagged `cbr.run_dir`; parameters task,
  model, metric, direction and config.json's values flattened (`develop.iterations`, `settings.store`, ...);
  metrics `valid_<metric>`, `test_<metric>` (when graded), `wall_time_s` and `failed` (1 for an iteration
  the report does not rank) with step = iteration, and
  `best_selection_<metric>`, `best_valid_<metric>`, `best_test_<metric>`, `best_iteration`, `failed_iterations`, `cost_usd`, `tokens`;
  artifacts report.md, report.html, metrics.png, importance.png, rows.json, summary.json, config.json,
  best_solution.py (those present). The MLflow run ends FINISHED, or KILLED for a run stopped as interrupted.
- Again: logging the same folder again (after `--resume`) continues its MLflow run: only iterations not yet
  logged add metrics, parameters keep their first value, artifacts are replaced.
- Errors: mlflow not installed, a tracking server that does not answer, or a store that refuses the run
  raise CbrError with one sentence; the run folder is never touched.

mlflow is imported here only when called (it is the optional extra `track`)."""

from __future__ import annotations

import hashlib
import json
import math
import os
import socket
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlparse
from urllib.request import getproxies, proxy_bypass

from dsagent_cbr.errors import CbrError

ARTIFACTS = ("report.md", "report.html", "metrics.png", "importance.png", "rows.json", "summary.json",
             "config.json", "best_solution.py")
MAX_PARAM_LENGTH = 500  # what every MLflow store accepts (newer ones take more)


def resolve_tracking_uri(uri: str | None) -> str:
    if uri:
        return uri
    return os.environ.get("MLFLOW_TRACKING_URI") or f"sqlite:///{Path.cwd() / 'mlflow.db'}"


def _read_json(path: Path, required: bool) -> Any:
    if not path.is_file():
        if required:
            raise CbrError(f"{path.parent} is not a finished run folder (no {path.name}).")
        return None
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise CbrError(f"{path} is not valid JSON ({exc}).") from exc


def _flatten(data: dict[str, Any], prefix: str = "") -> dict[str, str]:
    out: dict[str, str] = {}
    for key, value in data.items():
        if isinstance(value, dict):
            out.update(_flatten(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = str(value)[:MAX_PARAM_LENGTH]
    return out


def _metric_name(name: str) -> str:
    return "".join(c if c.isalnum() or c in "_-." else "_" for c in name) or "metric"


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and math.isfinite(value) else None


def _check_server(uri: str) -> None:
    """Fail in seconds, not after MLflow's minutes of retries, when a tracking server does not answer."""
    url = urlparse(uri)
    if url.scheme not in ("http", "https") or (getproxies().get(url.scheme) and not proxy_bypass(url.hostname or "")):
        return  # not a server, or one reached through a proxy that only MLflow's requests will use
    try:
        socket.create_connection((url.hostname, url.port or (443 if url.scheme == "https" else 80)), timeout=5).close()
    except OSError as exc:
        raise CbrError(f"The MLflow tracking server at {uri} does not answer ({exc.strerror or exc}).") from exc


def _artifact_root(uri: str) -> str | None:
    """For a local SQLite store, artifacts go beside the database (MLflow would use the current folder)."""
    if not uri.startswith("sqlite:///") or uri.endswith(":memory:"):
        return None
    return (Path(uri.removeprefix("sqlite:///")).resolve().parent / "mlartifacts").as_uri()


def log_run_to_mlflow(run_dir: Path, uri: str | None = None) -> str:
    run_dir = Path(run_dir).resolve()
    from dsagent_cbr.agent.record import load_record

    summary = load_record(run_dir).model_dump(mode="json")
    rows = summary["rows"]
    config = _read_json(run_dir / "config.json", required=False) or {}
    try:
        from mlflow.exceptions import MlflowException
        from mlflow.tracking import MlflowClient
    except ImportError as exc:
        raise CbrError('MLflow is not installed; install it with: pip install "dsagent-cbr[track]".') from exc
    uri = resolve_tracking_uri(uri)
    _check_server(uri)
    try:
        client = MlflowClient(tracking_uri=uri)
        return _log(client, uri, run_dir, summary, rows, config)
    except MlflowException as exc:
        message = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise CbrError(f"MLflow at {uri} did not take the run: {message.rstrip('.')}.") from exc


def _log(client: Any, uri: str, run_dir: Path, summary: dict[str, Any], rows: list[dict[str, Any]],
         config: dict[str, Any]) -> str:
    from mlflow.entities import Metric, Param, RunTag

    from dsagent_cbr.report.run_report import ranked

    name = f"cbr/{summary.get('task', run_dir.parent.name)}"
    experiment = client.get_experiment_by_name(name)
    root = _artifact_root(uri)
    experiment_id = experiment.experiment_id if experiment else client.create_experiment(
        name, artifact_location=root and f"{root}/{name.replace('/', '-')}")
    key = hashlib.sha256(str(run_dir).encode()).hexdigest()[:20]
    found = client.search_runs([experiment_id], filter_string=f"tags.`cbr.run_key` = '{key}'", max_results=1)
    run = found[0] if found else client.create_run(experiment_id, run_name=run_dir.name,
                                                     tags={"cbr.run_key": key, "cbr.run_dir": str(run_dir)})
    run_id = run.info.run_id

    params = _flatten({k: summary.get(k) for k in ("task", "model", "metric", "direction")} | config)
    params = {k: v for k, v in params.items() if k not in run.data.params}
    metric = _metric_name(str(summary.get("metric", "metric")))
    names = (f"selection_{metric}", f"valid_{metric}", f"test_{metric}", "wall_time_s", "failed")
    logged = {k: {m.step for m in client.get_metric_history(run_id, k)} for k in names}
    now = int(time.time() * 1000)
    metrics = []
    for r in rows:  # scores of failed iterations are not results: they are logged as failed, as the report shows them
        values = (r.get("selection") if ranked(r) else None, r.get("valid") if ranked(r) else None,
                  r.get("test") if ranked(r) else None, r.get("wall_time"), 0.0 if ranked(r) else 1.0)
        metrics += [Metric(k, _number(v), now, int(r["iteration"])) for k, v in zip(names, values, strict=True)
                    if _number(v) is not None and int(r["iteration"]) not in logged[k]]
    totals = {f"best_selection_{metric}": summary.get("best_selection"), f"best_valid_{metric}": summary.get("best_valid"),
              f"best_test_{metric}": summary.get("best_test"),
              "best_iteration": summary.get("best_iteration"), "cost_usd": summary.get("cost_usd"),
              "tokens": summary.get("tokens"),
              "failed_iterations": sum(not ranked(r) for r in rows)}
    metrics += [Metric(k, _number(v), now, 0) for k, v in totals.items() if _number(v) is not None]
    tags = [RunTag("cbr.stopped", str(summary.get("stopped", ""))), RunTag("cbr.model", str(summary.get("model", "")))]
    param_list = [Param(k, v) for k, v in params.items()]
    for start in range(0, max(len(metrics), len(param_list), 1), 100):  # MLflow's batch limits: 100 params
        client.log_batch(run_id, metrics=metrics[start:start + 100], params=param_list[start:start + 100],
                         tags=tags if start == 0 else [])
    for artifact in ARTIFACTS:
        if (run_dir / artifact).is_file():
            client.log_artifact(run_id, str(run_dir / artifact))
    client.set_terminated(run_id, "KILLED" if summary.get("outcome") == "interrupted" else "FINISHED")
    return run_id
