"""The stores the ingest tests write to: the real case bank (faiss, in a temporary folder), and a small
in-memory store with the same add() contract for tests about the pipeline's own bookkeeping."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dsagent_cbr.bank.cases import Case


@dataclass
class AddReport:
    added: list[str] = field(default_factory=list)
    duplicates: list[str] = field(default_factory=list)
    failed: list[tuple[str, str]] = field(default_factory=list)


class MemoryStore:
    """All-or-nothing add, duplicates by case id, like the bank."""

    def __init__(self) -> None:
        self.cases: dict[str, Case] = {}

    def add(self, cases: list[Case]) -> AddReport:
        report = AddReport()
        staged = dict(self.cases)
        for case in cases:
            if not case.text.strip():
                report.failed.append((case.id, "empty text"))
            elif case.id in staged:
                report.duplicates.append(case.id)
            else:
                staged[case.id] = case
                report.added.append(case.id)
        self.cases = staged
        return report

    def list(self, kind: str | None = None) -> list[Case]:
        return [c for c in self.cases.values() if kind is None or c.kind == kind]


def bank_settings(home: Path) -> Any:
    """A faiss bank under `home`, seeded from nothing (an empty casebank folder)."""
    from dsagent_cbr.config import load_settings

    (home / "empty-casebank").mkdir(parents=True, exist_ok=True)
    return load_settings(environ={}, home=home, store="faiss", bank_dir=home / "bank",
                         casebank_dir=home / "empty-casebank")


def open_store(home: Path) -> Any:
    from dsagent_cbr.bank import open_bank

    return open_bank(bank_settings(home), seed=False)


def stored_insights(store: Any) -> list[Case]:
    return list(store.list("insight"))
