"""The report as an observer of a run (agent/seams.py's Observer): drawn when the record is saved, at most
every REPORT_EVERY seconds while the run goes on, and always at its end. The commands attach it; the
loops know nothing of it."""

from __future__ import annotations

import math
import time
from pathlib import Path

from dsagent_cbr.agent.record import RunRecord
from dsagent_cbr.report.run_report import write_report

# seconds between two drawings of the report's charts while a run goes on: they take ~2 s, and after every
# node of a search on deliveries-time at --budget 1m they took 21 of its 60 s
# (python -m cProfile -m dsagent_cbr.cli develop tasks/deliveries-time --budget 1m)
REPORT_EVERY = 30.0


class ReportWriter:
    def __init__(self, run_dir: Path) -> None:
        self.run_dir = run_dir
        self.drawn = -math.inf  # when the report was last drawn (time.monotonic)

    def saved(self, record: RunRecord, *, final: bool) -> None:
        if final or time.monotonic() - self.drawn >= REPORT_EVERY:
            write_report(self.run_dir, record)
            self.drawn = time.monotonic()
