"""The search against FLAML seed by seed, from a bench record: how far each one's test score moves from
seed to seed, and in how many paired seeds the search is at least as good.

A single run of each, as search_vs_flaml.py compares them, decides a task only where the gap between
the two is larger than either one's own spread over seeds. Make the record with a paired grid (trial
k of every agent runs seed k), e.g.
    cbr bench run --tasks smoke-ban,titanic-survival --agents develop:search,flaml:300 --models none \
                  --trials 3 --anchor-trials 3 --budget 5m --name search-flaml-seeds-5m
Usage: python experiments/seed_pairs.py RECORD [--search develop:search@none] [--flaml flaml:300]
                                        [--out experiments/results/seed_pairs-5m.json]"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

from dsagent_cbr.tasks.metrics import get_metric


def by_seed(record: dict, agent: str, task: str) -> dict[int, float]:
    """Test scores of the agent's successful trials on the task, by seed."""
    return {t["seed"]: t["test_metric"] for t in record["trials"]
            if t["agent"] == agent and t["task"] == task and t["success"] and t["test_metric"] is not None}


def spread(scores: list[float]) -> dict:
    return {"mean": statistics.fmean(scores), "sd": statistics.stdev(scores) if len(scores) > 1 else None,
            "low": min(scores), "high": max(scores)}


def task_row(record: dict, task: str, search: str, flaml: str) -> dict:
    ours, theirs = by_seed(record, search, task), by_seed(record, flaml, task)
    metric = get_metric(record["baselines"][task]["metric"])
    paired = sorted(set(ours) & set(theirs))
    row = {"task": task, "metric": record["baselines"][task]["metric"],
           "search": {"by_seed": ours, **spread(list(ours.values()))} if ours else None,
           "flaml": {"by_seed": theirs, **spread(list(theirs.values()))} if theirs else None,
           "paired_seeds": len(paired),
           "search_at_least_flaml": sum(not metric.better(theirs[s], ours[s]) for s in paired)}
    if ours and theirs:  # at least as good: FLAML's is not strictly better
        row["mean_at_least_flaml"] = not metric.better(row["flaml"]["mean"], row["search"]["mean"])
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("record", type=Path)
    parser.add_argument("--search", default="develop:search@none")
    parser.add_argument("--flaml", default="flaml:300")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    record = json.loads(args.record.read_text(encoding="utf-8"))
    rows = [task_row(record, task, args.search, args.flaml) for task in record["tasks"]]
    for row in rows:
        print(json.dumps(row), flush=True)
    if args.out:
        args.out.write_text(json.dumps({"record": str(args.record), "search": args.search, "flaml": args.flaml,
                                        "rows": rows}, indent=2) + "\n")


if __name__ == "__main__":
    main()
