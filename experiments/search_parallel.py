"""`cbr develop --model none --budget B --parallel 2` against `--parallel 1` on one task, in one run of this
script: how many nodes each evaluated within the same wall clock, their best selection score and its
test score, and the wall time each command took (Ray's start included).

Usage: python experiments/search_parallel.py [--task hotel-rates] [--budget 2m]
                                             [--out experiments/results/search_parallel.json]"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from search_vs_flaml import search  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--task", default="hotel-rates")
    parser.add_argument("--budget", default="2m")
    parser.add_argument("--out", type=Path, default=ROOT / "experiments/results/search_parallel.json")
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="cbr-parallel-") as tmp:
        for parallel in (1, 2):
            runs = Path(tmp) / f"parallel-{parallel}"
            runs.mkdir()
            found = search(args.task, args.budget, runs, "none", "--parallel", str(parallel))
            rows.append({"parallel": parallel, **found})
            print(json.dumps(rows[-1]), flush=True)
    one, two = rows
    summary = {"task": args.task, "budget": args.budget, "nodes_ratio": two["nodes"] / one["nodes"],
               "selection": [one["selection"], two["selection"]], "test": [one["test"], two["test"]]}
    print(json.dumps(summary))
    args.out.write_text(json.dumps({"summary": summary, "rows": rows}, indent=2) + "\n")


if __name__ == "__main__":
    main()
