"""cbr bench's AutoML anchors, FLAML's and AutoGluon's: their scripts keep the task's starter skeleton, follow
each kind of task, give what each metric grades, and are tabled alike; AutoGluon's is graded for real in
the sandbox when it is installed."""

from __future__ import annotations

import ast
import json
import sys
from pathlib import Path

import pytest
from support.bench_data import REPO, TASKS, recipes, trial_record

from dsagent_cbr.bench import anchors, autogluon_script, grid, report, trial
from dsagent_cbr.bench.flaml_script import flaml_script, splice, unsupported
from dsagent_cbr.bench.spec import GridSpec, parse_agents
from dsagent_cbr.errors import CbrError
from dsagent_cbr.tasks.loader import load_task


def test_flaml_script_keeps_the_starter_skeleton():
    supported = [t for t in TASKS if unsupported(t) is None]
    assert {t.modality for t in supported} == {"tabular", "text"}
    assert {t.name for t in TASKS if t.modality in ("forecasting", "time-series-classification")}.isdisjoint(
        {t.name for t in supported})
    for task in supported:
        script = flaml_script(task, 60, 3)
        tree = ast.parse(script)
        names = [n.name for n in tree.body if isinstance(n, ast.FunctionDef)]
        assert names.count("train_model") == 1 and names.count("predict") == 1, task.name
        starter = task.starter.read_text()
        main = starter[starter.index('if __name__ == "__main__":'):]
        assert script.endswith(main if main.endswith("\n") else main + "\n"), task.name
        assert "FLAML_SEED = 3" in script and "rng.uniform" not in script and "rng.choice" not in script
    with pytest.raises(ValueError):
        splice("def predict(model, X):\n    return X\n", "pass\n")


def test_flaml_gets_label_codes_and_predict_gives_the_labels_back():
    """FLAML passes string labels on to XGBoost unchanged with sparse (TF-IDF) input, and XGBoost 3
    refuses them: the template hands FLAML codes 0..k-1 and maps them back."""
    import numpy as np
    import pandas as pd

    task = load_task(REPO / "tasks" / "trump-tweets-device")
    script = flaml_script(task, 60, 0)
    namespace: dict = {}
    exec(compile(script[: script.index('if __name__ == "__main__":')], "flaml", "exec"), namespace)
    labels = np.array(["android", "iphone"])
    assert namespace["_target"](pd.Series(["iphone", "android", "iphone"]), labels).tolist() == [1, 0, 1]
    assert namespace["FLAML_OUTPUT"] == "classes" and namespace["FLAML_TEXT"] is True


def test_the_default_lightgbm_is_flaml_s_table_without_its_search():
    """benchmarks/suite.py's default LightGBM: the FLAML anchor's table and labels, LightGBM as it comes in
    place of the search, learning every row it is given."""
    import numpy as np
    import pandas as pd

    from dsagent_cbr.bench.flaml_script import lightgbm_script

    def fitted(name: str, X, y):
        script = lightgbm_script(load_task(REPO / "tasks" / name))
        assert "FLAML_SEARCH = False" in script
        namespace: dict = {}
        exec(compile(script[: script.index('if __name__ == "__main__":')], "lightgbm", "exec"), namespace)
        model = namespace["train_model"](X, y, X[:5], y[:5])
        return model["automl"][0], namespace["predict"](model, X)

    rng = np.random.default_rng(0)
    X = pd.DataFrame({"nights": rng.integers(1, 9, 200), "meal": rng.choice(["BB", "HB"], 200)})
    y = pd.Series(X["nights"] * 10.0 + (X["meal"] == "HB") * 5)
    learner, values = fitted("hotel-rates", X, y)
    assert type(learner).__name__ == "LGBMRegressor" and learner.n_estimators == 100  # its default
    assert np.abs(values - y).mean() < 2
    texts = pd.Series(rng.choice(["rally tonight great crowd", "fake news media again"], 200))
    labels = pd.Series(np.where(texts.str.startswith("rally"), "android", "iphone"))
    learner, proba = fitted("trump-tweets-device", texts, labels)
    assert type(learner).__name__ == "LGBMClassifier" and proba.shape == (200, 2)
    assert (np.array(["android", "iphone"])[proba.argmax(axis=1)] == labels).all()


