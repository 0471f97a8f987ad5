"""MLflow tracking against real local MLflow stores: a live run's observer driven with run records, a run
folder logged after the fact, and what MLflow then holds, read back with MlflowClient."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from conftest import prepared
from mlflow.tracking import MlflowClient
from support.records import as_record

from dsagent_cbr.agent.record import Operator, Row, RunRecord, Status
from dsagent_cbr.errors import CbrError, Outcome
from dsagent_cbr.llm.local_server import free_port
from dsagent_cbr.report.run_report import write_report
from dsagent_cbr.tracking import live_tracking, log_run_to_mlflow, resolve_tracking_uri
from dsagent_cbr.tracking.store import LIVE_HTTP


@pytest.fixture(autouse=True)
def http_limits(monkeypatch):
    """What a live run sets in os.environ for MLflow's requests, set here so that the test undoes it."""
    for name, value in LIVE_HTTP.items():
        monkeypatch.setenv(name, value)


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> str:
    """One SQLite store for the module: creating its tables takes seconds."""
    return f"sqlite:///{tmp_path_factory.mktemp('mlflow') / 'mlflow.db'}"


SUMMARY = {"task": "concrete-strength", "model": "none", "metric": "rmse", "direction": "minimize",
           "best_iteration": 1, "best_valid": 6.5, "best_selection": 6.7, "best_score": 6.7, "best_test": 6.1,
           "stopped": "completed", "outcome": "ok", "cost_usd": 0.0, "tokens": 0}
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


@pytest.mark.integration
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
def test_real_develop_run_logged_live_and_read_back(tmp_path, store):
    """A real run (no model, 2 iterations of the case-based model search on concrete-strength), logged live
    by its observer, then its folder logged again."""
    from dsagent_cbr.agent.develop import DevelopConfig
    from dsagent_cbr.bank import open_bank
    from dsagent_cbr.config import load_settings
    from dsagent_cbr.report.observer import ReportWriter
    from dsagent_cbr.search.loop import develop_search

    settings = load_settings(home=tmp_path / "home", store="faiss")
    run_dir = tmp_path / "runs" / "real-run"
    run_dir.mkdir(parents=True)
    tracking = live_tracking(run_dir, store, "concrete-strength")
    run_id = tracking[0].tracker.run_id
    summary = develop_search(prepared("concrete-strength"), DevelopConfig(iterations=2), run_dir,
                             open_bank(settings), observers=(ReportWriter(run_dir), *tracking))
    rows = json.loads((run_dir / "rows.json").read_text())
    scored = [(r["iteration"], r["valid"]) for r in rows if r["status"] == "ok" and r["valid"] is not None]
    assert scored, "the seed bank's nearest regression solution runs on concrete-strength"
    assert "LightGBM" in (run_dir / "report.html").read_text()  # the adapted solutions are LightGBM ones

    client = MlflowClient(tracking_uri=store)
    assert client.get_run(run_id).info.status == "FINISHED"
    assert _history(client, run_id, "valid_rmse") == sorted(scored)
    assert client.get_run(run_id).data.metrics["best_test_rmse"] == pytest.approx(summary.best_test)
    assert {"report.html", "best_solution.py", "tree.png", "submission.csv"} <= \
        {a.path for a in client.list_artifacts(run_id)}
    children = _children(client, run_id)
    assert sorted(children) == [r["iteration"] for r in rows]
    assert children[1].data.params["operator"] == "draft" and children[1].data.params["model_family"] == "LightGBM"
    assert log_run_to_mlflow(run_dir, store) == run_id and sorted(_children(client, run_id)) == sorted(children)

SCRIPTS = {1: "from sklearn.linear_model import Ridge\nmodel = Ridge(alpha=2.0)\n",
           2: "import lightgbm as lgb\nmodel = lgb.LGBMRegressor(n_estimators=500, learning_rate=0.05)\n",
           3: "import lightgbm as lgb\nmodel = lgb.LGBMRegressor(n_estimators=800, learning_rate=0.03)\n"}


