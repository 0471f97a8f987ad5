"""How long the real local-model tests take on a busy machine: start N CPU-bound processes beside them
(a CI machine whose cores are shared with other work), run the tests once, and print each test's wall
time with the load average sampled while they ran.

    python experiments/local_tests_under_load.py --burners 3     # load about 4 on 2 cores
"""

from __future__ import annotations

import multiprocessing
import os
import re
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

import click

REPO = Path(__file__).resolve().parents[1]
TESTS = ("tests/test_develop.py::test_real_local_model_one_iteration",
         "tests/test_deploy.py::test_real_local_model_deploy_ends_graded",
         "tests/test_llm_client.py::test_real_local_model_completes_and_is_stopped")


def burn() -> None:
    while True:
        pass


def sample_load(samples: list[float], stop: threading.Event) -> None:
    while not stop.wait(5):
        samples.append(os.getloadavg()[0])


@click.command()
@click.option("--burners", type=int, default=3, show_default=True, help="CPU-bound processes beside the tests.")
def main(burners: int) -> None:
    procs = [multiprocessing.Process(target=burn, daemon=True) for _ in range(burners)]
    for proc in procs:
        proc.start()
    samples: list[float] = []
    stop = threading.Event()
    sampler = threading.Thread(target=sample_load, args=(samples, stop), daemon=True)
    sampler.start()
    started = time.monotonic()
    try:
        out = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--durations=0",
                              "--durations-min=1", *TESTS], cwd=REPO, capture_output=True, text=True)
    finally:
        stop.set()
        for proc in procs:
            proc.terminate()
    print(f"{burners} burner(s) on {os.cpu_count()} cores; load average while the tests ran: "
          f"mean {statistics.mean(samples or [0]):.1f}, max {max(samples or [0]):.1f}")
    for line in out.stdout.splitlines():
        if re.match(r"^\d+\.\d+s call", line) or re.search(r"\d+ (passed|failed)", line):
            print(line)
    print(f"all: {time.monotonic() - started:.0f} s, exit {out.returncode}")


if __name__ == "__main__":
    main()
