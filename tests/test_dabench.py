"""InfiAgent-DABench: the reference folder read, answers graded by the benchmark's rule
(eval_closed_form.py), the runner's figures, failures and resume, the table, and labels kept from the
answerer."""

from __future__ import annotations

import dataclasses
import json
import re
import time
from pathlib import Path

import pytest
from conftest import SHARED_REFERENCE
from hypothesis import given
from hypothesis import strategies as st

from dsagent_cbr.analysis.dabench import (
    SEED_PAPERS,
    Graded,
    Question,
    extract_answers,
    figures,
    grade,
    load_labels,
    load_questions,
    markdown_table,
    run_benchmark,
)
from dsagent_cbr.errors import CbrError, InfrastructureError

DABENCH = SHARED_REFERENCE / "dabench"
LABELS = load_labels(DABENCH) if DABENCH.is_dir() else {}
QUESTIONS = load_questions(DABENCH) if DABENCH.is_dir() else []
SUBS = sum(len(dict(pairs)) for pairs in LABELS.values())


def formatted(qid: int) -> str:
    return "Done. " + " ".join(f"@{name}[{value}]" for name, value in LABELS[qid])


def right_answerer(question: Question, tables: list[Path]) -> str:
    return formatted(question.id)


def test_reference_folder_loads():
    assert DABENCH.is_dir(), f"the DABench reference is expected at {DABENCH}"
    assert len(QUESTIONS) == 65 and len({q.id for q in QUESTIONS}) == 65
    assert len({q.files for q in QUESTIONS}) == 15 and all(len(q.files) == 1 for q in QUESTIONS)
    assert set(LABELS) == {q.id for q in QUESTIONS}
    assert all(q.tables(DABENCH)[0].is_file() and LABELS[q.id] for q in QUESTIONS)
    assert {q.level for q in QUESTIONS} == {"easy", "medium", "hard"}


def test_malformed_folders_say_where(tmp_path):
    (tmp_path / "tables").mkdir()
    row = {"id": 1, "question": "q", "concepts": ["Summary Statistics"], "constraints": "c"}
    row |= {"format": "@x[v]", "file_name": "t.csv", "level": "easy"}
    (tmp_path / "questions.jsonl").write_text(json.dumps(row) + "\n")
    with pytest.raises(CbrError, match=r"questions.jsonl, line 1: .*'t.csv'"):
        load_questions(tmp_path)
    (tmp_path / "tables" / "t.csv").write_text("a\n1\n")
    assert load_questions(tmp_path)[0].concepts == ("Summary Statistics",)
    (tmp_path / "questions.jsonl").write_text(json.dumps(row) + "\n{not json\n")
    with pytest.raises(CbrError, match=r"questions.jsonl, line 2 is not JSON cbr can read"):
        load_questions(tmp_path)
    (tmp_path / "labels.jsonl").write_text('{"id": 1, "common_answers": [["x", 3]]}\n')
    with pytest.raises(CbrError, match=r"labels.jsonl, line 1"):
        load_labels(tmp_path)


@pytest.mark.parametrize(
    ("response", "expected", "right"),
    [
        ("@m[570.68]", "570.68", True),
        ("@m[570.680]", "570.68", True),  # equal as numbers
        ("@m[570.6800001]", "570.68", True),  # within 1e-6
        ("@m[570.681]", "570.68", False),
        ("@m[5.7068e2]", "570.68", True),
        ("@m[ 570.68 ]", "570.68", True),  # float() ignores the spaces
        ("@m[no]", "no", True),
        ("@m[ no]", "no", False),  # text is compared as is, nothing stripped
        ("@m[No]", "no", False),
        ("@m[linear]", "linear", True),
        ("@m (570.68)", "570.68", False),
        ("m: 570.68", "570.68", False),
        ("@m [570.68]", "570.68", False),  # no space allowed before the bracket
        ("@m[570.\n68]", "570.68", False),  # a value stays on one line
        ("@m[[]]", "[", True),  # the shortest match: their labels hold "[" for id 273
        ("@m[[1, 2]]", "[1, 2]", False),
        ("@m[1] and later @m[2]", "2", True),  # a name given twice keeps its last value
        ("@m[nan]", "nan", True),  # equal as text, though nan != nan
        ("", "0", False),
    ],
)
def test_one_value(response, expected, right):
    assert grade(extract_answers(response), [("m", expected)]) == [right]


