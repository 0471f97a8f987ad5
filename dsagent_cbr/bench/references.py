"""Where each task's reference solution lives.

Development tasks: the seed bank's solution (casebank/solutions/<task>/solution.py), which is also a
solution case. Deployment tasks: benchmarks/references/<task>.py, outside casebank/ on purpose: the
seed bank is built from casebank/ only, so a deployment task's reference never becomes a case (a
test checks it) and `cbr deploy` can never retrieve the answer it is measured against."""

from __future__ import annotations

from pathlib import Path

from dsagent_cbr.config import BENCHMARKS_DIR, PROJECT_ROOT

# The shipped seed casebank's, not settings.casebank_dir's: baselines.json was measured with these scripts.
DEVELOPMENT_REFERENCES = PROJECT_ROOT / "casebank" / "solutions"
DEPLOYMENT_REFERENCES = BENCHMARKS_DIR / "references"


def reference_script(task_name: str, stage: str) -> Path | None:
    path = (
        DEVELOPMENT_REFERENCES / task_name / "solution.py"
        if stage == "development"
        else DEPLOYMENT_REFERENCES / f"{task_name}.py"
    )
    return path if path.is_file() else None
