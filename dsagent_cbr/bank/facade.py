"""The case bank the agent uses: a collection per kind of case (checks.KINDS) over one vector store.

open_bank(settings) -> CaseBank; search / add / remove / get / list / stats / export; rebuild_bank(settings).

What the bank holds is decided by two durable sources: the shipped seed files (casebank/) and the bank's
journal (journal.py), where every case a user adds or a run retains is written, fsynced, before it is
indexed. The vector store is derived from them: a store that is behind the journal (a writer died between
the two) is caught up when the bank is opened (sync.py), a rebuild makes a whole new store beside the old
one and switches to it atomically (rebuild.py, places.py), and a damaged store file is reported, never
silently replaced."""

from __future__ import annotations

import json
import threading
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from dsagent_cbr.bank import doctext
from dsagent_cbr.bank.cases import Case
from dsagent_cbr.bank.checks import KINDS, problem_with
from dsagent_cbr.bank.embedder import Embedder, EmbeddingCache, normalise
from dsagent_cbr.bank.integrity import notice
from dsagent_cbr.bank.journal import JOURNAL_NAME, BankLock, CaseJournal
from dsagent_cbr.bank.places import Place, make_place, recover
from dsagent_cbr.bank.rebuild import Rebuilding
from dsagent_cbr.bank.records import AddReport, by_kind, metadata_of, present_ids
from dsagent_cbr.bank.store import Record, VectorStore
from dsagent_cbr.bank.sync import Syncing
from dsagent_cbr.errors import CbrError
from dsagent_cbr.files import write_text_atomic
from dsagent_cbr.stores import STORES

T = TypeVar("T")


@dataclass
class Hit:
    case: Case
    score: float  # cosine similarity


def _where(where: dict[str, Any] | None, exclude_task: str | None) -> dict[str, Any] | None:
    out = dict(where or {})
    if "kind" in out and out["kind"] in KINDS:  # kind= names the collection, not the source kind
        out.pop("kind")
    if exclude_task:
        out["task_name"] = {"$ne": exclude_task}
    return out or None


def _all_ids(store: VectorStore) -> set[str]:
    store.refresh()
    return present_ids(store)


