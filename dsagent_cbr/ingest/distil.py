"""Turn a cleaned document into the text the bank stores.

As in DS-Agent, write-ups keep their (lightly cleaned) words, optionally condensed by the model; a
notebook's code means little to a planner, so the model answers six questions about it (overall design,
architecture, hyper-parameters, objective, advanced techniques, important tricks). With model "none"
nothing is sent anywhere and the cleaned text is stored as it is.

Answers are cached on disk, keyed by the content hash, the model and the prompt version, so ingesting
the same document again costs nothing."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from dsagent_cbr.files import write_text_atomic

# Bump when the distil prompt changes meaning: old cache entries then stop matching.
PROMPT_VERSION = "1"
# Beyond this a notebook is cut before it is sent: long notebooks are mostly repetition and outputs.
MAX_INPUT_CHARS = 24_000

# (kind, cleaned text) -> the model's answer
Complete = Callable[[str, str], str]


class DistilError(RuntimeError):
    pass


@dataclass(frozen=True)
class Distilled:
    text: str
    how: str  # "llm" (asked the model), "cache" (an earlier answer), "clean" (no model: cleaned text)
    model: str


def cache_key(model: str, kind: str, text: str) -> str:
    return hashlib.sha256(
        "\x1f".join((model, kind, PROMPT_VERSION, text)).encode("utf-8")
    ).hexdigest()


class DistilCache:
    """One small JSON file per answer under <dir>/<key[:2]>/<key>.json, written atomically."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def _path(self, key: str) -> Path:
        return self.root / key[:2] / f"{key}.json"

    def get(self, key: str) -> str | None:
        path = self._path(key)
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError, UnicodeDecodeError):
            return None
        text = data.get("text") if isinstance(data, dict) else None
        return text if isinstance(text, str) and text.strip() else None

    def put(self, key: str, model: str, kind: str, text: str) -> None:
        write_text_atomic(
            self._path(key),
            json.dumps(
                {"model": model, "kind": kind, "prompt_version": PROMPT_VERSION, "text": text}
            ),
        )


class Distiller:
    def __init__(
        self,
        model: str = "none",
        complete: Complete | None = None,
        cache_dir: Path | None = None,
        *,
        condense_writeups: bool = False,
        max_input_chars: int = MAX_INPUT_CHARS,
    ) -> None:
        if model != "none" and complete is None:
            raise ValueError(f"model {model!r} needs a completion function")
        self.model = model
        self.complete = complete if model != "none" else None
        self.cache = DistilCache(cache_dir) if cache_dir is not None else None
        self.condense_writeups = condense_writeups
        self.max_input_chars = max_input_chars

    def wants_model(self, kind: str) -> bool:
        return self.complete is not None and (kind == "notebook" or self.condense_writeups)

    def __call__(self, kind: str, text: str) -> Distilled:
        if not self.wants_model(kind):
            return Distilled(text, "clean", "none")
        assert self.complete is not None
        sent = (
            text
            if len(text) <= self.max_input_chars
            else text[: self.max_input_chars] + "\n[... cut ...]\n"
        )
        key = cache_key(self.model, kind, sent)
        if self.cache is not None and (hit := self.cache.get(key)) is not None:
            return Distilled(hit, "cache", self.model)
        answer = (self.complete(kind, sent) or "").strip()
        if not answer:
            raise DistilError(f"the model {self.model} returned an empty answer")
        if self.cache is not None:
            self.cache.put(key, self.model, kind, answer)
        return Distilled(answer, "llm", self.model)
