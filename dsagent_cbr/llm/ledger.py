"""Every LLM call, recorded: role, model, tokens, latency, cost, cache hit; appended as JSONL to the
run folder. The ledger also enforces the run's budget in dollars and tokens."""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, NotRequired, TypedDict

from dsagent_cbr.errors import BudgetExceeded, CbrError
from dsagent_cbr.files import append_lines, json_line, whole_lines

__all__ = ["BudgetExceeded", "CallRecord", "Ledger", "Usage"]


class Usage(TypedDict):
    """What a run has spent on its model so far."""

    tokens: int
    cost_usd: float
    calls: NotRequired[int]


@dataclass
class CallRecord:
    role: str
    model: str
    prompt_tokens: int
    completion_tokens: int
    latency: float
    cost: float
    cached: bool
    time: float = 0.0
    reply_cut: int = 0  # characters past client.MAX_REPLY_CHARS, which cbr did not keep


def _call(path: Path, number: int, line: str) -> CallRecord:
    """One ledger line as a CallRecord; a damaged one is refused in a sentence, not skipped: a budget in
    dollars must not forget what was spent."""
    from pydantic import TypeAdapter, ValidationError

    try:
        return TypeAdapter(CallRecord).validate_json(line)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "the line"
        raise CbrError(
            f"The ledger {path} is damaged at line {number} ({where}: {first['msg']})."
        ) from None


class Ledger:
    def __init__(
        self, path: Path | None = None, max_cost: float | None = None, max_tokens: int | None = None
    ):
        self.path = path
        self.max_cost = max_cost
        self.max_tokens = max_tokens
        self.records: list[CallRecord] = []
        if path is not None and path.is_file():  # a resumed run keeps counting from where it was
            # a line torn by a kill was never counted: skip it
            for number, _, line in whole_lines(path):
                if line.strip():
                    self.records.append(_call(path, number, line))

    @property
    def total_cost(self) -> float:
        return sum(r.cost for r in self.records)

    @property
    def total_tokens(self) -> int:
        return sum(r.prompt_tokens + r.completion_tokens for r in self.records)

    def check_budget(self) -> None:
        if self.max_cost is not None and self.total_cost >= self.max_cost:
            raise BudgetExceeded(f"cost budget ${self.max_cost:.4f} spent (${self.total_cost:.4f})")
        if self.max_tokens is not None and self.total_tokens >= self.max_tokens:
            raise BudgetExceeded(f"token budget {self.max_tokens} spent ({self.total_tokens})")

    def record(self, record: CallRecord) -> None:
        record.time = record.time or time.time()
        self.records.append(record)
        if self.path is not None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            append_lines(self.path, [json_line(asdict(record))])

    def summary(self) -> dict[str, Any]:
        fresh = [r for r in self.records if not r.cached]
        return {
            "calls": len(self.records),
            "cache_hits": len(self.records) - len(fresh),
            "prompt_tokens": sum(r.prompt_tokens for r in self.records),
            "completion_tokens": sum(r.completion_tokens for r in self.records),
            "cost": round(self.total_cost, 6),
            "latency": round(sum(r.latency for r in fresh), 3),
        }
