"""Analyses as cases of the bank (analysis/cases.py): a run that answered becomes a case, a new
question's plan shows the nearest cases of other questions, and never one of its own question.

The fast tests run the agent with a fake model and kernel (support/analysis_fakes.py) and a real
CaseBank over FAISS with an embedder of hashed words (no model loaded). The integration test runs
`cbr bank keep` with the real embedding model."""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from support.analysis_fakes import FakeKernel, cell, run

from dsagent_cbr.analysis.cases import (
    analysis_case,
    examples_text,
    question_key,
    retrieve,
)
from dsagent_cbr.analysis.summary import save_run, summary_of
from dsagent_cbr.bank.cases import Case
from dsagent_cbr.bank.checks import problem_with
from dsagent_cbr.bank.embedder import Embedder, normalise
from dsagent_cbr.bank.facade import CaseBank
from dsagent_cbr.bank.places import make_place
from dsagent_cbr.errors import CbrError

REPO = Path(__file__).resolve().parents[1]
QUESTION = "What is the mean of sales?"  # support/analysis_fakes.run's question


class WordsEmbedder(Embedder):
    """Hashed bags of words: texts that share words are near, and no model is loaded."""

    def __init__(self) -> None:
        super().__init__("test-words")

    def _embed(self, texts: list[str]) -> np.ndarray:
        out = np.full((len(texts), 128), 1e-3, dtype=np.float32)
        for row, text in enumerate(texts):
            for word in re.findall(r"\w+", text.lower()):
                out[row, int(hashlib.md5(word.encode()).hexdigest(), 16) % 128] += 1.0
        return normalise(out)


def answered_run(folder: Path, **config) -> Path:
    """A finished run folder (journal, notebook, answer, summary) whose first cell failed once."""
    result, _, _ = run(folder, {
        "analyze_plan": ["1. Compute the mean of sales.\n2. Print it."],
        "analyze_cell": [cell("mean = df['Sales'].mean()  # wrong"), cell("print(round(mean, 2))")],
        "analyze_debug": [cell("mean = df['sales'].mean()")],
        "analyze_answer": ["The mean is 4.\n@mean_sales[4.00]"],
    }, FakeKernel(errors={"wrong": "KeyError: 'Sales'"}), **config)
    from dsagent_cbr.analysis.agent import AnalysisConfig

    summary = summary_of(AnalysisConfig(QUESTION, answer_format="@mean_sales[value]"), result,
                         {"data": str(folder / "sales.csv"), "model": "fake"})
    save_run(folder, summary, result)
    return folder


def bank_in(folder: Path) -> CaseBank:
    folder.mkdir(parents=True)
    return CaseBank(make_place("faiss", folder, None), WordsEmbedder(), folder).open(seed=False)


def test_an_answered_run_becomes_a_case_with_its_code_answer_and_what_went_wrong(tmp_path):
    case = analysis_case(answered_run(tmp_path / "run"), "kept")
    assert case.kind == "analysis" and case.source_kind == "kept" and problem_with(case) is None
    assert case.task_name == question_key(QUESTION) == question_key("  what IS the mean of\tsales? ")
    assert question_key("What is the median of sales?") != case.task_name
    assert "mean = df['sales'].mean()" in case.script and "print(round(mean, 2))" in case.script
    assert "# wrong" not in case.script  # the failed cell is not what answered
    assert "read_csv" not in case.script and case.script.startswith("# In[1]:\nmean = ")  # nor cbr's own
    assert case.extra["answer"] == "The mean is 4.\n@mean_sales[4.00]" and case.extra["data"] == "sales.csv"
    assert case.extra["went_wrong"] == ["step 1 (Compute the mean of sales.): KeyError: 'Sales'; then it worked"]


def test_a_run_that_did_not_answer_or_is_no_run_is_refused_in_one_sentence(tmp_path):
    folder = answered_run(tmp_path / "run")
    summary = json.loads((folder / "summary.json").read_text())
    (folder / "summary.json").write_text(json.dumps(summary | {"exit_code": 1, "stopped": "the answer lacks m"}))
    with pytest.raises(CbrError, match=r"did not answer \(the answer lacks m\)"):
        analysis_case(folder, "kept")
    with pytest.raises(CbrError, match="is not a `cbr analyze` run folder"):
        analysis_case(tmp_path, "kept")
    assert "source kind" in problem_with(Case(kind="analysis", text="q", script="x", source_kind="retained"))
    assert problem_with(Case(kind="analysis", text="q", source_kind="kept")) == "an analysis case needs a script"


