"""The search's general drafts (search/drafts.py): which learners each kind of data gets, fitted to the task
by the structural adapter, with every column handed over as the task has it."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import prepared

from dsagent_cbr.adapter import adapt_case
from dsagent_cbr.harness.readers import read_importance
from dsagent_cbr.harness.run import run_script
from dsagent_cbr.search import drafts
from dsagent_cbr.search.drafts import general_cases
from dsagent_cbr.tasks.create import NewTaskRequest, create_task
from dsagent_cbr.tasks.loader import load_task


@pytest.fixture(autouse=True)
def _in_a_scratch_folder(monkeypatch, tmp_path):
    """A draft run in this process writes its class scores (cbr_class_scores.csv) where it runs, as it does
    in its workspace: here that is a tmp folder, never the repository."""
    monkeypatch.chdir(tmp_path)


def test_a_table_gets_lightgbm_its_defaults_xgboost_then_a_forest_with_the_task_s_loss_and_outputs():
    hotel = general_cases(prepared("hotel-rates"))  # regression graded by mean absolute error
    assert [c.task_name for c in hotel] == ["general", "general-default", "general-xgboost", "general-forest",
                                            "general-catboost"]
    # both keep the squared loss and stop early on the absolute error
    assert 'metric="l1"' in hotel[0].script and "lgb.LGBMRegressor(" in hotel[0].script
    assert "objective" not in hotel[0].script
    # the floor: LightGBM as it comes, every setting its default, no early stopping
    assert "lgb.LGBMRegressor(random_state=0, verbose=-1, n_jobs=THREADS)" in hotel[1].script
    assert "early_stopping" not in hotel[1].script
    assert "xgb.XGBRegressor(" in hotel[2].script and 'eval_metric="mae"' in hotel[2].script
    assert "lightgbm" not in hotel[2].script  # the third draft is XGBoost through and through
    smoke = general_cases(prepared("smoke-ban"))
    assert "lgb.LGBMClassifier(" in smoke[0].script and "xgb.XGBClassifier(" in smoke[2].script
    assert "lgb.LGBMClassifier(random_state=0" in smoke[1].script
    assert "metric=None" in smoke[0].script and "eval_metric=None" in smoke[2].script
    # the forest: every category as codes, trees added until the harness's deadline, no booster
    forest = smoke[3].script
    assert "ExtraTreesClassifier(" in forest and "CODES_ABOVE = -1" in forest and "CBR_DEADLINE" in forest
    assert "lightgbm" not in forest and "xgboost" not in forest and "ExtraTreesRegressor" in hotel[3].script


def test_text_gets_a_linear_model_then_trees_and_trees_learn_one_target_at_a_time():
    linear, trees = general_cases(prepared("tweet-sentiment"))  # two targets, graded by MCRMSE
    assert "Ridge(alpha=1.0)" in linear.script and linear.metric == "mcrmse"  # one model for both targets
    assert "lgb.LGBMRegressor(" in trees.script and trees.metric == "rmse"  # one model per target column


def test_text_classes_get_a_logistic_regression_then_naive_bayes():
    linear, bayes = general_cases(prepared("fine-foods-rating"))
    assert "LogisticRegression(C=4.0" in linear.script and "char_wb" in linear.script
    assert [c.task_name for c in (linear, bayes)] == ["general", "general-naive-bayes"]
    assert "ComplementNB(alpha=0.3)" in bayes.script and "char_wb" not in bayes.script  # words only
    assert "Ridge" not in bayes.script and "LogisticRegression" not in bayes.script
    assert general_cases(prepared("call-volume")) == []  # forecasting: no general solution


def test_the_general_draft_is_handed_dates_categories_and_numbers_as_they_are():
    task = prepared("hotel-rates")
    code = adapt_case(general_cases(task)[0], task)["code"]
    scope: dict = {"__name__": "adapted"}
    exec(compile(code, "adapted.py", "exec"), scope)  # our own general solution, not generated code
    data = pd.read_csv(task.public_dir / "train.csv").head(600)
    X, y = data.drop(columns=["id", *task.target]), data[task.target[0]]
    model = scope["train_model"](X[:500], y[:500], X[500:], y[500:])
    kinds = model.jobs[0]["inner"]["spec"]["kinds"]
    assert kinds["arrival_date"] == "date" and kinds["meal"] == "category" and kinds["lead_time"] == "number"
    assert len(scope["predict"](model, X[500:])) == 100


def test_the_forest_stops_adding_trees_at_the_deadline_and_still_predicts(monkeypatch):
    task = prepared("titanic-survival")
    forest = next(c for c in general_cases(task) if c.task_name == "general-forest")
    scope: dict = {"__name__": "adapted"}
    exec(compile(adapt_case(forest, task)["code"], "adapted.py", "exec"), scope)  # our own draft
    data = pd.read_csv(task.public_dir / "train.csv")
    X, y = data.drop(columns=["id", *task.target]), data[task.target[0]]

    def trees(deadline: float) -> int:
        monkeypatch.setenv("CBR_DEADLINE", str(deadline))
        model = scope["train_model"](X[:700], y[:700], X[700:], y[700:])
        assert set(scope["predict"](model, X[700:])) <= set(y)
        return model.jobs[0]["inner"]["model"].n_estimators

    assert trees(time.time() - 1) == 25  # past its deadline: the first 25 trees, kept
    assert trees(time.time() + 600) == 300


def test_a_large_table_gets_the_quick_booster_then_the_floor_before_the_full_booster(monkeypatch):
    monkeypatch.setattr(drafts, "QUICK_ROWS", 100)  # hotel-rates' 10,000-odd rows as a large table
    names = [c.task_name for c in general_cases(prepared("hotel-rates"))]
    assert names == ["general-quick", "general-default", "general", "general-xgboost", "general-forest",
                     "general-catboost"]
    monkeypatch.setattr(drafts, "CATBOOST_ROWS", 100)  # too many rows for CatBoost
    assert "general-catboost" not in [c.task_name for c in general_cases(prepared("hotel-rates"))]
    monkeypatch.setattr(drafts, "DEEP_ROWS", 100)  # and enough for LightGBM of many leaves, after XGBoost
    cases = general_cases(prepared("hotel-rates"))
    # no forest beside it: at 262,000 rows and more no blend weighed it
    assert [c.task_name for c in cases] == ["general-quick", "general-default", "general", "general-xgboost",
                                            "general-deep"]
    assert "num_leaves=255," in cases[4].script and "num_leaves=31," in cases[2].script


def test_the_quick_and_deep_drafts_learn_every_category_as_codes_where_the_first_draft_and_floor_keep_them(
    monkeypatch,
):
    monkeypatch.setattr(drafts, "QUICK_ROWS", 100)  # hotel-rates as a large table, with a deep draft
    monkeypatch.setattr(drafts, "DEEP_ROWS", 100)
    task = prepared("hotel-rates")
    data = pd.read_csv(task.public_dir / "train.csv").head(600)
    X, y = data.drop(columns=["id", *task.target]), data[task.target[0]]

    def table(case_name: str) -> pd.DataFrame:
        drafted = general_cases(task)  # and XGBoost as deep_next grows it
        case = next(c for c in [*drafted, *map(drafts.deepened, drafted)] if c.task_name == case_name)
        scope: dict = {"__name__": "adapted"}
        exec(compile(adapt_case(case, task)["code"], "adapted.py", "exec"), scope)  # our own draft
        model = scope["train_model"](X[:500], y[:500], X[500:], y[500:])
        return scope["design"](X[500:], model.jobs[0]["inner"]["spec"])

    for keeps in ("general", "general-default"):
        assert isinstance(table(keeps)["meal"].dtype, pd.CategoricalDtype)
    for codes in ("general-quick", "general-deep", "general-deep-xgboost"):
        drafted = table(codes)
        assert drafted["meal"].dtype == float and drafted.dtypes.map(pd.api.types.is_numeric_dtype).all()


def test_the_deep_draft_comes_next_when_the_31_leaf_booster_kept_thousands_of_rounds(monkeypatch):
    assert drafts.deep_next(general_cases(prepared("hotel-rates")), 1, [None]) is None  # no deep draft
    monkeypatch.setattr(drafts, "QUICK_ROWS", 100)
    monkeypatch.setattr(drafts, "DEEP_ROWS", 100)
    monkeypatch.setattr(drafts, "CATBOOST_ROWS", 100)
    cases = general_cases(prepared("hotel-rates"))
    moved = drafts.deep_next(cases, 3, [drafts.DEEP_SIGNAL])
    # and XGBoost, still to come, grows as many leaves over the same codes
    assert moved is not None and [c.task_name for c in moved] == [
        "general-quick", "general-default", "general", "general-deep", "general-deep-xgboost"]
    xgboost = moved[4].script
    assert "max_leaves=255," in xgboost and "CODES_ABOVE = -1" in xgboost and "xgb.XGBRegressor(" in xgboost
    assert drafts.in_order(cases, [c.task_name for c in moved]) == moved  # as a resume reads the order back
    assert [c.task_name for c in drafts.deep_next(cases, 3, [None])][3] == "general-deep"  # ran every round
    assert drafts.deep_next(cases, 3, [drafts.DEEP_SIGNAL - 1]) is None
    assert drafts.deep_next(cases, 5, [drafts.DEEP_SIGNAL]) is None  # the deep draft was taken already
    # the quick draft kept (nearly) all its rounds: the deep draft after the floor, in the 31-leaf one's place
    early = drafts.deep_next(cases, 1, [drafts.QUICK_SIGNAL], quick=True)
    assert early is not None and [c.task_name for c in early] == [
        "general-quick", "general-default", "general-deep", "general-deep-xgboost"]
    assert drafts.in_order(cases, [c.task_name for c in early]) == early
    assert drafts.deep_next(cases, 1, [drafts.QUICK_SIGNAL - 1], quick=True) is None
    assert drafts.deep_next(cases, 1, [drafts.QUICK_SIGNAL]) is None  # the 31-leaf draft's signal is higher


def _adapted_catboost(task) -> dict:
    """The CatBoost draft adapted to `task`, run in this process (our own draft, not generated code)."""
    case = next(c for c in general_cases(task) if c.task_name == "general-catboost")
    scope: dict = {"__name__": "adapted"}
    exec(compile(adapt_case(case, task)["code"], "adapted.py", "exec"), scope)
    return scope


def test_the_catboost_draft_refits_the_trees_its_first_fit_kept_and_stops_at_its_deadline(monkeypatch):
    task = prepared("mlc-churn")
    data = pd.read_csv(task.public_dir / "train.csv").head(1500)
    X, y = data.drop(columns=["id", *task.target]), data[task.target[0]]
    scope = _adapted_catboost(task)
    trees = lambda fitted: fitted.jobs[0]["inner"]["model"].tree_count_  # noqa: E731 (the shim's job)
    first = trees(scope["train_model"](X[:1200], y[:1200], X[1200:], y[1200:]))
    assert 0 < first < 1000  # early stopping chose them
    monkeypatch.setenv("CBR_FIT", "refit")  # what the bootstrap says while the refit's train_model runs
    assert trees(scope["train_model"](X, y, X[1200:], y[1200:])) == first
    monkeypatch.delenv("CBR_FIT")
    monkeypatch.setenv("CBR_DEADLINE", str(time.time()))  # the deadline for training has passed
    assert trees(_adapted_catboost(task)["train_model"](X[:1200], y[:1200], X[1200:], y[1200:])) == 1


def test_the_quick_draft_learns_a_sample_of_many_rows_and_its_refit_learns_them_all(monkeypatch):
    task = prepared("hotel-rates")
    monkeypatch.setattr(drafts, "QUICK_ROWS", 100)  # a large table's first draft: the quick booster
    quick = general_cases(task)[0]
    assert quick.task_name == "general-quick" and str(drafts.QUICK_SAMPLE) in quick.script
    code = adapt_case(quick, task)["code"].replace(str(drafts.QUICK_SAMPLE), "400")  # many rows: 400 here
    scope: dict = {"__name__": "adapted"}
    exec(compile(code, "adapted.py", "exec"), scope)  # our own draft, not generated code
    learnt, design = [], scope["design"]
    scope["design"] = lambda X, spec: learnt.append(len(X)) or design(X, spec)
    data = pd.read_csv(task.public_dir / "train.csv").head(700)
    X, y = data.drop(columns=["id", *task.target]), data[task.target[0]]
    scope["train_model"](X[:600], y[:600], X[600:], y[600:])
    monkeypatch.setenv("CBR_FIT", "refit")  # what the bootstrap says while the refit's train_model runs
    scope["train_model"](X[:600], y[:600], X[600:], y[600:])
    assert learnt == [400, 100, 600, 100]  # (training rows, early-stopping rows), first fit then refit


@pytest.mark.slow
@pytest.mark.parametrize("name", ["hotel-rates", "titanic-survival", "trump-tweets-device", "tweet-sentiment"])
def test_every_general_draft_runs_in_the_sandbox_and_beats_the_starter(name, tmp_path):
    task = prepared(name)
    starter = run_script(task, task.starter, run_dir=tmp_path / "starter")
    for case in general_cases(task):
        result = run_script(task, adapt_case(case, task)["code"], run_dir=tmp_path / case.task_name, timeout=300)
        assert result.ok, f"{case.task_name}: {result.status}: {result.error}\n{result.stderr[-2000:]}"
        assert task.metric.better(result.selection_metric, starter.selection_metric), case.task_name
        if task.modality == "text":  # the importances name words and n-grams, not "feature 3538"
            names = list(read_importance(Path(result.workspace)) or {})
            assert names or "naive-bayes" in case.task_name, case.task_name  # naive Bayes has no importances
            assert not any(n.startswith("feature ") for n in names), (case.task_name, names[:5])


def _table_with_text(folder: Path) -> Path:
    """A label that needs both a statement's words and the room it was said in: either alone tells three
    rows in four."""
    rng = np.random.default_rng(0)
    rooms, moods = rng.choice(["north", "south"], 400), rng.choice(["sunny", "gloomy"], 400)
    filler = "the committee met again on the second floor to talk about the coming budget and its plans"
    words = [f"{filler} {rng.integers(10**6)} it was {mood} today" for mood in moods]
    label = np.where((rooms == "north") & (moods == "sunny"), "yes", "no")
    folder.mkdir()
    frame = pd.DataFrame({"id": range(400), "statement": words, "room": rooms, "label": label})
    frame.to_csv(folder / "train.csv", index=False)
    return folder / "train.csv"


def test_free_text_beside_other_columns_is_a_table_whose_drafts_learn_from_every_column(tmp_path):
    train = _table_with_text(tmp_path / "data")
    request = NewTaskRequest(
        dest=tmp_path / "task", train=train, target=("label",), metric="accuracy", holdout=0.2
    )
    assert create_task(request).modality == "tabular"  # the statement is text, beside another column
    task = load_task(tmp_path / "task")
    drafts = general_cases(task)
    assert [c.task_name for c in drafts] == ["general", "general-default", "general-linear", "general-xgboost"]
    code = adapt_case(drafts[2], task)["code"]
    assert "LogisticRegression(C=4.0" in code and "lightgbm" not in code
    scope: dict = {"__name__": "adapted"}
    exec(compile(code, "adapted.py", "exec"), scope)  # our own general solution, not generated code
    data = pd.read_csv(task.public_dir / task.train_file)
    X, y = data.drop(columns=["id", "label"]), data["label"]
    model = scope["train_model"](X[:250], y[:250], X[250:], y[250:])
    assert (scope["predict"](model, X[250:]) == y[250:]).mean() > 0.9
