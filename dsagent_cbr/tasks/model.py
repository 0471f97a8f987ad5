"""The Task: what a task folder declares, loaded and validated by tasks.loader."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from dsagent_cbr.tasks.dsagent_layout import DsagentGrading
from dsagent_cbr.tasks.metrics import Metric, get_metric

MODALITIES = ("tabular", "text", "forecasting", "time-series-classification")
TASK_TYPES = (
    "regression",
    "binary-classification",
    "multiclass-classification",
    "multilabel-classification",
    "forecasting",
)
STAGES = ("development", "deployment")


@dataclass(frozen=True)
class Task:
    name: str
    root: Path
    description: str
    modality: str
    task_type: str
    metric_name: str
    direction: str
    starter: Path
    public_dir: Path
    public_files: tuple[str, ...]
    private_dir: Path
    # under private_dir; None: no test answers, runs are judged on selection rows only
    answers: str | None
    predictions: str | None
    # csv | npy | dsagent (graded by the folder's own submission.py, outside)
    data_format: str = "csv"
    id_column: str | None = None
    target: tuple[str, ...] = ()
    classes: tuple[str, ...] = ()
    stage: str = "development"
    paired_with: tuple[str, ...] = ()
    source: str = ""
    # "package:path" of the package data it was built from (tasks/sources.py)
    sources: tuple[str, ...] = ()
    layout: str = "cbr"  # cbr | dsagent
    test_pattern: str | None = None  # DS-Agent layout: the label its submission.py prints
    # the public file holding the test rows (what `cbr predict` replaces)
    test_file: str | None = None
    # csv: the public file of labelled rows (the selection rows come from it)
    train_file: str | None = None
    group_column: str | None = None  # csv: rows sharing it are held back together
    time_column: str | None = None  # csv: the rows' time, so that the latest are held back
    dsagent: DsagentGrading | None = None

    @property
    def has_answers(self) -> bool:
        return self.answers is not None or self.dsagent is not None

    @property
    def metric(self) -> Metric:
        return get_metric(self.metric_name)

    @property
    def prepare_script(self) -> Path:
        return self.root / "prepare.py"

    def is_prepared(self) -> bool:
        files = [self.public_dir / f for f in self.public_files]
        if self.answers:
            files.append(self.private_dir / self.answers)
        return all(f.exists() for f in files)

    def summary(self) -> dict[str, object]:
        return {
            "name": self.name,
            "modality": self.modality,
            "task_type": self.task_type,
            "metric": self.metric_name,
            "direction": self.direction,
            "stage": self.stage,
            "paired_with": list(self.paired_with),
            "layout": self.layout,
            "prepared": self.is_prepared(),
            "test_answers": self.has_answers,
            "root": str(self.root),
        }