def test_retrieval_shows_other_questions_and_never_the_same_one(tmp_path):
    bank = bank_in(tmp_path / "bank")
    mean = analysis_case(answered_run(tmp_path / "mean"), "graded", bench="t")
    other = Case(kind="analysis", text="What is the median of sales by city?", source_kind="kept",
                 task_name=question_key("What is the median of sales by city?"),
                 script="print(df.groupby('city')['sales'].median())",
                 extra={"question": "What is the median of sales by city?", "answer": "@median[3]"})
    assert bank.add([mean, other]).added == [mean.id, other.id]
    cases, examples = retrieve(bank, "what is  the MEAN of sales?", "", k=5)
    assert [c.id for c in cases] == [other.id]  # its own question's case is left out
    cases, examples = retrieve(bank, "What is the mean of sales per city?", "", k=1)
    assert [e.id for e in examples] == [mean.id] and examples[0].question == QUESTION
    assert retrieve(bank, "anything", "", k=0) == ([], [])
    text = examples_text(cases)
    assert text.startswith("Example 1, about the file sales.csv:\nQuestion: What is the mean of sales?")
    assert "mean = df['sales'].mean()" in text and "Its answer: The mean is 4. @mean_sales[4.00]" in text
    assert "KeyError: 'Sales'; then it worked" in text


def test_the_plan_prompt_shows_the_examples_and_the_step_prompts_do_not(tmp_path):
    shown = examples_text([analysis_case(answered_run(tmp_path / "past"), "kept")])
    _, model, _ = run(tmp_path / "now", {
        "analyze_plan": ["1. Print the mean."],
        "analyze_cell": [cell("print(df['sales'].mean())")],
        "analyze_answer": ["@mean_sales[4.0]"],
    }, examples=shown)
    assert "Past analyses of other questions" in model.prompts[0] and shown in model.prompts[0]
    assert all("Past analyses" not in prompt for prompt in model.prompts[1:])


def _secret(folder: Path) -> Path:
    """A file only root may read, as /etc/shadow is."""
    secret = folder / "secret.txt"
    secret.write_text("root-only secret\n")
    secret.chmod(0o600)
    return secret


def _link(path: Path, target: Path) -> None:
    path.unlink()
    path.symlink_to(target)


def _question(run: Path, question: str) -> None:
    summary = json.loads((run / "summary.json").read_text())
    (run / "summary.json").write_text(json.dumps(summary | {"question": question}))


FORGED = {
    "answer.md links to a root-only file": lambda run: _link(run / "answer.md", _secret(run.parent)),
    "summary.json links to a root-only file": lambda run: _link(run / "summary.json", _secret(run.parent)),
    "analysis.ipynb links to /etc/passwd": lambda run: _link(run / "analysis.ipynb", Path("/etc/passwd")),
    "analysis.ipynb is a pipe": lambda run: ((run / "analysis.ipynb").unlink(), os.mkfifo(run / "analysis.ipynb")),
    "analysis.ipynb is no JSON": lambda run: (run / "analysis.ipynb").write_text("root-only secret\n"),
    "analysis.ipynb is JSON of another shape": lambda run: (run / "analysis.ipynb").write_text('{"cells": 3}'),
    "answer.md is 3 GB": lambda run: os.truncate(run / "answer.md", 3 * 2**30),
    "summary.json nests 100k deep": lambda run: (run / "summary.json").write_text("[" * 100_000 + "]" * 100_000),
    "the question holds a lone surrogate": lambda run: _question(run, "What is \ud800 the mean?"),
}


@pytest.mark.parametrize("forgery", list(FORGED))
def test_bank_keep_refuses_a_forged_run_folder_in_one_sentence_quoting_nothing(tmp_path, monkeypatch, capsys,
                                                                              forgery):
    """A run folder is files anyone may have made: a link in it put a root-only file into the bank (and
    so into a later plan prompt), a notebook linked to /etc/passwd had its first line quoted in the
    refusal, and a lone surrogate in the question was a traceback. Each is now refused, exit 2, in
    one sentence that quotes nothing of the file, before the bank is opened."""
    from dsagent_cbr.cli import main

    monkeypatch.setenv("CBR_HOME", str(tmp_path / "home"))
    run = answered_run(tmp_path / "run")
    FORGED[forgery](run)
    assert main(["bank", "keep", str(run), "--store", "faiss"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("Error: ") and len(err.splitlines()) == 1, err
    assert "secret" not in err.replace("secret.txt", "") and "root:" not in err
    assert not (tmp_path / "home").exists()  # no bank was opened, so nothing entered one


@pytest.mark.integration
def test_bank_keep_adds_an_analysis_once_and_refuses_one_that_did_not_answer(tmp_path):
    folder = answered_run(tmp_path / "run")
    env = {**os.environ, "CBR_HOME": str(tmp_path / "home"), "PYTHONPATH": str(REPO)}

    def cbr(*args: str) -> subprocess.CompletedProcess:
        command = [sys.executable, "-m", "dsagent_cbr.cli", "bank", *args, "--store", "faiss"]
        return subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)

    kept = cbr("keep", str(folder))
    assert kept.returncode == 0 and kept.stdout.startswith("kept: analysis "), kept.stderr
    assert cbr("keep", str(folder)).stdout.startswith("already kept: analysis ")
    listed = cbr("list", "--kind", "analysis", "--json")
    assert [json.loads(line)["task_name"] for line in listed.stdout.splitlines()] == [question_key(QUESTION)]
    summary = json.loads((folder / "summary.json").read_text())
    (folder / "summary.json").write_text(json.dumps(summary | {"exit_code": 4, "stopped": "the budget ended"}))
    refused = cbr("keep", str(folder))
    assert refused.returncode == 2 and "did not answer (the budget ended)" in refused.stderr