def _live(root: Path, test_answers: bool = True) -> tuple[Path, RunRecord]:
    """A search's run folder as it starts (config.json, the scripts its nodes will run) and its record."""
    for t, code in SCRIPTS.items():
        (root / f"step-{t:02d}").mkdir(parents=True)
        (root / f"step-{t:02d}" / "script.py").write_text(code)
    (root / "config.json").write_text(json.dumps({"develop": {"iterations": 3}, "settings": {"store": "faiss"}}))
    return root, RunRecord(kind="search", task="concrete-strength", model="none", metric="rmse", direction="minimize",
                           run_dir=str(root), test_answers=test_answers)


def _graded(iteration: int, score: float, **fields) -> Row:
    return Row(iteration=iteration, status=Status.OK, valid=score - 0.2, selection=score, score=score,
               test=score - 0.6, wall_time=2.0, script=f"step-{iteration:02d}/script.py", **fields)


def _best(record: RunRecord, row: Row) -> None:
    record.best_iteration, record.best_selection, record.best_score = row.iteration, row.selection, row.score
    record.best_valid, record.best_test = row.valid, row.test
    record.outcome = Outcome.OK


def _children(client: MlflowClient, parent_id: str) -> dict[int, object]:
    runs = client.search_runs([client.get_run(parent_id).info.experiment_id],
                              filter_string=f"tags.`mlflow.parentRunId` = '{parent_id}'")
    found = [int(r.data.tags["cbr.iteration"]) for r in runs]
    assert len(found) == len(set(found)), f"a row logged twice: {sorted(found)}"
    return {int(r.data.tags["cbr.iteration"]): r for r in runs}


@pytest.mark.integration
def test_live_run_a_parent_running_and_a_child_run_per_row(tmp_path, capfd):
    uri = f"sqlite:///{tmp_path / 'live.db'}"  # a new store: its tables are made without a line in cbr's output
    run_dir, record = _live(tmp_path / "runs" / "run-live")
    (observer,) = live_tracking(run_dir, uri, "concrete-strength")
    client = MlflowClient(tracking_uri=uri)
    parent_id = observer.tracker.run_id
    assert client.get_run(parent_id).info.status == "RUNNING"  # open before the run's first step
    assert client.get_run(parent_id).data.params["develop.iterations"] == "3"

    record.rows.append(_graded(1, 6.7, operator=Operator.DRAFT, case="general"))
    _best(record, record.rows[0])
    observer.saved(record, final=False)
    record.rows += [Row(iteration=2, operator=Operator.TUNE, parent=1, status=Status.ERROR, error="ValueError: bad",
                        wall_time=1.25, script="step-02/script.py"),
                    Row(iteration=3, operator=Operator.TRANSPLANT, case="diamonds-price")]  # 3 still runs
    observer.saved(record, final=False)
    assert sorted(_children(client, parent_id)) == [1, 2] and client.get_run(parent_id).info.status == "RUNNING"

    record.rows[2] = _graded(3, 5.1, operator=Operator.TRANSPLANT, case="diamonds-price")
    _best(record, record.rows[2])
    for name in ("submission.csv", "report.md", "tree.png", "best_solution.py"):
        (run_dir / name).write_text("id,strength\n1,30.0\n" if name == "submission.csv" else name)
    record.submission, record.final = str(run_dir / "submission.csv"), True
    record.save(run_dir)
    observer.saved(record, final=True)

    parent = client.get_run(parent_id)
    assert parent.info.status == "FINISHED" and parent.data.params["metric"] == "rmse"
    assert _history(client, parent_id, "best_selection_rmse") == [(1, 6.7), (3, 5.1)]  # as the best improved
    assert _history(client, parent_id, "failed") == [(1, 0.0), (2, 1.0), (3, 0.0)]
    assert {"submission.csv", "report.md", "tree.png", "best_solution.py", "summary.json", "config.json"} <= \
        {a.path for a in client.list_artifacts(parent_id)}
    children = _children(client, parent_id)
    ridge, tune, transplant = children[1], children[2], children[3]
    assert ridge.info.status == "FINISHED" and ridge.info.run_name == "01 draft: Ridge"
    assert ridge.data.params["model_family"] == "Ridge" and ridge.data.params["model.alpha"] == "2.0"
    assert ridge.data.params["operator"] == "draft" and "parent" not in ridge.data.params
    assert ridge.data.metrics == {"selection_rmse": 6.7, "valid_rmse": 6.5, "test_rmse": pytest.approx(6.1),
                                  "wall_time_s": 2.0}
    assert tune.info.status == "FAILED" and tune.data.tags["cbr.error"] == "ValueError: bad"
    assert (tune.data.params["parent"], tune.data.params["model_family"], tune.data.params["model.n_estimators"]) == \
        ("1", "LightGBM", "500")
    assert tune.data.metrics == {"wall_time_s": 1.25}  # a broken row's scores are not results
    assert transplant.data.params["case"] == "diamonds-price" and transplant.data.params["model.n_estimators"] == "800"

    # the folder logged again (as after a resume): the same parent, no row twice, nothing logged again
    assert log_run_to_mlflow(run_dir, uri) == parent_id
    assert sorted(_children(client, parent_id)) == [1, 2, 3]
    assert _history(client, parent_id, "best_selection_rmse") == [(1, 6.7), (3, 5.1)]
    err = capfd.readouterr().err
    assert err == f"mlflow:          run {parent_id} in {uri}\n"  # no INFO line of MLflow's, SQLAlchemy's or alembic's


