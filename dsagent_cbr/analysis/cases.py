"""Analyses as cases of the bank: a run that answered a question becomes a case (its question, the code
of the cells that ran, its answer, what went wrong on the way), and a new question's plan prompt shows
the nearest of them as examples.

An analysis enters the bank when a bench graded it right (`cbr bench dabench`) or when its user keeps
it (`cbr bank keep RUN`). Its `task_name` is its question's key, and a retrieval for a question leaves
out every case of that key: an analysis is never an example for the question it answered."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from pydantic import BaseModel, ValidationError

from dsagent_cbr.analysis.agent import NOTEBOOK
from dsagent_cbr.analysis.answer import ANSWER_BYTES, ANSWER_MD
from dsagent_cbr.analysis.describe import is_first_cell
from dsagent_cbr.analysis.notebook import RAISES
from dsagent_cbr.analysis.run_record import SUMMARY
from dsagent_cbr.bank.cases import Case, content_id
from dsagent_cbr.bounded import Absent, Unreadable, read_capped, read_json
from dsagent_cbr.errors import CbrError

KIND = "analysis"
SCRIPT_CHARS = 20_000  # of the cells' code kept in a case
ANSWER_CHARS = 2_000
EXAMPLE_CODE_CHARS = 3_000  # of a case's code in a prompt: its head and its tail
TITLE_CHARS = 100
# what `cbr bank keep` reads of a run's notebook, its outputs included (a plot is some 50 kB)
NOTEBOOK_BYTES = 32 * 2**20


class Bank(Protocol):
    """What retrieval needs of CaseBank (the fast tests pass a fake)."""

    def count(self, kind: str) -> int: ...

    def search(
        self, text: str, kind: str = ..., k: int = ..., exclude_task: str | None = ...
    ) -> list[Any]: ...


@dataclass
class Example:
    """A retrieved analysis, as the journal and summary record it."""

    id: str
    score: float
    question: str


def question_key(question: str) -> str:
    """The same question, whatever its spacing or letter case, has the same key."""
    return "question-" + content_id(" ".join(question.lower().split()))


def query_text(question: str, constraints: str = "") -> str:
    """What is embedded, of a case and of a new question alike."""
    return question.strip() + (
        f"\nConstraints: {constraints.strip()}" if constraints.strip() else ""
    )


def analysis_case(run_dir: Path, source_kind: str, **extra: Any) -> Case:
    """The case of the `cbr analyze` run in `run_dir`; a CbrError in one sentence when the folder is
    not such a run or its analysis did not answer. `extra` is provenance (the bench, its grade)."""
    summary = _summary(run_dir)
    if summary.get("exit_code") != 0:
        raise CbrError(
            f"The analysis in {run_dir} did not answer ({summary.get('stopped') or 'no outcome'}): "
            "only an answered analysis becomes a case."
        )
    named = summary.get("data") or ""
    data = ", ".join(
        Path(str(path)).name for path in (named if isinstance(named, list) else [named])
    )
    # cbr's own first cell is the same in every analysis: the case keeps the model's cells
    code = _cells_code(run_dir / NOTEBOOK)
    if not code.strip():
        raise CbrError(f"The analysis in {run_dir} has no cell that ran: there is nothing to keep.")
    question, constraints = str(summary["question"]), str(summary.get("constraints") or "")
    return Case(
        kind=KIND,
        text=query_text(question, constraints),
        title=" ".join(question.split())[:TITLE_CHARS],
        source_kind=source_kind,
        task_name=question_key(question),
        script=code[:SCRIPT_CHARS],
        extra={
            "question": question,
            "constraints": constraints,
            "format": str(summary.get("format") or ""),
            "data": data,
            "answer": _answer_text(run_dir)[:ANSWER_CHARS],
            "went_wrong": went_wrong(summary.get("steps") or []),
            "run": run_dir.name,
            "model": str(summary.get("model") or ""),
            **extra,
        },
    )


def _summary(run_dir: Path) -> dict[str, Any]:
    path = run_dir / SUMMARY
    try:
        summary = read_json(path)
    except Absent:
        raise CbrError(
            f"{run_dir} is not a `cbr analyze` run folder: it has no {SUMMARY}."
        ) from None
    except Unreadable as exc:
        raise CbrError(f"{exc}.") from None
    if not isinstance(summary, dict) or not isinstance(summary.get("question"), str):
        raise CbrError(f"{path} is not the summary of an analysis (it has no question).")
    return summary


class _Tags(BaseModel):
    tags: list[str] = []


class _Cell(BaseModel):
    cell_type: str
    source: str | list[str] = ""  # nbformat writes a cell's lines as a list
    metadata: _Tags = _Tags()


class _Notebook(BaseModel):
    """What a case takes of a notebook: read as JSON of this shape, not by nbformat, whose errors
    quote the file they could not read."""

    cells: list[_Cell]


def _cells_code(notebook: Path) -> str:
    """The code of the notebook's cells that ran without error, each headed by its number, but for
    cbr's first cell."""
    try:
        cells = _Notebook.model_validate(read_json(notebook, NOTEBOOK_BYTES)).cells
    except Unreadable as exc:
        raise CbrError(f"{exc}.") from None
    except ValidationError as exc:
        where = ".".join(str(part) for part in exc.errors()[0]["loc"])
        raise CbrError(f"{notebook} is not a notebook cbr can read ({where}).") from None
    sources = [
        "".join(c.source) for c in cells if c.cell_type == "code" and RAISES not in c.metadata.tags
    ]
    code = [source for source in sources if not is_first_cell(source)]
    return "\n\n".join(f"# In[{n}]:\n{source.rstrip()}" for n, source in enumerate(code, start=1))


