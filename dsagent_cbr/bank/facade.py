"""The case bank the agent uses: two collections (insights, solutions) over one vector store.

open_bank(settings) -> CaseBank; search / add / remove / get / list / stats / export; ensure_seeded()
keeps the shipped seed bank (casebank/) indexed, re-adding only what changed."""

from __future__ import annotations

import json
import os
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from dsagent_cbr.bank import casefiles, doctext
from dsagent_cbr.bank.cases import Case, modality_family
from dsagent_cbr.bank.embedder import Embedder, EmbeddingCache, normalise
from dsagent_cbr.bank.store import Record, VectorStore
from dsagent_cbr.errors import CbrError

KINDS = ("insight", "solution")
STORES = ("chroma", "faiss", "faiss-hnsw")


@dataclass
class Hit:
    case: Case
    score: float  # cosine similarity


@dataclass
class AddReport:
    added: list[str] = field(default_factory=list)
    duplicates: list[str] = field(default_factory=list)
    failed: list[tuple[str, str]] = field(default_factory=list)  # (id, reason)

    def summary(self) -> str:
        return f"{len(self.added)} added, {len(self.duplicates)} already present, {len(self.failed)} failed"


def metadata_of(case: Case) -> dict[str, str | float | int | bool]:
    """Flat fields the stores filter on (Chroma takes no None or nested values)."""
    return {"kind": case.source_kind, "modality": case.modality, "family": modality_family(case.modality),
            "task_type": case.task_type, "competition": case.competition, "task_name": case.task_name,
            "metric": case.metric, "source_url": case.source_url}


def _check(case: Case) -> str | None:
    if case.kind not in KINDS:
        return f"kind must be insight or solution, not {case.kind!r}"
    if not case.text.strip():
        return "empty text"
    if case.kind == "solution" and not case.script.strip():
        return "a solution case needs a script"
    return None


def _where(where: dict[str, Any] | None, exclude_task: str | None) -> dict[str, Any] | None:
    out = dict(where or {})
    if "kind" in out and out["kind"] in KINDS:  # kind= names the collection, not the source kind
        out.pop("kind")
    if exclude_task:
        out["task_name"] = {"$ne": exclude_task}
    return out or None


