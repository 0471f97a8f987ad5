"""The sandboxed runner, with real child processes on a real task."""

from __future__ import annotations

import io
import json
import math
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pandas as pd
import psutil
import pytest

from dsagent_cbr.cores import machine_cores
from dsagent_cbr.harness import upload
from dsagent_cbr.harness.plan import hold_out
from dsagent_cbr.harness.result import RunResult, parse_validation_metric
from dsagent_cbr.harness.run import run_script
from dsagent_cbr.sandbox.bubblewrap import child_environment
from dsagent_cbr.tasks.metrics import rmse


@pytest.mark.integration
def test_starter_runs_and_is_graded_against_the_answers(concrete, tmp_path):
    result = run_script(concrete, concrete.starter, run_dir=tmp_path / "run")
    assert result.ok, result.error
    assert result.valid_metric is not None and result.valid_metric > 0
    raw = (Path(result.workspace) / "submission.csv").read_bytes()  # by the workspace's ids
    sub = pd.read_csv(io.BytesIO(upload.test_rows_only(concrete, hold_out(concrete), raw)))  # by the test rows' own
    answers = pd.read_csv(concrete.private_dir / "answers.csv").merge(sub, on="id", suffixes=("", "_p"))
    expected = rmse(answers["compressive_strength"], answers["compressive_strength_p"])
    assert result.test_metric == expected
    assert result.peak_memory_mb > 10 and result.wall_time > 0
    saved = RunResult.from_dict(json.loads((tmp_path / "run" / "result.json").read_text()))
    assert saved.test_metric == result.test_metric and saved.ok


@pytest.mark.integration
def test_a_sandboxed_run_closes_each_of_its_descriptors_once(concrete, tmp_path, monkeypatch):
    """A second close of a number another thread has opened since closes that thread's file: a node's
    run beside a thread loading the embedding model lost a subprocess pipe so (EBADF)."""
    closes, twice = os.close, []

    def once(fd: int) -> None:
        try:
            closes(fd)
        except OSError as exc:
            twice.append((fd, exc.errno))
            raise

    monkeypatch.setattr(os, "close", once)
    assert run_script(concrete, concrete.starter, run_dir=tmp_path / "run").ok
    assert twice == []


@pytest.mark.integration
def test_timeout_kills_the_whole_tree(concrete, tmp_path):
    marker = f"cbr-test-sleeper-{os.getpid()}"
    script = textwrap.dedent(f"""
        import os, time
        if os.fork() == 0:
            if os.fork() == 0:
                open("grandchild-started", "w").close()
                os.execvp("sleep", [{marker!r}, "300"])
            os._exit(0)
        time.sleep(300)
    """)
    start = time.monotonic()
    result = run_script(concrete, script, run_dir=tmp_path / "run", timeout=2)
    assert result.status == "timeout" and result.timed_out
    assert time.monotonic() - start < 30
    assert (Path(result.workspace) / "grandchild-started").exists()
    time.sleep(0.5)
    assert not [p for p in psutil.process_iter(["cmdline"]) if marker in (p.info["cmdline"] or [])]


@pytest.mark.integration
def test_memory_limit_gives_a_clear_result(concrete, tmp_path):
    script = "import numpy as np\nblocks = []\nfor _ in range(40):\n    blocks.append(np.ones(25_000_000))\n"
    result = run_script(concrete, script, run_dir=tmp_path / "run", memory_mb=300)
    assert result.status == "memory_limit"
    assert "memory limit" in (result.error or "")