def _answer_text(run_dir: Path) -> str:
    try:
        raw = read_capped(run_dir / ANSWER_MD, ANSWER_BYTES)
    except Absent:
        return ""
    except Unreadable as exc:
        raise CbrError(f"{exc}.") from None
    return raw.decode("utf-8", errors="replace").strip()


def went_wrong(steps: list[Any]) -> list[str]:
    """One line per step that did not work at once: its errors, and whether a fix made it work."""
    lines = []
    for number, step in enumerate(steps, start=1):
        if not isinstance(step, dict) or not step.get("errors"):
            continue
        errors = "; then ".join(str(e) for e in step["errors"])
        end = "then it worked" if step.get("ok") else "left undone"
        lines.append(f"step {number} ({str(step.get('step', ''))[:120]}): {errors}; {end}")
    return lines


def retrieve(
    bank: Bank, question: str, constraints: str, k: int
) -> tuple[list[Case], list[Example]]:
    """The k analyses nearest to the question, never one of the same question."""
    if k <= 0 or bank.count(KIND) == 0:  # no embedding model loaded for an empty collection
        return [], []
    hits = bank.search(
        query_text(question, constraints), kind=KIND, k=k, exclude_task=question_key(question)
    )
    examples = [Example(h.case.id, round(float(h.score), 4), h.case.title) for h in hits]
    return [h.case for h in hits], examples


def examples_text(cases: list[Case]) -> str:
    """The cases as the plan prompt shows them (`examples` in analyze_plan.md)."""
    return "\n\n".join(_example(number, case) for number, case in enumerate(cases, start=1))


def _example(number: int, case: Case) -> str:
    extra = case.extra
    lines = [f"Example {number}, about the file {extra.get('data') or '(unnamed)'}:"]
    lines.append(f"Question: {extra.get('question') or case.text}")
    if extra.get("constraints"):
        lines.append(f"Constraints: {extra['constraints']}")
    lines += [
        "Its cells that ran, after the one that loaded and described the data:",
        "```python",
        _cut(case.script, EXAMPLE_CODE_CHARS),
        "```",
    ]
    if extra.get("answer"):
        lines.append(f"Its answer: {' '.join(str(extra['answer']).split())[:600]}")
    wrong = extra.get("went_wrong") or []
    lines.append("What went wrong on the way: " + ("; ".join(wrong) if wrong else "nothing"))
    return "\n".join(lines)


def _cut(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text.rstrip()
    half = limit // 2
    return f"{text[:half].rstrip()}\n# ... ({len(text) - limit} characters left out) ...\n{text[-half:].lstrip()}"
