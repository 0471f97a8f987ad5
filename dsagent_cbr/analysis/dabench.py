"""InfiAgent-DABench (Hu et al., ICML 2024): closed-form data-analysis questions over CSV tables, graded
by the `@name[value]` answers in the response. This module is the public face of four:

    dabench_data.py   Question, load_questions, load_labels: a folder in DABench's format
    dabench_grade.py  extract_answers, grade, Graded, figures: the benchmark's rule and its figures
                      (ABQ, PASQ, UASQ), following InfiAgent's eval_closed_form.py
    dabench_table.py  SEED_PAPERS, markdown_table: ours beside the seed papers' figures
    dabench_run.py    run_benchmark: an injected answerer over every question, resumable

Labels never reach the answerer, by construction: a `Question` has no field for its answer, the
answerer is called with a `Question` and the path of a copy of its table in a folder without labels,
and only the grader loads labels.jsonl, after the answerer has returned."""

from dsagent_cbr.analysis.dabench_data import Label, Question, load_labels, load_questions
from dsagent_cbr.analysis.dabench_grade import (
    Graded,
    extract_answers,
    figures,
    grade,
    grade_response,
    is_right,
)
from dsagent_cbr.analysis.dabench_run import ANSWERS, Answerer, read_records, run_benchmark
from dsagent_cbr.analysis.dabench_table import SEED_PAPERS, SeedFigure, markdown_table

__all__ = [
    "ANSWERS",
    "SEED_PAPERS",
    "Answerer",
    "Graded",
    "Label",
    "Question",
    "SeedFigure",
    "extract_answers",
    "figures",
    "grade",
    "grade_response",
    "is_right",
    "load_labels",
    "load_questions",
    "markdown_table",
    "read_records",
    "run_benchmark",
]
