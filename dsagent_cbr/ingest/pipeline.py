"""clean -> dedup by content hash -> distil -> store (the bank embeds as it adds).

The pipeline is given its effects: a `store` with `add(cases) -> report` (the case bank, or anything
with the same contract) and a `distil(kind, text) -> Distilled` callable. Every document ends in exactly
one outcome - added, duplicate or failed (with a reason) - and the store sees a single batch, so a
store that refuses it is left as it was."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Literal, Protocol

from dsagent_cbr.bank.cases import Case
from dsagent_cbr.errors import BudgetExceeded, CbrError
from dsagent_cbr.ingest.clean import (
    CleanError,
    clean_writeup,
    normalise_whitespace,
    notebook_to_text,
    script_to_text,
)
from dsagent_cbr.ingest.distil import Distilled
from dsagent_cbr.ingest.documents import RawDoc, SourceError

Status = Literal["added", "duplicate", "failed"]
Distil = Callable[[str, str], Distilled]


class Store(Protocol):
    def add(self, cases: list[Case]) -> Any: ...


@dataclass
class Outcome:
    status: Status
    label: str
    url: str
    kind: str = ""
    reason: str = ""
    case_id: str = ""


@dataclass
class IngestReport:
    outcomes: list[Outcome] = field(default_factory=list)

    def _of(self, status: Status) -> list[Outcome]:
        return [o for o in self.outcomes if o.status == status]

    @property
    def added(self) -> list[Outcome]:
        return self._of("added")

    @property
    def duplicates(self) -> list[Outcome]:
        return self._of("duplicate")

    @property
    def failed(self) -> list[Outcome]:
        return self._of("failed")

    def counts(self) -> dict[str, int]:
        return {
            "added": len(self.added),
            "duplicates": len(self.duplicates),
            "failed": len(self.failed),
        }

    def to_dict(self) -> dict[str, Any]:
        return {**self.counts(), "outcomes": [asdict(o) for o in self.outcomes]}


def clean_document(doc: RawDoc) -> str:
    """The document as plain text, by its format; raises CleanError when there is nothing usable."""
    if doc.format == "ipynb":
        text = notebook_to_text(doc.content, language=doc.language)
    elif doc.format == "script":
        text = script_to_text(doc.content, language=doc.language)
    elif doc.format in ("html", "markdown"):
        text = clean_writeup(doc.content)
    else:
        text = normalise_whitespace(doc.content)
    if not text.strip():
        raise CleanError("no text is left after cleaning")
    return text


def content_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def modality_from_tags(tags: Sequence[str], category: str = "") -> str:
    """A competition's Kaggle tags say what kind of data it has; the bank's modality names are used."""
    words = " ".join([*tags, category]).lower()
    if "time series" in words or "time-series" in words or "forecast" in words:
        return "forecasting"
    if any(w in words for w in ("nlp", "text", "language", "linguistics")):
        return "text"
    if "tabular" in words:
        return "tabular"
    return ""


def build_case(doc: RawDoc, distilled: Distilled, cleaned_hash: str, modality: str = "") -> Case:
    provenance = {
        "url": doc.url,
        "kind": doc.kind,
        "rank": doc.rank,
        "votes": doc.votes,
        "author": doc.author,
        "fetched_at": doc.fetched_at,
        "content_sha256": cleaned_hash,
        "distilled_by": distilled.model,
        **{k: v for k, v in doc.extra.items() if k not in ("api_url",)},
    }
    return Case(
        kind="insight",
        text=distilled.text,
        title=doc.title,
        competition=doc.competition,
        source_url=doc.url,
        source_kind=doc.kind,
        modality=modality,
        extra=provenance,
    )


def _ids(value: Any) -> list[str]:
    """Case ids from one field of the store's report (ids, cases, (id, reason) pairs, or a count)."""
    if value is None or isinstance(value, int):
        return []
    out = []
    for item in value:
        if isinstance(item, str):
            out.append(item)
        elif isinstance(item, tuple | list) and item:
            out.append(str(item[0]))
        elif hasattr(item, "id"):
            out.append(str(item.id))
        elif isinstance(item, dict) and "id" in item:
            out.append(str(item["id"]))
    return out


def _reasons(value: Any) -> dict[str, str]:
    if isinstance(value, dict):
        return {str(k): str(v) for k, v in value.items()}
    reasons: dict[str, str] = {}
    for item in value or []:
        if isinstance(item, tuple | list) and len(item) >= 2:
            reasons[str(item[0])] = str(item[1])
        elif isinstance(item, dict) and "id" in item:
            reasons[str(item["id"])] = str(item.get("reason", "refused by the bank"))
    return reasons