def _anchor_settings(script: str) -> dict:
    """The settings block of an anchor's script, as the script itself reads it."""
    block = script[script.index(anchors.SETTINGS_START):script.index(anchors.SETTINGS_END)]
    namespace: dict = {}
    exec(block, namespace)
    return {k: v for k, v in namespace.items() if k.startswith("AUTOGLUON_")}


def test_autogluon_is_an_anchor_named_by_its_budget_in_seconds():
    agents = parse_agents(["autogluon:60", "flaml:60", "autogluon:300"], [])
    assert [a.label for a in agents] == ["autogluon:60", "flaml:60", "autogluon:300"]
    assert parse_agents(["autogluon"], [])[0].label == "autogluon:60"
    for bad in (["autogluon:soon"], ["autogluon:0"], ["autogluon:-5"], ["autogluon:60", "autogluon:60"]):
        with pytest.raises(CbrError):
            parse_agents(bad, [])
    spec = GridSpec(tasks=["t"], agents=["autogluon:60", "deploy:cbr@none"], trials=3, anchor_trials=2)
    assert sum(t.agent.kind == "autogluon" for t in spec.trial_list()) == 2  # --anchor-trials, not --trials


def test_autogluon_settings_follow_each_kind_of_task():
    by_name = {t.name: t for t in TASKS}
    expected = {  # task: (eval_metric, what predict returns, text, log target)
        "smoke-ban": ("accuracy", "labels", False, False), "mlc-churn": ("roc_auc", "positive", False, False),
        "pbc-status": ("log_loss", "classes", False, False),
        "concrete-strength": ("root_mean_squared_error", "values", False, False),
        "deliveries-time": ("median_absolute_error", "values", False, False),
        "hotel-rates": ("mean_absolute_error", "values", False, False),
        "diamonds-price": ("root_mean_squared_error", "values", False, True),
        "yeast-multilabel": ("roc_auc", "positive", False, False),
        "trump-tweets-device": ("log_loss", "classes", True, False),
        "fine-foods-rating": ("roc_auc", "positive", True, False),
        "movie-snippets-sentiment": ("root_mean_squared_error", "values", True, False),
        "rotten-tomatoes": ("accuracy", "labels", True, False)}
    for name, (metric, output, text, log) in expected.items():
        task = by_name[name]
        settings = _anchor_settings(autogluon_script.autogluon_script(task, 45))
        assert settings == {
            "AUTOGLUON_BUDGET": 45.0, "AUTOGLUON_PRESETS": "medium_quality",
            "AUTOGLUON_TASK": "regression" if task.task_type == "regression" else "classification",
            "AUTOGLUON_METRIC": metric, "AUTOGLUON_OUTPUT": output, "AUTOGLUON_CLASSES": list(task.classes),
            "AUTOGLUON_TEXT": text, "AUTOGLUON_LOG_TARGET": log}, name
    assert _anchor_settings(autogluon_script.autogluon_script(by_name["pbc-status"], 60))["AUTOGLUON_CLASSES"] == [
        "censored", "dead", "transplant"]


def test_autogluon_runs_where_flaml_runs_and_keeps_the_starter_skeleton():
    for task in TASKS:
        assert (autogluon_script.unsupported(task) is None) == (unsupported(task) is None), task.name
        if autogluon_script.unsupported(task) is not None:
            assert "AutoGluon" in autogluon_script.unsupported(task) or "not supported" in autogluon_script.unsupported(task)
            with pytest.raises(ValueError, match="AutoGluon does not support"):
                autogluon_script.autogluon_script(task, 60)
            continue
        script = autogluon_script.autogluon_script(task, 60)
        names = [n.name for n in ast.parse(script).body if isinstance(n, ast.FunctionDef)]
        assert names.count("train_model") == 1 and names.count("predict") == 1, task.name
        starter = task.starter.read_text()
        main = starter[starter.index('if __name__ == "__main__":'):]
        assert script.endswith(main if main.endswith("\n") else main + "\n"), task.name
        assert "rng.uniform" not in script and "rng.choice" not in script and "Runs untrusted" not in script
    assert "forecasting" in autogluon_script.unsupported(load_task(REPO / "tasks" / "call-volume"))


