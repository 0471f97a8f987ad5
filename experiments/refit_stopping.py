"""What keeping the first fit's early-stopping points does to a refit (`--refit`): each task's hand-written
reference, fitted to the task by the adapter, run three ways in the real sandbox and graded on the test
answers:
    no refit              the script as the search runs it (the selection rows held back)
    refit, rounds kept    CBR_REFIT, the bootstrap truncating the refit's early-stopped models to the
                          first fit's best rounds (what cbr does)
    refit, own stopping   CBR_REFIT with the bootstrap's line that keeps the rounds taken out: the refit
                          stops on validation rows it now learns
Usage: python experiments/refit_stopping.py [hotel-rates deliveries-time ...]"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import dsagent_cbr.harness.run as runner
from dsagent_cbr.adapter import adapt_case
from dsagent_cbr.bank.cases import Case
from dsagent_cbr.tasks.loader import load_task
from dsagent_cbr.tasks.prepare import prepare_task

ROOT = Path(__file__).resolve().parents[1]
KEEP = "                _reuse_stopping(fits[0], model)"


def adapted(name: str) -> tuple[object, str]:
    task = load_task(ROOT / "tasks" / name)
    prepare_task(task)
    script = (ROOT / "experiments" / "references" / f"{name}.py").read_text(encoding="utf-8")
    case = Case(kind="solution", text=name, task_name=name, source_kind="reference", modality=task.modality,
                task_type=task.task_type, script=script)
    return task, adapt_case(case, task)["code"]


def test_score(task: object, code: str, bootstrap: str, refit: bool) -> str:
    runner._bootstrap = lambda: bootstrap  # type: ignore[assignment]
    result = runner.run_script(task, code, run_dir=Path(tempfile.mkdtemp()), refit=refit)  # type: ignore[arg-type]
    return f"{result.test_metric:.4f}" if result.ok else result.status


def main() -> None:
    names = sys.argv[1:] or ["hotel-rates", "deliveries-time"]
    ours = runner._bootstrap()
    assert KEEP in ours, "the bootstrap no longer keeps the rounds on this line: update KEEP"
    print(f"{'task':18} {'metric':7} {'no refit':>9} {'rounds kept':>12} {'own stopping':>13}")
    for name in names:
        task, code = adapted(name)
        row = [test_score(task, code, ours, False), test_score(task, code, ours, True),
               test_score(task, code, ours.replace(KEEP, "                pass"), True)]
        print(f"{name:18} {task.metric_name:7} {row[0]:>9} {row[1]:>12} {row[2]:>13}")  # type: ignore[attr-defined]


if __name__ == "__main__":
    main()
