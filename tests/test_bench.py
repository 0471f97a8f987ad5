"""cbr bench without Ray: the measures, the grid's plan, outcome classification, the AutoML anchors' scripts
(FLAML's, AutoGluon's), and the rule that no deployment task's reference is ever a case."""

from __future__ import annotations

import ast
import json
import os
import sys
from importlib import metadata
from pathlib import Path

import pytest

from dsagent_cbr.bank.casefiles import load_seed
from dsagent_cbr.bench import anchors, autogluon_script, grid, report, trial
from dsagent_cbr.bench.flaml_script import flaml_script, splice, unsupported
from dsagent_cbr.bench.measures import measure, normalised, rank_pool
from dsagent_cbr.bench.references import DEPLOYMENT_REFERENCES, reference_script
from dsagent_cbr.bench.spec import Agent, GridSpec, parse_agents
from dsagent_cbr.errors import CbrError
from dsagent_cbr.tasks.loader import discover_tasks, load_task

REPO = Path(__file__).resolve().parents[1]
TASKS = [load_task(p) for p in discover_tasks(REPO / "tasks")]
DEPLOYMENT = [t for t in TASKS if t.stage == "deployment"]


def recipes(*names: str) -> dict[str, str]:
    return {n: str(REPO / "tasks" / n) for n in names}


def test_ranks_put_failures_last_and_share_ties():
    assert rank_pool([0.9, None, 0.7, 0.9, None], maximize=True) == [1.5, 4.5, 3.0, 1.5, 4.5]
    assert rank_pool([2.0, 1.0, None], maximize=False) == [2.0, 1.0, 3.0]
    assert rank_pool([], maximize=True) == []


def test_normalised_score_is_direction_free():
    assert normalised(0.75, random=0.5, reference=1.0) == pytest.approx(0.5)  # accuracy, higher is better
    assert normalised(5.0, random=10.0, reference=0.0) == pytest.approx(0.5)  # error, lower is better
    assert normalised(12.0, random=10.0, reference=0.0) == pytest.approx(-0.2)  # worse than the starter
    assert normalised(1.0, random=1.0, reference=1.0) is None
    assert normalised(None, random=0.0, reference=1.0) is None


def _rec(task, agent, test, success=True, one_pass=None, outcome=None, cost=0.0):
    return {"task": task, "agent": agent, "kind": agent.split(":")[0], "test_metric": test, "success": success,
            "one_pass": one_pass, "outcome": outcome or ("ok" if success else "failed"), "cost_usd": cost,
            "direction": "maximize"}


def test_measures_pool_agents_per_task_and_leave_infrastructure_out():
    baselines = {"a": {"direction": "maximize", "random": 0.0, "reference": 1.0},
                 "b": {"direction": "minimize", "random": 10.0, "reference": 0.0}}
    records = [
        _rec("a", "deploy:cbr@m", 0.8, one_pass=True, cost=0.02), _rec("a", "deploy:cbr@m", None, False, False),
        _rec("a", "flaml:60", 0.9), _rec("a", "deploy:cbr@m", None, False, outcome="infrastructure"),
        {**_rec("b", "deploy:cbr@m", 2.0, one_pass=False), "direction": "minimize"},
        {**_rec("b", "flaml:60", 4.0), "direction": "minimize"},
    ]
    out = measure(records, baselines)
    cells = {(c["task"], c["agent"]): c for c in out["cells"]}
    # task a pools 3 counted runs: flaml 0.9 (1), deploy 0.8 (2), the failed deploy run last (3)
    assert cells[("a", "deploy:cbr@m")]["mean_rank"] == 2.5 and cells[("a", "deploy:cbr@m")]["best_rank"] == 2
    assert cells[("a", "deploy:cbr@m")]["infrastructure"] == 1 and cells[("a", "deploy:cbr@m")]["runs"] == 2
    assert cells[("a", "deploy:cbr@m")]["normalised"] == pytest.approx(0.4)  # (0.8 + 0) / 2: failures count 0
    assert cells[("b", "deploy:cbr@m")]["mean_rank"] == 1 and cells[("b", "flaml:60")]["normalised"] == pytest.approx(0.6)
    agents = {a["agent"]: a for a in out["agents"]}
    deploy = agents["deploy:cbr@m"]
    assert (deploy["runs"], deploy["successes"], deploy["infrastructure"]) == (3, 2, 1)
    assert (deploy["one_pass_passed"], deploy["one_pass_asked"]) == (1, 3)
    assert deploy["mean_rank"] == pytest.approx((2.5 + 1) / 2) and deploy["best_rank"] == pytest.approx(1.5)
    assert deploy["cost_per_run"] == pytest.approx(0.02 / 3)
    assert agents["flaml:60"]["one_pass"] is None


