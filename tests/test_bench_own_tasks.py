"""cbr bench on a user's own tasks: found by name or path as every command finds them, kept by their folder
for resumes and workers, and tabled by selection scores when they have no test answers."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
from support.bench_data import DEPLOYMENT, REPO, trial_record

from dsagent_cbr.bench import grid, report
from dsagent_cbr.bench.spec import GridSpec
from dsagent_cbr.errors import CbrError


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
    return {**trial_record("mine", agent, None, success), "selection_metric": selection, "metric": "accuracy",
            "test_answers": False, **more}


def test_a_task_without_test_answers_is_tabled_by_selection_scores_and_not_ranked(tmp_path):
    records = [_untested("flaml:60", 0.8), _untested("flaml:60", 0.9), _untested("starter", 0.5),
               _untested("deploy:cbr@none", None, success=False),
               _untested("deploy:cbr@none", None, success=False, outcome="infrastructure", id="mine/d/trial-1",
                         reason="the model server did not answer"),
               {**trial_record("a", "flaml:60", 0.7), "test_answers": True}, {**trial_record("a", "starter", 0.5), "test_answers": True}]
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
