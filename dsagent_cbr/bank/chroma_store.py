"""Chroma backend: an embedded PersistentClient under the bank directory, or a Chroma server over HTTP.

We always pass our own vectors and embedding_function=None, so Chroma never loads (or downloads) its
default embedding model."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import numpy as np

from dsagent_cbr.bank.integrity import damaged
from dsagent_cbr.bank.store import Match, Record, matches, parse_where, to_chroma_where
from dsagent_cbr.errors import CbrError, InfrastructureError

META_COLLECTION = "cbr-bank-meta"


def connect(url: str) -> Any:
    """A client of the Chroma server at `url`, checked with a heartbeat."""
    import chromadb

    parsed = urlparse(url if "://" in url else f"http://{url}")
    if not parsed.hostname:
        raise CbrError(f"Chroma URL {url!r} has no host.")
    port = parsed.port or (443 if parsed.scheme == "https" else 8000)
    try:
        client = chromadb.HttpClient(
            host=parsed.hostname,
            port=port,
            ssl=parsed.scheme == "https",
            settings=chromadb.Settings(anonymized_telemetry=False),
        )
        client.heartbeat()
    except Exception as exc:
        raise InfrastructureError(f"Cannot reach the Chroma server at {url}: {exc}") from exc
    return client


def _embedded(path: Path) -> Any:
    import chromadb

    path.mkdir(parents=True, exist_ok=True)
    try:
        return chromadb.PersistentClient(
            path=str(path), settings=chromadb.Settings(anonymized_telemetry=False)
        )
    except Exception as exc:
        raise damaged(
            path / "chroma.sqlite3", f"cannot be opened by Chroma ({_first_line(exc)})"
        ) from exc


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return (text[0] if text else type(exc).__name__)[:200]


class ChromaStore:
    """Collections `<prefix>-<kind>` (insight, solution, analysis) and a meta collection, in one client.

    In the embedded mode every call that fails inside Chroma is reported as a damaged index file with
    the fix, not as Chroma's own traceback; a server's failures are the server's and say so."""

    def __init__(
        self,
        path: Path | None = None,
        url: str | None = None,
        prefix: str = "cbr",
        client: Any = None,
    ) -> None:
        self.name = f"chroma ({url})" if url else "chroma"
        self.location = url or str(path)
        self._path = None if url else path
        if client is not None:
            self._client = client
        elif url:
            self._client = connect(url)
        else:
            assert path is not None
            self._client = _embedded(path)
        self._prefix = prefix
        self._meta_name = META_COLLECTION if prefix == "cbr" else f"{prefix}-meta"
        self._cols: dict[str, Any] = {}
        with self._guard():
            self._batch = int(self._client.get_max_batch_size())

    @contextlib.contextmanager
    def _guard(self) -> Iterator[None]:
        try:
            yield
        except CbrError:
            raise
        except Exception as exc:
            if self._path is None:
                raise InfrastructureError(
                    f"The Chroma server at {self.location} failed: {_first_line(exc)}"
                ) from exc
            raise damaged(
                self._path / "chroma.sqlite3", f"cannot be read by Chroma ({_first_line(exc)})"
            ) from exc

    def refresh(self) -> None:
        """Nothing cached here: Chroma reads its files on every call."""

    def _col(self, collection: str) -> Any:
        if collection not in self._cols:
            with self._guard():
                self._cols[collection] = self._client.get_or_create_collection(
                    f"{self._prefix}-{collection}",
                    embedding_function=None,
                    # a higher ef keeps HNSW effectively exact on banks of a few thousand cases
                    configuration={
                        "hnsw": {"space": "cosine", "ef_search": 200, "ef_construction": 200}
                    },
                )
        return self._cols[collection]

    def add(self, collection: str, records: list[Record], vectors: np.ndarray) -> None:
        col = self._col(collection)
        done: list[str] = []
        try:
            for start in range(0, len(records), self._batch):
                part = records[start : start + self._batch]
                ids = [r.id for r in part]
                col.add(
                    ids=ids,
                    embeddings=vectors[start : start + len(part)].astype(np.float32),
                    metadatas=[{**r.metadata, "payload": r.payload} for r in part],
                    documents=[json.loads(r.payload).get("text", "")[:2000] for r in part],
                )
                done.extend(ids)
        except Exception as exc:
            if done:  # all or nothing: take back what went in before the failure
                with self._guard():
                    col.delete(ids=done)
            raise CbrError(
                f"Chroma refused the batch ({_first_line(exc)}); nothing was added."
            ) from exc

    def delete(self, collection: str, ids: list[str]) -> None:
        if ids:
            with self._guard():
                self._col(collection).delete(ids=list(ids))

    def get(self, collection: str, ids: list[str]) -> list[Record]:
        if not ids:
            return []
        with self._guard():
            got = self._col(collection).get(ids=list(ids), include=["metadatas"])
        by_id = {i: _record(i, m) for i, m in zip(got["ids"], got["metadatas"], strict=True)}
        return [by_id[i] for i in ids if i in by_id]

    def ids(self, collection: str) -> set[str]:
        with self._guard():
            return set(self._col(collection).get(include=[])["ids"])

    def records(self, collection: str, where: dict[str, Any] | None = None) -> list[Record]:
        with self._guard():
            got = self._col(collection).get(
                where=to_chroma_where(parse_where(where)), include=["metadatas"]
            )
        return [_record(i, m) for i, m in zip(got["ids"], got["metadatas"], strict=True)]

    def count(self, collection: str) -> int:
        with self._guard():
            return int(self._col(collection).count())

    def query(
        self, collection: str, vector: np.ndarray, k: int, where: dict[str, Any] | None = None
    ) -> list[Match]:
        col = self._col(collection)
        clauses = parse_where(where)
        with self._guard():
            total = col.count()
            if total == 0 or k <= 0:
                return []
            got = col.query(
                query_embeddings=[np.asarray(vector, np.float32)],
                n_results=min(k, total),
                where=to_chroma_where(clauses),
                include=["metadatas", "distances"],
            )
        out = []
        for i, meta, dist in zip(
            got["ids"][0], got["metadatas"][0], got["distances"][0], strict=True
        ):
            if matches(meta, clauses):  # belt and braces: Chroma already filtered
                out.append(Match(i, 1.0 - float(dist), str(meta.get("payload", "{}"))))
        return out

    def _meta(self) -> Any:
        with self._guard():
            return self._client.get_or_create_collection(self._meta_name, embedding_function=None)

    def get_meta(self) -> dict[str, str]:
        metadata = self._meta().metadata or {}
        return {k: str(v) for k, v in metadata.items() if not k.startswith("hnsw:")}

    def set_meta(self, values: dict[str, str]) -> None:
        col = self._meta()
        with self._guard():
            col.modify(metadata={**self.get_meta(), **values})

    def close(self) -> None:
        self._cols.clear()


def _record(id_: str, meta: dict[str, Any]) -> Record:
    meta = dict(meta or {})
    payload = str(meta.pop("payload", "{}"))
    return Record(id_, meta, payload)
