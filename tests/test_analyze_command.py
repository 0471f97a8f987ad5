"""`cbr analyze`, the real command: the real kernel in the real sandbox, and the scripted
OpenAI-compatible server (support/scripted_llm.py) standing in for a model, on a real DABench table.
The tests of the answer, the plan, the prompts and the agent's loop with fakes are test_analyze.py's."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import pytest
from conftest import SHARED_REFERENCE
from support.scripted_llm import DROP, ScriptedLLM

from dsagent_cbr.analysis.agent import NOTEBOOK
from dsagent_cbr.sandbox.bubblewrap import bwrap_problem

REPO = Path(__file__).resolve().parents[1]
DABENCH = SHARED_REFERENCE / "dabench"
needs_bwrap = pytest.mark.skipif(bwrap_problem() is not None, reason=f"no sandbox: {bwrap_problem()}")


def cbr(args: list[str], env: dict[str, str], cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "dsagent_cbr.cli", "analyze", *args], env=env, cwd=cwd,
                          capture_output=True, text=True, timeout=600)


def environment(tmp_path: Path, url: str = "http://127.0.0.1:9/v1") -> dict[str, str]:
    return {**os.environ, "CBR_HOME": str(tmp_path / "home"), "CBR_BASE_URL": url, "CBR_API_KEY": "test",
            "PYTHONPATH": str(REPO)}


def dabench(question_id: int) -> tuple[dict, dict]:
    def by_id(name: str) -> dict:
        rows = (json.loads(line) for line in (DABENCH / name).read_text().splitlines() if line.strip())
        return next(row for row in rows if row["id"] == question_id)

    return by_id("questions.jsonl"), by_id("labels.jsonl")


MEAN_CELL = ("mean_close = df['Close Price'].mean()\n"
             "print('mean close price:', mean_close)\nprint('rounded:', round(mean_close, 2))")


def analyze_godrej(tmp_path, replies, budget: str = "3m") -> tuple[subprocess.CompletedProcess, Path, ScriptedLLM]:
    question, _ = dabench(9)
    with ScriptedLLM(replies) as server:
        proc = cbr([str(DABENCH / "tables" / question["file_name"]), question["question"], "--format",
                    question["format"], "--constraints", question["constraints"], "--model", "scripted",
                    "--runs-dir", str(tmp_path / "runs"), "--budget", budget], environment(tmp_path, server.url))
    found = list((tmp_path / "runs" / "analyze" / "GODREJIND").glob("*"))
    return proc, (found[0] if found else tmp_path / "none"), server


@pytest.mark.slow
@needs_bwrap
def test_the_command_answers_a_dabench_question_and_its_notebook_runs_again(tmp_path):
    from nbclient import NotebookClient

    question, label = dabench(9)
    proc, run_dir, server = analyze_godrej(tmp_path, [
        "1. Compute the mean of the \"Close Price\" column and print it.",
        f"```python\n{MEAN_CELL}\n```",
        "The notebook computed the column's mean.\n@mean_close_price[570.68]",
    ])
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = proc.stdout.strip().splitlines()
    assert lines[-3:] == ["answer:   @mean_close_price[570.68]", f"notebook: {run_dir / NOTEBOOK}",
                          f"run:      {run_dir}"]
    assert "Traceback" not in proc.stderr and "step 1/1: ok (mean close price: 570.68" in proc.stderr
    answer = json.loads((run_dir / "answer.json").read_text())
    assert answer["answers"] == label["common_answers"] == [["mean_close_price", "570.68"]]
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["outcome"] == "ok" and summary["exit_code"] == 0 and summary["cells_run"] == 2
    assert summary["tokens"] > 0 and summary["question"] == question["question"]
    assert {"journal.jsonl", "ledger.jsonl", "answer.md"} <= {p.name for p in run_dir.iterdir()}
    # no label reaches a prompt: the only answer the model sees is the one it wrote
    prompts = [m["content"] for r in server.requests for m in r["messages"]]
    assert "570.68" not in prompts[0] and question["constraints"] in prompts[0]
    # the notebook runs again, top to bottom, with the data beside it
    replay = tmp_path / "replay"
    replay.mkdir()
    shutil.copy(DABENCH / "tables" / "GODREJIND.csv", replay)
    notebook = nbformat.read(run_dir / NOTEBOOK, as_version=4)
    NotebookClient(notebook, timeout=60, resources={"metadata": {"path": str(replay)}}).execute()
    assert notebook.cells[-1].outputs[0].text.splitlines()[-1] == "rounded: 570.68"


@pytest.mark.slow
@needs_bwrap
def test_a_failing_cell_and_its_fix_in_the_real_kernel(tmp_path):
    proc, run_dir, _ = analyze_godrej(tmp_path, [
        "1. Compute the mean of the \"Close Price\" column.",
        "```python\nmean_close = df['Close'].mean()\nprint(mean_close)\n```",
        f"The column is named 'Close Price'.\n```python\n{MEAN_CELL}\n```",
        "@mean_close_price[570.68]",
    ])
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "step 1/1: the cell failed (KeyError: 'Close'); fix 1" in proc.stderr
    summary = json.loads((run_dir / "summary.json").read_text())
    assert (summary["cells_run"], summary["cells_failed"], summary["steps"][0]["attempts"]) == (3, 1, 2)
    sources = [c.source for c in nbformat.read(run_dir / NOTEBOOK, as_version=4).cells]
    assert len(sources) == 2 and sources[1] == MEAN_CELL and "df['Close']" not in "".join(sources)
    journal = [json.loads(line) for line in (run_dir / "journal.jsonl").read_text().splitlines()]
    failed = [r["output"] for r in journal if r["role"] == "cell" and not r["output"]["ok"]]
    assert len(failed) == 1 and "KeyError: 'Close'" in failed[0]["error"]


@pytest.mark.slow
@needs_bwrap
def test_a_hostile_answer_ends_the_analysis_within_its_budget(tmp_path):
    """`"@x[" * 30000` (90 kB) as the answer, twice (it lacks the name, so it is asked again): reading it
    was quadratic, and a 60 s budget ran for ten minutes. Now the analysis ends as the model's failure."""
    start = time.monotonic()
    proc, run_dir, _ = analyze_godrej(tmp_path, ["1. Print the number of rows.", "```python\nprint(len(df))\n```",
                                                 "@x[" * 30000, "@x[" * 30000], budget="60s")
    assert time.monotonic() - start < 75, proc.stderr[-2000:]
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert json.loads((run_dir / "summary.json").read_text())["answers"] == []