class CaseBank:
    def __init__(self, store: VectorStore, embedder: Embedder, bank_dir: Path, casebank_dir: Path | None = None):
        self.store = store
        self.embedder = embedder
        self.bank_dir = bank_dir
        self.casebank_dir = casebank_dir
        self.seed_problems: list[str] = []
        self._check_model()

    # -- reading ---------------------------------------------------------------------------------
    def search(self, text: str, kind: str = "insight", k: int = 5, where: dict[str, Any] | None = None,
               exclude_task: str | None = None) -> list[Hit]:
        _kind(kind)
        vector = self.embedder.embed_query(doctext.query_text(text))
        matches = self.store.query(kind, vector, k, _where(where, exclude_task))
        return [Hit(Case.from_dict(json.loads(m.payload)), m.score) for m in matches]

    def get(self, case_id: str) -> Case | None:
        for kind in KINDS:
            found = self.store.get(kind, [case_id])
            if found:
                return Case.from_dict(json.loads(found[0].payload))
        return None

    def list(self, kind: str = "insight", where: dict[str, Any] | None = None) -> list[Case]:
        _kind(kind)
        return [Case.from_dict(json.loads(r.payload)) for r in self.store.records(kind, _where(where, None))]

    def stats(self) -> dict[str, Any]:
        out: dict[str, Any] = {"store": self.store.name, "location": getattr(self.store, "location", ""),
                               "embedding_model": self.embedder.model_name,
                               "embedded": self.embedder.stats.computed, "embed_cache_hits": self.embedder.stats.cached}
        for kind in KINDS:
            records = self.store.records(kind)
            out[kind] = {"count": len(records),
                         "by_modality": dict(Counter(str(r.metadata.get("modality") or "?") for r in records)),
                         "by_kind": dict(Counter(str(r.metadata.get("kind") or "?") for r in records))}
        out["seed"] = self.store.get_meta().get("seed_fingerprint", "")
        return out

    def export(self, path: Path) -> int:
        """Every case as one JSON line; returns how many."""
        path = Path(path)
        tmp = path.with_name(path.name + ".tmp")
        n = 0
        with tmp.open("w", encoding="utf-8") as fh:
            for kind in KINDS:
                for record in self.store.records(kind):
                    fh.write(record.payload + "\n")  # json.dumps output has no raw newlines
                    n += 1
        os.replace(tmp, path)
        return n

    # -- writing ---------------------------------------------------------------------------------
    def add(self, cases: list[Case], all_or_nothing: bool = False) -> AddReport:
        """Add new cases. Invalid ones are listed in `failed`; the valid new ones are written together or
        not at all (a store error raises CbrError and leaves the bank as it was). With all_or_nothing,
        one invalid case means nothing is written."""
        report = AddReport()
        fresh: dict[str, list[Case]] = {k: [] for k in KINDS}
        seen: set[str] = set()
        present = {k: self.store.ids(k) for k in KINDS}
        for case in cases:
            problem = _check(case)
            if problem:
                report.failed.append((case.id, problem))
            elif case.id in seen or case.id in present[case.kind]:
                report.duplicates.append(case.id)
            else:
                seen.add(case.id)
                fresh[case.kind].append(case)
        if report.failed and all_or_nothing:
            return report
        vectors = {k: self._embed_cases(v) for k, v in fresh.items() if v}  # embed before touching the store
        report.added = self._write(fresh, vectors)
        return report

    def _write(self, fresh: dict[str, list[Case]], vectors: dict[str, np.ndarray]) -> list[str]:
        written: list[tuple[str, list[str]]] = []
        try:
            for kind, batch in fresh.items():
                if not batch:
                    continue
                records = [Record(c.id, metadata_of(c), json.dumps(c.to_dict(), default=str)) for c in batch]
                self.store.add(kind, records, vectors[kind])
                written.append((kind, [c.id for c in batch]))
        except Exception as exc:
            for kind, ids in written:  # the other collection may already hold its part: take it back
                self.store.delete(kind, ids)
            if isinstance(exc, CbrError):
                raise
            raise CbrError(f"The store refused the batch ({exc}); nothing was added.") from exc
        return [i for _, ids in written for i in ids]

    def remove(self, ids: list[str]) -> list[str]:
        removed = []
        for kind in KINDS:
            present = self.store.ids(kind) & set(ids)
            if present:
                self.store.delete(kind, sorted(present))
                removed.extend(sorted(present))
        seeded = json.loads(self.store.get_meta().get("seed_ids", "[]"))
        if set(seeded) & set(removed):  # a seed case the user removed stays removed until `bank build`
            self.store.set_meta({"seed_ids": json.dumps([i for i in seeded if i not in set(removed)])})
        return removed

    def _embed_cases(self, cases: list[Case]) -> np.ndarray:
        pieces = [doctext.document_chunks(c) for c in cases]
        flat = self.embedder.embed_documents([p for parts in pieces for p in parts])
        out, at = [], 0
        for parts in pieces:
            out.append(flat[at:at + len(parts)].mean(axis=0))
            at += len(parts)
        return normalise(np.stack(out))

    # -- seed bank and rebuilds ------------------------------------------------------------------
    def ensure_seeded(self, force: bool = False) -> AddReport:
        """Index casebank/ when its files changed since the last time (or when forced): cases from
        files that are gone or edited are removed, new ones added; unchanged ones stay untouched."""
        report = AddReport()
        if self.casebank_dir is None or not self.casebank_dir.is_dir():
            return report
        meta = self.store.get_meta()
        current = casefiles.fingerprint(self.casebank_dir)
        before = set(json.loads(meta.get("seed_ids", "[]")))
        present = self.store.ids("insight") | self.store.ids("solution")
        if not force and meta.get("seed_fingerprint") == current and before <= present:
            return report
        loaded = casefiles.load_seed(self.casebank_dir)
        self.seed_problems = loaded.problems
        wanted = {c.id for c in loaded.cases}
        stale = sorted(before - wanted)
        report = self.add(loaded.cases)
        if stale:
            self.remove(stale)
        self.store.set_meta({"seed_fingerprint": current, "seed_ids": json.dumps(sorted(wanted))})
        return report

    def rebuild(self) -> AddReport:
        """Index every case again (with the embedding cache, unchanged texts are not re-embedded). All
        vectors are computed before the old ones are dropped, and a JSONL backup is kept until the new
        index is written, so a failure loses nothing."""
        fresh = {kind: self.list(kind) for kind in KINDS}
        vectors = {k: self._embed_cases(v) for k, v in fresh.items() if v}
        backup = self.bank_dir / "rebuild-backup.jsonl"
        self.export(backup)
        self.store.drop()
        report = AddReport(added=self._write(fresh, vectors))
        self.store.set_meta({"embedding_model": self.embedder.model_name})
        backup.unlink()
        return report

    def _check_model(self) -> None:
        recorded = self.store.get_meta().get("embedding_model")
        if recorded is None:
            self.store.set_meta({"embedding_model": self.embedder.model_name})
        elif recorded != self.embedder.model_name:
            self.rebuild()  # vectors of another model are not comparable with our queries

    def close(self) -> None:
        self.store.close()
        if self.embedder.cache is not None:
            self.embedder.cache.close()


def _kind(kind: str) -> None:
    if kind not in KINDS:
        raise CbrError(f"Case kind must be insight or solution, not {kind!r}.")


def make_store(store: str, bank_dir: Path, chroma_url: str | None = None) -> VectorStore:
    if store == "chroma":
        from dsagent_cbr.bank.chroma_store import ChromaStore

        return ChromaStore(path=None if chroma_url else bank_dir / "chroma", url=chroma_url)
    if store in ("faiss", "faiss-hnsw"):
        from dsagent_cbr.bank.faiss_store import FaissStore

        return FaissStore(bank_dir / store, hnsw=store == "faiss-hnsw")
    raise CbrError(f"Unknown store {store!r}; use one of {', '.join(STORES)}.")


def open_bank(settings: Any, *, seed: bool = True, cache_path: Path | None = None,
              query_prefix: str | None = None, document_prefix: str | None = None) -> CaseBank:
    """The bank in settings.bank_path with settings.store, seeded from settings.casebank_dir."""
    bank_dir = Path(settings.bank_path)
    bank_dir.mkdir(parents=True, exist_ok=True)
    cache = EmbeddingCache(cache_path or bank_dir / "embeddings.sqlite")
    embedder = Embedder(settings.embedding_model, cache=cache, query_prefix=query_prefix,
                        document_prefix=document_prefix)
    bank = CaseBank(make_store(settings.store, bank_dir, settings.chroma_url), embedder, bank_dir,
                    Path(settings.casebank_dir) if settings.casebank_dir else None)
    if seed:
        bank.ensure_seeded()
    return bank