class _Predictor:
    """What predict reads of a TabularPredictor: labels or values, and class probabilities by class."""

    def __init__(self, proba: dict) -> None:
        import pandas as pd

        self.proba = pd.DataFrame(proba)

    def predict(self, table):
        import pandas as pd

        return pd.Series(self.proba.idxmax(axis=1).to_numpy()) if len(self.proba.columns) > 1 else self.proba.iloc[:, 0]

    def predict_proba(self, table, as_multiclass=True):
        return self.proba


def _template(monkeypatch: pytest.MonkeyPatch, task_name: str) -> dict:
    """The AutoGluon script's own functions for a task, without running its main block (nor registering the
    removal of its models folder at this process's exit)."""
    import atexit

    monkeypatch.setattr(atexit, "register", lambda *args, **kwargs: None)
    script = autogluon_script.autogluon_script(load_task(REPO / "tasks" / task_name), 60)
    namespace: dict = {}
    exec(compile(script[: script.index('if __name__ == "__main__":')], "autogluon", "exec"), namespace)
    return namespace


def test_autogluon_predict_gives_what_each_metric_grades(monkeypatch: pytest.MonkeyPatch) -> None:
    import numpy as np
    import pandas as pd

    pbc = _template(monkeypatch, "pbc-status")  # log loss: the task's class order, 0 for a class never seen
    out = pbc["predict"]({"predictors": [_Predictor({"dead": [0.7, 0.2], "censored": [0.3, 0.8]})]}, pd.DataFrame({"a": [1, 2]}))
    assert out.tolist() == [[0.3, 0.7, 0.0], [0.8, 0.2, 0.0]]
    foods = _template(monkeypatch, "fine-foods-rating")  # AUROC: the positive class ("great") as 1
    assert foods["_target"](pd.Series(["great", "other", "great"])).tolist() == [1, 0, 1]
    assert foods["predict"]({"predictors": [_Predictor({0: [0.9], 1: [0.1]})]}, pd.Series(["so so"])).tolist() == [0.1]
    assert list(foods["_frame"](pd.Series(["a b", None]))["text"]) == ["a b", ""]
    diamonds = _template(monkeypatch, "diamonds-price")  # RMSLE: fitted on log1p(y), predicted back
    assert diamonds["_target"](pd.Series([0.0, np.e - 1])).tolist() == pytest.approx([0.0, 1.0])
    assert diamonds["predict"]({"predictors": [_Predictor({"y": [1.0]})]}, pd.DataFrame({"a": [1]})) == pytest.approx([np.e - 1])
    yeast = _template(monkeypatch, "yeast-multilabel")  # one column per target, side by side
    two = {"predictors": [_Predictor({0: [0.4], 1: [0.6]}), _Predictor({0: [0.9], 1: [0.1]})]}
    assert yeast["predict"](two, pd.DataFrame({"a": [1]})).tolist() == [[0.6, 0.1]]
    # the starter's refit hands the validation rows in among the training rows: AutoGluon holds out its own
    X = pd.DataFrame({"a": range(10)})
    assert yeast["_learned"](X, X.iloc[7:]) and not yeast["_learned"](X.iloc[:7], X.iloc[7:])


