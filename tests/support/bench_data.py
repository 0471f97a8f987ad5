"""What cbr bench's tests share: the recipes, and a trial record as the grid writes one."""

from __future__ import annotations

from pathlib import Path

from dsagent_cbr.tasks.loader import discover_tasks, load_task

REPO = Path(__file__).resolve().parents[2]
TASKS = [load_task(p) for p in discover_tasks(REPO / "tasks")]
DEPLOYMENT = [t for t in TASKS if t.stage == "deployment"]


def recipes(*names: str) -> dict[str, str]:
    """Task name -> its recipe folder, as a grid's spec keeps them."""
    return {n: str(REPO / "tasks" / n) for n in names}


def trial_record(task, agent, test, success=True, one_pass=None, outcome=None, cost=0.0):
    return {"task": task, "agent": agent, "kind": agent.split(":")[0], "test_metric": test, "success": success,
            "one_pass": one_pass, "outcome": outcome or ("ok" if success else "failed"), "cost_usd": cost,
            "direction": "maximize"}