@pytest.mark.slow
@needs_bwrap
def test_a_model_server_that_dies_is_ours(tmp_path):
    question, _ = dabench(9)
    with ScriptedLLM(lambda messages: DROP) as server:
        env = {**environment(tmp_path, server.url), "CBR_MAX_RETRIES": "0"}
        proc = cbr([str(DABENCH / "tables" / "GODREJIND.csv"), question["question"], "--model", "scripted",
                    "--runs-dir", str(tmp_path / "runs")], env)
    assert proc.returncode == 3 and "Cannot reach the model server" in proc.stderr, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr
    run_dir = next((tmp_path / "runs" / "analyze" / "GODREJIND").iterdir())
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["outcome"] == "infrastructure" and summary["answers"] == []
    assert (run_dir / NOTEBOOK).is_file()


@pytest.mark.integration
def test_without_a_model_the_command_says_how_to_give_one(tmp_path):
    env = {**os.environ, "CBR_HOME": str(tmp_path / "home"), "PYTHONPATH": str(REPO)}
    env.pop("CBR_MODEL", None)
    for extra in ([], ["--model", "none"]):
        proc = cbr([str(DABENCH / "tables" / "GODREJIND.csv"), "What is the mean?", *extra,
                    "--runs-dir", str(tmp_path / "runs")], env, cwd=tmp_path)
        assert proc.returncode == 2 and proc.stderr.startswith("Error: Analysis needs a model"), proc.stderr
        assert "--model" in proc.stderr and "local" in proc.stderr and len(proc.stderr.splitlines()) == 1
    assert not (tmp_path / "runs").exists()


@pytest.mark.integration
def test_bad_input_is_one_sentence_and_no_run_folder(tmp_path):
    env = environment(tmp_path)
    missing = cbr([str(tmp_path / "absent.csv"), "What is the mean?", "--model", "scripted",
                   "--runs-dir", str(tmp_path / "runs")], env)
    absent = tmp_path / "absent.csv"
    assert missing.returncode == 2
    assert missing.stderr == f"Error: No data file or folder at {absent}.\n"
    empty = cbr([str(DABENCH / "tables" / "GODREJIND.csv"), "  ", "--model", "scripted",
                 "--runs-dir", str(tmp_path / "runs")], env)
    assert empty.returncode == 2 and "The question is empty" in empty.stderr
    # bytes that are not UTF-8 become lone surrogates, which no journal or bank could write
    for args in ([b"What is \xed\xa0\x80 the mean?"], ["What is the mean?", "--format", b"@m[\xff]"]):
        odd = subprocess.run([sys.executable, "-m", "dsagent_cbr.cli", "analyze", str(DABENCH / "tables" / "GODREJIND.csv"),
                              *args, "--model", "scripted", "--runs-dir", str(tmp_path / "runs")],
                             env=env, capture_output=True, text=True, timeout=600)
        assert odd.returncode == 2 and odd.stderr.startswith("Error: The ") and "not UTF-8" in odd.stderr, odd.stderr
        assert len(odd.stderr.splitlines()) == 1
    assert not (tmp_path / "runs").exists()


@pytest.mark.slow
@needs_bwrap
def test_the_real_local_model_runs_to_a_clean_end(tmp_path):
    """SmolLM2-135M rarely writes a cell that runs: only the run's end is checked, never its answer.
    It ends as the model's failure or success, or with the budget when its answer takes too long."""
    from support.local_model import LOCAL_BOUNDS

    question, _ = dabench(9)
    env = {**environment(tmp_path), **LOCAL_BOUNDS}
    env.pop("CBR_BASE_URL")
    proc = cbr([str(DABENCH / "tables" / "GODREJIND.csv"), question["question"], "--format", question["format"],
                "--model", "local", "--budget", "1m", "--runs-dir", str(tmp_path / "runs")], env)
    assert proc.returncode in (0, 1, 4), proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr + proc.stdout
    run_dir = next((tmp_path / "runs" / "analyze" / "GODREJIND").iterdir())
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["exit_code"] == proc.returncode
    # every finished call is in the ledger; an end other than the budget's came after a plan and a cell
    assert summary["calls"] == len((run_dir / "ledger.jsonl").read_text().splitlines()) >= 1
    assert summary["calls"] >= 2 or summary["outcome"] == "budget"
    assert nbformat.read(run_dir / NOTEBOOK, as_version=4).cells  # at least the data's description
    assert proc.stdout.strip().splitlines()[-1] == f"run:      {run_dir}"
