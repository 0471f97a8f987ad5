"""The vector-store interface both backends implement, and the small filter language they share.

A store keeps, per collection, records of (id, unit vector, flat metadata for filtering, payload JSON).
Filters are dicts: {"modality": "text"} (equal), {"kind": ["writeup", "notebook"]} (any of),
{"task_name": {"$ne": "x"}} (not equal), {"modality": {"$in": [...]}}; several keys must all hold."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from dsagent_cbr.errors import CbrError


@dataclass
class Record:
    id: str
    metadata: dict[str, str | float | int | bool]
    payload: str  # the case as JSON


@dataclass
class Match:
    id: str
    score: float  # cosine similarity
    payload: str


class VectorStore(Protocol):
    name: str

    def add(self, collection: str, records: list[Record], vectors: np.ndarray) -> None:
        """Add all records or none (raise and leave the collection as it was)."""

    def delete(self, collection: str, ids: list[str]) -> None: ...

    def get(self, collection: str, ids: list[str]) -> list[Record]: ...

    def ids(self, collection: str) -> set[str]: ...

    def records(self, collection: str, where: dict[str, Any] | None = None) -> list[Record]: ...

    def query(
        self, collection: str, vector: np.ndarray, k: int, where: dict[str, Any] | None = None
    ) -> list[Match]: ...

    def get_meta(self) -> dict[str, str]: ...

    def set_meta(self, values: dict[str, str]) -> None: ...

    def refresh(self) -> None:
        """Drop anything cached from disk, so the next call sees other processes' writes."""

    def close(self) -> None: ...


Clause = tuple[str, str, tuple[Any, ...]]  # (field, "$in" | "$nin", values)


def parse_where(where: dict[str, Any] | None) -> list[Clause]:
    clauses: list[Clause] = []
    for key, value in (where or {}).items():
        if isinstance(value, dict):
            if len(value) != 1:
                raise CbrError(f"Filter on {key} must have one operator, got {sorted(value)}.")
            ((op, arg),) = value.items()
            if op in ("$eq", "$in"):
                clauses.append(
                    (key, "$in", tuple(arg) if isinstance(arg, list | tuple) else (arg,))
                )
            elif op in ("$ne", "$nin"):
                clauses.append(
                    (key, "$nin", tuple(arg) if isinstance(arg, list | tuple) else (arg,))
                )
            else:
                raise CbrError(
                    f"Filter operator {op} is not supported (use $eq, $ne, $in or $nin)."
                )
        elif isinstance(value, list | tuple):
            clauses.append((key, "$in", tuple(value)))
        else:
            clauses.append((key, "$in", (value,)))
    return clauses


def matches(metadata: dict[str, Any], clauses: list[Clause]) -> bool:
    for key, op, values in clauses:
        present = metadata.get(key, "") in values
        if present != (op == "$in"):
            return False
    return True


def to_chroma_where(clauses: list[Clause]) -> dict[str, Any] | None:
    parts = []
    for key, op, values in clauses:
        if len(values) == 1:
            parts.append({key: {"$eq" if op == "$in" else "$ne": values[0]}})
        else:
            parts.append({key: {op: list(values)}})
    if not parts:
        return None
    return parts[0] if len(parts) == 1 else {"$and": parts}
