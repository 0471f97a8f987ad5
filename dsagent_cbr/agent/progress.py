"""A one-line live status for long runs (rich), silent when stdout is not a terminal."""

from __future__ import annotations

import sys
from typing import Any


class LiveProgress:
    def __init__(self, title: str, enabled: bool | None = None) -> None:
        self.title = title
        self.enabled = sys.stdout.isatty() if enabled is None else enabled
        self.fields: dict[str, Any] = {}
        self._status = None

    def __enter__(self) -> LiveProgress:
        if self.enabled:
            from rich.console import Console

            self._status = Console().status(self.title)
            self._status.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._status is not None:
            self._status.__exit__(None, None, None)

    def update(self, **fields: Any) -> None:
        self.fields.update({k: v for k, v in fields.items() if v is not None})
        if self._status is None:
            return
        f = self.fields
        parts = [self.title, f"iteration {f.get('iteration', '-')}", f"{f.get('role', '')}"]
        if f.get("attempt"):
            parts.append(f"debug attempt {f['attempt']}")
        parts.append(f"best {f['best']:.5g}" if isinstance(f.get("best"), float) else "best —")
        if "tokens" in f:
            parts.append(f"{f['tokens']} tokens, ${f.get('cost', 0.0):.4f}")
        self._status.update(" · ".join(parts))
