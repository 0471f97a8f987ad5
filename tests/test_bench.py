"""cbr bench without Ray: the measures, the grid's plan, outcome classification, the tables, and the rule
that no deployment task's reference is ever a case. The AutoML anchors' scripts: test_bench_anchors.py; a
user's own tasks in a grid: test_bench_own_tasks.py."""

from __future__ import annotations

import json
import os
import sys
from importlib import metadata
from pathlib import Path

import pytest
from support.bench_data import DEPLOYMENT, REPO, TASKS, recipes, trial_record

from dsagent_cbr.bank.casefiles import load_seed
from dsagent_cbr.bench import grid, report, trial
from dsagent_cbr.bench.flaml_script import unsupported
from dsagent_cbr.bench.measures import measure, normalised, rank_pool
from dsagent_cbr.bench.references import DEPLOYMENT_REFERENCES, reference_script
from dsagent_cbr.bench.spec import Agent, GridSpec, parse_agents
from dsagent_cbr.errors import CbrError
from dsagent_cbr.tasks.loader import load_task


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


def test_measures_pool_agents_per_task_and_leave_infrastructure_out():
    baselines = {"a": {"direction": "maximize", "random": 0.0, "reference": 1.0},
                 "b": {"direction": "minimize", "random": 10.0, "reference": 0.0}}
    records = [
        trial_record("a", "deploy:cbr@m", 0.8, one_pass=True, cost=0.02), trial_record("a", "deploy:cbr@m", None, False, False),
        trial_record("a", "flaml:60", 0.9), trial_record("a", "deploy:cbr@m", None, False, outcome="infrastructure"),
        {**trial_record("b", "deploy:cbr@m", 2.0, one_pass=False), "direction": "minimize"},
        {**trial_record("b", "flaml:60", 4.0), "direction": "minimize"},
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
    assert "--no-cache" in deploy.command and "--json" in deploy.command and "--disk" not in deploy.command
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
    records = [{**trial_record("mine", "flaml:60", 0.7), "metric": "accuracy"}, {**trial_record("a", "flaml:60", 0.5), "metric": "auroc"}]
    built = report.build(records, {"a": {"metric": "AUROC", "direction": "maximize", "random": 0.5, "reference": 0.9}},
                         report.stamp())
    assert built["baselines"]["mine"] == {"metric": "accuracy", "direction": "maximize", "random": None, "reference": None}
    assert built["baselines"]["a"]["metric"] == "AUROC" and built["baselines"]["a"]["random"] == 0.5
    assert "| mine | accuracy ↑ |" in report.markdown(built, "t")


def test_a_table_names_the_commit_its_trials_ran_at_when_later_code_tables_them() -> None:
    # `cbr bench report` on a grid run before a change: the table's commit is not what ran
    records = [{**trial_record("a", "flaml:60", 0.5), "started": 0.0, "wall_seconds": 60.0, "commit": "abc1234"}]
    later = report.markdown(report.build(records, {}, {**report.stamp(), "commit": "def5678"}), "t")
    assert "(commit def5678); trials ran" in later and "at commit abc1234\n" in later
    same = report.markdown(report.build(records, {}, {**report.stamp(), "commit": "abc1234"}), "t")
    assert "at commit" not in same