def test_agents_expand_over_models_and_reject_nonsense():
    agents = parse_agents(["deploy", "develop:no-cbr", "flaml:300", "starter"], ["none", "gguf:/m/x.gguf"])
    assert [a.label for a in agents] == ["deploy:cbr@none", "deploy:cbr@gguf:/m/x.gguf", "develop:no-cbr@none",
                                         "develop:no-cbr@gguf:/m/x.gguf", "flaml:300", "starter"]
    assert Agent.parse("deploy:cbr@gguf:/m/x.gguf") == agents[1]
    assert "/" not in agents[1].slug
    for bad in (["deploy:two-shot"], ["flaml:soon"], ["automl"], ["deploy", "deploy:cbr"]):
        with pytest.raises(CbrError):
            parse_agents(bad, ["none"])


def test_trials_are_seeded_per_index_and_anchors_run_once():
    spec = GridSpec(tasks=["t1", "t2"], agents=["deploy:zero-shot@none", "flaml:60"], trials=3, anchor_trials=1, seed=7)
    trials = spec.trial_list()
    assert len(trials) == 2 * (3 + 1)
    assert [t.seed for t in trials if t.task == "t1" and t.agent.kind == "deploy"] == [7, 8, 9]
    assert len({t.id for t in trials}) == len(trials)
    assert GridSpec.from_dict(json.loads(json.dumps(spec.to_dict()))).digest() == spec.digest()


def test_a_grid_folder_refuses_another_grid(tmp_path):
    spec = GridSpec(tasks=["smoke-ban"], agents=["starter"])
    assert grid.open_grid(tmp_path, spec) is False
    assert grid.open_grid(tmp_path, spec) is True
    with pytest.raises(CbrError, match="another grid"):
        grid.open_grid(tmp_path, GridSpec(tasks=["smoke-ban"], agents=["starter"], trials=5))


def test_retained_cases_of_the_task_are_found_and_nothing_else(tmp_path):
    cases = [{"id": "r1", "kind": "solution", "source_kind": "retained", "task_name": "smoke-ban"},
             {"id": "r2", "kind": "insight", "source_kind": "retained", "competition": "smoke-ban"},
             {"id": "r3", "kind": "solution", "source_kind": "retained", "task_name": "titanic-survival"},
             {"id": "s1", "kind": "solution", "source_kind": "reference", "task_name": "smoke-ban"}]
    (tmp_path / grid.CASES).write_text("\n".join(json.dumps(c) for c in cases))
    assert grid.retained_ids(tmp_path, "smoke-ban") == ["r1", "r2"]


def test_commands_use_the_public_cli_with_the_trial_s_own_folders(tmp_path):
    spec = GridSpec(tasks=["smoke-ban", "call-volume"], agents=["deploy:one-shot-random@none", "develop:no-rerank@local",
                                                                "develop:search@none", "flaml:60", "reference"],
                    task_folders=recipes("smoke-ban", "call-volume"), trials=2, iterations=2, budget=60.0)
    plan = grid.plan(tmp_path, spec, bank=None)
    by_id = {j.trial_id: j for j in plan.jobs}
    deploy = by_id["smoke-ban/deploy-one-shot-random@none/trial-1"]
    assert deploy.command[1:3] == ["-m", "dsagent_cbr.cli"] and deploy.command[3] == "deploy"
    for flag, value in (("--seed", "1"), ("--strategy", "one-shot-random"), ("--model", "none"),
                        ("--bank-dir", f"{deploy.folder}/bank"), ("--runs-dir", f"{deploy.folder}/runs")):
        assert deploy.command[deploy.command.index(flag) + 1] == value
    assert "--no-cache" in deploy.command and "--json" in deploy.command
    develop = by_id["smoke-ban/develop-no-rerank@local/trial-0"]
    assert "--no-rerank" in develop.command and develop.command[develop.command.index("-T") + 1] == "2"
    search = by_id["smoke-ban/develop-search@none/trial-0"]
    assert search.command[search.command.index("--budget") + 1] == "60" and "-T" not in search.command
    assert 60 < search.wall_limit < develop.wall_limit  # the budget, not T iterations, bounds it
    flaml = by_id["smoke-ban/flaml-60/trial-0"]
    assert flaml.command[3] == "run" and "import os" in flaml.script and "FLAML_BUDGET = 60.0" in flaml.script
    assert flaml.wall_limit > 60 and float(flaml.command[flaml.command.index("--timeout") + 1]) >= 420
    # FLAML has no forecasting: the pair is reported, not run; the reference runs everywhere
    assert plan.unsupported == [{"task": "call-volume", "agent": "flaml:60", "reason": unsupported(
        load_task(REPO / "tasks" / "call-volume"))}]
    assert "call-volume/reference/trial-0" in by_id
    # a finished trial is not planned again
    done = Path(deploy.folder)
    done.mkdir(parents=True)
    (done / trial.RECORD).write_text("{}")
    (done / trial.DONE).write_text("")
    again = grid.plan(tmp_path, spec, bank=None)
    assert deploy.trial_id in again.finished and deploy.trial_id not in {j.trial_id for j in again.jobs}