class CaseBank(Syncing, Rebuilding):
    def __init__(
        self, place: Place, embedder: Embedder, bank_dir: Path, casebank_dir: Path | None = None
    ):
        self.place = place
        self.embedder = embedder
        self.bank_dir = bank_dir
        self.casebank_dir = casebank_dir
        self.seed_problems: list[str] = []
        self.journal = CaseJournal(bank_dir / JOURNAL_NAME)
        self.lock = BankLock(bank_dir)
        self._slot: str | None = None
        self._store: VectorStore | None = None
        # seed files still to index before the first search (open(seed_when_searched=True))
        self._seed_due = False
        self._seed_lock = threading.Lock()

    @property
    def store(self) -> VectorStore:
        if self._store is None:
            raise CbrError("The bank is not open (use open_bank).")
        return self._store

    # -- opening ---------------------------------------------------------------------------------
    def open(self, seed: bool = True, *, seed_when_searched: bool = False) -> CaseBank:
        """Finish or roll back an interrupted rebuild, open the store in use (or start one), catch it up
        with the journal, and index the seed files when they changed: now, or with seed_when_searched
        just before the first search (a new home's first run embeds every seed case, 12 s here, which a
        short search that never retrieves should not spend)."""
        self._seed_due = seed and seed_when_searched
        with self.lock():
            self._recover(roll_back=not self.place.shared)
            slot = self.place.current()
            if slot is None:
                self._start_store()
            else:
                self._use(slot)
            self._sync_journal()
            self._check_model()
            if seed and not seed_when_searched:
                self.ensure_seeded()
        return self

    def _recover(self, roll_back: bool = True) -> None:
        line = recover(self.place, roll_back)
        # a compacted journal that its rebuild never put in place
        if self.journal.next_path.exists():
            self.journal.next_path.unlink()
            line = line or (
                "An interrupted `cbr bank rebuild` was rolled back: it had only begun, and the bank "
                "is as it was before the rebuild."
            )
        if line:
            notice(line)

    def _use(self, slot: str) -> None:
        store = self.place.open(slot)
        store.get_meta()  # read something now: a damaged store is reported here, in one sentence
        for kind in KINDS:
            store.count(kind)
        if self._store is not None:
            self._store.close()
        self._store, self._slot = store, slot

    def _start_store(self) -> None:
        """No index yet (a new bank, or a store kind not used here before): an empty one, filled from the
        journal and the seed files by the steps that follow."""
        slot = self.place.new_slot()
        store = self.place.open(slot, fresh=True)
        store.set_meta({"embedding_model": self.embedder.model_name})
        self.place.mark_complete(slot, store)
        self.place.point_to(slot)
        self._store, self._slot = store, slot

    def _fresh(self) -> None:
        """Under the lock, before a write: follow a rebuild another process switched to, see other
        writers' cases, and catch up with the journal."""
        slot = self.place.current()
        if slot != self._slot and slot is not None:
            self._use(slot)
        else:
            self.store.refresh()
        self._sync_journal()

    def _check_model(self) -> None:
        recorded = self.store.get_meta().get("embedding_model")
        if recorded is None:
            self.store.set_meta({"embedding_model": self.embedder.model_name})
        elif recorded != self.embedder.model_name:
            notice(
                f"The index was built with the embedding model {recorded}; rebuilding it with "
                f"{self.embedder.model_name}."
            )
            self.rebuild()  # vectors of another model are not comparable with our queries

    # -- reading ---------------------------------------------------------------------------------
    def _read(self, read: Callable[[VectorStore], T]) -> T:
        """`read` on the store in use, following a rebuild another process switched to since we opened
        (checked up front for a folder, where it costs a small file read; on a failure for a server)."""
        if not self.place.shared and self.place.current() not in (None, self._slot):
            self._follow()
        try:
            return read(self.store)
        except CbrError:
            if self.place.current() in (None, self._slot):
                raise
            self._follow()
            return read(self.store)

    def _follow(self) -> None:
        with self.lock():
            self._fresh()

    def search(
        self,
        text: str,
        kind: str = "insight",
        k: int = 5,
        where: dict[str, Any] | None = None,
        exclude_task: str | None = None,
    ) -> list[Hit]:
        _kind(kind)
        with self._seed_lock:
            if self._seed_due:
                self.ensure_seeded()
                self._seed_due = False
        vector = self.embedder.embed_query(doctext.query_text(text))
        matches = self._read(
            lambda store: store.query(kind, vector, k, _where(where, exclude_task))
        )
        return [Hit(Case.from_dict(json.loads(m.payload)), m.score) for m in matches]

    def get(self, case_id: str) -> Case | None:
        for kind in KINDS:
            found = self._read(lambda store, kind=kind: store.get(kind, [case_id]))
            if found:
                return Case.from_dict(json.loads(found[0].payload))
        return None

    def count(self, kind: str) -> int:
        """How many cases of `kind` the bank holds (no embedding model loaded)."""
        _kind(kind)
        return len(self._read(lambda store: store.ids(kind)))

    def list(self, kind: str = "insight", where: dict[str, Any] | None = None) -> list[Case]:
        _kind(kind)
        records = self._read(lambda store: store.records(kind, _where(where, None)))
        return [Case.from_dict(json.loads(r.payload)) for r in records]

    def stats(self) -> dict[str, Any]:
        self._read(lambda store: store.get_meta())  # follow a switch before reading anything else
        out: dict[str, Any] = {
            "store": self.store.name,
            "location": self.place.where(self._slot or ""),
            "embedding_model": self.embedder.model_name,
            "embedded": self.embedder.stats.computed,
            "embed_cache_hits": self.embedder.stats.cached,
        }
        for kind in KINDS:
            records = self.store.records(kind)
            out[kind] = {
                "count": len(records),
                "by_modality": dict(
                    Counter(str(r.metadata.get("modality") or "?") for r in records)
                ),
                "by_kind": dict(Counter(str(r.metadata.get("kind") or "?") for r in records)),
            }
        out["seed"] = self.store.get_meta().get("seed_fingerprint", "")
        out["journal"] = str(self.journal.path)
        out["user_cases"] = len(self.journal.state().cases) if self.journal.exists() else 0
        return out

    def export(self, path: Path) -> int:
        """Every case as one JSON line; returns how many."""
        # The stores hand back every record as a list already, so joining them costs no more memory than
        # reading them did, and the file is written whole like every other.
        payloads = [
            record.payload
            for kind in KINDS
            for record in self._read(lambda store, kind=kind: store.records(kind))
        ]
        # json.dumps output has no raw newlines
        write_text_atomic(Path(path), "".join(p + "\n" for p in payloads))
        return len(payloads)

    # -- writing ---------------------------------------------------------------------------------
    def add(self, cases: list[Case], all_or_nothing: bool = False) -> AddReport:
        """Add new cases: journal first, then index. Invalid ones are listed in `failed`; the valid new
        ones are written together or not at all (a store error raises CbrError and leaves the bank as it
        was). With all_or_nothing, one invalid case means nothing is written. Under concurrent writers
        the report says exactly what this call wrote: `added` were new when written, `duplicates` were
        there already (written by anyone)."""
        report = AddReport()
        candidates: dict[str, Case] = {}
        present = self._read(_all_ids)
        for case in cases:
            problem = problem_with(case)
            if problem:
                report.failed.append((case.id, problem))
            elif case.id in candidates or case.id in present:
                report.duplicates.append(case.id)
            else:
                candidates[case.id] = case
        if report.failed and all_or_nothing:
            return report
        # embed outside the lock (the slow part); what is new is decided under it
        batches = by_kind(list(candidates.values()))
        vectors = {k: self._embed_cases(v) for k, v in batches.items() if v}
        with self.lock():
            self._fresh()
            present = present_ids(self.store)
            fresh: dict[str, list[Case]] = {k: [] for k in KINDS}
            keep: dict[str, list[int]] = {k: [] for k in KINDS}
            for kind, batch in batches.items():
                for row, case in enumerate(batch):
                    if case.id in present:
                        report.duplicates.append(case.id)
                    else:
                        fresh[kind].append(case)
                        keep[kind].append(row)
            written = [c for kind in KINDS for c in fresh[kind]]
            if not written:
                return report
            size = self.journal.append([{"op": "add", "case": c.to_dict()} for c in written])
            try:
                report.added = self._index(
                    fresh, {k: vectors[k][keep[k]] for k in KINDS if fresh[k]}
                )
            except CbrError:
                # the index refused: take the cases back out of the journal's meaning too
                self.journal.append([{"op": "remove", "ids": [c.id for c in written]}])
                raise
            self._mark_applied(size)
        return report

    def _index(self, fresh: dict[str, list[Case]], vectors: dict[str, np.ndarray]) -> list[str]:
        """Write cases to the store only (seed cases, journal replays, and add() after its journal line)."""
        written: list[tuple[str, list[str]]] = []
        try:
            for kind, batch in fresh.items():
                if not batch:
                    continue
                records = [
                    Record(c.id, metadata_of(c), json.dumps(c.to_dict(), default=str))
                    for c in batch
                ]
                self.store.add(kind, records, vectors[kind])
                written.append((kind, [c.id for c in batch]))
        except Exception as exc:
            # the other collection may already hold its part: take it back
            for kind, ids in written:
                self.store.delete(kind, ids)
            if isinstance(exc, CbrError):
                raise
            raise CbrError(f"The store refused the batch ({exc}); nothing was added.") from exc
        return [i for _, ids in written for i in ids]

    def _delete(self, ids: list[str]) -> list[str]:
        removed = []
        for kind in KINDS:
            present = self.store.ids(kind) & set(ids)
            if present:
                self.store.delete(kind, sorted(present))
                removed.extend(sorted(present))
        seeded = json.loads(self.store.get_meta().get("seed_ids", "[]"))
        # a seed case the user removed stays removed until `bank build`
        if set(seeded) & set(removed):
            self.store.set_meta(
                {"seed_ids": json.dumps([i for i in seeded if i not in set(removed)])}
            )
        return removed

    def remove(self, ids: list[str]) -> list[str]:
        with self.lock():
            self._fresh()
            present = present_ids(self.store) & set(ids)
            if not present:
                return []
            size = self.journal.append([{"op": "remove", "ids": sorted(present)}])
            removed = self._delete(sorted(present))
            self._mark_applied(size)
        return removed

    def _embed_cases(self, cases: list[Case]) -> np.ndarray:
        pieces = [doctext.document_chunks(c) for c in cases]
        flat = self.embedder.embed_documents([p for parts in pieces for p in parts])
        out, at = [], 0
        for parts in pieces:
            out.append(flat[at : at + len(parts)].mean(axis=0))
            at += len(parts)
        return normalise(np.stack(out))

    def close(self) -> None:
        if self._store is not None:
            self._store.close()
        if self.embedder.cache is not None:
            self.embedder.cache.close()


