"""What the bank accepts: the allowed kinds, modalities, task types and source kinds, a size cap per case,
and metadata without control characters (a newline in a modality broke `bank stats`). Pure functions."""

from __future__ import annotations

import re

from dsagent_cbr.bank.cases import Case
from dsagent_cbr.tasks.model import MODALITIES, TASK_TYPES

KINDS = ("insight", "solution", "analysis")
# "time-series": imported insights that only say time series (DS-Agent's tsa_cases); "": not known
CASE_MODALITIES = ("", *MODALITIES, "time-series")
CASE_TASK_TYPES = ("", *TASK_TYPES)
SOURCE_KINDS = {
    "insight": ("", "writeup", "notebook", "retained"),
    "solution": ("", "reference", "retained"),
    # graded: answered right in a bench; kept: a user's `cbr bank keep`
    "analysis": ("graded", "kept"),
}
FILE_SOURCE_KINDS = ("writeup", "notebook")  # what a user's file may claim: only runs retain

# A case is one write-up, notebook digest or solution. Only its first few hundred words are embedded
# (doctext.MAX_CHUNKS), so a longer text would be stored whole but found by its opening alone; we refuse it
# and ask for it to be split. The biggest of DS-Agent's 186 reference cases is about 9,000 characters.
MAX_TEXT_CHARS = 100_000
MAX_SCRIPT_CHARS = 200_000

METADATA_FIELDS = (
    "title",
    "competition",
    "source_url",
    "source_kind",
    "modality",
    "task_type",
    "task_name",
    "metric",
)
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def _named(value: str) -> str:
    return repr(value) if len(value) <= 40 else repr(value[:40] + "...")


def problem_with(case: Case) -> str | None:
    """Why the bank refuses `case`, in one phrase, or None."""
    if case.kind not in KINDS:
        return f"kind must be one of {', '.join(KINDS)}, not {_named(str(case.kind))}"
    for name in METADATA_FIELDS:
        value = getattr(case, name)
        if not isinstance(value, str):
            return f"{name} must be text, not {type(value).__name__}"
        if _CONTROL.search(value):
            return f"{name} {_named(value)} contains a newline or another control character"
    if case.modality not in CASE_MODALITIES:
        return f"modality must be one of {', '.join(m for m in CASE_MODALITIES if m)}, not {_named(case.modality)}"
    if case.task_type not in CASE_TASK_TYPES:
        return f"task type must be one of {', '.join(t for t in CASE_TASK_TYPES if t)}, not {_named(case.task_type)}"
    if case.source_kind not in SOURCE_KINDS[case.kind]:
        allowed = ", ".join(s for s in SOURCE_KINDS[case.kind] if s)
        return (
            f"source kind of a{'n' if case.kind != 'solution' else ''} {case.kind} must be one of {allowed}, "
            f"not {_named(case.source_kind)}"
        )
    if not case.text.strip():
        return "empty text"
    if "\x00" in case.text or "\x00" in case.script:
        return "text contains NUL bytes"
    if len(case.text) > MAX_TEXT_CHARS:
        return (
            f"text of {len(case.text):,} characters is over the cap of {MAX_TEXT_CHARS:,} per case; "
            "split it into several cases"
        )
    if len(case.script) > MAX_SCRIPT_CHARS:
        return f"script of {len(case.script):,} characters is over the cap of {MAX_SCRIPT_CHARS:,} per case"
    if case.kind != "insight" and not case.script.strip():
        return f"a{'n' if case.kind == 'analysis' else ''} {case.kind} case needs a script"
    return None


def problem_with_file_case(case: Case) -> str | None:
    """Why a case read from a user's file (`bank import`, `bank add`) is refused beyond problem_with: a
    retained case stands for a run's own validated work (runs and bench treat it so), and only runs
    retain, so a file may not claim to be one."""
    if case.source_kind == "retained":
        return (
            f"source kind 'retained' is only for cases a run retains; a file may claim "
            f"{' or '.join(FILE_SOURCE_KINDS)}"
        )
    return None
