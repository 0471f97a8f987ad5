"""A run's rows as the report reads them: which are ranked and in what order, and how their values
print. Only rows with status "ok" and a finite score are ranked, by that score in the metric's
direction; the others follow in their order."""

from __future__ import annotations

import math
from typing import Any


def fmt(value: float | None) -> str:
    return "—" if value is None else f"{value:.5g}"


def fmt_seconds(seconds: float | None) -> str:
    if seconds is None:
        return "—"
    return f"{seconds:.1f} s" if seconds < 120 else f"{seconds / 60:.1f} min"


def one_line(text: Any, limit: int) -> str:
    line = " ".join(str(text or "").split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


def ranked(row: dict[str, Any]) -> bool:
    score = row.get("score")
    return row.get("status") == "ok" and isinstance(score, int | float) and math.isfinite(score)


def leaderboard(rows: list[dict[str, Any]], direction: str) -> list[dict[str, Any]]:
    """Ranked rows by score, best first (stable on ties), then the failed ones in order."""
    if direction not in ("minimize", "maximize"):
        raise ValueError(f"direction must be minimize or maximize, not {direction!r}")
    good = sorted(
        (r for r in rows if ranked(r)), key=lambda r: r["score"], reverse=direction == "maximize"
    )
    return good + [r for r in rows if not ranked(r)]
