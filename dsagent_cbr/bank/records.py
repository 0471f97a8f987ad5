"""What the stores hold of a case (its flat filter fields), which cases a store holds, and what adding
cases reports."""

from __future__ import annotations

from dataclasses import dataclass, field

from dsagent_cbr.bank.cases import Case, modality_family
from dsagent_cbr.bank.checks import KINDS
from dsagent_cbr.bank.store import VectorStore


@dataclass
class AddReport:
    added: list[str] = field(default_factory=list)
    duplicates: list[str] = field(default_factory=list)
    failed: list[tuple[str, str]] = field(default_factory=list)  # (id, reason)

    def summary(self) -> str:
        return f"{len(self.added)} added, {len(self.duplicates)} already present, {len(self.failed)} failed"


def metadata_of(case: Case) -> dict[str, str | float | int | bool]:
    """Flat fields the stores filter on (Chroma takes no None or nested values)."""
    return {
        "kind": case.source_kind,
        "modality": case.modality,
        "family": modality_family(case.modality),
        "task_type": case.task_type,
        "competition": case.competition,
        "task_name": case.task_name,
        "metric": case.metric,
        "source_url": case.source_url,
    }


def by_kind(cases: list[Case]) -> dict[str, list[Case]]:
    return {kind: [c for c in cases if c.kind == kind] for kind in KINDS}


def present_ids(store: VectorStore) -> set[str]:
    """Every case id the store holds, of any kind."""
    return set().union(*(store.ids(kind) for kind in KINDS))