# eval_closed_form.py's own reader, the rule extract_answers must keep to
THEIRS = re.compile(r"@(\w+)\[(.*?)\]")


@given(st.text(alphabet="@x_1[] \n.", max_size=60))
def test_answers_are_read_exactly_as_the_benchmarks_own_pattern_reads_them(response):
    assert extract_answers(response) == dict(THEIRS.findall(response))


@pytest.mark.parametrize("response", ["@x[" * 350_000, "@x" + "[" * 2**20, "@a[" + "x" * 2**20],
                         ids=["open items", "open brackets", "one long value"])
def test_grading_a_hostile_megabyte_takes_well_under_a_second(response):
    """The pattern itself is quadratic where items never close (`"@x[" * 30000` took 12 s, so a
    resumed bench ran its trial past its time and stopped with exit 3): the reader is linear."""
    start = time.perf_counter()
    extract_answers(response)
    assert time.perf_counter() - start < 1.0


def test_names_missing_extra_and_repeated_in_the_label():
    answers = extract_answers("@a[1] @extra[zzz] @c[x]")
    assert answers == {"a": "1", "extra": "zzz", "c": "x"}
    assert grade(answers, [("a", "1.0"), ("b", "2"), ("c", "x")]) == [True, False, True]
    # a label naming one answer twice counts it once, with its last value (their id 734)
    assert grade({"r": "0.56"}, [("r", "0.38"), ("s", "no"), ("r", "0.56")]) == [True, False]


def test_figures_by_hand():
    graded = [
        Graded(1, "easy", ("A",), (True, True)),
        Graded(2, "easy", ("A", "B"), (True, False)),
        Graded(3, "hard", ("B",), (False, False, True, True)),
    ]
    f = figures(graded)
    assert f["overall"]["ABQ"] == pytest.approx(1 / 3)
    assert f["overall"]["PASQ"] == pytest.approx((1 + 0.5 + 0.5) / 3)
    assert f["overall"]["UASQ"] == pytest.approx(5 / 8)
    assert list(f["by_level"]) == ["easy", "hard"] and f["by_level"]["easy"]["ABQ"] == 0.5
    assert f["by_concept"]["B"]["questions"] == 2 and f["by_concept"]["B"]["UASQ"] == 3 / 6
    assert figures([])["overall"]["ABQ"] == 0.0


def test_right_answers_score_full_marks(tmp_path):
    result = run_benchmark(DABENCH, right_answerer, tmp_path)
    assert result["overall"] == {
        "questions": 65,
        "sub_answers": SUBS,
        "ABQ": 1.0,
        "PASQ": 1.0,
        "UASQ": 1.0,
    }
    assert all(
        f["ABQ"] == 1.0 for f in [*result["by_level"].values(), *result["by_concept"].values()]
    )
    records = [json.loads(line) for line in (tmp_path / "answers.jsonl").read_text().splitlines()]
    assert [r["id"] for r in records] == [q.id for q in QUESTIONS]
    assert all(all(r["right"]) and r["answers"] == dict(LABELS[r["id"]]) for r in records)
    assert json.loads((tmp_path / "figures.json").read_text()) == result
    assert "| cbr |" in (tmp_path / "table.md").read_text()


def expected_with_one_wrong(qid: int) -> dict:
    k = len(dict(LABELS[qid]))
    return {"ABQ": 64 / 65, "PASQ": 64 / 65, "UASQ": (SUBS - k) / SUBS}


