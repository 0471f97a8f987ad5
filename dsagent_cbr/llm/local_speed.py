"""How fast the local model is on this machine, measured once when its server starts, and what that means
for a budget: a small model on two cores takes minutes per node, which a user should know before waiting."""

from __future__ import annotations

import json
import math
import time
import urllib.request
from dataclasses import dataclass

# What a model node asks of the model, roughly: a rerank, a plan and a program call read the task's card,
# the cases and the script (about 8,000 tokens in all) and write a plan and a script (about 2,000).
NODE_READS, NODE_WRITES = 8_000, 2_000
# What an analysis asks at the least: a plan, one cell and an answer, each prompt holding the data's
# description (about 2,800 tokens each), and short replies (a plan, a cell, an answer)
ANALYSIS_READS, ANALYSIS_WRITES = 8_500, 500
# about 150 tokens
PROBE = "Write the numbers from 1 to 40, separated by spaces. " + "Then stop. " * 60
PROBE_TOKENS = 48


@dataclass(frozen=True)
class Speed:
    reads: float  # prompt tokens a second
    writes: float  # reply tokens a second

    def seconds(self, reads: int, writes: int) -> float:
        return reads / self.reads + writes / self.writes

    def node_seconds(self) -> float:
        return self.seconds(NODE_READS, NODE_WRITES)

    def said(self) -> str:
        reads, writes = (f"{x:.0f}" if x >= 10 else f"{x:.1f}" for x in (self.reads, self.writes))
        return f"local model: reads {reads} and writes {writes} tokens a second here"


def measure(base_url: str, timeout: float = 300.0) -> Speed | None:
    """One short chat call; llama.cpp's reply says how long it read and wrote (`timings`). None when the
    server gives no timings or the call fails: the note is a courtesy, never a reason to stop."""
    body = {
        "model": "local",
        "messages": [{"role": "user", "content": PROBE}],
        "max_tokens": PROBE_TOKENS,
        "temperature": 0,
    }
    request = urllib.request.Request(
        base_url.rstrip("/") + "/chat/completions",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout) as reply:
            timings = json.loads(reply.read()).get("timings") or {}
    except (OSError, ValueError):
        return None
    reads, writes = timings.get("prompt_per_second"), timings.get("predicted_per_second")
    if not (
        isinstance(reads, int | float)
        and isinstance(writes, int | float)
        and reads > 0
        and writes > 0
    ):
        return None
    return Speed(float(reads), float(writes))


def note(speed: Speed, left: float | None) -> str:
    """One line: the speed, a model node's time, and how many fit in the `left` seconds of the budget."""
    from dsagent_cbr.clock import say_duration

    node = speed.node_seconds()
    line = f"{speed.said()}; a model node takes about {say_duration(node, exact=False)}"
    if left is None:
        return line
    fit = int(left // node)
    return f"{line}; the {say_duration(left, exact=False)} left of the budget has room for {fit or 'none'}"


def search_note(base_url: str, left: float | None) -> tuple[str | None, bool]:
    """Before a search: the note, measured now, and whether the model is worth asking. With a budget, not
    when one of its nodes takes longer than what is left: a node the budget cuts grades nothing, and the
    plain moves alone still make a submission (the note then says the search goes on without it)."""
    started = time.monotonic()
    speed = measure(base_url)
    if speed is None:
        return None, True
    left = None if left is None else max(left - (time.monotonic() - started), 0.0)
    said = note(speed, left)
    if left is None or speed.node_seconds() <= left:
        return said, True
    return f"{said}: the search goes on without it", False


def analysis_note(base_url: str, left: float, probe_limit: float) -> str | None:
    """Before an analysis: the speed measured now (the probe given `probe_limit` seconds), the least
    an analysis takes at it, and whether the `left` seconds of the budget hold that. None when the
    server gives no timings; a sentence of its own when the probe had no reply in its time."""
    from dsagent_cbr.clock import say_duration

    started = time.monotonic()
    speed = measure(base_url, timeout=probe_limit)
    spent = time.monotonic() - started
    left = max(left - spent, 0.0)
    if speed is None:
        if spent < probe_limit - 1:
            return None
        return (
            f"local model: a {PROBE_TOKENS}-token reply took over {probe_limit:.0f} s here, so an "
            f"analysis (about {ANALYSIS_READS:,} tokens read and {ANALYSIS_WRITES} written) will "
            f"likely not finish in the {say_duration(left, exact=False)} left of the budget"
        )
    need = speed.seconds(ANALYSIS_READS, ANALYSIS_WRITES)
    line = f"{speed.said()}; an analysis of one step takes about {say_duration(need, exact=False)}"
    if need <= left:
        return line
    return (
        f"{line}, more than the {say_duration(left, exact=False)} left of the budget: it will "
        f"likely end before an answer (--budget {math.ceil((2 * need + spent) / 60)}m would hold "
        "it)"
    )
