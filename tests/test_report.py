"""The run report: leaderboard order, model families read from scripts, the plot's axes, self-contained HTML."""

from __future__ import annotations

import base64
import io
import json
import re
import time
from pathlib import Path

import pytest
from support.records import as_record

from dsagent_cbr.agent.model_family import describe_model
from dsagent_cbr.agent.progress import LiveProgress, heartbeat, progress_line
from dsagent_cbr.report.figures import build_metrics_figure
from dsagent_cbr.report.rows import leaderboard
from dsagent_cbr.report.run_report import write_report

REPO = Path(__file__).resolve().parents[1]
PNG = b"\x89PNG\r\n\x1a\n"


def row(iteration, score=None, status="ok", **extra):
    """A row judged by its selection score; its printed validation claims less than it unless given."""
    return {"iteration": iteration, "score": score, "selection": score, "valid": score, "status": status, **extra}


@pytest.mark.parametrize(("direction", "expected"), [("minimize", [3, 1, 4, 5, 2]), ("maximize", [4, 5, 1, 3, 2])])
def test_leaderboard_ranks_by_the_score_in_the_metrics_direction(direction, expected):
    rows = [row(1, 0.5, valid=0.99), row(2, None, "error", error="boom"), row(3, 0.2, valid=0.0), row(4, 0.9),
            row(5, 0.9)]  # what a script printed of itself never ranks it
    # a failed run keeps no rank even if it scored before failing
    rows.append(row(6, 0.01, "grading_error"))
    assert [r["iteration"] for r in leaderboard(rows, direction)] == expected + [6]


@pytest.mark.parametrize(("code", "family", "params"), [
    ("from lightgbm import LGBMRegressor\nm = LGBMRegressor(n_estimators=500, learning_rate=0.05)",
     "LightGBM", "n_estimators=500, learning_rate=0.05"),
    ("import xgboost as xgb\nm = xgb.XGBClassifier(max_depth=6, eta=0.1, n_jobs=2, random_state=0)",
     "XGBoost", "max_depth=6, eta=0.1"),  # n_jobs and random_state say nothing about the model
    ("from catboost import CatBoostRegressor\nm = CatBoostRegressor(depth=8, verbose=0)", "CatBoost", "depth=8"),
    ("import lightgbm as lgb\nP = {'objective': 'binary', 'num_leaves': 31}\nb = lgb.train(P, data)",
     "LightGBM", "objective='binary', num_leaves=31"),
    ("from sklearn.ensemble import RandomForestClassifier\nPARAMS = dict(n_estimators=300, max_depth=None)\n"
     "m = RandomForestClassifier(**PARAMS)", "Random forest", "n_estimators=300, max_depth=None"),
    ("from sklearn.pipeline import make_pipeline\nm = make_pipeline(TfidfVectorizer(), LogisticRegression(C=4.0))",
     "Logistic regression (on TF-IDF)", "C=4.0"),
    ("m = StackingRegressor([('a', LGBMRegressor()), ('r', Ridge(alpha=1.0))], final_estimator=Ridge())",
     "LightGBM + Ridge (stacking)", ""),
    ("import torch\nfrom torch import nn\nclass Net(nn.Module):\n    def __init__(self):\n"
     "        super().__init__()\n        self.rnn = nn.LSTM(3, 16)\n        self.out = nn.Linear(16, 1)\n"
     "opt = torch.optim.Adam(net.parameters(), lr=1e-3)", "PyTorch", "layers: LSTM, Linear; Adam lr=0.001"),
    ("from tensorflow import keras\nm = keras.Sequential([keras.layers.Dense(32), keras.layers.Dense(1)])",
     "Keras", "layers: Dense"),
    ("from statsmodels.tsa.arima.model import ARIMA\nfit = ARIMA(y, order=(2, 1, 0)).fit()",
     "statsmodels ARIMA", "order=(2, 1, 0)"),
    ("from sktime.classification.kernel_based import RocketClassifier\nm = RocketClassifier(num_kernels=500)",
     "ROCKET", "num_kernels=500"),
    # a strength the script chooses itself among values it tries
    ("for C in (1.0, 4.0):\n    m = LogisticRegression(C=C, max_iter=3000)", "Logistic regression",
     "C=one of (1.0, 4.0), max_iter=3000"),
    ("m = LogisticRegression(C=best_c)", "Logistic regression", "C=?"),  # a value known only when it runs
    # TF-IDF built only for the text columns a table has: the model may not learn from any
    ("texts = {c: TfidfVectorizer().fit(X[c]) for c in X if kinds[c] == 'text'}\nm = LGBMRegressor(num_leaves=7)",
     "LightGBM (on TF-IDF where it applies)", "num_leaves=7"),
    ("if __name__ == '__main__':\n    m = make_pipeline(TfidfVectorizer(), Ridge(alpha=2.0))",
     "Ridge (on TF-IDF)", "alpha=2.0"),  # a script's main block is no condition on its features
    ("import numpy as np\npred = np.full(10, 3.0)", "unknown", ""),
    ("def broken(:\n", "unknown", ""),
])
def test_model_family_and_key_parameters_from_the_script(code, family, params):
    info = describe_model(code)
    assert (info.family, info.params) == (family, params)