def _kind(kind: str) -> None:
    if kind not in KINDS:
        raise CbrError(f"Case kind must be one of {', '.join(KINDS)}, not {kind!r}.")


def _bank(
    settings: Any, cache_path: Path | None, query_prefix: str | None, document_prefix: str | None
) -> CaseBank:
    if settings.store not in STORES:
        raise CbrError(f"Unknown store {settings.store!r}; use one of {', '.join(STORES)}.")
    bank_dir = Path(settings.bank_path)
    bank_dir.mkdir(parents=True, exist_ok=True)
    cache = EmbeddingCache(cache_path or settings.embedding_cache or bank_dir / "embeddings.sqlite")
    embedder = Embedder(
        settings.embedding_model,
        cache=cache,
        query_prefix=query_prefix,
        document_prefix=document_prefix,
    )
    return CaseBank(
        make_place(settings.store, bank_dir, settings.chroma_url),
        embedder,
        bank_dir,
        Path(settings.casebank_dir) if settings.casebank_dir else None,
    )


def open_bank(
    settings: Any,
    *,
    seed: bool = True,
    seed_when_searched: bool = False,
    cache_path: Path | None = None,
    query_prefix: str | None = None,
    document_prefix: str | None = None,
) -> CaseBank:
    """The bank in settings.bank_path with settings.store, seeded from settings.casebank_dir."""
    bank = _bank(settings, cache_path, query_prefix, document_prefix)
    return bank.open(seed=seed, seed_when_searched=seed_when_searched)


def rebuild_bank(settings: Any, *, cache_path: Path | None = None) -> tuple[CaseBank, AddReport]:
    """A new index for the bank from its seed files and journal, without reading the index in use (which
    may be the damaged thing the rebuild is for)."""
    bank = _bank(settings, cache_path, None, None)
    report = bank.rebuild()
    return bank, report
