"""A small seed bank for the bank's tests: three insights and one solution, as casebank/ lays them out."""

from __future__ import annotations

from pathlib import Path

SEED_TOPICS = ["CatBoost on categorical columns", "LightGBM with monotone constraints", "ridge regression on log targets"]


def small_casebank(root: Path) -> Path:
    seed = root / "casebank"
    (seed / "insights" / "tabular").mkdir(parents=True)
    for i, topic in enumerate(SEED_TOPICS):
        (seed / "insights" / "tabular" / f"seed-{i}.md").write_text(
            f'+++\ntitle = "seed {i}"\ncompetition = "seed-comp-{i}"\nkind = "writeup"\n+++\nUse {topic}.\n',
            encoding="utf-8")
    sol = seed / "solutions" / "toy"
    sol.mkdir(parents=True)
    (sol / "task.md").write_text("Predict y from x in a small table.", encoding="utf-8")
    (sol / "solution.py").write_text("def train_model(*a):\n    return None\n", encoding="utf-8")
    (sol / "meta.toml").write_text('task = "toy"\nmodality = "tabular"\ntask_type = "regression"\n'
                                   'metric = "rmse"\ntest_score = 1.5\n', encoding="utf-8")
    return seed