def test_model_family_of_real_scripts():
    starter = describe_model((REPO / "tasks/concrete-strength/train.py").read_text())
    solution = describe_model((REPO / "casebank/solutions/concrete-strength/solution.py").read_text())
    assert starter.family == "unknown"  # the starter guesses at random
    assert solution.family == "LightGBM" and "learning_rate=0.05" in solution.params  # from **PARAMS


def test_plot_has_integer_iterations_failed_marks_and_baselines():
    rows = [row(1, 5.1, test=4.9), row(2, None, "error"), row(3, 4.2, test=4.0)]
    fig = build_metrics_figure(rows, "rmse", "minimize", {"starter": 6.0, "reference": 4.5})
    ax = fig.axes[0]
    assert list(ax.get_xticks()) == [1, 2, 3]
    lines = {line.get_label(): line for line in ax.get_lines()}
    failed = lines["failed (no score)"]
    assert list(failed.get_xdata()) == [2]
    assert list(lines["selection"].get_xdata()) == [1, 3]
    assert list(lines["validation the script printed (not used to select)"].get_ydata()) == [5.1, 4.2]
    assert list(lines["test (reported, not used to select)"].get_ydata()) == [4.9, 4.0]
    assert lines["starter selection 6"].get_ydata()[0] == 6.0
    assert lines["reference validation 4.5"].get_ydata()[0] == 4.5
    assert "best selection (iteration 3)" in lines  # lower is better
    # a starter far off the iterations' scores is named at the edge, not drawn there to flatten them
    far = build_metrics_figure(rows, "rmse", "minimize", {"starter": 32.0}).axes[0]
    assert "starter selection 32" not in {line.get_label() for line in far.get_lines()}
    assert far.get_title(loc="left") == "↑ starter selection 32 (off the scale)"

    one = build_metrics_figure([row(1, 0.97)], "accuracy", "maximize").axes[0]
    assert list(one.get_xticks()) == [1]  # not 0.96 .. 1.04
    many = build_metrics_figure([row(t, 1.0 / t) for t in range(1, 41)], "mae", "minimize").axes[0]
    ticks = [t for t in many.get_xticks() if 1 <= t <= 40]
    assert ticks and all(float(t).is_integer() for t in ticks)


SCRIPT = """import lightgbm as lgb
PARAMS = dict(n_estimators=400, learning_rate=0.03, num_leaves=15, random_state=0)
model = lgb.LGBMRegressor(**PARAMS)
"""