@pytest.mark.parametrize("wrong", ["{name}: {value}", "@{name}({value})"])
def test_a_wrong_format_scores_zero(tmp_path, wrong):
    target = next(q.id for q in QUESTIONS if len(LABELS[q.id]) > 1)

    def answer(question: Question, tables: list[Path]) -> str:
        if question.id != target:
            return formatted(question.id)
        return "\n".join(wrong.format(name=n, value=v) for n, v in LABELS[question.id])

    result = run_benchmark(DABENCH, answer, tmp_path)
    for key, value in expected_with_one_wrong(target).items():
        assert result["overall"][key] == pytest.approx(value)
    level = next(q.level for q in QUESTIONS if q.id == target)
    assert result["by_level"][level]["ABQ"] < 1.0


def test_an_agent_error_counts_wrong_and_the_run_goes_on(tmp_path):
    target = QUESTIONS[3].id

    def answer(question: Question, tables: list[Path]) -> str:
        if question.id == target:
            raise ValueError("the model wrote no code")
        return formatted(question.id)

    result = run_benchmark(DABENCH, answer, tmp_path)
    for key, value in expected_with_one_wrong(target).items():
        assert result["overall"][key] == pytest.approx(value)
    lines = (tmp_path / "answers.jsonl").read_text().splitlines()
    records = {r["id"]: r for r in map(json.loads, lines)}
    assert len(records) == 65
    assert records[target]["response"] == "" and "ValueError" in records[target]["error"]


def test_infrastructure_stops_and_the_next_run_resumes(tmp_path):
    asked: list[int] = []
    stop_at = QUESTIONS[9].id

    def failing(question: Question, tables: list[Path]) -> str:
        if question.id == stop_at:
            raise InfrastructureError("the model server is unreachable")
        asked.append(question.id)
        return formatted(question.id)

    with pytest.raises(InfrastructureError):
        run_benchmark(DABENCH, failing, tmp_path)
    assert len((tmp_path / "answers.jsonl").read_text().splitlines()) == 9
    assert not (tmp_path / "figures.json").exists()
    first = list(asked)
    asked.clear()

    def recording(question: Question, tables: list[Path]) -> str:
        asked.append(question.id)
        return formatted(question.id)

    seen: list[tuple[int, int]] = []
    result = run_benchmark(
        DABENCH, recording, tmp_path, lambda g, done, total: seen.append((done, total))
    )
    assert first == [q.id for q in QUESTIONS[:9]] and asked == [q.id for q in QUESTIONS[9:]]
    assert seen[0] == (10, 65) and seen[-1] == (65, 65)
    assert result["overall"]["ABQ"] == 1.0 and result["overall"]["questions"] == 65


def recording(asked: list[int]):
    """A right answerer that notes the questions it is asked."""
    def answer(question: Question, tables: list[Path]) -> str:
        asked.append(question.id)
        return formatted(question.id)

    return answer


def test_a_torn_last_line_is_asked_again(tmp_path):
    run_benchmark(DABENCH, right_answerer, tmp_path)
    lines = (tmp_path / "answers.jsonl").read_text().splitlines(keepends=True)
    (tmp_path / "answers.jsonl").write_text("".join(lines[:-1]) + lines[-1][:15])
    asked: list[int] = []
    assert run_benchmark(DABENCH, recording(asked), tmp_path)["overall"]["ABQ"] == 1.0
    assert asked == [QUESTIONS[-1].id]
    assert len((tmp_path / "answers.jsonl").read_text().splitlines()) == 65


def test_the_table_holds_the_seed_papers(tmp_path):
    graded = [Graded(q.id, q.level, q.concepts, (q.id % 2 == 0,)) for q in QUESTIONS]
    table = markdown_table(figures(graded), "cbr (gpt-4o-mini)")
    assert (
        "| cbr (gpt-4o-mini) |" in table and "### By level" in table and "### By concept" in table
    )
    for seed in SEED_PAPERS:
        assert f"| {seed.system} | {seed.model} |" in table and f"{seed.abq:.2f}" in table
    assert {"94.93", "75.78", "85.99", "81.32", "73.54", "70.00", "88.00"} <= set(
        cell.strip() for line in table.splitlines() for cell in line.split("|")
    )
    assert "257" in table and "not comparable" in table