def record_data(**fields: object) -> dict:
    """A run record as summary.json holds it (agent/record.py)."""
    return {"kind": "deploy", "task": "t", "model": "m", "metric": "rmse", "direction": "minimize", "run_dir": "r",
            **fields}


@pytest.mark.parametrize("data,code,timed_out,expected", [
    (None, 2, False, "infrastructure"),  # no record: the run never began
    (record_data(outcome="ok", best_iteration=1), 0, True, "infrastructure"),  # past the harness's wall limit
    (record_data(outcome="infrastructure", stopped="infrastructure: Cannot reach the model server"), 3, False,
     "infrastructure"),
    (record_data(outcome="budget", best_iteration=1, stopped="budget: cost budget $0.50 spent"), 4, False,
     "infrastructure"),
    (record_data(outcome="interrupted", stopped="interrupted"), 130, False, "infrastructure"),
    (record_data(outcome="agent_failure", deploy={"strategy": "cbr", "one_pass": False,
                                                  "llm_error": "error: NameError: name 'np' is not defined"}),
     1, False, "failed"),
    (record_data(outcome="ok", best_iteration=1, best_test=0.8), 0, False, "ok"),
])
def test_outcomes_are_read_from_the_run_record_not_from_words(data, code, timed_out, expected):
    summary = trial.summarise("deploy", data) if data is not None else {"success": False}
    assert trial.classify("deploy", data, summary, code, timed_out, "boom", 60)[0] == expected


def test_results_are_read_from_the_run_folder_before_stdout(tmp_path):
    run = tmp_path / "runs" / "smoke-ban" / "20260101-000000-abcd"
    run.mkdir(parents=True)
    (run / "summary.json").write_text(json.dumps(record_data(outcome="agent_failure", deploy={
        "strategy": "cbr", "one_pass": False, "llm_error": "error: KeyError"})))
    (tmp_path / "stdout.txt").write_text("not json")
    data = trial.find_result("deploy", tmp_path)
    assert trial.summarise("deploy", data)["one_pass"] is False
    assert trial.find_result("starter", tmp_path) is None


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


def test_every_task_has_a_reference_and_no_deployment_reference_is_a_case():
    for task in TASKS:
        assert reference_script(task.name, task.stage) is not None, task.name
    seed = load_seed(REPO / "casebank")
    assert not seed.problems
    deployment = {t.name for t in DEPLOYMENT}
    scripts = {c.script.strip() for c in seed.cases if c.script}
    for task in DEPLOYMENT:
        reference = reference_script(task.name, task.stage)
        assert DEPLOYMENT_REFERENCES in reference.parents and (REPO / "casebank") not in reference.parents
        assert reference.read_text().strip() not in scripts, task.name
    assert not {c.task_name for c in seed.cases} & deployment
    assert not {c.competition for c in seed.cases} & deployment


@pytest.mark.slow
def test_a_trial_runs_the_cli_from_a_clean_folder_and_marks_itself_done(tmp_path):
    task = load_task(REPO / "tasks" / "titanic-survival")
    from dsagent_cbr.tasks.prepare import prepare_task

    prepare_task(task)
    folder = tmp_path / "t"
    (folder / "runs").mkdir(parents=True)
    (folder / "runs" / "stale.txt").write_text("from a killed run")
    job = trial.TrialJob(trial_id="titanic-survival/starter/trial-0", task=task.name, agent="starter", kind="starter",
                         index=0, seed=0, folder=str(folder), wall_limit=300, script=task.starter.read_text(),
                         command=[sys.executable, "-m", "dsagent_cbr.cli", "run", str(task.root),
                                  str(folder / "solution.py"), "--json", "--out", str(folder / "run"),
                                  "--timeout", "120"])
    record = trial.execute(job)
    assert record["outcome"] == "ok" and record["exit_code"] == 0 and 0 < record["test_metric"] < 1
    assert trial.is_done(folder) and trial.load_record(folder) == json.loads(json.dumps(record, default=str))
    assert not (folder / "runs" / "stale.txt").exists()


