"""One prompt of each role of the search's model moves, as a model is shown them on a real task: a search
with the real sandbox and a scripted model in this process that answers every program and debug call with
the task's reference script (experiments/references/), so that the tree grows real, graded nodes.

    python experiments/prompts_by_role.py hotel-rates experiments/results/prompts/after

writes <out>/<role>.md (the first prompt of each role) and prints their sizes. Run at an earlier commit
(experiments/earlier_commit.py gives its worktree) to set the prompts before a change beside those after."""

from __future__ import annotations

import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
PLAN = ("Reflection: the drafts stand as the tree log says.\nReasoning: the case's boosted trees suit this table.\n"
        "Thought: boosting on the metric's own loss.\nCheck: one experiment.\n"
        "Decision: Train LightGBM on the metric's loss with date parts and native categoricals.")


@dataclass
class Scripted:
    """Answers each role from the reference script (its first script breaks, so that a debug follows); keeps
    every prompt, by role and, for plan and program, by whether the node drafts or improves."""

    script: str
    model: str = "scripted"
    prompts: dict[str, str] = field(default_factory=dict)
    programs: int = 0

    def complete(self, role: str, messages: list[dict[str, str]], *, validate: Any = None, **options: Any) -> Any:
        prompt = messages[-1]["content"]
        kind = "-draft" if "from scratch" in prompt or "Write a new solution" in prompt else "-improve"
        self.prompts.setdefault(role + (kind if role in ("plan", "program") else ""), prompt)  # the first of each
        script = self.script
        if role == "program":
            self.programs += 1
            script = script.replace("import ", "import undefined_module_x\nimport ", 1) if self.programs == 1 else script
        text = {"rerank": "[1]", "plan": PLAN, "log": "Experiment Summary: done.\nExperiment Result: graded."}.get(
            role, f"The fix.\n```python\n{script}\n```\n")
        parsed = validate(text) if validate else None
        return type("Reply", (), {"text": text, "parsed": parsed})()

    def usage(self) -> dict[str, Any]:
        return {"tokens": 0, "cost_usd": 0.0}


def develop_search() -> Any:
    try:
        from dsagent_cbr.search.loop import develop_search as found
    except ImportError:  # before the search moved into search/
        from dsagent_cbr.agent.search import develop_search as found  # type: ignore[no-redef]
    return found


def main(name: str, out: Path) -> None:
    from dsagent_cbr.agent.develop import DevelopConfig
    from dsagent_cbr.bank import open_bank
    from dsagent_cbr.config import load_settings
    from dsagent_cbr.tasks.loader import load_task
    from dsagent_cbr.tasks.prepare import prepare_task

    task = load_task(REPO / "tasks" / name)
    prepare_task(task)
    model = Scripted((REPO / "experiments" / "references" / f"{name}.py").read_text(encoding="utf-8"))
    home = Path(tempfile.mkdtemp(prefix="prompts-"))
    bank = open_bank(load_settings(home=home, store="faiss"))
    config = DevelopConfig(iterations=14, in_turn=True, budget=3600.0)
    record = develop_search()(task, config, home / "run", bank, model=model)
    out.mkdir(parents=True, exist_ok=True)
    for role, prompt in sorted(model.prompts.items()):
        (out / f"{role}.md").write_text(prompt, encoding="utf-8")
        print(f"{role:8} {len(prompt):6,} characters")
    print("nodes:", ", ".join(f"{r.iteration} {r.operator} {r.score}" for r in record.rows))


if __name__ == "__main__":
    main(sys.argv[1], Path(sys.argv[2]))
