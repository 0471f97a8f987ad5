"""What a source (Kaggle spider, page spider, local files) hands to the ingest pipeline: one fetched
document with its provenance, before any cleaning. Spiders emit these as JSON lines."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

DocKind = Literal["writeup", "notebook"]
# how the raw content is encoded: decides which cleaner runs
ContentFormat = Literal["html", "markdown", "text", "ipynb", "script"]
FORMATS = ("html", "markdown", "text", "ipynb", "script")


def now_iso() -> str:
    return datetime.now(UTC).replace(microsecond=0).isoformat()


@dataclass
class RawDoc:
    url: str
    kind: DocKind
    content: str
    format: ContentFormat
    title: str = ""
    competition: str = ""
    rank: int | None = None  # 1 = most voted notebook / first writeup of the listing
    votes: int | None = None
    author: str = ""
    language: str = "python"
    fetched_at: str = field(default_factory=now_iso)
    extra: dict[str, Any] = field(default_factory=dict)

    def label(self) -> str:
        """How the document is named in summaries."""
        return self.title or self.url

    def to_item(self) -> dict[str, Any]:
        return {"type": "doc", **asdict(self)}

    @classmethod
    def from_item(cls, item: dict[str, Any]) -> RawDoc:
        known = {k: v for k, v in item.items() if k in cls.__dataclass_fields__}
        if known.get("kind") not in ("writeup", "notebook"):
            raise ValueError(
                f"document kind must be writeup or notebook, not {known.get('kind')!r}"
            )
        if known.get("format") not in FORMATS:
            raise ValueError(
                f"document format must be one of {', '.join(FORMATS)}, not {known.get('format')!r}"
            )
        return cls(**known)


@dataclass
class SourceError:
    """A fetch that failed before there was a document: what was asked for and why it failed."""

    url: str
    reason: str
    stage: str = ""  # competition | notebook-list | notebook | writeup-list | writeup | page | file
    status: int | None = None
    fatal: bool = False  # the whole crawl is pointless without it (e.g. the competition lookup)

    def to_item(self) -> dict[str, Any]:
        return {"type": "error", **asdict(self)}

    @classmethod
    def from_item(cls, item: dict[str, Any]) -> SourceError:
        return cls(**{k: v for k, v in item.items() if k in cls.__dataclass_fields__})
