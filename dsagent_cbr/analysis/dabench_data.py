"""Reading a folder in InfiAgent-DABench's format: questions.jsonl, labels.jsonl and
tables/<file_name>; a multi-file set's question names its `files` (tables, JSON, documentation)
instead.

Questions and labels are read by two separate functions into two separate types on purpose: a
`Question` has no field for an answer, so whatever is handed a `Question` (the agent under test) cannot
see the labels; only the grader (dabench_grade.py, dabench_run.py) ever calls `load_labels`."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dsagent_cbr.bounded import Unreadable, parse_json, read_capped
from dsagent_cbr.errors import CbrError

QUESTIONS = "questions.jsonl"
LABELS = "labels.jsonl"
TABLES = "tables"
# questions.jsonl or labels.jsonl: the reference folder's questions take 50 kB
MAX_FILE_BYTES = 64 * 2**20

# A label is the list of (name, value) pairs the response must give as @name[value].
Label = list[tuple[str, str]]


@dataclass(frozen=True)
class Question:
    """One closed-form question, without its answer: what the agent under test is given."""

    id: int
    question: str
    concepts: tuple[str, ...]
    constraints: str
    format: str
    # under tables/: DABench's one `file_name`, or a multi-file set's `files`
    files: tuple[str, ...]
    level: str

    def tables(self, folder: Path) -> list[Path]:
        return [Path(folder) / TABLES / name for name in self.files]


def load_questions(folder: str | Path) -> list[Question]:
    """The folder's questions in file order; each must have its table under tables/."""
    folder = Path(folder)
    path = folder / QUESTIONS
    questions: list[Question] = []
    seen: set[int] = set()
    for number, row in _rows(path):
        question = _question(row, path, number)
        if question.id in seen:
            raise CbrError(f"{path}, line {number}: question {question.id} appears twice.")
        for name in question.files:
            problem = _table_problem(folder, name)
            if problem:
                raise CbrError(
                    f"{path}, line {number}: question {question.id} names the table "
                    f"{name!r}, which {problem}."
                )
        seen.add(question.id)
        questions.append(question)
    if not questions:
        raise CbrError(f"{path} holds no questions.")
    return questions


def _table_problem(folder: Path, name: str) -> str | None:
    """Why tables/<name> is not a table cbr copies, or None: a link (to a file only root may read,
    which would reach the kernel and every prompt) or a pipe is refused, as in a task's data."""
    tables = folder / TABLES
    try:
        modes = os.lstat(tables).st_mode, os.lstat(tables / name).st_mode
    except OSError:
        return f"is not in {tables}"
    if stat.S_ISLNK(modes[0]) or stat.S_ISLNK(modes[1]):
        return "is reached through a link: a benchmark's tables must be regular files"
    return None if stat.S_ISREG(modes[1]) else "is not a regular file"


def load_labels(folder: str | Path) -> dict[int, Label]:
    """Question id → its labelled (name, value) pairs, as the file gives them (duplicates kept)."""
    path = Path(folder) / LABELS
    labels: dict[int, Label] = {}
    for number, row in _rows(path):
        qid, pairs = row.get("id"), row.get("common_answers")
        if not _is_id(qid) or not _is_pairs(pairs):
            raise CbrError(
                f"{path}, line {number}: a label needs an integer id and common_answers as a "
                "list of [name, value] text pairs."
            )
        if qid in labels:
            raise CbrError(f"{path}, line {number}: the label of question {qid} appears twice.")
        labels[qid] = [(name, value) for name, value in pairs]
    return labels


def _rows(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """Each non-blank line's JSON object with its line number (from 1), read through bounded.py."""
    try:
        lines = read_capped(path, MAX_FILE_BYTES).splitlines()
    except Unreadable as exc:
        raise CbrError(f"{exc}.") from None
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            row = parse_json(line, f"{path}, line {number}")
        except Unreadable as exc:
            raise CbrError(f"{exc}.") from None
        if not isinstance(row, dict):
            raise CbrError(f"{path}, line {number}: expected a JSON object.")
        yield number, row


def _question(row: dict[str, Any], path: Path, number: int) -> Question:
    texts = ("question", "constraints", "format", "level")
    concepts = row.get("concepts")
    files = _files(row)
    if (
        not _is_id(row.get("id"))
        or any(not isinstance(row.get(key), str) for key in texts)
        or not isinstance(concepts, list)
        or not all(isinstance(c, str) for c in concepts)
        or files is None
    ):
        raise CbrError(
            f"{path}, line {number}: a question needs an integer id, concepts as a list of text, "
            "question, constraints, format and level as text, and either file_name as text or "
            "files as a list of text."
        )
    # a name is joined to tables/: a path that climbs out of it is not a benchmark's table
    for name in files:
        if Path(name).name != name or name in ("", ".", ".."):
            raise CbrError(f"{path}, line {number}: the file {name!r} is not a plain name.")
    return Question(
        id=row["id"],
        question=row["question"],
        concepts=tuple(concepts),
        constraints=row["constraints"],
        format=row["format"],
        files=files,
        level=row["level"],
    )


def _files(row: dict[str, Any]) -> tuple[str, ...] | None:
    """A question's files: DABench's one `file_name`, or a multi-file set's `files` (one at least);
    None when it gives neither, or both."""
    one, several = row.get("file_name"), row.get("files")
    if isinstance(one, str) and several is None:
        return (one,)
    if one is None and isinstance(several, list) and several:
        return tuple(several) if all(isinstance(n, str) for n in several) else None
    return None


def _is_id(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_pairs(value: Any) -> bool:
    return isinstance(value, list) and all(
        isinstance(pair, list) and len(pair) == 2 and all(isinstance(x, str) for x in pair)
        for pair in value
    )
