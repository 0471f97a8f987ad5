"""Running an answerer over a DABench folder, grading it apart, resumably.

The answerer is handed a `Question` (no label field) and the paths of copies of its files in
`out_dir/tables/`, a folder with no labels beside it; the labels are read here, by the grader, after the
answerer has returned. Each answer is appended to `out_dir/answers.jsonl` as soon as it is graded, so an
interrupted run resumes where it stopped: a question already there is not asked again."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

from dsagent_cbr.analysis.dabench_data import Label, Question, load_labels, load_questions
from dsagent_cbr.analysis.dabench_grade import Graded, extract_answers, figures, grade_response
from dsagent_cbr.analysis.dabench_table import markdown_table
from dsagent_cbr.bounded import Unreadable, parse_json
from dsagent_cbr.errors import CbrError
from dsagent_cbr.harness.workspace import copy_entry

ANSWERS = "answers.jsonl"
FIGURES = "figures.json"
TABLE = "table.md"

Answerer = Callable[[Question, list[Path]], str]
Progress = Callable[[Graded, int, int], None]


def run_benchmark(
    folder: str | Path,
    answer: Answerer,
    out_dir: str | Path,
    progress: Progress | None = None,
    *,
    label: str = "cbr",
) -> dict:
    """Ask `answer` every question not yet in out_dir/answers.jsonl, grade each, and write
    figures.json and table.md; returns the figures (dabench_grade.figures).

    A CbrError from the answerer (InfrastructureError, BudgetExceeded, a bad setting) is not the
    agent's answer: it stops the run, with what was answered kept for the next call. Any other
    exception is the agent's failure: the question is recorded with an empty response and the error."""
    folder, out_dir = Path(folder), Path(out_dir)
    questions = load_questions(folder)
    labels = _labels_for(folder, questions)
    out_dir.mkdir(parents=True, exist_ok=True)
    answers_path = out_dir / ANSWERS
    records = read_records(answers_path, {q.id for q in questions})
    todo = [q for q in questions if q.id not in records]
    for done, question in enumerate(todo, start=len(records) + 1):
        record = _ask(question, answer, _staged_tables(folder, question, out_dir))
        graded = grade_response(question, record["response"], labels[question.id])
        record |= {"answers": extract_answers(record["response"]), "right": list(graded.right)}
        _append(answers_path, record)
        records[question.id] = record
        if progress:
            progress(graded, done, len(questions))
    # graded again from the stored responses, so a resumed run is graded by the current labels
    graded_all = [grade_response(q, records[q.id]["response"], labels[q.id]) for q in questions]
    result = figures(graded_all)
    (out_dir / FIGURES).write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    (out_dir / TABLE).write_text(_table(result, label, questions, folder), encoding="utf-8")
    return result


def _table(result: dict, label: str, questions: list[Question], folder: Path) -> str:
    """DABench's table, beside the seed papers' figures; a multi-file set's, beside none."""
    if all(len(question.files) == 1 for question in questions):
        return markdown_table(result, label)
    return markdown_table(result, label, (), f"Multi-file questions: {folder.name}")


def _labels_for(folder: Path, questions: list[Question]) -> dict[int, Label]:
    labels = load_labels(folder)
    missing = [q.id for q in questions if q.id not in labels]
    if missing:
        raise CbrError(
            f"{folder / 'labels.jsonl'} has no label for question(s) {', '.join(map(str, missing))}."
        )
    return labels


def _staged_tables(folder: Path, question: Question, out_dir: Path) -> list[Path]:
    """The question's files copied to out_dir/tables/: the answerer's paths lead to no labels."""
    staged = []
    for name, source in zip(question.files, question.tables(folder), strict=True):
        copy = out_dir / "tables" / name
        if not copy.is_file():
            copy.parent.mkdir(parents=True, exist_ok=True)
            # a link in the benchmark's folder, to a file only root may read, would reach every
            # prompt
            copy_entry(source, copy, "a benchmark's tables")
        staged.append(copy)
    return staged


def _ask(question: Question, answer: Answerer, tables: list[Path]) -> dict:
    try:
        response = answer(question, tables)
    except CbrError:
        raise  # ours or the user's, never the agent's answer: the run stops, resumably
    except Exception as exc:  # the agent failed this question: it scores as an empty response
        return {"id": question.id, "response": "", "error": f"{type(exc).__name__}: {exc}"}
    if not isinstance(response, str):
        return {"id": question.id, "response": "", "error": f"not text: {type(response).__name__}"}
    return {"id": question.id, "response": response}


def _append(path: Path, record: dict) -> None:
    with path.open("a", encoding="utf-8") as fh:
        fh.write(json.dumps(record, ensure_ascii=False) + "\n")
        fh.flush()
        os.fsync(fh.fileno())


def read_records(path: Path, known: set[int]) -> dict[int, dict]:
    """The answers of an earlier run. A torn last line (the run killed mid-write) is dropped, and its
    question asked again; any other bad line is an error, as is an answer to an unknown question."""
    if not path.is_file():
        return {}
    lines = _whole_lines(path)
    records: dict[int, dict] = {}
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        record = _record(line)
        if record is None:
            raise CbrError(f"{path}, line {number}: not an answer record (id and response).")
        if record["id"] not in known:
            raise CbrError(
                f"{path}, line {number}: question {record['id']} is not in this benchmark folder; "
                "use another output folder."
            )
        records[record["id"]] = record
    return records


def _whole_lines(path: Path) -> list[str]:
    """The file's lines, mended so that the next record appended starts a line of its own: a last
    line without its newline is kept if it is a whole record (only the newline was lost), else
    dropped (the write was cut)."""
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    if lines and not lines[-1].endswith("\n"):
        if _record(lines[-1]) is None:
            lines.pop()
        else:
            lines[-1] += "\n"
        path.write_text("".join(lines), encoding="utf-8")
    return lines


def _record(line: str) -> dict | None:
    try:
        record = parse_json(line.encode("utf-8", errors="replace"), ANSWERS)
    except Unreadable:
        return None
    ok = (
        isinstance(record, dict)
        and isinstance(record.get("id"), int)
        and isinstance(record.get("response"), str)
    )
    return record if ok else None