def _run_folder(tmp_path: Path) -> tuple[Path, list[dict], dict]:
    run = tmp_path / "run"
    (run / "step-01").mkdir(parents=True)
    (run / "step-01/script.py").write_text("from sklearn.linear_model import Ridge\nm = Ridge(alpha=3.0)\n")
    (run / "step-03/debug-1").mkdir(parents=True)
    (run / "step-03/debug-1/script.py").write_text(SCRIPT)
    (run / "importance.json").write_text(json.dumps({f"feature_{i}": float(i) for i in range(30)}))
    rows = [  # iteration 1 names no script: its step folder has it; iteration 3's final script is a debug one
        {"iteration": 1, "case": "diamonds-price", "step": "adapt diamonds-price", "status": "ok", "valid": 1.5,
         "selection": 6.2, "score": 6.2, "test": 6.0, "wall_time": 2.5, "retained": True},  # it claims far more
        {"iteration": 2, "case": "pbc-status", "step": "use <script>alert(1)</script> | pipes", "status": "error",
         "error": "ValueError: Unknown label type: continuous", "debug_attempts": 0, "wall_time": 1.0},
        {"iteration": 3, "case": "mlc-churn", "step": "tune LightGBM", "status": "ok", "valid": 4.3, "selection": 4.4,
         "score": 4.4, "test": 4.1, "wall_time": 130.0, "debug_attempts": 1, "script": "step-03/debug-1/script.py", "retained": True},
    ]
    summary = {"task": "concrete-strength", "model": "gpt-4o", "metric": "rmse", "direction": "minimize",
               "best_iteration": 3, "best_valid": 4.3, "best_selection": 4.4, "best_score": 4.4, "best_test": 4.1,
               "stopped": "completed", "selected_by": "selection", "selection_rows": 154,
               "baselines": {"starter": 16.3, "reference": 4.6}, "feature_importance": "importance.json",
               "model_errors": [{"iteration": 2, "role": "execute", "attempt": 0, "error": "ValueError: Unknown label type"}]}
    return run, rows, summary


def test_write_report_markdown_html_and_rows(tmp_path):
    run, rows, summary = _run_folder(tmp_path)
    write_report(run, as_record(rows, summary))
    assert {"report.md", "report.html", "metrics.png", "importance.png", "rows.json"} <= {p.name for p in run.iterdir()}
    assert not list(run.glob("*.tmp*"))  # atomic writes leave no temp files
    assert (run / "metrics.png").read_bytes().startswith(PNG)

    md = (run / "report.md").read_text()
    board = md.split("## Leaderboard")[1].split("##")[0]
    table = [line for line in board.splitlines() if re.match(r"\| (\d+|—) \|", line)]
    assert [line.split("|")[2].strip() for line in table] == ["3 ★", "1", "2"]  # 4.4 < 6.2 < failed
    assert "LightGBM" in table[0] and "n_estimators=400, learning_rate=0.03, num_leaves=15" in table[0]
    assert "random_state" not in table[0]
    assert "Ridge" in table[1] and "alpha=3.0" in table[1]
    assert "error: ValueError: Unknown label type: continuous" in table[2]
    assert "2.2 min" in table[0] and "2.5 s" in table[1]
    assert "\\| pipes" in md  # a pipe in a cell does not break the table
    assert "starter 16.3, reference 4.6" in md
    assert "iteration 3: selection 4.4, its printed validation 4.3, test 4.1" in md
    assert "cbr's grade of 154 labelled rows it held back" in md
    assert [line.split("|")[6].strip() for line in table] == ["4.3", "1.5 ⚠", "—"]  # iteration 1 overclaims
    assert "⚠ marks a printed validation much better than the selection score" in md
    assert "- iteration 2 (execute): ValueError: Unknown label type" in md.split("## What the model got wrong")[1]

    write_report(run, as_record(rows, {**summary, "model": "none"}))  # no model: nothing a model got wrong
    assert "What the model got wrong" not in (run / "report.md").read_text()

    saved = json.loads((run / "rows.json").read_text())
    assert [r["model"] for r in saved] == ["Ridge", "unknown", "LightGBM"]
    assert saved[0]["script"] == "step-01/script.py"