def test_child_environment_is_an_allowlist(concrete, tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-should-not-leak")
    monkeypatch.setenv("GITHUB_TOKEN", "ghp-should-not-leak")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("CBR_CORES", "1")  # a run that shares the machine
    script = "import os\nprint('ENV', sorted(os.environ))\nprint('WAIT', os.environ['OMP_WAIT_POLICY'])\n"
    result = run_script(concrete, script, run_dir=tmp_path / "run")
    assert "ENV" in result.stdout
    for name in ("OPENAI_API_KEY", "GITHUB_TOKEN", "HF_HUB_OFFLINE"):
        assert name not in result.stdout
    assert "WAIT PASSIVE" in result.stdout  # OpenMP threads sleep while they wait, beside other runs
    monkeypatch.delenv("CBR_CORES")
    assert "OMP_WAIT_POLICY" not in child_environment(2, "/tmp")  # alone, spinning is faster
    monkeypatch.setenv("CBR_CORES", str(machine_cores()))  # every core: alone too
    assert "OMP_WAIT_POLICY" not in child_environment(2, "/tmp")


AFFINITY = "import os, time\nprint('CORES', sorted(os.sched_getaffinity(0)))\ntime.sleep({})\n"


def _cores(result: RunResult) -> list[int]:
    return json.loads(next(line for line in result.stdout.splitlines() if line.startswith("CORES"))[6:])


@pytest.mark.integration
@pytest.mark.skipif(machine_cores() < 2, reason="one core: nothing to pin to")
def test_a_share_of_the_cores_pins_the_script_to_that_many(concrete, tmp_path, monkeypatch):
    """CBR_CORES=1 set the script's thread pools to one core and left it scheduled on every core; it
    is now pinned to one. Two runs at once take different cores (the least claimed, under a lock),
    and a run alone keeps every core."""
    from concurrent.futures import ThreadPoolExecutor

    monkeypatch.setenv("CBR_CORES", "1")
    with ThreadPoolExecutor(2) as pool:
        first = pool.submit(run_script, concrete, AFFINITY.format(4), run_dir=tmp_path / "first")
        time.sleep(2.5)  # the first is pinned by then (a sandbox starts in well under a second)
        second = run_script(concrete, AFFINITY.format(0), run_dir=tmp_path / "second")
        both = [_cores(first.result()), _cores(second)]
    assert [len(cores) for cores in both] == [1, 1] and both[0] != both[1], both
    monkeypatch.delenv("CBR_CORES")
    alone = run_script(concrete, AFFINITY.format(0), run_dir=tmp_path / "alone")
    assert _cores(alone) == sorted(os.sched_getaffinity(0))


def test_the_least_claimed_cores_are_chosen():
    from dsagent_cbr.sandbox.launch import least_claimed

    assert least_claimed([3, 2, 1, 0], 2, {0: 3, 1: 1}) == [2, 3]
    assert least_claimed([0, 1, 2, 3], 3, {2: 1}) == [0, 1, 3]
    assert least_claimed([0, 1], 1, {0: 2, 1: 2}) == [0]


def test_workspace_is_the_only_writable_place(concrete, tmp_path):
    script = textwrap.dedent(f"""
        import os
        print("TASK VISIBLE", os.path.exists({str(concrete.root)!r}))
        print("CWD", os.getcwd(), sorted(os.listdir(".")))
        for path in ({str(concrete.root)!r}, {str(tmp_path)!r}, "/usr/x"):
            try:
                open(os.path.join(path, "x"), "w").write("x")
                print("WROTE", path)
            except OSError as exc:
                print("REFUSED", path, type(exc).__name__)
    """)
    result = run_script(concrete, script, run_dir=tmp_path / "run")
    assert result.isolated and "WROTE" not in result.stdout
    assert result.stdout.count("REFUSED") == 3
    assert "TASK VISIBLE False" in result.stdout
    assert "CWD /workspace ['test.csv', 'train.csv', 'train.py']" in result.stdout


def test_missing_predictions_is_a_grading_error(concrete, tmp_path):
    result = run_script(concrete, "print('Validation rmse: 1.5')\n", run_dir=tmp_path / "run")
    assert result.status == "grading_error" and "submission.csv" in (result.error or "")
    assert result.valid_metric == 1.5


def test_script_error_reports_the_last_line(concrete, tmp_path):
    result = run_script(concrete, "import no_such_module_xyz\n", run_dir=tmp_path / "run")
    assert result.status == "error"
    assert "ModuleNotFoundError" in (result.error or "")


def test_validation_metric_parsing_reads_only_the_documented_line():
    assert parse_validation_metric("Validation rmse: 3.5\nValidation rmse: 2.25\n", "rmse") == 2.25
    assert parse_validation_metric("final MAE on validation set: 0.125", "mae") == 0.125
    assert parse_validation_metric("Validation ROC AUC: 0.91", "auroc") == 0.91
    assert math.isnan(parse_validation_metric("Validation rmse: nan", "rmse"))  # read: a run printing it fails
    assert parse_validation_metric("nothing here", "rmse") is None
    assert parse_validation_metric("Validation set size: 206\n", "rmse") is None
    assert parse_validation_metric("Validation rmse: 4.1\nValidation set size: 206\n", "rmse") == 4.1
    assert parse_validation_metric("Validation accuracy: 0.8\n", "rmse") is None
    assert parse_validation_metric("valid_auroc=0.91", "auroc") is None


@pytest.mark.integration
def test_grading_rejects_nan_and_missing_ids(concrete, tmp_path):
    script = ("import pandas as pd\ntest = pd.read_csv('test.csv')\n"
              "test[['id']].iloc[:-1].assign(compressive_strength=1.0).to_csv('submission.csv', index=False)\n")
    result = run_script(concrete, script, run_dir=tmp_path / "a")
    assert result.status == "grading_error" and "no prediction" in (result.error or "")
    script = ("import pandas as pd\ntest = pd.read_csv('test.csv')\n"
              "test[['id']].assign(compressive_strength=float('nan')).to_csv('submission.csv', index=False)\n")
    result = run_script(concrete, script, run_dir=tmp_path / "b")
    assert result.status == "grading_error" and "NaN" in (result.error or "")
    assert os.path.isdir(result.workspace)


@pytest.mark.integration
def test_without_bubblewrap_scripts_run_only_when_the_user_says_so(concrete, tmp_path):
    env = {**os.environ, "PATH": str(tmp_path / "no-bwrap-here")}
    cmd = [sys.executable, "-m", "dsagent_cbr.cli", "run", str(concrete.root), str(concrete.starter), "--json"]
    refused = subprocess.run([*cmd, "--out", str(tmp_path / "a")], env=env, capture_output=True, text=True)
    assert refused.returncode == 3 and "bubblewrap (bwrap) is not installed" in refused.stderr
    assert "--no-sandbox" in refused.stderr and not (tmp_path / "a").exists()
    allowed = subprocess.run([*cmd, "--out", str(tmp_path / "b"), "--no-sandbox"], env=env, capture_output=True,
                             text=True)
    result = json.loads(allowed.stdout)
    assert allowed.returncode == 0 and result["status"] == "ok" and result["isolated"] is False


REFIT_SCRIPT = '''
import os
import lightgbm as lgb
import pandas as pd
import xgboost as xgb
from sklearn.model_selection import train_test_split

ROUNDS = {rounds}


def train_model(X_train, y_train, X_valid, y_valid):
    with open("fits.txt", "a") as fits:  # which fit the bootstrap says this is
        fits.write(os.environ.get("CBR_FIT", "first") + "\\n")
    if ROUNDS:  # fixed rounds, no early stopping
        first = lgb.LGBMRegressor(n_estimators=ROUNDS[0], verbose=-1, random_state=0).fit(X_train, y_train)
        second = xgb.XGBRegressor(n_estimators=ROUNDS[1], random_state=0).fit(X_train, y_train)
    else:
        first = lgb.LGBMRegressor(n_estimators=3000, verbose=-1, random_state=0)
        first.fit(X_train, y_train, eval_set=[(X_valid, y_valid)], callbacks=[lgb.early_stopping(20, verbose=False)])
        second = xgb.XGBRegressor(n_estimators=3000, early_stopping_rounds=20, random_state=0)
        second.fit(X_train, y_train, eval_set=[(X_valid, y_valid)], verbose=False)
    with open("built.txt", "a") as built:  # the rounds each booster built in this fit
        built.write(f"{{first.booster_.current_iteration()}} {{second.get_booster().num_boosted_rounds()}}\\n")
    return {{"lgb": first, "xgb": second}}


def predict(model, X):
    return (model["lgb"].predict(X) + model["xgb"].predict(X)) / 2


if __name__ == "__main__":
    data = pd.read_csv("train.csv")
    X, y = data.drop(columns=["id", "compressive_strength"]), data["compressive_strength"]
    X_train, X_valid, y_train, y_valid = train_test_split(X, y, test_size=0.2, random_state=42)
    model = train_model(X_train, y_train, X_valid, y_valid)
    print("Validation rmse: 1.0")
    if os.environ.get("CBR_REFIT"):
        model = train_model(X, y, X_valid, y_valid)
    test = pd.read_csv("test.csv")
    pd.DataFrame({{"id": test["id"], "compressive_strength": predict(model, test.drop(columns=["id"]))}}).to_csv(
        "submission.csv", index=False)
'''


@pytest.mark.integration
def test_a_refit_keeps_the_first_fits_early_stopping_points(concrete, tmp_path):
    """Stopping early on rows it now learns, a refit would run to its cap; it stops at the first fit's
    stopping points instead, as it trains, which makes the very model a fit of that many rounds makes."""
    from dsagent_cbr.agent.refit import stopping_note
    from dsagent_cbr.harness.readers import read_refit_rounds

    stopped = run_script(concrete, REFIT_SCRIPT.format(rounds="None"), run_dir=tmp_path / "stopped", refit=True)
    assert stopped.ok, stopped.error
    rounds = read_refit_rounds(Path(stopped.workspace))
    assert (Path(stopped.workspace) / "fits.txt").read_text().split() == ["first", "refit"]
    assert rounds is not None and len(rounds) == 2
    assert all(first == built for first, built in rounds), rounds  # no round built past the first fit's
    assert all(first < 3000 for first, _ in rounds)
    assert f"points: {rounds[0][0]} rounds, {rounds[1][0]} rounds" in stopping_note(rounds)
    fixed = run_script(concrete, REFIT_SCRIPT.format(rounds=[first for first, _ in rounds]),
                       run_dir=tmp_path / "fixed", refit=True)
    assert fixed.ok, fixed.error
    assert read_refit_rounds(Path(fixed.workspace)) == []  # nothing stopped early or was cut short there
    a, b = (pd.read_csv(Path(r.workspace) / "submission.csv") for r in (stopped, fixed))
    assert np.allclose(a["compressive_strength"], b["compressive_strength"], rtol=0, atol=1e-9)


@pytest.mark.integration
def test_a_refit_told_its_first_fits_rounds_does_not_boost_its_validation_fit_again(concrete, tmp_path):
    """A first fit leaves the rounds its boosters kept; its refit, given them, builds one round per booster
    in the validation fit it only prints a score from, and stops at the first fit's rounds: it predicts what
    a fit of that many rounds on every labelled row predicts."""
    from dsagent_cbr.harness.readers import read_fit_rounds, read_refit_rounds

    script = REFIT_SCRIPT.format(rounds="None")
    first = run_script(concrete, script, run_dir=tmp_path / "first")
    assert first.ok, first.error
    plan = read_fit_rounds(Path(first.workspace))
    assert plan is not None and plan["calls"] == plan["models"] and len(plan["models"]) == 2
    assert all(1 < rounds < 3000 for rounds in plan["models"]), plan
    told = run_script(concrete, script, run_dir=tmp_path / "told", refit=True, first_fit=plan)
    assert told.ok, told.error
    built = (Path(told.workspace) / "built.txt").read_text().splitlines()
    assert built == ["1 1", " ".join(str(r) for r in plan["models"])]
    assert read_refit_rounds(Path(told.workspace)) == [[r, r] for r in plan["models"]]
    assert not (Path(told.workspace) / "cbr_fit_rounds.json").exists()  # a refit is no first fit
    fixed = run_script(concrete, REFIT_SCRIPT.format(rounds=plan["models"]), run_dir=tmp_path / "fixed", refit=True)
    assert fixed.ok, fixed.error
    a, b = (pd.read_csv(Path(r.workspace) / "submission.csv") for r in (told, fixed))
    assert np.allclose(a["compressive_strength"], b["compressive_strength"], rtol=0, atol=1e-9)


@pytest.mark.integration
def test_a_refit_told_its_boosters_stop_nowhere_builds_them_whole_after_a_one_round_validation_fit(
        concrete, tmp_path):
    from dsagent_cbr.harness.readers import read_fit_rounds

    script = REFIT_SCRIPT.format(rounds=[40, 30])  # the floor's kind: fixed rounds, no early stopping
    first = run_script(concrete, script, run_dir=tmp_path / "first")
    plan = read_fit_rounds(Path(first.workspace))
    assert first.ok and plan == {"calls": [None, None], "models": [], "unwatched": [40, 30]}
    told = run_script(concrete, script, run_dir=tmp_path / "told", refit=True, first_fit=plan)
    assert told.ok, told.error
    assert (Path(told.workspace) / "built.txt").read_text().splitlines() == ["1 1", "40 30"]


@pytest.mark.integration
def test_a_blend_re_run_refits_its_members_as_the_search_did(concrete, tmp_path):
    """best_solution.py of a blend (what `cbr predict` re-runs) runs each member under cbr's bootstrap: its
    refit keeps the member's stopping points, so it makes the predictions the member's own refit made."""
    from dsagent_cbr.search import ensemble

    code = REFIT_SCRIPT.format(rounds="None")
    alone = run_script(concrete, code, run_dir=tmp_path / "alone", refit=True)
    member = ensemble.Member(1, code, np.zeros(1))
    blended = run_script(concrete, ensemble.script(concrete, [member], {1: 1.0}), run_dir=tmp_path / "blend",
                         refit=True)
    assert alone.ok and blended.ok, blended.stderr[-2000:]
    a, b = (pd.read_csv(Path(r.workspace) / "submission.csv") for r in (alone, blended))
    assert np.allclose(a["compressive_strength"], b["compressive_strength"], rtol=0, atol=1e-9)


@pytest.mark.integration
def test_a_blend_re_run_tells_each_members_refit_the_rounds_its_first_fit_kept(concrete, tmp_path):
    """As the search's refit of a member is told its node's rounds, so is the member in a re-run blend."""
    from dataclasses import replace

    from dsagent_cbr.harness.readers import read_fit_rounds
    from dsagent_cbr.search import ensemble

    code = REFIT_SCRIPT.format(rounds="None")
    plan = read_fit_rounds(Path(run_script(concrete, code, run_dir=tmp_path / "first").workspace))
    assert plan is not None
    told = run_script(concrete, code, run_dir=tmp_path / "told", refit=True, first_fit=plan)
    member = replace(ensemble.Member(1, code, np.zeros(1)), first_fit=plan)
    blended = run_script(concrete, ensemble.script(concrete, [member], {1: 1.0}), run_dir=tmp_path / "blend",
                         refit=True)
    assert told.ok and blended.ok, blended.stderr[-2000:]
    built = (Path(blended.workspace) / "built.txt").read_text().splitlines()
    assert built == ["1 1", " ".join(str(r) for r in plan["models"])]
    a, b = (pd.read_csv(Path(r.workspace) / "submission.csv") for r in (told, blended))
    assert np.allclose(a["compressive_strength"], b["compressive_strength"], rtol=0, atol=1e-9)


@pytest.mark.integration
def test_a_script_cannot_pass_its_failure_off_as_the_sandboxs(concrete, tmp_path):
    """Whether the sandbox failed is the sandbox's own word (a pipe it writes before the script starts,
    which the script never holds), never what the script prints: words of bubblewrap or setpriv on the
    script's stderr are the script's error."""
    for word in ("bwrap", "setpriv"):
        script = f"import sys\nsys.stderr.write('{word}: Creating new namespace failed: nope\\n')\nsys.exit(1)\n"
        result = run_script(concrete, script, run_dir=tmp_path / word)
        assert result.status == "error" and result.error.startswith(f"{word}: "), result


def test_a_sandbox_that_cannot_start_is_ours(concrete, tmp_path, monkeypatch):
    import pytest

    from dsagent_cbr.sandbox import SandboxUnavailable, run

    real = run.bwrap_argv
    monkeypatch.setattr(run, "bwrap_argv", lambda *a, **k: [real(*a, **k)[0], "--no-such-option", *real(*a, **k)[1:]])
    with pytest.raises(SandboxUnavailable, match="failed to start the script"):
        run_script(concrete, "print('never runs')\n", run_dir=tmp_path / "broken")


# boosting that would run for hours: the deadline must stop it, its rounds kept. The rows are repeated so
# that a round takes a while: thousands of rounds, not tens of thousands whose model alone takes seconds
# to write out and read back (LightGBM copies its booster through a string when training ends)
ENDLESS = {
    "lightgbm": "    import lightgbm as lgb\n"
                "    X_train, y_train = pd.concat([X_train] * 50), pd.concat([y_train] * 50)\n"
                "    return lgb.LGBMRegressor(n_estimators=10**7, learning_rate=1e-4, verbose=-1).fit(\n"
                "        X_train, y_train, eval_set=[(X_valid, y_valid)], callbacks=[lgb.early_stopping(10**6)])\n",
    "xgboost": "    import xgboost as xgb\n"
               "    X_train, y_train = pd.concat([X_train] * 50), pd.concat([y_train] * 50)\n"
               "    return xgb.XGBRegressor(n_estimators=10**7, learning_rate=1e-4, tree_method='hist').fit(X_train, y_train)\n",
}


@pytest.mark.integration
@pytest.mark.parametrize("library", sorted(ENDLESS))
def test_boosting_that_reaches_its_deadline_stops_there_and_its_predictions_are_graded(concrete, tmp_path, library):
    starter = concrete.starter.read_text()
    start = starter.index("def train_model")
    code = (starter[:start] + "def train_model(X_train, y_train, X_valid, y_valid):\n" + ENDLESS[library] + "\n\n"
            + "def predict(model, X):\n    return model.predict(X)\n\n\n" + starter[starter.index('if __name__'):])
    result = run_script(concrete, code, run_dir=tmp_path / library, timeout=24)
    assert result.ok, (result.status, result.error, result.stderr[-1000:])
    assert "stopped at its deadline" in result.stderr  # and it ended in time: graded, not killed
    assert result.selection_metric is not None and result.test_metric is not None
