"""An on-disk response cache (SQLite), keyed by model, messages and sampling parameters, so an
identical request is answered without a call and without new tokens."""

from __future__ import annotations

import hashlib
import json
import sqlite3
from pathlib import Path
from typing import Any


def request_key(model: str, messages: list[dict[str, str]], params: dict[str, Any]) -> str:
    blob = json.dumps({"model": model, "messages": messages, "params": params}, sort_keys=True)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


class ResponseCache:
    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.db = sqlite3.connect(path, timeout=30, check_same_thread=False)
        self.db.execute(
            "CREATE TABLE IF NOT EXISTS responses (key TEXT PRIMARY KEY, model TEXT, text TEXT, "
            "prompt_tokens INTEGER, completion_tokens INTEGER, created REAL DEFAULT (julianday('now')))"
        )
        self.db.commit()

    def get(self, key: str) -> dict[str, Any] | None:
        row = self.db.execute(
            "SELECT text, prompt_tokens, completion_tokens FROM responses WHERE key = ?", (key,)
        ).fetchone()
        if row is None:
            return None
        return {"text": row[0], "prompt_tokens": row[1], "completion_tokens": row[2]}

    def put(
        self, key: str, model: str, text: str, prompt_tokens: int, completion_tokens: int
    ) -> None:
        self.db.execute(
            "INSERT OR REPLACE INTO responses (key, model, text, prompt_tokens, completion_tokens) "
            "VALUES (?, ?, ?, ?, ?)",
            (key, model, text, prompt_tokens, completion_tokens),
        )
        self.db.commit()

    def close(self) -> None:
        self.db.close()