def test_html_report_is_self_contained_and_escaped(tmp_path):
    run, rows, summary = _run_folder(tmp_path)
    write_report(run, as_record(rows, summary))
    html = (run / "report.html").read_text()
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:|//)""", html, re.IGNORECASE)
    assert "<link" not in html and "<script" not in html  # the plan's text is shown escaped
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    images = re.findall(r'<img [^>]*src="([^"]+)"', html)
    assert len(images) == 2  # the metric plot and the feature importance
    for src in images:
        assert src.startswith("data:image/png;base64,")
        assert base64.b64decode(src.split(",", 1)[1]).startswith(PNG)
    assert html.index("LightGBM") < html.index("Ridge")  # leaderboard order


def test_a_search_report_draws_its_tree_and_says_what_each_operator_gained(tmp_path):
    def node(i, operator, score, started, **more):
        return {"iteration": i, "operator": operator, "status": "ok" if score else "error", "score": score,
                "selection": score, "started": started, "wall_time": 5.0, **more}

    rows = [node(1, "draft", 5.0, 1.0), node(2, "transplant", 6.0, 7.0), node(3, "tune", 4.5, 13.0, parent=1),
            node(4, "tune", None, 19.0, parent=1), node(5, "ensemble", 4.0, 25.0, members={1: 0.5, 3: 0.5})]
    summary = {"task": "t", "model": "none", "metric": "rmse", "direction": "minimize", "best_iteration": 5,
               "best_score": 4.0, "selection_rows": 50, "baselines": {"starter": 16.0}}
    write_report(tmp_path, as_record(rows, summary, kind="search"))
    assert (tmp_path / "tree.png").read_bytes().startswith(PNG)
    md = (tmp_path / "report.md").read_text()
    table = md.split("## The search tree")[1].split("##")[0]
    assert "| draft | 1 | 1 | 1 | 11 |" in table  # 16 (the starter) to 5
    assert "| transplant | 1 | 1 | 0 | 0 |" in table
    assert "| tune | 2 | 1 | 1 | 0.5 |" in table and "| ensemble | 1 | 1 | 1 | 0.5 |" in table
    board = md.split("## Leaderboard")[1].split("##")[0]
    assert "| 1 | 5 ★ | ensemble of 2 | node 1: 0.5, node 3: 0.5 |" in board
    write_report(tmp_path, as_record(rows, summary))  # not a search: no tree
    assert "The search tree" not in (tmp_path / "report.md").read_text()


def test_a_bench_draws_flaml_s_score_as_a_line_in_an_agent_trial_s_pictures(tmp_path):
    from dsagent_cbr.bench.anchor_lines import draw_anchors
    from dsagent_cbr.report.tree_figure import build_tree_figure

    rows = [{"iteration": 1, "operator": "draft", "status": "ok", "score": 5.0, "selection": 5.0, "started": 1.0,
             "wall_time": 5.0}]
    summary = {"task": "t", "model": "none", "metric": "rmse", "direction": "minimize", "best_iteration": 1,
               "best_score": 5.0, "selection_rows": 50, "baselines": {"starter": 16.0}}
    record = as_record(rows, summary, kind="search", run_dir=tmp_path)
    record.save(tmp_path)
    saved = (tmp_path / "summary.json").read_text()
    trials = [{"kind": "flaml", "agent": "flaml:300", "task": "t", "outcome": "ok", "selection_metric": 4.5},
              {"kind": "flaml", "agent": "flaml:300", "task": "other", "outcome": "ok", "selection_metric": 9.0},
              {"kind": "develop", "agent": "develop:search@none", "task": "t", "outcome": "ok", "run_dir": str(tmp_path)}]
    assert draw_anchors(trials) == 1
    assert "FLAML-300 4.5" in (tmp_path / "report.md").read_text() and "9" not in (tmp_path / "report.md").read_text().split("baselines")[1].split("\n")[0]
    assert (tmp_path / "summary.json").read_text() == saved  # the record itself is not changed
    figure = build_tree_figure(rows, "rmse", "minimize", 1, {"starter": 16.0, "FLAML-300": 4.5})
    labels = figure.axes[0].get_legend_handles_labels()[1]
    assert "FLAML-300 selection 4.5" in labels