def test_interrupted_live_run_ends_killed_and_no_test_score_without_answers(tmp_path, store):
    run_dir, record = _live(tmp_path / "run-k", test_answers=False)
    (observer,) = live_tracking(run_dir, store, "concrete-strength")
    parent_id = observer.tracker.run_id
    record.rows.append(_graded(1, 6.7, operator=Operator.DRAFT))
    _best(record, record.rows[0])
    observer.saved(record, final=False)
    record.outcome, record.stopped = Outcome.INTERRUPTED, "interrupted"
    observer.saved(record, final=True)
    client = MlflowClient(tracking_uri=store)
    parent = client.get_run(parent_id)
    assert parent.info.status == "KILLED" and parent.data.tags["cbr.outcome"] == "interrupted"
    assert "best_test_rmse" not in parent.data.metrics and "test_rmse" not in parent.data.metrics
    assert "test_rmse" not in _children(client, parent_id)[1].data.metrics


@pytest.mark.integration
def test_a_tracking_server_that_does_not_answer_is_one_warning_and_the_run_goes_on(tmp_path, store, capfd):
    run_dir, record = _live(tmp_path / "run-d")
    record.rows.append(_graded(1, 6.7, operator=Operator.DRAFT))
    started = time.monotonic()
    (observer,) = live_tracking(run_dir, "http://127.0.0.1:9", "concrete-strength")  # nothing listens on 9
    for final in (False, False, True):
        observer.saved(record, final=final)
    assert capfd.readouterr().err == ("mlflow: no longer logging this run to http://127.0.0.1:9 (The MLflow tracking "
                                      "server at http://127.0.0.1:9 does not answer (Connection refused)); "
                                      "the run goes on\n")

    # a server that goes down mid-run: the parent opened, then every request refused
    run_dir, record = _live(tmp_path / "run-e")
    (observer,) = live_tracking(run_dir, store, "concrete-strength")
    record.rows.append(_graded(1, 6.7, operator=Operator.DRAFT))
    observer.tracker.client = MlflowClient(tracking_uri="http://127.0.0.1:9")
    for final in (False, False, True):
        observer.saved(record, final=final)
    err = capfd.readouterr().err.splitlines()
    assert len(err) == 2 and err[0].startswith("mlflow:          run ")
    assert err[1].startswith(f"mlflow: no longer logging this run to {store} (") and \
        err[1].endswith("; the run goes on")
    assert time.monotonic() - started < 30  # MLflow's retries are bounded for a live run
