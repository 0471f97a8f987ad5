"""The kinds of case the banks hold: human insights (for planning), (task, solution) pairs (for
deployment) and analyses (a question about a data file, the notebook code that answered it and the
answer, for `cbr analyze`: analysis/cases.py). A case's id is the hash of its content, so the same text is never stored twice."""

from __future__ import annotations

import hashlib
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

CaseKind = Literal["insight", "solution", "analysis"]
# Imported insights often only say "time series" (DS-Agent's tsa_cases mix forecasting and classification),
# so matching and filtering can work on the family instead of the exact modality.
FAMILIES = {
    "tabular": "tabular",
    "text": "text",
    "forecasting": "time-series",
    "time-series-classification": "time-series",
    "time-series": "time-series",
}


def modality_family(modality: str) -> str:
    return FAMILIES.get(modality, modality)


def content_id(*parts: str) -> str:
    digest = hashlib.sha256("\x1f".join(p.strip() for p in parts).encode("utf-8")).hexdigest()
    return digest[:16]


@dataclass
class Case:
    kind: CaseKind
    text: str  # what is embedded: the insight text, a solution's task description, an analysis's question
    id: str = ""
    title: str = ""
    competition: str = ""
    source_url: str = ""
    # insights: writeup | notebook | retained; solutions: reference | retained; analyses: graded | kept
    source_kind: str = ""
    modality: str = ""
    task_type: str = ""
    # solution and analysis cases (an analysis's task_name is its question's key, its script its cells)
    task_name: str = ""
    script: str = ""
    metric: str = ""
    valid_score: float | None = None  # as its script printed it
    selection_score: float | None = None  # retained: cbr's grade on the rows it held back
    test_score: float | None = None
    # provenance: rank, votes, fetched_at, run id...
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.id:
            self.id = content_id(self.kind, self.text, self.script)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Case:
        known = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        return cls(**known)
