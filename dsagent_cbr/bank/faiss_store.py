"""FAISS backend: exact inner product (IndexFlatIP) on unit vectors, or HNSW when asked, in process.

Each collection is a folder holding vectors.npy and records.jsonl (one JSON record a line). A write goes
to a fresh folder that then replaces the old one, so a crash leaves either the old or the new collection."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from dsagent_cbr.bank.integrity import damaged
from dsagent_cbr.bank.store import Match, Record, matches, parse_where
from dsagent_cbr.errors import CbrError
from dsagent_cbr.files import exclusive, write_bytes_atomic


def _why(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]


def build_index(vectors: np.ndarray, hnsw: bool = False, m: int = 32, ef_search: int = 64) -> Any:
    import faiss

    dim = vectors.shape[1] if vectors.ndim == 2 and vectors.shape[1] else 384
    if hnsw:
        index = faiss.IndexHNSWFlat(dim, m, faiss.METRIC_INNER_PRODUCT)
        index.hnsw.efSearch = ef_search
    else:
        index = faiss.IndexFlatIP(dim)
    if len(vectors):
        index.add(np.ascontiguousarray(vectors, dtype=np.float32))
    return index


class _Collection:
    def __init__(self, records: list[Record], vectors: np.ndarray, hnsw: bool) -> None:
        self.records = records
        self.vectors = vectors
        self.pos = {r.id: i for i, r in enumerate(records)}
        self.hnsw = hnsw
        self._index: Any = None

    @property
    def index(self) -> Any:
        if self._index is None:
            self._index = build_index(self.vectors, self.hnsw)
        return self._index


class FaissStore:
    def __init__(self, path: Path, hnsw: bool = False) -> None:
        self.name = "faiss-hnsw" if hnsw else "faiss"
        self.location = str(path)
        self.root = path
        self.hnsw = hnsw
        self._cols: dict[str, _Collection] = {}
        path.mkdir(parents=True, exist_ok=True)

    def _col(self, collection: str) -> _Collection:
        if collection not in self._cols:
            self._cols[collection] = self._load(collection)
        return self._cols[collection]

    def _load(self, collection: str) -> _Collection:
        folder = self.root / collection
        if not folder.exists() and (self.root / f"{collection}.old").exists():
            # a swap was interrupted: keep the old copy
            os.replace(self.root / f"{collection}.old", folder)
        if not folder.exists():
            return _Collection([], np.zeros((0, 0), np.float32), self.hnsw)
        try:
            records = []
            with (folder / "records.jsonl").open(encoding="utf-8") as fh:
                for line in fh:
                    row = json.loads(line)
                    records.append(Record(row["id"], row["metadata"], row["payload"]))
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise damaged(folder / "records.jsonl", f"cannot be read ({_why(exc)})") from exc
        try:
            vectors = np.load(folder / "vectors.npy")
        except (OSError, ValueError, EOFError) as exc:
            raise damaged(folder / "vectors.npy", f"cannot be read ({_why(exc)})") from exc
        if len(vectors) != len(records):
            raise damaged(
                folder, f"is inconsistent ({len(vectors)} vectors, {len(records)} records)"
            )
        return _Collection(records, vectors, self.hnsw)

    def _save(self, collection: str, col: _Collection) -> None:
        folder = self.root / collection
        tmp = Path(tempfile.mkdtemp(prefix=f".{collection}-", dir=self.root))
        try:
            with (tmp / "records.jsonl").open("w", encoding="utf-8") as fh:
                for r in col.records:
                    fh.write(
                        json.dumps({"id": r.id, "metadata": r.metadata, "payload": r.payload})
                        + "\n"
                    )
            np.save(tmp / "vectors.npy", col.vectors)
            old = self.root / f"{collection}.old"
            if folder.exists():
                os.replace(folder, old)
            os.replace(tmp, folder)
            shutil.rmtree(old, ignore_errors=True)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise

    def _replace(self, collection: str, records: list[Record], vectors: np.ndarray) -> None:
        fresh = _Collection(records, vectors, self.hnsw)
        self._save(collection, fresh)  # on failure the old in-memory and on-disk collection stay
        self._cols[collection] = fresh

    @contextlib.contextmanager
    def _writing(self, collection: str) -> Iterator[_Collection]:
        """Writers take a file lock and start from what is on disk, so two processes adding cases (two
        develop runs retaining solutions) do not overwrite each other's additions."""
        with exclusive(self.root / ".lock"):
            self._cols[collection] = self._load(collection)
            yield self._cols[collection]

    def add(self, collection: str, records: list[Record], vectors: np.ndarray) -> None:
        if not records:
            return
        with self._writing(collection) as col:
            self._add(collection, col, records, vectors)

    def _add(
        self, collection: str, col: _Collection, records: list[Record], vectors: np.ndarray
    ) -> None:
        clash = [r.id for r in records if r.id in col.pos]
        if clash:
            raise CbrError(
                f"FAISS collection {collection} already holds {clash[0]}; nothing was added."
            )
        vectors = np.asarray(vectors, np.float32)
        merged = vectors if not len(col.records) else np.vstack([col.vectors, vectors])
        try:
            self._replace(collection, col.records + records, merged)
        except OSError as exc:
            raise CbrError(f"Cannot write the FAISS collection under {self.root}: {exc}") from exc

    def delete(self, collection: str, ids: list[str]) -> None:
        with self._writing(collection) as col:
            gone = set(ids) & set(col.pos)
            if not gone:
                return
            keep = [i for i, r in enumerate(col.records) if r.id not in gone]
            self._replace(collection, [col.records[i] for i in keep], col.vectors[keep])

    def get(self, collection: str, ids: list[str]) -> list[Record]:
        col = self._col(collection)
        return [col.records[col.pos[i]] for i in ids if i in col.pos]

    def ids(self, collection: str) -> set[str]:
        return set(self._col(collection).pos)

    def records(self, collection: str, where: dict[str, Any] | None = None) -> list[Record]:
        clauses = parse_where(where)
        return [r for r in self._col(collection).records if matches(r.metadata, clauses)]

    def count(self, collection: str) -> int:
        return len(self._col(collection).records)

    def query(
        self, collection: str, vector: np.ndarray, k: int, where: dict[str, Any] | None = None
    ) -> list[Match]:
        import faiss

        col = self._col(collection)
        if not col.records or k <= 0:
            return []
        clauses = parse_where(where)
        query = np.asarray(vector, np.float32).reshape(1, -1)
        params = None
        if clauses:
            allowed = np.array(
                [i for i, r in enumerate(col.records) if matches(r.metadata, clauses)],
                dtype=np.int64,
            )
            if not len(allowed):
                return []
            selector = faiss.IDSelectorBatch(allowed)
            params = (
                faiss.SearchParametersHNSW(sel=selector)
                if self.hnsw
                else faiss.SearchParameters(sel=selector)
            )
        scores, rows = col.index.search(query, min(k, len(col.records)), params=params)
        return [
            Match(col.records[r].id, float(s), col.records[r].payload)
            for s, r in zip(scores[0], rows[0], strict=True)
            if r >= 0
        ]

    def get_meta(self) -> dict[str, str]:
        path = self.root / "meta.json"
        if not path.is_file():
            return {}
        try:
            meta = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise damaged(path, f"cannot be read ({_why(exc)})") from exc
        if not isinstance(meta, dict):
            raise damaged(path, "does not hold a JSON object")
        return meta

    def set_meta(self, values: dict[str, str]) -> None:
        write_bytes_atomic(
            self.root / "meta.json",
            json.dumps({**self.get_meta(), **values}, indent=1).encode("utf-8"),
        )

    def refresh(self) -> None:
        """Forget the collections read so far: another process may have written since."""
        self._cols.clear()

    def close(self) -> None:
        self._cols.clear()
