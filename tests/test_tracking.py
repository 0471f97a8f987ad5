"""MLflow tracking against real local MLflow stores: log a run folder, read the metrics back with MlflowClient."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from conftest import prepared
from mlflow.tracking import MlflowClient
from support.records import as_record

from dsagent_cbr.errors import CbrError
from dsagent_cbr.llm.local_server import free_port
from dsagent_cbr.report.run_report import write_report
from dsagent_cbr.tracking import log_run_to_mlflow, resolve_tracking_uri


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> str:
    """One SQLite store for the module: creating its tables takes seconds."""
    return f"sqlite:///{tmp_path_factory.mktemp('mlflow') / 'mlflow.db'}"


SUMMARY = {"task": "concrete-strength", "model": "none", "metric": "rmse", "direction": "minimize",
           "best_iteration": 1, "best_valid": 6.5, "best_selection": 6.7, "best_score": 6.7, "best_test": 6.1,
           "stopped": "completed", "cost_usd": 0.0, "tokens": 0}
ROWS = [{"iteration": 1, "case": "diamonds-price", "status": "ok", "valid": 6.5, "selection": 6.7, "score": 6.7,
         "test": 6.1, "wall_time": 3.5},
        {"iteration": 2, "case": "pbc-status", "status": "error", "error": "ValueError: bad", "wall_time": 1.25}]


def _folder(root: Path, rows: list[dict], summary: dict) -> Path:
    """A run folder as develop leaves it: step scripts, config, summary, best script and the report."""
    for r in rows:
        step = root / f"step-{r['iteration']:02d}"
        step.mkdir(parents=True, exist_ok=True)
        (step / "script.py").write_text("from sklearn.linear_model import Ridge\nmodel = Ridge(alpha=2.0)\n")
    (root / "best_solution.py").write_text((root / "step-01" / "script.py").read_text())
    (root / "config.json").write_text(json.dumps({"task_dir": "tasks/concrete-strength",
                                                  "develop": {"iterations": 3, "k": 5},
                                                  "settings": {"store": "faiss", "chroma_url": None}}))
    record = as_record(rows, summary, run_dir=root)
    record.save(root)
    write_report(root, record)
    return root


def _history(client: MlflowClient, run_id: str, key: str) -> list[tuple[int, float]]:
    return sorted((m.step, m.value) for m in client.get_metric_history(run_id, key))


def test_run_folder_round_trip_and_resume(tmp_path, store):
    run_dir = _folder(tmp_path / "run-a", ROWS, SUMMARY)
    run_id = log_run_to_mlflow(run_dir, store)
    client = MlflowClient(tracking_uri=store)
    run = client.get_run(run_id)
    assert run.info.status == "FINISHED" and run.info.run_name == "run-a"
    assert client.get_experiment(run.info.experiment_id).name == "cbr/concrete-strength"
    params = run.data.params
    assert (params["task"], params["model"], params["metric"], params["direction"]) == \
        ("concrete-strength", "none", "rmse", "minimize")
    assert params["develop.iterations"] == "3" and params["settings.store"] == "faiss"
    assert _history(client, run_id, "valid_rmse") == [(1, 6.5)]  # the failed iteration has no score
    assert _history(client, run_id, "selection_rmse") == [(1, 6.7)]
    assert _history(client, run_id, "test_rmse") == [(1, 6.1)]
    assert _history(client, run_id, "wall_time_s") == [(1, 3.5), (2, 1.25)]
    assert _history(client, run_id, "failed") == [(1, 0.0), (2, 1.0)]
    assert run.data.metrics["best_valid_rmse"] == 6.5 and run.data.metrics["failed_iterations"] == 1
    assert run.data.metrics["best_selection_rmse"] == 6.7
    artifacts = {a.path for a in client.list_artifacts(run_id)}
    assert {"report.md", "report.html", "metrics.png", "rows.json", "best_solution.py", "summary.json"} <= artifacts
    # artifacts sit beside the database, not in the current folder
    assert Path(store.removeprefix("sqlite:///")).parent.joinpath("mlartifacts").is_dir()

    # a resumed run adds iteration 3: the same MLflow run, no iteration logged twice
    rows = [*ROWS, {"iteration": 3, "status": "ok", "valid": 5.0, "selection": 5.1, "score": 5.1, "test": 5.2,
                    "wall_time": 2.0}]
    summary = {**SUMMARY, "best_iteration": 3, "best_valid": 5.0, "best_test": 5.2}
    _folder(run_dir, rows, summary)
    assert log_run_to_mlflow(run_dir, store) == run_id
    assert _history(client, run_id, "valid_rmse") == [(1, 6.5), (3, 5.0)]
    assert client.get_run(run_id).data.metrics["best_valid_rmse"] == 5.0


def test_interrupted_run_ends_killed_and_any_store_by_uri(tmp_path, store, monkeypatch):
    run_dir = _folder(tmp_path / "run-b", ROWS[:1], {**SUMMARY, "stopped": "interrupted", "outcome": "interrupted"})
    assert MlflowClient(tracking_uri=store).get_run(log_run_to_mlflow(run_dir, store)).info.status == "KILLED"
    # MLflow's plain-folder store, for those who opt in to it
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    uri = (tmp_path / "mlruns").as_uri()
    run_id = log_run_to_mlflow(run_dir, uri)
    assert _history(MlflowClient(tracking_uri=uri), run_id, "valid_rmse") == [(1, 6.5)]


def test_default_uri_and_errors_in_one_sentence(tmp_path, monkeypatch):
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.chdir(tmp_path)
    assert resolve_tracking_uri(None) == f"sqlite:///{tmp_path / 'mlflow.db'}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://tracking.example:5000")
    assert resolve_tracking_uri(None) == "http://tracking.example:5000"
    assert resolve_tracking_uri("sqlite:///x.db") == "sqlite:///x.db"

    with pytest.raises(CbrError, match="not a finished run folder"):
        log_run_to_mlflow(tmp_path, "sqlite:///unused.db")
    run_dir = _folder(tmp_path / "run-c", ROWS, SUMMARY)
    started = time.monotonic()
    with pytest.raises(CbrError, match="does not answer"):
        log_run_to_mlflow(run_dir, f"http://127.0.0.1:{free_port()}")
    assert time.monotonic() - started < 10  # not MLflow's minutes of retries


@pytest.mark.slow
def test_real_develop_run_logged_and_read_back(tmp_path, store):
    """A real run (no model, 2 iterations of the case-based model search on concrete-strength)."""
    from dsagent_cbr.agent.develop import DevelopConfig
    from dsagent_cbr.bank import open_bank
    from dsagent_cbr.config import load_settings
    from dsagent_cbr.report.observer import ReportWriter
    from dsagent_cbr.search.loop import develop_search

    settings = load_settings(home=tmp_path / "home", store="faiss")
    run_dir = tmp_path / "runs" / "real-run"
    run_dir.mkdir(parents=True)
    summary = develop_search(prepared("concrete-strength"), DevelopConfig(iterations=2), run_dir,
                             open_bank(settings), observers=(ReportWriter(run_dir),))
    rows = json.loads((run_dir / "rows.json").read_text())
    scored = [(r["iteration"], r["valid"]) for r in rows if r["status"] == "ok" and r["valid"] is not None]
    assert scored, "the seed bank's nearest regression solution runs on concrete-strength"
    assert "LightGBM" in (run_dir / "report.html").read_text()  # the adapted solutions are LightGBM ones

    run_id = log_run_to_mlflow(run_dir, store)
    client = MlflowClient(tracking_uri=store)
    assert _history(client, run_id, "valid_rmse") == sorted(scored)
    assert client.get_run(run_id).data.metrics["best_test_rmse"] == pytest.approx(summary.best_test)
    assert {"report.html", "best_solution.py"} <= {a.path for a in client.list_artifacts(run_id)}
