"""`cbr runs list|show|rm` over run folders made by hand (real records saved by record.py, configs by
rundir.py) and the home's index of runs; one slow test finds a real `cbr deploy` run through the index."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from dsagent_cbr.agent import runs_index
from dsagent_cbr.agent.record import Row, RunRecord
from dsagent_cbr.agent.rundir import new_run_dir, save_config
from dsagent_cbr.cli import cli, main
from dsagent_cbr.errors import CbrError, Outcome

CBR = [sys.executable, "-m", "dsagent_cbr.cli"]


@pytest.fixture
def home(tmp_path, monkeypatch):
    """CBR_HOME and the runs folder in tmp_path; cbr runs from tmp_path/cwd, so ./runs is not the project's."""
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    monkeypatch.setenv("CBR_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("CBR_RUNS_DIR", str(tmp_path / "runs"))
    return tmp_path / "home"


def cbr_runs(*args: str, input: str | None = None):
    return CliRunner().invoke(cli, ["runs", *args], input=input)


def make_run(runs: Path, task: str, run_id: str, *, kind: str = "search", selection: float | None = 4.2303901,
             took: float | None = 108.0, outcome: Outcome = Outcome.OK, summary: bool = True,
             final: bool = True) -> Path:
    """A run folder as develop or deploy leaves it: config.json, and (unless still running) its record."""
    folder = runs / task / run_id
    folder.mkdir(parents=True)
    section = {"deploy": {"strategy": "cbr"}} if kind == "deploy" else {"develop": {"iterations": 2}}
    save_config(folder, {"task_dir": f"/tasks/{task}", **section, "settings": {"model": "none", "store": "faiss"}})
    if summary:
        graded = selection is not None
        rows = [Row(iteration=1, status="ok", selection=selection, score=selection, test=4.5)] if graded else []
        RunRecord(kind=kind, task=task, model="none", metric="rmse", direction="minimize", run_dir=str(folder),
                  outcome=outcome, stopped="the cap of 2 nodes reached", took=took, rows=rows, selection_rows=154,
                  best_iteration=1 if graded else None, best_selection=selection, best_score=selection,
                  best_test=4.5 if graded else None, submission=str(folder / "submission.csv"),
                  best_solution=str(folder / "best_solution.py"), final=final).save(folder)
        (folder / "best_solution.py").write_text("print('hi')\n")
        (folder / "submission.csv").write_text("id,y\n1,2\n")
        (folder / "report.md").write_text("# report\n")
    return folder


def index(home: Path, folder: Path, task: str, started: str) -> None:
    """An index line with a chosen start time (register stamps now: these runs must differ)."""
    home.mkdir(parents=True, exist_ok=True)
    with (home / "runs.jsonl").open("a") as fh:
        fh.write(json.dumps({"run_dir": str(folder), "task": task, "started": started}) + "\n")


@pytest.fixture
def three(home, tmp_path):
    """An old finished search, a deploy with no graded solution, and a newest run still going (no record)."""
    runs = tmp_path / "runs"
    old = make_run(runs, "concrete", "20260101-090000-aaaa")
    failed = make_run(runs, "concrete", "20260102-090000-bbbb", kind="deploy", selection=None, took=7.2,
                      outcome=Outcome.AGENT_FAILURE)
    going = make_run(runs, "titanic", "20260103-090000-cccc", summary=False)
    for folder, day in ((old, 1), (failed, 2), (going, 3)):
        index(home, folder, folder.parent.name, f"2026-01-0{day}T09:00:00+00:00")
    return old, failed, going


def test_list_is_newest_first_with_each_runs_facts(three):
    old, failed, going = three
    listed = json.loads(cbr_runs("list", "--json").output)
    assert [r["id"] for r in listed] == [going.name, failed.name, old.name]
    assert listed[2] | {"started": None} == {
        "id": old.name, "task": "concrete", "kind": "search", "model": "none", "metric": "rmse",
        "selection": 4.2303901, "outcome": "ok", "stopped": "the cap of 2 nodes reached", "took": 108.0,
        "started": None, "folder": str(old)}
    assert listed[1]["kind"] == "deploy" and listed[1]["selection"] is None and listed[1]["outcome"] == "agent_failure"
    assert listed[0]["kind"] == "develop" and listed[0]["outcome"] == "running or killed" and listed[0]["took"] is None
    table = cbr_runs("list").output
    assert table.index(going.name) < table.index(failed.name) < table.index(old.name)
    old_row = next(line for line in table.splitlines() if old.name in line)
    assert "4.2304" in old_row and "4.23039" not in old_row and "1m 48s" in old_row and str(old) in old_row
    failed_row = next(line for line in table.splitlines() if failed.name in line)
    assert "—" in failed_row and "7s" in failed_row and "agent_failure" in failed_row
    assert "running or killed" in table and "None" not in table


def test_list_filters_by_task_and_limits(three):
    old, failed, going = three
    assert [r["id"] for r in json.loads(cbr_runs("list", "--task", "concrete", "--json").output)] == [
        failed.name, old.name]
    assert [r["id"] for r in json.loads(cbr_runs("list", "--limit", "1", "--json").output)] == [going.name]
    assert "No runs for task nope" in cbr_runs("list", "--task", "nope").output


def test_a_run_folder_not_in_the_index_is_listed_too(home, tmp_path):
    elsewhere = make_run(tmp_path / "other-runs", "concrete", "20260105-090000-dddd")  # another --runs-dir
    index(home, elsewhere, "concrete", "2026-01-05T09:00:00+00:00")
    unindexed = make_run(tmp_path / "runs", "concrete", "20260104-090000-eeee")  # made before the index
    (tmp_path / "runs" / "concrete" / "run-20260104-090000").mkdir()  # `cbr run`'s folder: no config.json
    listed = json.loads(cbr_runs("list", "--json").output)
    assert [(r["id"], r["folder"]) for r in listed] == [(elsewhere.name, str(elsewhere)),
                                                         (unindexed.name, str(unindexed))]
    assert listed[1]["started"].startswith("2026-01-04T09:00:00")  # from its id


@pytest.mark.integration
def test_malformed_and_stale_index_lines_are_skipped(home, tmp_path):
    run = make_run(tmp_path / "elsewhere", "concrete", "20260101-090000-aaaa")
    gone = tmp_path / "elsewhere" / "concrete" / "20260102-090000-gone"
    home.mkdir()
    (home / "runs.jsonl").write_text("\n".join([
        "not json", "[1, 2]", json.dumps({"run_dir": 3, "task": "x", "started": "2026-01-01T00:00:00"}),
        json.dumps({"run_dir": str(run), "task": "concrete"}),  # no start time
        json.dumps({"run_dir": "relative/run", "task": "x", "started": "2026-01-01T00:00:00"}),
        json.dumps({"run_dir": str(gone), "task": "concrete", "started": "2026-01-02T09:00:00+00:00"}),
        json.dumps({"run_dir": str(run), "task": "concrete", "started": "2026-01-01T09:00:00+00:00"}),
        json.dumps({"run_dir": str(run), "task": "concrete", "started": "2026-01-01T09:00:00+00:00"}),
        '{"run_dir": "/torn']))  # a last line without its newline: a writer that died mid-write
    result = cbr_runs("list", "--json")
    assert result.exit_code == 0, result.output
    assert [r["folder"] for r in json.loads(result.output)] == [str(run)]


def _secret(folder: Path) -> Path:
    """A file only root may read, as /etc/shadow is: what a link in a forged run folder points at."""
    secret = folder / "secret"
    secret.write_text("root-only secret\n")
    secret.chmod(0o600)
    return secret


HOSTILE_RECORDS = {
    "nested 100k deep": lambda path: path.write_text("[" * 100_000 + "]" * 100_000),
    "nested 200 deep": lambda path: path.write_text('{"kind": ' + "[" * 200 + "]" * 200 + "}"),
    "3 GB": lambda path: os.truncate(path, 3 * 2**30),  # sparse: it takes no room, only reading it would
    "a link to a root-only file": lambda path: (path.unlink(), path.symlink_to(_secret(path.parent.parent))),
    "a lone surrogate": lambda path: path.write_text('{"kind": "search", "task": "\\ud800"}'),
    "a pipe": lambda path: (path.unlink(), os.mkfifo(path)),
}


@pytest.mark.parametrize("damage", list(HOSTILE_RECORDS))
def test_a_damaged_record_makes_its_one_run_unreadable_and_the_rest_list(three, damage):
    """A record nested 100k deep killed `cbr runs list` for every run (RecursionError), and a 3 GB one
    was read whole (6.3 GB of memory, 87 s): each is now its own run's "unreadable record", found
    without reading past MAX_RECORD_BYTES, and nothing of what a link points at is shown."""
    old, failed, going = three
    HOSTILE_RECORDS[damage](old / "summary.json")
    HOSTILE_RECORDS[damage](going / "config.json")  # a run with no record yet: its config is all it has
    start = time.monotonic()
    result = cbr_runs("list", "--json")
    assert result.exit_code == 0, result.output
    outcomes = {r["id"]: r["outcome"] for r in json.loads(result.output)}
    assert outcomes == {old.name: "unreadable record", failed.name: "agent_failure",
                        going.name: "unreadable record"}
    table = cbr_runs("list")
    assert table.exit_code == 0 and table.output.count("unreadable record") == 2
    shown = cbr_runs("show", old.name)
    assert shown.exit_code == 0 and "outcome:        unreadable record" in shown.output
    assert "secret" not in table.output + shown.output and time.monotonic() - start < 10


def test_text_from_records_and_folder_names_reaches_the_terminal_escaped(home, tmp_path):
    """A folder name and a record's task that set the window's title and clear the screen, and rich
    markup: each is shown as its escapes, as written, and runs nothing."""
    run = make_run(tmp_path / "runs", "a\x1b[2Jtask[bold]", "20260106-090000-\x1b]0;pwned\x07")
    table, shown = cbr_runs("list"), cbr_runs("show", run.name)
    assert table.exit_code == 0 and shown.exit_code == 0, table.output + shown.output
    for output in (table.output, shown.output):
        assert "\x1b" not in output and "\x07" not in output
        assert "\\x1b]0;pwned\\x07" in output and "a\\x1b[2Jtask[bold]" in output.replace("\n", "")


def test_new_run_dir_registers_in_the_home_and_rm_takes_it_out(tmp_path):
    home = tmp_path / "home"
    first = new_run_dir(tmp_path / "runs", "concrete", home)
    second = new_run_dir(tmp_path / "runs", "concrete", home)
    new_run_dir(tmp_path / "scratch", "concrete")  # no home: an experiment's scratch run is not indexed
    entries = runs_index.read(home)
    assert {e.run_dir for e in entries} == {first.resolve(), second.resolve()} and entries[0].task == "concrete"
    assert runs_index.remove(home, first) == 1 and [e.run_dir for e in runs_index.read(home)] == [second.resolve()]


def test_show_by_unique_prefix(three):
    old, _, _ = three
    result = cbr_runs("show", "20260101")
    assert result.exit_code == 0, result.output
    facts = dict(line.split(":", 1) for line in result.output.splitlines())
    facts = {label: value.strip() for label, value in facts.items()}
    assert facts["run"] == old.name and facts["task"] == "concrete (rmse, minimize)" and facts["model"] == "none"
    assert facts["outcome"] == "ok (the cap of 2 nodes reached)" and facts["took"] == "1m 48s"
    assert facts["selection"] == "rmse 4.2304 (iteration 1; graded by cbr on 154 held-back rows)"
    assert facts["submission"] == str(old / "submission.csv") and facts["report"] == str(old / "report.md")
    assert facts["best solution"] == str(old / "best_solution.py") and "resume" not in facts


def test_show_says_how_to_resume_a_run_that_did_not_end(three, tmp_path):
    _, failed, going = three
    shown = cbr_runs("show", str(going)).output  # by its path
    assert "running or killed" in shown and f"cbr develop --resume {going} (unless it is still running)" in shown
    interrupted = make_run(tmp_path / "runs", "concrete", "20260104-090000-ffff", outcome=Outcome.INTERRUPTED)
    assert f"cbr develop --resume {interrupted}\n" in cbr_runs("show", interrupted.name).output
    assert "--resume" not in cbr_runs("show", failed.name).output  # the model's failure: nothing to go on with
    assert "selection:      — (no graded solution)" in cbr_runs("show", failed.name).output


def test_a_record_saved_mid_run_is_not_taken_for_the_end(home, tmp_path):
    """A run saves its record after every iteration, as if it ended there: only its last save is final."""
    going = make_run(tmp_path / "runs", "concrete", "20260104-090000-abcd", final=False)
    done = make_run(tmp_path / "runs", "concrete", "20260103-090000-abcd")
    listed = {r["id"]: r for r in json.loads(cbr_runs("list", "--json").output)}
    assert listed[going.name]["outcome"] == "running or killed" and listed[going.name]["selection"] == 4.2303901
    assert listed[done.name]["outcome"] == "ok"
    shown = cbr_runs("show", going.name).output
    assert "outcome:        running or killed (its record was last saved after 1 iteration(s))" in shown
    assert "selection:      rmse 4.2304 (iteration 1; graded by cbr on 154 held-back rows) so far" in shown
    assert f"cbr develop --resume {going} (unless it is still running)" in shown
    assert "--resume" not in cbr_runs("show", done.name).output


def test_an_ambiguous_or_unknown_id_is_one_sentence(three):
    old, failed, _ = three
    ambiguous = cbr_runs("show", "2026010")
    assert isinstance(ambiguous.exception, CbrError)
    message = str(ambiguous.exception)
    assert message.startswith("Run id '2026010' is ambiguous") and f"concrete/{old.name}" in message
    assert f"concrete/{failed.name}" in message and "\n" not in message
    unknown = cbr_runs("show", "2027")
    assert isinstance(unknown.exception, CbrError) and "No run '2027'" in str(unknown.exception)


def test_the_cli_exits_2_with_the_sentence(three, capsys):
    assert main(["runs", "show", "2026010"]) == 2
    assert capsys.readouterr().err.startswith("Error: Run id '2026010' is ambiguous")


def test_rm_yes_removes_the_folder_and_its_index_line(three, home):
    old, failed, going = three
    assert isinstance(cbr_runs("rm", "2026010", "--yes").exception, CbrError)  # every run's prefix: none goes
    assert old.exists() and failed.exists() and going.exists()
    result = cbr_runs("rm", "20260101", "--yes")
    assert result.exit_code == 0, result.output
    assert not old.exists() and failed.exists() and going.exists()
    lines = (home / "runs.jsonl").read_text().splitlines()
    assert len(lines) == 2 and not any(str(old) in line for line in lines)
    assert [r["id"] for r in json.loads(cbr_runs("list", "--json").output)] == [going.name, failed.name]


def test_rm_asks_first(three):
    old, _, _ = three
    declined = cbr_runs("rm", old.name, input="n\n")
    assert declined.exit_code != 0 and old.exists() and "Remove run" in declined.output
    assert cbr_runs("rm", old.name, input="y\n").exit_code == 0 and not old.exists()


def test_rm_refuses_a_folder_that_is_not_a_run(home, tmp_path):
    precious = tmp_path / "precious"
    precious.mkdir()
    (precious / "summary.json").write_text("{}")  # looks a little like a run, but has no config.json
    (precious / "data.csv").write_text("a,b\n")
    result = cbr_runs("rm", str(precious), "--yes")
    assert isinstance(result.exception, CbrError) and "no config.json" in str(result.exception)
    assert (precious / "data.csv").is_file()
    plain = tmp_path / "plain"
    plain.mkdir()
    assert isinstance(cbr_runs("rm", str(plain), "--yes").exception, CbrError) and plain.exists()


@pytest.mark.slow
def test_a_real_deploy_run_is_found_from_any_folder(tmp_path, concrete):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {**os.environ, "CBR_HOME": str(tmp_path / "home")}
    env.pop("CBR_RUNS_DIR", None)
    ran = subprocess.run([*CBR, "deploy", str(concrete.root), "--model", "none", "--store", "faiss", "--runs-dir",
                          str(tmp_path / "runs"), "--json"], capture_output=True, text=True, env=env, timeout=900)
    assert ran.returncode == 0, ran.stderr[-3000:]
    record = json.loads(ran.stdout)
    # from another folder: its ./runs is empty, so only the home's index can find the run
    listed = subprocess.run([*CBR, "runs", "list", "--json"], capture_output=True, text=True, env=env,
                            cwd=elsewhere, timeout=120)
    assert listed.returncode == 0, listed.stderr
    (run,) = json.loads(listed.stdout)
    assert Path(run["folder"]) == Path(record["run_dir"]).resolve() and run["task"] == "concrete-strength"
    assert run["kind"] == "deploy" and run["outcome"] == "ok" and run["selection"] == record["best_selection"]
    shown = subprocess.run([*CBR, "runs", "show", run["id"][:15]], capture_output=True, text=True, env=env,
                           cwd=elsewhere, timeout=120)
    assert shown.returncode == 0, shown.stderr
    assert f"run:            {run['id']}" in shown.stdout and "outcome:        ok (completed)" in shown.stdout
    assert f"submission:     {Path(run['folder']) / Path(record['submission']).name}" in shown.stdout


def make_analysis(runs: Path, home: Path, *, final: bool = True) -> Path:
    """A `cbr analyze` run folder, written by its own writers (analysis/summary.py) and indexed as
    the command does: its summary as the run began, then (when `final`) as it ended."""
    from dsagent_cbr.analysis.agent import Analysis, AnalysisConfig
    from dsagent_cbr.analysis.summary import save_run, save_start, summary_of

    folder = new_run_dir(runs / "analyze", "GODREJIND", home)
    config = AnalysisConfig("What is the mean close price?", answer_format="@mean[v]")
    facts = {"data": ["/data/GODREJIND.csv"], "model": "gpt-4o", "run_dir": str(folder)}
    save_start(folder, config, facts)
    if final:
        result = Analysis(answers=[("mean", "570.68")], text="@mean[570.68]", cells_run=2)
        more = {"seconds": 42.0, "calls": 3, "tokens": 900, "cost_usd": 0.0}
        save_run(folder, summary_of(config, result, facts | more), result)
    (folder / "analysis.ipynb").write_text("{}")
    return folder


def test_analyses_are_listed_shown_and_removed(home, tmp_path):
    """`runs show` said "unreadable record" on an analysis folder, and `runs list` left them out."""
    done = make_analysis(tmp_path / "runs", home)
    going = make_analysis(tmp_path / "runs", home, final=False)
    listed = {r["id"]: r for r in json.loads(cbr_runs("list", "--json").output)}
    assert listed[done.name]["kind"] == listed[going.name]["kind"] == "analyze"
    assert listed[done.name]["outcome"] == "ok" and listed[done.name]["took"] == 42.0
    assert listed[done.name]["answers"] == [["mean", "570.68"]]
    assert listed[going.name]["outcome"] == "running or killed"
    assert "analyze" in cbr_runs("list").output
    shown = cbr_runs("show", done.name).output
    assert "unreadable" not in shown and "question:       What is the mean close price?" in shown
    assert "data:           GODREJIND.csv" in shown and "answer:         @mean[570.68]" in shown
    assert "outcome:        ok (answered)" in shown and "analysis.ipynb" in shown
    assert "running or killed" in cbr_runs("show", str(going)).output
    # found by its folder alone too, without the index (another home)
    (home / "runs.jsonl").unlink()
    listed = json.loads(cbr_runs("list", "--json").output)
    assert {r["id"] for r in listed} == {done.name, going.name}
    assert cbr_runs("rm", done.name, "--yes").exit_code == 0 and not done.exists()


def test_an_edited_analysis_summary_is_unreadable_and_stops_no_other_run(home, tmp_path):
    broken = make_analysis(tmp_path / "runs", home)
    (broken / "summary.json").write_text(json.dumps({"kind": "analyze", "question": ["not text"]}))
    kept = make_run(tmp_path / "runs", "concrete", "20260101-090000-aaaa")
    listed = {r["id"]: r["outcome"] for r in json.loads(cbr_runs("list", "--json").output)}
    assert listed == {broken.name: "unreadable record", kept.name: "ok"}