def ingest(
    docs: Iterable[RawDoc],
    store: Store,
    distil: Distil,
    *,
    source_errors: Iterable[SourceError] = (),
    modality: str = "",
    on_progress: Callable[[str], None] | None = None,
) -> IngestReport:
    report = IngestReport()
    for err in source_errors:
        report.outcomes.append(Outcome("failed", err.url, err.url, err.stage, err.reason))
    batch = _Batch(distil, modality)
    for doc in docs:
        label = doc.label()
        if on_progress:
            on_progress(label)
        kept_out = batch.take(doc, label)
        if kept_out is not None:
            report.outcomes.append(kept_out)
    if batch.pending:
        _store(store, batch.pending, report)
    return report


class _Batch:
    """The cases ingest gives the store in one batch, and what it has seen on the way: the cleaned
    texts' hashes and the cases' ids (a second one is a duplicate), and whether the model's budget is
    spent (the documents left that need the model are not distilled)."""

    def __init__(self, distil: Distil, modality: str) -> None:
        self.distil = distil
        self.modality = modality
        self.pending: list[tuple[Case, RawDoc]] = []
        self.seen_content: dict[str, str] = {}
        self.seen_ids: dict[str, str] = {}
        self.spent = ""
        self.needs_model: Callable[[str], bool] = getattr(distil, "wants_model", lambda kind: True)

    def take(self, doc: RawDoc, label: str) -> Outcome | None:
        """Clean, deduplicate and distil `doc` into a case of the batch (None), or the outcome that
        keeps it out."""
        if self.spent and self.needs_model(doc.kind):
            return Outcome("failed", label, doc.url, doc.kind, self.spent)
        try:
            cleaned = clean_document(doc)
        except CleanError as exc:
            return Outcome("failed", label, doc.url, doc.kind, f"{doc.kind} {label}: {exc}")
        digest = content_hash(cleaned)
        if digest in self.seen_content:
            return Outcome(
                "duplicate",
                label,
                doc.url,
                doc.kind,
                f"same content as {self.seen_content[digest]}",
            )
        self.seen_content[digest] = label
        distilled = self._distil(doc, label, cleaned)
        if isinstance(distilled, Outcome):
            return distilled
        case = build_case(doc, distilled, digest, self.modality)
        if case.id in self.seen_ids:
            return Outcome(
                "duplicate",
                label,
                doc.url,
                doc.kind,
                f"distils to the same text as {self.seen_ids[case.id]}",
            )
        self.seen_ids[case.id] = label
        self.pending.append((case, doc))
        return None

    def _distil(self, doc: RawDoc, label: str, cleaned: str) -> Distilled | Outcome:
        """The model's distillation of the cleaned text, or the failed outcome when it gave none."""
        try:
            return self.distil(doc.kind, cleaned)
        except BudgetExceeded as exc:  # the documents left are listed as not distilled
            self.spent = f"not distilled: {exc}"
            return Outcome("failed", label, doc.url, doc.kind, self.spent)
        except CbrError:
            raise  # model unreachable: the user must act, other documents would fail alike
        except Exception as exc:  # one bad answer must not sink the batch
            return Outcome("failed", label, doc.url, doc.kind, f"distillation failed: {exc}")


def _store(store: Store, pending: list[tuple[Case, RawDoc]], report: IngestReport) -> None:
    try:
        result = store.add([case for case, _ in pending])
    except CbrError as exc:
        raise CbrError(f"The bank refused the batch and was left unchanged: {exc}") from exc
    added = set(_ids(getattr(result, "added", None)))
    dupes = set(_ids(getattr(result, "duplicates", None)))
    failed_field = getattr(result, "failed", None)
    failed = set(_ids(failed_field)) | set(_reasons(failed_field))
    reasons = _reasons(failed_field)
    counted = not added and not dupes and isinstance(getattr(result, "added", None), int)
    for case, doc in pending:
        label = doc.label()
        if case.id in failed:
            reason = reasons.get(case.id, "refused by the bank")
            report.outcomes.append(Outcome("failed", label, doc.url, doc.kind, reason, case.id))
        elif case.id in dupes:
            report.outcomes.append(
                Outcome("duplicate", label, doc.url, doc.kind, "already in the bank", case.id)
            )
        elif case.id in added or counted:
            report.outcomes.append(Outcome("added", label, doc.url, doc.kind, "", case.id))
        else:
            report.outcomes.append(
                Outcome(
                    "failed", label, doc.url, doc.kind, "the bank did not report this case", case.id
                )
            )
