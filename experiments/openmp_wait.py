"""OpenMP's wait policy under shared cores: plain LightGBM on a 6k-row table, timed alone and beside
other work, with libgomp's default (threads spin a while before they sleep) and with OMP_WAIT_POLICY=PASSIVE
(what the sandbox sets for a run that shares the machine: CBR_CORES below its cores).

Three settings, each in one run of this script on this machine:
    alone       one fit, every core
    loaded      one fit while two busy processes hold the cores (a bench trial or a search node beside it)
    side-by-side  two fits at once, each told all the cores (the oversubscription a share avoids)
Usage: python experiments/openmp_wait.py [--repeats 3]"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys

FIT = """
import time, numpy as np, lightgbm as lgb
rng = np.random.default_rng(0)
X = rng.normal(size=(6000, 20)); y = X[:, 0] * 2 + np.sin(X[:, 1]) + rng.normal(size=6000)
start = time.perf_counter()
lgb.LGBMRegressor(n_estimators=300, verbose=-1).fit(X, y)
print(time.perf_counter() - start)
"""
BUSY = "import time\nend = time.time() + 600\nwhile time.time() < end: pass\n"


def fit(policy: str, count: int = 1) -> list[float]:
    cores = str(len(os.sched_getaffinity(0)))
    env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    env.update({"OMP_NUM_THREADS": cores, **({"OMP_WAIT_POLICY": policy} if policy else {})})
    procs = [subprocess.Popen([sys.executable, "-c", FIT], env=env, stdout=subprocess.PIPE, text=True)
             for _ in range(count)]
    return [float(p.communicate()[0]) for p in procs]


def loaded(policy: str) -> float:
    busy = [subprocess.Popen([sys.executable, "-c", BUSY]) for _ in range(len(os.sched_getaffinity(0)))]
    try:
        return fit(policy)[0]
    finally:
        for b in busy:
            b.kill()
            b.wait()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    settings = {"alone": lambda p: fit(p)[0], "loaded": loaded, "side-by-side": lambda p: max(fit(p, 2))}
    print(f"{'setting':14} {'default (s)':>11} {'PASSIVE (s)':>12} {'ratio':>7}   (median of {args.repeats})")
    for name, measure in settings.items():
        times = {p: sorted(measure(p) for _ in range(args.repeats))[args.repeats // 2] for p in ("", "PASSIVE")}
        print(f"{name:14} {times['']:11.2f} {times['PASSIVE']:12.2f} {times[''] / times['PASSIVE']:7.2f}")


if __name__ == "__main__":
    main()