def test_report_without_scores_or_importance(tmp_path):
    rows = [row(1, None, "no plan"), row(2, None, "timeout", error="exceeded 600 s")]
    summary = {"task": "t", "model": "m", "metric": "accuracy", "direction": "maximize", "best_iteration": None,
               "best_valid": None, "best_test": None, "stopped": "completed", "feature_importance": "missing.json"}
    write_report(tmp_path, as_record(rows, summary))
    md = (tmp_path / "report.md").read_text()
    assert "none (no iteration succeeded)" in md and "timeout: exceeded 600 s" in md
    assert "could not be read" in md and not (tmp_path / "importance.png").exists()
    assert "| test |" not in md  # no answers, no test column
    assert "| step |" not in md  # every step is its case (here both empty): one column


def test_progress_line_and_one_line_per_finished_iteration_off_a_terminal():
    assert progress_line(3, 8, "execute", "ok", 5.12345, 4.9, "rmse") == \
        "iteration 3/8 (execute): ok, rmse 5.1235, best 4.9"
    assert progress_line(1, None, None, "error", None, None, "auc") == "iteration 1: error, auc —, best —"
    out = io.StringIO()
    with LiveProgress("developing", enabled=False, total=2, stream=out) as progress:
        progress.update(iteration=1, role="plan", metric="rmse")
        progress.update(iteration=1, role="execute")
        progress.update(iteration=1, status="ok", score=5.0, best=5.0)
        progress.update(iteration=2, role="execute")
        progress.update(iteration=2, status="error", score=None)
    assert out.getvalue().splitlines() == ["iteration 1/2 (execute): ok, rmse 5, best 5",
                                           "iteration 2/2 (execute): error, rmse —, best 5"]


def test_a_long_step_says_it_is_still_running_until_it_ends():
    out = io.StringIO()
    with LiveProgress("developing", enabled=False, stream=out) as progress:
        with heartbeat(progress, every=0.05, iteration=4, role="execute"):
            time.sleep(0.18)
        lines = out.getvalue().splitlines()
        time.sleep(0.12)
    assert len(lines) >= 2 and all(ln.startswith("iteration 4 (execute): still running after") for ln in lines)
    assert out.getvalue().splitlines() == lines  # nothing more once the step ended


def test_the_time_left_is_the_time_left_when_the_line_is_printed(monkeypatch):
    """A node that started with 54 s of the budget left and ended 7 s later says 47 s left."""
    from types import SimpleNamespace

    from dsagent_cbr.agent import progress as progress_module

    now = [100.0]
    monkeypatch.setattr(progress_module, "time", SimpleNamespace(monotonic=lambda: now[0]))
    out = io.StringIO()
    with LiveProgress("developing", enabled=False, stream=out) as progress:
        progress.update(iteration=3, role="execute", left=54.0, metric="auroc")
        now[0] += 7.0
        assert "47 s of the budget left" in progress.__rich__().plain  # a terminal's live line
        progress.update(iteration=3, status="ok", score=0.8, best=0.8)
    line = "iteration 3 (execute): ok, auroc 0.8, best 0.8, 47 s left"
    assert out.getvalue().splitlines() == [line]


def test_a_run_over_its_budget_says_by_how_much():
    from dsagent_cbr.clock import say_time_of

    assert say_time_of(64.2, 60) == "1m 04s of a 1m budget: 4 s over"
    assert say_time_of(56, 60) == "56s of a 1m budget"
    assert say_time_of(60.4, 60) == "1m 00s of a 1m budget"
    assert say_time_of(12, None) == "12s"


