"""How the index keeps up with the bank's two durable sources. The journal: ops past the last one the
store applied are replayed, a journal cut short is written again from the index, and a bank without one
is given one. The seed files (casebank/): indexed again when they change. CaseBank (facade.py) takes these
methods from Syncing."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

from dsagent_cbr.bank import casefiles
from dsagent_cbr.bank.cases import Case
from dsagent_cbr.bank.checks import KINDS, problem_with
from dsagent_cbr.bank.integrity import notice
from dsagent_cbr.bank.journal import JournalState
from dsagent_cbr.bank.records import AddReport, by_kind, present_ids
from dsagent_cbr.saying import doing

if TYPE_CHECKING:
    from dsagent_cbr.bank.facade import CaseBank


class Syncing:
    def _journal_key(self: CaseBank) -> str:
        return f"journal:{self.journal.ident()}"

    def _mark_applied(self: CaseBank, size: int) -> None:
        self.store.set_meta({self._journal_key(): str(size)})

    def _sync_journal(self: CaseBank) -> None:
        """Make the store hold what the journal says: ops after the last one the store recorded as applied
        are applied again (adds of cases already there and removes of absent ones change nothing)."""
        if not self.journal.exists():
            self._start_journal()
            return
        size = self.journal.size()
        applied = int(self.store.get_meta().get(self._journal_key(), "-1"))
        if applied == size:
            return
        if applied > size:
            self._rerecord()
            return
        start = max(applied, 0)
        state = JournalState()
        reseed = False
        for _, op in self.journal.ops(start):
            state.apply(op)
            reseed = reseed or op.get("op") == "reseed"
        present = {kind: self.store.ids(kind) for kind in KINDS}
        missing = [c for c in state.cases.values() if c.id not in present[c.kind]]
        gone = sorted(state.removed & set().union(*present.values()))
        if missing:
            fresh = by_kind(missing)
            self._index(fresh, {k: self._embed_cases(v) for k, v in fresh.items() if v})
        if gone:
            self._delete(gone)
        if reseed:
            self.ensure_seeded(force=True, record=False)
        self._mark_applied(size)
        if missing or gone:
            notice(
                f"The bank's index was behind its journal ({self.journal.path}): indexed {len(missing)} "
                f"case(s) and removed {len(gone)} to match it."
            )

    def _store_user_cases(self: CaseBank, seed_now: list[Case]) -> list[Case]:
        """Cases in the index that did not come from the seed files."""
        seed_ids = set(json.loads(self.store.get_meta().get("seed_ids", "[]"))) | {
            c.id for c in seed_now
        }
        return [
            c
            for kind in KINDS
            for c in self.list(kind)
            if c.id not in seed_ids and not str(c.extra.get("origin", "")).startswith("casebank/")
        ]

    def _rerecord(self: CaseBank) -> None:
        """The journal is shorter than the index last saw it (cut or edited by hand): the index's user
        cases that it no longer mentions are written to it again."""
        state = self.journal.state()
        seed_now = self._load_seed().cases if self.casebank_dir else []
        lost = [
            c
            for c in self._store_user_cases(seed_now)
            if c.id not in state.cases and c.id not in state.removed
        ]
        size = (
            self.journal.append([{"op": "add", "case": c.to_dict()} for c in lost])
            if lost
            else self.journal.size()
        )
        self._mark_applied(size)
        notice(
            f"The bank's journal {self.journal.path} is shorter than when the index last read it; "
            f"{len(lost)} case(s) the index holds were written to it again."
        )

    def _start_journal(self: CaseBank) -> None:
        """A bank without a journal: a new one, or one made before journals. Its user cases (those not
        from the seed files) are written to a new journal, so that from now on they survive anything
        that happens to the index."""
        seed_now = self._load_seed().cases if self.casebank_dir else []
        user = self._store_user_cases(seed_now)
        ops = [{"op": "add", "case": c.to_dict()} for c in user]
        meta = self.store.get_meta()
        if seed_now and meta.get("seed_fingerprint") == casefiles.fingerprint(
            self.casebank_dir or Path()
        ):
            present = present_ids(self.store)
            # seed cases the user removed stay removed
            removed = sorted({c.id for c in seed_now} - present)
            if removed:
                ops.append({"op": "remove", "ids": removed})
        _, size = self.journal.create(ops)
        self._mark_applied(size)
        if ops:
            notice(
                f"This bank had no journal: recorded its {len(user)} user case(s) in {self.journal.path}, "
                "from which `cbr bank rebuild` can always rebuild the index."
            )

    def _load_seed(self: CaseBank) -> casefiles.Loaded:
        loaded = casefiles.load_seed(self.casebank_dir) if self.casebank_dir else casefiles.Loaded()
        self.seed_problems = loaded.problems
        return loaded

    def ensure_seeded(self: CaseBank, force: bool = False, record: bool = True) -> AddReport:
        """Index casebank/ when its files changed since the last time (or when forced, which also brings
        back seed cases a user removed): cases from files that are gone or edited are removed, new ones
        added; unchanged ones stay untouched. Seed cases are not journaled: the files are their record."""
        report = AddReport()
        if self.casebank_dir is None or not self.casebank_dir.is_dir():
            return report
        with self.lock():
            meta = self.store.get_meta()
            current = casefiles.fingerprint(self.casebank_dir)
            before = set(json.loads(meta.get("seed_ids", "[]")))
            present = present_ids(self.store)
            if not force and meta.get("seed_fingerprint") == current and before <= present:
                return report
            if force and record:
                self._mark_applied(self.journal.append([{"op": "reseed"}]))
            loaded = self._load_seed()
            journal = self.journal.state()
            wanted = [c for c in loaded.cases if c.id not in journal.removed]
            wanted_ids = {c.id for c in wanted}
            stale = sorted(before - wanted_ids - set(journal.cases))
            new = [c for c in wanted if c.id not in present]
            report.duplicates = [c.id for c in wanted if c.id in present]
            report.failed = [(c.id, why) for c in new if (why := problem_with(c))]
            new = [c for c in new if not problem_with(c)]
            if new:
                batches = by_kind(new)
                # a new home embeds every seed case: 45 s on a loaded machine
                with doing(f"indexing {len(new)} case(s) of the seed bank {self.casebank_dir}"):
                    vectors = {k: self._embed_cases(v) for k, v in batches.items() if v}
                report.added = self._index(batches, vectors)
            if stale:
                self._delete(stale)
            self.store.set_meta(
                {"seed_fingerprint": current, "seed_ids": json.dumps(sorted(wanted_ids))}
            )
        return report