@pytest.mark.parametrize("argv", [["--help"], ["bench", "--help"], ["bench", "run", "--help"]])
def test_help_does_not_import_ray_or_flaml(argv):
    import subprocess

    code = (f"import sys\nfrom dsagent_cbr.cli import main\nmain({argv!r})\n"
            "print('HEAVY', [m for m in ('ray', 'flaml', 'torch', 'matplotlib') if m in sys.modules])\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO)
    assert "HEAVY []" in proc.stdout, proc.stdout + proc.stderr


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


def test_a_trial_keeps_to_its_share_of_the_cores(monkeypatch: pytest.MonkeyPatch) -> None:
    from dsagent_cbr.cluster import share_of_cores
    from dsagent_cbr.cores import usable_cores
    from dsagent_cbr.errors import CbrError
    from dsagent_cbr.sandbox.bubblewrap import SandboxPolicy

    class Cluster:  # what share_of_cores reads of ray: the live nodes
        def __init__(self, *cpus: int) -> None:
            self.cpus = cpus

        def nodes(self) -> list[dict]:
            return [{"Alive": True, "Resources": {"CPU": c}} for c in self.cpus]

    assert [share_of_cores(Cluster(2), 2, p) for p in (1, 2, 3)] == [2, 1, 1]
    assert share_of_cores(Cluster(8, 2), 10, 2) == 2  # never more than the smallest node has
    monkeypatch.setenv("CBR_CORES", "1")
    assert usable_cores() == 1 and SandboxPolicy().cores == 1
    monkeypatch.setenv("CBR_CORES", "two")
    with pytest.raises(CbrError, match="CBR_CORES must be a whole number"):
        usable_cores()
    monkeypatch.delenv("CBR_CORES")
    assert usable_cores() == len(os.sched_getaffinity(0))


def test_a_table_names_the_learner_releases_its_scores_ran_on(monkeypatch: pytest.MonkeyPatch) -> None:
    # FLAML's anchor measured again on other releases is another anchor: the table must say which it ran on
    monkeypatch.setattr(report, "LEARNERS", ("numpy", "no-such-learner"))
    info = report.stamp()
    assert info["packages"] == {"numpy": metadata.version("numpy")}
    table = report.markdown(report.build([], {}, info), "t")
    assert f"- packages: numpy {metadata.version('numpy')}\n" in table


def test_a_task_of_the_user_s_own_is_tabled_by_the_metric_its_trials_ran_under() -> None:
    # a grid over tasks found through tasks_dir: the suite's baselines table does not know them
    records = [{**_rec("mine", "flaml:60", 0.7), "metric": "accuracy"}, {**_rec("a", "flaml:60", 0.5), "metric": "auroc"}]
    built = report.build(records, {"a": {"metric": "AUROC", "direction": "maximize", "random": 0.5, "reference": 0.9}},
                         report.stamp())
    assert built["baselines"]["mine"] == {"metric": "accuracy", "direction": "maximize", "random": None, "reference": None}
    assert built["baselines"]["a"]["metric"] == "AUROC" and built["baselines"]["a"]["random"] == 0.5
    assert "| mine | accuracy ↑ |" in report.markdown(built, "t")


def test_a_table_names_the_commit_its_trials_ran_at_when_later_code_tables_them() -> None:
    # `cbr bench report` on a grid run before a change: the table's commit is not what ran
    records = [{**_rec("a", "flaml:60", 0.5), "started": 0.0, "wall_seconds": 60.0, "commit": "abc1234"}]
    later = report.markdown(report.build(records, {}, {**report.stamp(), "commit": "def5678"}), "t")
    assert "(commit def5678); trials ran" in later and "at commit abc1234\n" in later
    same = report.markdown(report.build(records, {}, {**report.stamp(), "commit": "abc1234"}), "t")
    assert "at commit" not in same


def own_task(folder: Path, *, data: bool = False, answers: bool = True) -> Path:
    """A user's task: concrete-strength copied to `folder` (its name the folder's), with or without its
    data, with or without its test answers."""
    import shutil

    source = REPO / "tasks" / "concrete-strength"
    keep = {"task.toml", "description.md", "train.py", "prepare.py", *(("data",) if data else ())}
    shutil.copytree(source, folder, ignore=lambda d, names: [n for n in names if Path(d) == source and n not in keep])
    toml = (source / "task.toml").read_text().replace('"concrete-strength"', f'"{folder.name}"')
    if not answers:
        toml = toml.replace('answers = "answers.csv"\n', "")
    (folder / "task.toml").write_text(toml)
    return folder


def test_bench_tasks_are_found_as_every_command_finds_them(tmp_path, monkeypatch):
    mine = own_task(tmp_path / "tasks" / "my-concrete")
    monkeypatch.chdir(tmp_path)
    expected = {"my-concrete": mine.resolve()}
    assert grid.select_tasks("my-concrete", REPO / "tasks") == expected  # a bare name, in ./tasks
    assert grid.select_tasks("tasks/my-concrete", REPO / "tasks") == expected  # a path
    assert grid.select_tasks(str(mine), REPO / "tasks") == expected
    # groups stay the recipes'; a name given twice, or as a name and a path, is one task
    both = grid.select_tasks("deployment, my-concrete,tasks/my-concrete", REPO / "tasks")
    assert list(both) == [t.name for t in DEPLOYMENT] + ["my-concrete"]
    assert all(both[t.name] == REPO / "tasks" / t.name for t in DEPLOYMENT)
    assert grid.select_tasks("smoke-ban", REPO / "tasks") == {"smoke-ban": REPO / "tasks" / "smoke-ban"}
    own_task(tmp_path / "elsewhere" / "my-concrete")
    with pytest.raises(CbrError, match="Two task folders are named my-concrete"):
        grid.select_tasks("my-concrete,elsewhere/my-concrete", REPO / "tasks")


@pytest.mark.integration
def test_an_unknown_task_is_one_sentence_naming_it(tmp_path, monkeypatch):
    import subprocess

    monkeypatch.chdir(tmp_path)
    with pytest.raises(CbrError) as raised:
        grid.select_tasks("smoke-ban,no-such-task", REPO / "tasks")
    message = str(raised.value)
    assert message.startswith("No task folder 'no-such-task'") and "\n" not in message and message.count(". ") == 0
    env = {**os.environ, "CBR_HOME": str(tmp_path / "home"), "PYTHONPATH": str(REPO)}
    proc = subprocess.run([sys.executable, "-m", "dsagent_cbr.cli", "bench", "run", "--tasks", "no-such-task",
                           "--agents", "starter"], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert proc.returncode == 2 and proc.stderr.strip().splitlines() == [f"Error: {message}"]


def test_the_spec_keeps_each_task_s_absolute_folder_for_resumes_and_workers(tmp_path, monkeypatch):
    mine = own_task(tmp_path / "tasks" / "my-concrete").resolve()
    monkeypatch.chdir(tmp_path)
    folders = grid.select_tasks("tasks/my-concrete", REPO / "tasks")
    spec = GridSpec(tasks=list(folders), task_folders={t: str(f) for t, f in folders.items()}, agents=["starter"])
    saved = GridSpec.from_dict(json.loads(json.dumps(spec.to_dict())))
    assert saved.folder("my-concrete") == mine and mine.is_absolute() and saved.digest() == spec.digest()
    assert grid.open_grid(tmp_path / "grid", spec) is False
    (tmp_path / "other").mkdir()
    monkeypatch.chdir(tmp_path / "other")  # a resume from elsewhere, and a worker's folder, find the same task
    assert grid.open_grid(tmp_path / "grid", saved) is True
    (job,) = grid.plan(tmp_path / "grid", saved, bank=None).jobs
    assert job.command[job.command.index("run") + 1] == str(mine) and job.test_answers is True
    moved = own_task(tmp_path / "moved" / "my-concrete").resolve()
    with pytest.raises(CbrError, match=f"ran my-concrete from {mine}, not {moved}"):
        grid.open_grid(tmp_path / "grid", GridSpec(tasks=["my-concrete"], task_folders={"my-concrete": str(moved)},
                                                   agents=["starter"]))
    # a grid made before grids kept their folders resumes, and keeps them from then on
    older = {k: v for k, v in spec.to_dict().items() if k != "task_folders"}
    (tmp_path / "older").mkdir()
    (tmp_path / "older" / grid.SPEC_FILE).write_text(json.dumps(older))
    assert grid.open_grid(tmp_path / "older", spec) is True
    assert json.loads((tmp_path / "older" / grid.SPEC_FILE).read_text())["task_folders"] == {"my-concrete": str(mine)}


def _untested(agent: str, selection: float | None, success: bool = True, **more: object) -> dict:
    return {**_rec("mine", agent, None, success), "selection_metric": selection, "metric": "accuracy",
            "test_answers": False, **more}


def test_a_task_without_test_answers_is_tabled_by_selection_scores_and_not_ranked(tmp_path):
    records = [_untested("flaml:60", 0.8), _untested("flaml:60", 0.9), _untested("starter", 0.5),
               _untested("deploy:cbr@none", None, success=False),
               _untested("deploy:cbr@none", None, success=False, outcome="infrastructure", id="mine/d/trial-1",
                         reason="the model server did not answer"),
               {**_rec("a", "flaml:60", 0.7), "test_answers": True}, {**_rec("a", "starter", 0.5), "test_answers": True}]
    built = report.build(records, {"a": {"metric": "AUROC", "direction": "maximize", "random": 0.5, "reference": 0.9}},
                         report.stamp())
    assert built["tasks"] == ["a"] and built["untested_tasks"] == ["mine"]
    assert {c["task"] for c in built["cells"]} == {"a"} and {a["agent"]: a["tasks"] for a in built["agents"]} == {
        "flaml:60": 1, "starter": 1}
    flaml = next(c for c in built["selection_scores"] if c["agent"] == "flaml:60")
    assert (flaml["runs"], flaml["successes"], flaml["best_selection"]) == (2, 2, 0.9)
    assert flaml["mean_selection"] == pytest.approx(0.85)
    text = report.markdown(built, "t")
    assert "### mine (accuracy ↑)\n" in text and "| flaml:60 | 2/2 | 0.85 | 0.9 |" in text
    assert "| starter | 1/1 | 0.5 | 0.5 |" in text and "| deploy:cbr@none | 0/1 | — | — |" in text
    assert not [line for line in text.splitlines() if line.startswith("| mine |")]  # in no ranked table
    assert "## Scores on your tasks" in text.split("\n## Per task and agent")[0]  # what `cbr bench run` prints
    # records made before they said so: no test score anywhere on the task, selection scores there
    older = [{k: v for k, v in r.items() if k != "test_answers"} for r in records]
    assert report.build(older, {}, report.stamp())["untested_tasks"] == ["mine"]
    # a grid of only such tasks: no ranked tables, and no figure of normalised scores that do not exist
    alone = report.build(records[:5], {}, report.stamp())
    paths = report.write(alone, "own", tmp_path)
    assert [p.name for p in paths] == ["bench-own.json", "bench-own.md"]
    assert "## Agents" not in paths[1].read_text() and "No figure" in paths[1].read_text()


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_a_grid_runs_a_task_folder_of_the_user_s_and_tables_it_in_bench_here(tmp_path):
    """`cbr bench run --tasks <a folder outside the recipes>` for real on local Ray: the trial's command names
    the folder whole, and the tables, with the task's selection scores, land in ./bench."""
    import subprocess

    mine = own_task(tmp_path / "data" / "my-concrete", data=True, answers=False)
    work = tmp_path / "work"
    work.mkdir()
    env = {**os.environ, "CBR_HOME": str(tmp_path / "home"), "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-m", "dsagent_cbr.cli", "bench", "run", "--tasks", "../data/my-concrete",
                           "--agents", "starter", "--trials", "1", "--parallel", "1", "--timeout", "300",
                           "--grid", str(tmp_path / "grid"), "--name", "own"], cwd=work, env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (record,) = json.loads((work / "bench" / "bench-own.json").read_text())["trials"]
    assert record["outcome"] == "ok" and record["test_metric"] is None and record["selection_metric"] > 0
    assert record["command"][record["command"].index("run") + 1] == str(mine.resolve())
    table = (work / "bench" / "bench-own.md").read_text()
    assert "### my-concrete (rmse ↓)" in table and "| starter | 1/1 |" in table and "## Agents" not in table
    assert "## Scores on your tasks" in done.stdout


# --- the AutoGluon anchor -----------------------------------------------------------------------------

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

    records = [{**_rec("a", "flaml:60", 0.8), "selection_metric": 0.79},
               {**_rec("a", "autogluon:60", 0.85), "selection_metric": 0.84},
               {**_rec("a", "starter", 0.5), "selection_metric": 0.5}]
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