def test_model_errors_are_only_the_steps_that_went_wrong(tmp_path):
    from dsagent_cbr.agent.journal import RunJournal

    journal = RunJournal(tmp_path)
    journal.step(0, "execute", lambda: {"status": "ok", "error": None, "valid_metric": 0.9})  # a run that worked
    journal.step(1, "program", lambda: {"error": "the reply held no code block", "raw": "hello"})
    journal.step(1, "execute", lambda: {"status": "error", "error": "NameError: name 'X' is not defined"}, attempt=1)
    assert journal.errors() == [
        {"iteration": 1, "role": "program", "attempt": 0, "error": "the reply held no code block"},
        {"iteration": 1, "role": "execute", "attempt": 1, "error": "NameError: name 'X' is not defined"}]


def test_a_torn_journal_line_is_dropped_and_the_next_step_appends_cleanly(tmp_path):
    """A run killed mid-write leaves half a line; the resumed run redoes that step and its journal stays
    readable (appending after the torn half would glue two records into one damaged line)."""
    from dsagent_cbr.agent.journal import RunJournal

    RunJournal(tmp_path).step(0, "execute", lambda: {"status": "ok"})
    with (tmp_path / "journal.jsonl").open("a") as fh:
        fh.write('{"iteration": 1, "role": "plan", "attem')
    resumed = RunJournal(tmp_path)
    assert resumed.step(1, "plan", lambda: "again") == "again"
    assert [r["role"] for r in RunJournal(tmp_path).records] == ["execute", "plan"]


# --- untrusted text: feature and column names, error lines, printed output --------------------------------

# invalid mathtext, as a script's importances or a data column's name may hold it
MATHTEXT = {"$x^$": 3.0, "\\frac{": 2.0, "$a_$": 1.0}


def _untrusted_run(tmp_path: Path, importance: dict | None = None) -> tuple[Path, list[dict], dict]:
    run = tmp_path / "run"
    run.mkdir()
    (run / "importance.json").write_text(json.dumps(importance or MATHTEXT))
    rows = [row(1, 5.0, case="$a_$ case", step="printed <b>bold</b> & more"),
            row(2, None, "error", error="<img src=x onerror=alert(1)>"),
            row(3, 4.0, candidate="cand <script>alert(1)</script> | x")]
    summary = {"task": "t", "model": "none", "metric": "$m^$", "direction": "minimize", "best_iteration": 3,
               "best_score": 4.0, "selection_rows": 10, "baselines": {"starter": 6.0},
               "feature_importance": "importance.json", "stopped": "completed"}
    return run, rows, summary


def test_feature_and_column_names_that_are_invalid_mathtext_are_drawn_as_plain_text(tmp_path):
    run, rows, summary = _untrusted_run(tmp_path)
    write_report(run, as_record(rows, summary))
    for name in ("metrics.png", "importance.png"):
        assert (run / name).read_bytes().startswith(PNG)
    write_report(run, as_record(rows, summary, kind="search"))  # the tree's labels too, and again (a resume)
    assert (run / "tree.png").read_bytes().startswith(PNG)
    assert "could not be drawn" not in (run / "report.md").read_text()


def test_plain_text_labels_are_not_parsed_as_mathtext():
    from dsagent_cbr.report.figures import PLAIN_TEXT, build_importance_figure, plain_png

    made = []

    def build():
        made.append(build_importance_figure(MATHTEXT))
        return made[-1]

    assert plain_png(build).startswith(PNG)
    labels = [t for t in made[0].axes[0].get_yticklabels() if t.get_text()]
    assert {t.get_text() for t in labels} == set(MATHTEXT)
    assert not any(t._parse_math or t.get_usetex() for t in labels)  # no mathtext, no TeX
    assert PLAIN_TEXT == {"text.parse_math": False, "text.usetex": False}