def test_autogluon_trials_run_cbr_under_autogluon_s_python(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    spec = GridSpec(tasks=["smoke-ban", "call-volume"], agents=["autogluon:60", "flaml:60"],
                    task_folders=recipes("smoke-ban", "call-volume"))
    monkeypatch.setattr(autogluon_script, "python", lambda: "/venv/bin/python")
    plan = grid.plan(tmp_path, spec, bank=None)
    by_id = {j.trial_id: j for j in plan.jobs}
    job = by_id["smoke-ban/autogluon-60/trial-0"]
    assert job.command[:4] == ["/venv/bin/python", "-m", "dsagent_cbr.cli", "run"] and job.kind == "autogluon"
    assert "AUTOGLUON_BUDGET = 60.0" in job.script and float(job.command[job.command.index("--timeout") + 1]) >= 420
    assert by_id["smoke-ban/flaml-60/trial-0"].command[0] == sys.executable
    for anchor in (job, by_id["smoke-ban/flaml-60/trial-0"]):  # their models may pass the default disk
        assert float(anchor.command[anchor.command.index("--disk") + 1]) == grid.ANCHOR_DISK_MB > 1024
    assert {"task": "call-volume", "agent": "autogluon:60", "reason": autogluon_script.unsupported(
        load_task(REPO / "tasks" / "call-volume"))} in plan.unsupported
    # not installed: every pair is reported with how to install it, and the rest of the grid runs
    monkeypatch.setattr(autogluon_script, "python", lambda: None)
    missing = grid.plan(tmp_path, spec, bank=None)
    assert not [j for j in missing.jobs if j.kind == "autogluon"] and "smoke-ban/flaml-60/trial-0" in {
        j.trial_id for j in missing.jobs}
    assert {"task": "smoke-ban", "agent": "autogluon:60", "reason": autogluon_script.missing()} in missing.unsupported
    assert "setup-autogluon.sh" in autogluon_script.missing()


def test_autogluon_is_tabled_and_drawn_as_an_anchor_like_flaml(monkeypatch: pytest.MonkeyPatch) -> None:
    from dsagent_cbr.bench.anchor_lines import anchors as anchor_lines

    records = [{**trial_record("a", "flaml:60", 0.8), "selection_metric": 0.79},
               {**trial_record("a", "autogluon:60", 0.85), "selection_metric": 0.84},
               {**trial_record("a", "starter", 0.5), "selection_metric": 0.5}]
    assert anchor_lines(records) == {"a": {"FLAML-60": 0.79, "AutoGluon-60": 0.84}}
    monkeypatch.setattr(autogluon_script, "versions", lambda: {"autogluon.tabular": "9.9"})
    built = report.build(records, {"a": {"metric": "accuracy", "direction": "maximize", "random": 0.5,
                                         "reference": 0.9}}, report.stamp(records))
    agents = {a["agent"]: a for a in built["agents"]}
    assert agents["autogluon:60"]["mean_rank"] == 1 and agents["autogluon:60"]["normalised"] == pytest.approx(0.875)
    text = report.markdown(built, "t")
    assert "| a | accuracy ↑ | 0.5 | 0.9 |" in text and "| autogluon:60 | 1 | 1 | n/a | 100% (1/1) |" in text
    assert "autogluon.tabular 9.9" in text  # the table says which AutoGluon its scores ran on...
    assert "autogluon" not in str(report.stamp(records[:1])["packages"])  # ...and only when it ran


@pytest.mark.slow
@pytest.mark.timeout(900)
@pytest.mark.skipif(autogluon_script.python() is None, reason="AutoGluon is not installed (setup-autogluon.sh)")
def test_the_autogluon_anchor_is_graded_for_real_in_the_sandbox(tmp_path):
    """autogluon:30 on titanic-survival, as `cbr bench run` runs it: the trial's command (`cbr run` under
    AutoGluon's python, so harness.run.run_script in the real sandbox), its record, and a sensible score."""
    from dsagent_cbr.tasks.prepare import prepare_task

    task = load_task(REPO / "tasks" / "titanic-survival")
    prepare_task(task)
    spec = GridSpec(tasks=[task.name], agents=["autogluon:30"], task_folders=recipes(task.name), timeout=300)
    (job,) = grid.plan(tmp_path, spec, bank=None).jobs
    record = trial.execute(job, cores=1)
    result = json.loads((Path(job.folder) / "run" / "result.json").read_text())
    assert record["outcome"] == "ok", (record.get("reason"), result.get("stderr", "")[-2000:])
    assert result["isolated"] is True and result["status"] == "ok"
    assert 0.7 < record["test_metric"] <= 1 and record["selection_metric"] is not None  # random 0.48, reference 0.79
    assert "AutoGluon target:" in result["stdout"] and record["script_seconds"] < 300
    assert not (Path(job.folder) / "run" / "workspace" / "AutogluonModels").exists()  # removed when done
    print(f"AutoGluon 30 s on titanic-survival: test accuracy {record['test_metric']:.4f}, "
          f"script {record['script_seconds']:.1f} s, trial {record['wall_seconds']:.1f} s")