def test_the_answerer_never_sees_labels(tmp_path):
    assert {f.name for f in dataclasses.fields(Question)} == {
        "id",
        "question",
        "concepts",
        "constraints",
        "format",
        "files",
        "level",
    }
    reference = DABENCH.resolve()

    def answer(*args) -> str:
        question, tables = args
        assert len(args) == 2 and type(question) is Question and len(tables) == 1
        table = tables[0]
        # the table is a copy, in a folder that holds tables only: no labels.jsonl to climb to
        assert reference not in table.resolve().parents and table.read_bytes()
        assert not any(p.name.endswith(".jsonl") for p in table.parent.iterdir())
        assert not (table.parent.parent / "labels.jsonl").exists()
        # a label value that the question's own text does not hold is nowhere in what it is given
        text = " ".join([question.question, question.constraints, question.format])
        hidden = [v for _, v in LABELS[question.id] if len(v) > 3 and v not in text]
        assert not any(v in repr(question) for v in hidden)
        return formatted(question.id)

    assert run_benchmark(DABENCH, answer, tmp_path)["overall"]["ABQ"] == 1.0


def test_answers_from_another_folder_are_refused(tmp_path):
    (tmp_path / "answers.jsonl").write_text('{"id": 999999, "response": ""}\n')
    with pytest.raises(CbrError, match="not in this benchmark folder"):
        run_benchmark(DABENCH, right_answerer, tmp_path)


def test_a_last_record_without_its_newline_is_kept(tmp_path):
    run_benchmark(DABENCH, right_answerer, tmp_path)
    lines = (tmp_path / "answers.jsonl").read_text().splitlines(keepends=True)
    (tmp_path / "answers.jsonl").write_text("".join(lines[:-2]) + lines[-2].rstrip("\n"))
    asked: list[int] = []
    assert run_benchmark(DABENCH, recording(asked), tmp_path)["overall"]["ABQ"] == 1.0
    assert asked == [QUESTIONS[-1].id]
    assert len((tmp_path / "answers.jsonl").read_text().splitlines()) == 65


def test_a_multi_file_question_names_its_files_and_gets_copies_of_each(tmp_path):
    folder = tmp_path / "set"
    (folder / "tables").mkdir(parents=True)
    for name in ("a.csv", "b.json", "notes.md"):
        (folder / "tables" / name).write_text("x\n1\n")
    row = {"id": 1, "question": "q", "concepts": ["Summary Statistics"], "constraints": "",
           "format": "@x[v]", "files": ["a.csv", "b.json", "notes.md"], "level": "easy"}
    (folder / "questions.jsonl").write_text(json.dumps(row) + "\n")
    (folder / "labels.jsonl").write_text('{"id": 1, "common_answers": [["x", "1"]]}\n')
    given: list[list[Path]] = []

    def answer(question: Question, tables: list[Path]) -> str:
        given.append(tables)
        return "@x[1]"

    result = run_benchmark(folder, answer, tmp_path / "out")
    assert [p.name for p in given[0]] == ["a.csv", "b.json", "notes.md"]
    assert all(p.parent == tmp_path / "out" / "tables" for p in given[0])
    assert result["overall"]["ABQ"] == 1.0
    table = (tmp_path / "out" / "table.md").read_text()
    assert table.startswith("## Multi-file questions: set") and "Data Interpreter" not in table
    for bad in ({"file_name": "a.csv"}, {"files": []}, {"files": ["../labels.jsonl"]}):
        (folder / "questions.jsonl").write_text(json.dumps(row | bad) + "\n")
        with pytest.raises(CbrError, match="questions.jsonl, line 1"):
            load_questions(folder)
