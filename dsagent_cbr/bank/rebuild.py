"""A bank's rebuild: a whole new index from the seed files and the journal, made beside the one in use and
switched to atomically (places.py). CaseBank (facade.py) takes these methods from Rebuilding."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from dsagent_cbr.bank import casefiles
from dsagent_cbr.bank.cases import Case
from dsagent_cbr.bank.checks import KINDS
from dsagent_cbr.bank.integrity import notice
from dsagent_cbr.bank.journal import CaseJournal, JournalState
from dsagent_cbr.bank.records import AddReport, by_kind, metadata_of
from dsagent_cbr.bank.store import Record, VectorStore
from dsagent_cbr.errors import CbrError

if TYPE_CHECKING:
    from dsagent_cbr.bank.facade import CaseBank

REBUILD_BATCH = 256  # cases embedded and written at a time while a rebuild fills its new store


class Rebuilding:
    def rebuild(self: CaseBank) -> AddReport:
        """Make a new index from the seed files and the journal, beside the one in use, and switch to it.

        The journal is compacted on the way (texts of removed cases leave it). A kill at any point leaves
        the old index in use or the new one; the next command finishes or rolls back what is left. With
        a Chroma server, cases the server holds that neither the seed files nor this bank's journal know
        (added by others who share the server) are carried over into the new collections."""
        with self.lock():
            self._recover()
            state = self._state_for_rebuild()
            loaded = self._load_seed()
            cases: dict[str, Case] = {c.id: c for c in loaded.cases if c.id not in state.removed}
            seed_ids = set(cases)
            cases.update(state.cases)
            carried = self._carry_over(cases, state.removed)
            cases.update(carried)
            staged_id, size = self.journal.create(CaseJournal.compacted(state), staged=True)
            slot = self.place.new_slot()
            try:
                store = self._fill(
                    slot, list(cases.values()), seed_ids, {f"journal:{staged_id}": str(size)}
                )
            except BaseException:
                # an error (not a kill): put things back now rather than at the next command
                self.place.discard(slot)
                self.journal.next_path.unlink(missing_ok=True)
                raise
            self.journal.commit_staged()
            old = self.place.current()
            self.place.point_to(slot)
            if self._store is not None:
                self._store.close()
            self._store, self._slot = store, slot
            if old and old != slot:
                self.place.discard(old)
            if carried:
                notice(
                    f"Carried over {len(carried)} case(s) that {self.place.label} held and this bank's "
                    "journal does not (added from elsewhere)."
                )
        return AddReport(added=list(cases))

    def _fill(
        self: CaseBank, slot: str, cases: list[Case], seed_ids: set[str], meta: dict[str, str]
    ) -> VectorStore:
        """A complete new store in `slot` holding `cases`, embedded and written a batch at a time."""
        store = self.place.open(slot, fresh=True)
        for start in range(0, len(cases), REBUILD_BATCH):
            for kind, batch in by_kind(cases[start : start + REBUILD_BATCH]).items():
                if batch:
                    records = [
                        Record(c.id, metadata_of(c), json.dumps(c.to_dict(), default=str))
                        for c in batch
                    ]
                    store.add(kind, records, self._embed_cases(batch))
        meta = {
            **meta,
            "embedding_model": self.embedder.model_name,
            "seed_ids": json.dumps(sorted(seed_ids)),
        }
        if self.casebank_dir and self.casebank_dir.is_dir():
            meta["seed_fingerprint"] = casefiles.fingerprint(self.casebank_dir)
        store.set_meta(meta)
        self.place.mark_complete(slot, store)
        return store

    def _state_for_rebuild(self: CaseBank) -> JournalState:
        if not self.journal.exists():
            slot = self.place.current()
            if slot is not None:
                try:
                    self._use(slot)
                except CbrError as exc:
                    raise CbrError(
                        f"{exc} But this bank was made before banks kept a journal, so its own cases "
                        f"exist only in that index; remove {self.place.label}* to start again from "
                        "the seed files."
                    ) from exc
                self._start_journal()
            else:
                self.journal.create()
        return self.journal.state()

    def _carry_over(self: CaseBank, known: dict[str, Case], removed: set[str]) -> dict[str, Case]:
        """On a shared Chroma server: cases in the collections in use that neither source knows."""
        slot = self.place.current()
        if not getattr(self.place, "shared", False) or slot is None:
            return {}
        store = self.place.open(slot)
        out: dict[str, Case] = {}
        for kind in KINDS:
            for record in store.records(kind):
                if record.id not in known and record.id not in removed:
                    out[record.id] = Case.from_dict(json.loads(record.payload))
        return out
