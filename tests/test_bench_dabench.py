"""`cbr bench dabench`: cbr analyze over a DABench-format folder, each question a process of its own, the
answers graded apart (analysis/dabench*.py; its grading rule is tested in test_dabench.py). Here the real
command, the real kernel in the sandbox, and a scripted model that answers from the labels: the test's
stand-in for a perfect analyst, never a measure of one."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import SHARED_REFERENCE
from support.scripted_llm import ScriptedLLM

from dsagent_cbr.cli import main
from dsagent_cbr.sandbox.bubblewrap import bwrap_problem

DABENCH = SHARED_REFERENCE / "dabench"
REPO = Path(__file__).resolve().parents[1]
CHOSEN = (9, 10, 24)  # one-, one- and one-item answers over two tables
WRONG_FORMAT = 10  # the scripted analyst answers this one as `name: value`


def small_folder(tmp_path: Path) -> Path:
    """A DABench-format folder of the CHOSEN questions, their labels and tables."""
    folder = tmp_path / "dabench"
    (folder / "tables").mkdir(parents=True)
    for name in ("questions.jsonl", "labels.jsonl"):
        rows = [line for line in (DABENCH / name).read_text().splitlines() if line.strip()]
        kept = [line for line in rows if json.loads(line)["id"] in CHOSEN]
        (folder / name).write_text("\n".join(kept) + "\n")
    for line in (folder / "questions.jsonl").read_text().splitlines():
        table = json.loads(line)["file_name"]
        shutil.copyfile(DABENCH / "tables" / table, folder / "tables" / table)
    return folder


def analyst(folder: Path, asked: list[str]):
    """Replies by role: a one-step plan, a cell that prints, and the label as the answer (for
    WRONG_FORMAT, the label in a form the benchmark does not read)."""
    questions = [json.loads(line) for line in (folder / "questions.jsonl").read_text().splitlines()]
    labels = {json.loads(line)["id"]: json.loads(line)["common_answers"]
              for line in (folder / "labels.jsonl").read_text().splitlines()}

    def reply(messages: list[dict]) -> str:
        prompt = messages[-1]["content"]
        asked.append(prompt)
        if "Write the plan" in prompt:
            return "1. Print the number of rows."
        if "Write the next cell" in prompt:
            return "```python\nprint('rows:', len(df))\n```"
        question = next(q for q in questions if q["question"] in prompt)
        items = labels[question["id"]]
        if question["id"] == WRONG_FORMAT:
            return "\n".join(f"{name}: {value}" for name, value in items)
        return "From the notebook.\n" + " ".join(f"@{name}[{value}]" for name, value in items)

    return reply


def _secret(folder: Path) -> Path:
    """A file only root may read, as /etc/shadow is."""
    secret = folder / "secret.csv"
    secret.write_text("password\nroot-only secret\n")
    secret.chmod(0o600)
    return secret


def _table_linked(folder: Path) -> None:
    table = next((folder / "tables").iterdir())
    table.unlink()
    table.symlink_to(_secret(folder.parent))


def _tables_linked(folder: Path) -> None:
    elsewhere = folder.parent / "elsewhere"
    (folder / "tables").rename(elsewhere)
    (folder / "tables").symlink_to(elsewhere)


def _questions_linked(folder: Path) -> None:
    (folder / "questions.jsonl").rename(folder.parent / "questions.jsonl")
    (folder / "questions.jsonl").symlink_to(folder.parent / "questions.jsonl")


HOSTILE_FOLDERS = {
    "a table links to a root-only file": (_table_linked, "which is reached through a link"),
    "tables/ links to another folder": (_tables_linked, "which is reached through a link"),
    "questions.jsonl is a link": (_questions_linked, "questions.jsonl cannot be read (a link"),
    "a table is a pipe": (lambda f: (next((f / "tables").iterdir()).unlink(),
                                     os.mkfifo(f / "tables" / "GODREJIND.csv")), "which is not a regular file"),
    "questions.jsonl is empty": (lambda f: (f / "questions.jsonl").write_text("\n"), "holds no questions"),
    "a question nests 100k deep": (lambda f: (f / "questions.jsonl").write_text("[" * 100_000 + "]" * 100_000),
                                   "line 1 is not JSON cbr can read (RecursionError)"),
    "a question holds a lone surrogate": (
        lambda f: (f / "questions.jsonl").write_text('{"id": 1, "question": "\\ud800"}\n'), "not Unicode"),
}


@pytest.mark.parametrize("hostile", list(HOSTILE_FOLDERS))
def test_a_hostile_benchmark_folder_is_refused_in_one_sentence_before_any_question(tmp_path, monkeypatch, capsys,
                                                                                   hostile):
    """A table linked to a root-only file was copied into the kernel and every prompt, and left in the
    bench's folder readable by all; an empty questions.jsonl made a table of 0 questions and exit 0; a
    question nested past json's recursion, or with a lone surrogate, was a traceback."""
    folder = small_folder(tmp_path)
    damage, says = HOSTILE_FOLDERS[hostile]
    damage(folder)
    monkeypatch.setenv("CBR_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("CBR_BASE_URL", "http://127.0.0.1:9/v1")  # never asked: the folder is refused first
    out = tmp_path / "out"
    assert main(["bench", "dabench", str(folder), "--model", "scripted", "-k", "0", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("Error: ") and len(err.splitlines()) == 1 and says in err, err
    assert not [p for p in out.rglob("*") if p.is_file()] if out.exists() else True


@pytest.mark.slow
@pytest.mark.skipif(bwrap_problem() is not None, reason="needs bubblewrap")
def test_right_answers_score_and_a_wrong_format_scores_nothing_and_a_second_run_resumes(tmp_path):
    folder, out, asked = small_folder(tmp_path), tmp_path / "out", []
    with ScriptedLLM(analyst(small_folder(tmp_path / "copy"), asked)) as server:
        env = {**os.environ, "CBR_HOME": str(tmp_path / "home"), "CBR_BASE_URL": server.url,
               "CBR_API_KEY": "test", "PYTHONPATH": str(REPO)}
        command = [sys.executable, "-m", "dsagent_cbr.cli", "bench", "dabench", str(folder), "--model", "scripted",
                   "--budget", "2m", "--out", str(out)]
        proc = subprocess.run(command, env=env, capture_output=True, text=True, timeout=900)
        assert proc.returncode == 0, proc.stderr[-3000:]
        figures = json.loads((out / "figures.json").read_text())["overall"]
        assert figures["questions"] == 3 and figures["ABQ"] == pytest.approx(2 / 3)
        records = {json.loads(line)["id"]: json.loads(line) for line in (out / "answers.jsonl").read_text().splitlines()}
        assert records[WRONG_FORMAT]["right"] == [False] and records[9]["right"] == [True] == records[24]["right"]
        assert "accuracy by question 66.67%" in proc.stdout and (out / "table.md").is_file()
        labels = [json.loads(line) for line in (folder / "labels.jsonl").read_text().splitlines()]
        values = {v for row in labels for _, v in row["common_answers"] if len(v) > 3}
        assert not [v for v in values for prompt in asked if v in prompt]  # no label reached a prompt
        calls = len(asked)
        again = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
        assert again.returncode == 0 and len(asked) == calls  # every question answered: none asked again
        # the analyses graded right entered the bank once, when the bench ended
        assert "bank:    2 analyses graded right added as cases (0 were there already)" in proc.stdout
        assert "bank:    0 analyses graded right added as cases (2 were there already)" in again.stdout
        # and a new analysis of question 9 is shown question 24's, never its own
        questions = {json.loads(line)["id"]: json.loads(line) for line in (folder / "questions.jsonl").read_text().splitlines()}
        nine = questions[9]
        analyze = [sys.executable, "-m", "dsagent_cbr.cli", "analyze", str(folder / "tables" / nine["file_name"]),
                   nine["question"], "--format", nine["format"], "--model", "scripted", "--budget", "2m",
                   "--runs-dir", str(tmp_path / "later")]
        later = subprocess.run(analyze, env=env, capture_output=True, text=True, timeout=300)
        assert later.returncode == 0, later.stderr[-3000:]
        plan = next(prompt for prompt in asked[calls:] if "Write the plan" in prompt)
        assert f"Question: {questions[24]['question']}" in plan and plan.count(nine["question"]) == 1