@pytest.mark.parametrize("figure", ["build_importance_figure", "build_metrics_figure", "build_tree_figure"])
def test_a_figure_that_fails_is_logged_and_named_in_the_report_and_the_run_goes_on(
        tmp_path, monkeypatch, caplog, figure):
    from dsagent_cbr.report import run_report as report

    def broken(*args, **kwargs):
        raise RuntimeError("matplotlib gave up")

    monkeypatch.setattr(report, figure, broken)
    run, rows, summary = _untrusted_run(tmp_path, {"a": 1.0})
    record = as_record(rows, summary, kind="search", run_dir=run)
    record.save(run)
    saved = (run / "summary.json").read_text()
    write_report(run, record)  # it does not raise
    name = {"build_importance_figure": "importance.png", "build_metrics_figure": "metrics.png",
            "build_tree_figure": "tree.png"}[figure]
    assert not (run / name).exists()
    assert {"metrics.png", "importance.png", "tree.png"} - {name} <= {p.name for p in run.iterdir()}
    md, page = (run / "report.md").read_text(), (run / "report.html").read_text()
    lines = [line for line in md.splitlines() if "could not be drawn" in line]
    assert len(lines) == 1 and "(RuntimeError)" in lines[0] and f"]({name})" not in md
    assert "could not be drawn (RuntimeError)" in page
    assert "| operator | nodes |" in md  # the search's operator table is there without its picture
    assert (run / "summary.json").read_text() == saved  # the run's record is intact
    assert len(json.loads((run / "rows.json").read_text())) == 3
    failures = [r for r in caplog.records if "could not be drawn" in r.getMessage()]
    assert len(failures) == 1 and failures[0].levelname == "WARNING" and failures[0].exc_info


def test_report_md_shows_untrusted_html_as_text(tmp_path):
    run, rows, summary = _untrusted_run(tmp_path, {"<img src=y onerror=f()>": 1.0})
    summary["model"] = "m"
    summary["model_errors"] = [{"iteration": 2, "role": "execute",
                                "error": "printed <script>alert(2)</script>"}]
    summary["feature_importance"] = "missing <i>.json"  # a path in the note
    write_report(run, as_record(rows, summary))
    md = (run / "report.md").read_text()
    assert "&lt;img src=x onerror=alert(1)&gt;" in md and "<img" not in md
    assert "<script" not in md and "&lt;script&gt;alert(2)&lt;/script&gt;" in md
    assert "printed &lt;b&gt;bold&lt;/b&gt; &amp; more" in md and "<b>" not in md and "<i>" not in md
    board = md.split("## Leaderboard")[1].split("##")[0]
    candidate = next(line for line in board.splitlines() if "cand " in line)
    assert "cand &lt;script&gt;alert(1)&lt;/script&gt; \\| x" in candidate  # a pipe stays in its cell
    header = next(line for line in board.splitlines() if line.startswith("| # |"))
    assert candidate.replace("\\|", "").count("|") == header.count("|")
    page = (run / "report.html").read_text()
    assert "<img src=x" not in page and "&lt;img src=x onerror=alert(1)&gt;" in page


def test_bench_figure_draws_plain_labels_and_a_failed_one_leaves_the_tables(tmp_path, monkeypatch):
    from dsagent_cbr.bench import report as tables

    info = {"command": "cbr bench $x^$", "cores": 2, "date": "today", "load_average": [0.1]}
    built = tables.build([], {}, info)
    built.update(tasks=["$a_$", "\\frac{"], agents=[{"agent": "$x^$"}],
                 cells=[{"task": "$a_$", "agent": "$x^$", "runs": 1, "normalised": 0.5}])
    monkeypatch.setattr(tables, "markdown", lambda report, title: "# tables\n")
    paths = tables.write(built, "t", tmp_path)
    assert paths[2].read_bytes().startswith(PNG)

    def broken(*args, **kwargs):
        raise ValueError("no picture")

    monkeypatch.setattr(tables, "_png", broken)
    paths = tables.write(built, "u", tmp_path)
    assert [p.name for p in paths] == ["bench-u.json", "bench-u.md"]
    assert not (tmp_path / "bench-u.png").exists()
    assert "The figure could not be drawn (ValueError)" in (tmp_path / "bench-u.md").read_text()
