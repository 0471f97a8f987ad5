"""Load and validate task folders: ours (task.toml) and DS-Agent/MLAgentBench's (env/, scripts/)."""

from __future__ import annotations

import ast
import re
import tomllib
from pathlib import Path
from typing import Any

from dsagent_cbr.errors import CbrError
from dsagent_cbr.python_syntax import parse as parse_python
from dsagent_cbr.tasks.dsagent_layout import DsagentGrading, training_csv
from dsagent_cbr.tasks.metrics import get_metric
from dsagent_cbr.tasks.model import MODALITIES, STAGES, TASK_TYPES, Task
from dsagent_cbr.tasks.sources import entry_problem


class TaskError(CbrError):
    """A task folder that cannot be used; `details` holds one line per problem."""


def detect_layout(root: Path) -> str | None:
    if (root / "task.toml").is_file():
        return "cbr"
    if (root / "env" / "train.py").is_file() and (
        root / "scripts" / "research_problem.txt"
    ).is_file():
        return "dsagent"
    return None


def not_a_task(given: str, root: Path) -> TaskError:
    """A folder without task.toml, and the command that makes a task of it: a Kaggle competition's
    folder (train.csv beside test.csv) is one `tasks new` away, and so is a folder of CSV files."""
    name = re.sub(r"[^\w.-]+", "-", root.name).strip("-.") or "my-task"
    files = {p.name.lower(): p.name for p in root.iterdir() if p.is_file()}
    if "train.csv" in files:
        make = f"cbr tasks new tasks/{name} --from-kaggle-folder {given}"
        return TaskError(
            f"{given} is a Kaggle competition folder, not a task: make it one with `{make}`."
        )
    csvs = sorted(v for k, v in files.items() if k.endswith(".csv"))
    if csvs:
        train = Path(given) / csvs[0]
        make = f"cbr tasks new tasks/{name} --train {train} --target COLUMN --holdout 0.2"
        return TaskError(f"{given} holds CSV files but no task: make one with `{make}`.")
    return TaskError(
        f"{given} is not a task folder: it has neither task.toml nor env/train.py with "
        "scripts/research_problem.txt.",
        details=[f"{root}: missing task.toml"],
    )


def load_task(path: str | Path, *, require_data: bool = False) -> Task:
    """Load a task folder, raising TaskError listing every problem found."""
    root = Path(path).expanduser().resolve()
    if not root.is_dir():
        raise TaskError(f"No task folder at {path}.")
    layout = detect_layout(root)
    if layout is None:
        raise not_a_task(str(path), root)
    task, problems = _load_cbr(root) if layout == "cbr" else _load_dsagent(root)
    if task is not None and require_data and not task.is_prepared():
        problems.append(f"{root}: data not prepared (run `cbr tasks prepare {task.name}`)")
    # what develop, deploy and run would trip on, named up front
    elif task is not None and require_data:
        from dsagent_cbr.tasks.data_checks import data_problems

        problems += data_problems(task)
    if problems:
        raise TaskError(f"Task folder {path} has {len(problems)} problem(s).", details=problems)
    assert task is not None
    return task


def validate_task(path: str | Path, *, require_data: bool = True) -> list[str]:
    try:
        load_task(path, require_data=require_data)
    except TaskError as exc:
        return exc.details or [str(exc)]
    return []


def _read_toml(path: Path, problems: list[str]) -> dict[str, Any]:
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        problems.append(f"{path}: not valid TOML ({exc})")
        return {}


def _strings(value: Any, field: str, where: Path, problems: list[str]) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        return (value,)
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return tuple(value)
    problems.append(f"{where}: {field} must be a string or a list of strings")
    return ()


def _plain_name(name: str) -> bool:
    return bool(name) and "/" not in name and "\\" not in name and name not in (".", "..")


def _sources(value: Any, where: Path, problems: list[str]) -> tuple[str, ...]:
    """task.toml's `sources`, each "package:path" (tasks/sources.py); whether the package is installed
    is not checked, so a folder still loads on a machine that could not prepare it."""
    sources = _strings(value, "sources", where, problems)
    for entry in sources:
        problem = entry_problem(entry)
        if problem:
            problems.append(f"{where}: sources entry {entry!r} {problem}")
    return sources


def _check_inside(folder: Path, name: str, what: str, problems: list[str]) -> None:
    """A task file must stay inside its folder: no absolute path, no '..', no symlink leading out."""
    parts = Path(name).parts
    if not name or Path(name).is_absolute() or ".." in parts or "\\" in name:
        problems.append(
            f"{what} {name!r} must be a relative name inside {folder.name}/ (no '..', no absolute path)"
        )
        return
    path = folder / name
    if not path.exists() and not path.is_symlink():
        return  # not prepared yet: is_prepared() says so
    inside = folder.resolve()
    escaping = [
        p
        for p in [path, *(path.rglob("*") if path.is_dir() else [])]
        if p.is_symlink() and not p.resolve().is_relative_to(inside)
    ]
    if escaping or not path.resolve().is_relative_to(inside):
        problems.append(f"{what} {name!r} leads outside {folder.name}/ through a symlink")


def _check_not_linked(answers: Path, public: list[Path], where: Path, problems: list[str]) -> None:
    """A hard link is the same file under another name: the answers must not be one of the public files."""
    secret = answers.stat()
    for path in public:
        files = [path, *path.rglob("*")] if path.is_dir() else [path]
        for f in files:
            if f.is_file() and (f.stat().st_dev, f.stat().st_ino) == (secret.st_dev, secret.st_ino):
                problems.append(
                    f"{where}: public file {f.name!r} is the answers file under another name"
                )


def _check_starter(starter: Path, problems: list[str], *, skeleton: bool) -> None:
    if not starter.is_file():
        problems.append(f"{starter}: starter script missing")
        return
    try:
        tree = parse_python(starter.read_text(encoding="utf-8"))
    except (SyntaxError, UnicodeDecodeError) as exc:
        problems.append(f"{starter}: does not parse ({exc})")
        return
    if skeleton:
        defined = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
        for name in ("train_model", "predict"):
            if name not in defined:
                problems.append(f"{starter}: the skeleton function {name}() is missing")


def _check_head(meta: dict[str, Any], where: Path, problems: list[str]) -> tuple[Any, ...]:
    """The task's identity: (modality, task type, metric, stage, paired_with, sources)."""
    for key in ("name", "modality", "task_type", "metric"):
        if not isinstance(meta.get(key), str) or not meta.get(key):
            problems.append(f"{where}: required key {key!r} is missing")
    modality, task_type = meta.get("modality", ""), meta.get("task_type", "")
    if modality and modality not in MODALITIES:
        problems.append(f"{where}: modality {modality!r} is not one of {', '.join(MODALITIES)}")
    if task_type and task_type not in TASK_TYPES:
        problems.append(f"{where}: task_type {task_type!r} is not one of {', '.join(TASK_TYPES)}")
    metric_name, direction = str(meta.get("metric", "")), meta.get("direction")
    metric = None
    if metric_name:
        try:
            metric = get_metric(metric_name)
        except KeyError as exc:
            problems.append(f"{where}: {exc.args[0]}")
    if metric and direction is not None and direction != metric.direction:
        problems.append(
            f"{where}: direction {direction!r} contradicts {metric.name} ({metric.direction})"
        )
    stage = meta.get("stage", "development")
    if stage not in STAGES:
        problems.append(f"{where}: stage {stage!r} is not one of {', '.join(STAGES)}")
    paired = _strings(meta.get("paired_with", []), "paired_with", where, problems)
    if stage == "deployment" and not paired:
        problems.append(f"{where}: a deployment task needs paired_with = [<development task>, ...]")
    return (
        modality,
        task_type,
        metric,
        stage,
        paired,
        _sources(meta.get("sources"), where, problems),
    )


def _check_data(
    root: Path, data: dict[str, Any], metric: Any, where: Path, problems: list[str]
) -> dict[str, Any]:
    """The [data] table: its files stay inside the folder, and csv tasks name their columns. Returns the
    Task fields it gives."""
    fmt = data.get("format", "csv")
    if fmt not in ("csv", "npy"):
        problems.append(f"{where}: data.format {fmt!r} must be 'csv' or 'npy'")
    public = _strings(data.get("public"), "data.public", where, problems)
    if not public:
        problems.append(f"{where}: data.public must list the public data files")
    for name in public:
        _check_inside(root / "data", name, f"{where}: data.public entry", problems)
    answers, predictions = data.get("answers"), data.get("predictions")
    if answers is not None:
        if not isinstance(answers, str) or not answers:
            problems.append(
                f"{where}: data.answers must name a file under private/ (or be left out)"
            )
        else:
            _check_inside(root / "private", answers, f"{where}: data.answers", problems)
    if not isinstance(predictions, str) or not _plain_name(predictions):
        problems.append(
            f"{where}: data.predictions must be a plain file name (what the script writes)"
        )
    test_file = data.get("test", "test.csv" if "test.csv" in public else None)
    if test_file is not None and test_file not in public:
        problems.append(f"{where}: data.test {test_file!r} must be one of data.public")
    train_file = data.get("train", "train.csv" if "train.csv" in public else None)
    if train_file is not None and train_file not in public:
        problems.append(f"{where}: data.train {train_file!r} must be one of data.public")
    for key in ("group_column", "time_column"):
        if data.get(key) is not None and not isinstance(data.get(key), str):
            problems.append(f"{where}: data.{key} must be a column name")
    target = _strings(data.get("target"), "data.target", where, problems)
    classes = _strings(data.get("classes"), "data.classes", where, problems)
    if fmt == "csv":
        if not data.get("id_column"):
            problems.append(f"{where}: csv tasks need data.id_column")
        if not target:
            problems.append(f"{where}: csv tasks need data.target")
        if metric and metric.name == "logloss" and not classes:
            problems.append(f"{where}: log-loss tasks need data.classes (the probability columns)")
    if isinstance(answers, str) and (root / "private" / answers).is_file():
        _check_not_linked(
            root / "private" / answers, [root / "data" / n for n in public], where, problems
        )
    return {
        "data_format": fmt,
        "public_files": public,
        "answers": answers,
        "predictions": predictions,
        "test_file": test_file,
        "train_file": train_file,
        "id_column": data.get("id_column"),
        "target": target,
        "classes": classes,
        "group_column": data.get("group_column"),
        "time_column": data.get("time_column"),
    }


def _load_cbr(root: Path) -> tuple[Task | None, list[str]]:
    problems: list[str] = []
    where = root / "task.toml"
    meta = _read_toml(where, problems)
    if not meta:
        return None, problems or [f"{where}: empty"]
    data = meta.get("data", {})
    if not isinstance(data, dict):
        problems.append(f"{where}: [data] must be a table")
        data = {}
    modality, task_type, metric, stage, paired, sources = _check_head(meta, where, problems)
    files = _check_data(root, data, metric, where, problems)
    description = root / "description.md"
    text = description.read_text(encoding="utf-8").strip() if description.is_file() else ""
    if not text:
        problems.append(f"{description}: missing or empty")
    _check_starter(root / "train.py", problems, skeleton=True)
    if meta.get("name") and meta["name"] != root.name:
        problems.append(
            f"{where}: name {meta['name']!r} differs from the folder name {root.name!r}"
        )
    if problems:
        return None, problems
    assert metric is not None
    task = Task(
        name=meta["name"],
        root=root,
        description=text,
        modality=modality,
        task_type=task_type,
        metric_name=metric.name,
        direction=metric.direction,
        starter=root / "train.py",
        public_dir=root / "data",
        private_dir=root / "private",
        stage=stage,
        paired_with=paired,
        source=str(meta.get("source", "")),
        sources=sources,
        layout="cbr",
        **files,
    )
    return task, problems


# Longest names first, so RMSLE is not read as RMSE and RMSE not as MSE.
_METRIC_WORDS = [
    ("mcrmse", "mcrmse"),
    ("rmsle", "rmsle"),
    ("rmse", "rmse"),
    ("medae", "medae"),
    ("mse", "mse"),
    ("mae", "mae"),
    ("auroc", "auroc"),
    ("roc auc", "auroc"),
    ("auc", "auroc"),
    ("log loss", "logloss"),
    ("logloss", "logloss"),
    ("nll", "logloss"),
    ("accuracy", "accuracy"),
]


def _find_metric(*texts: str) -> str | None:
    for text in texts:
        lowered = text.lower()
        for word, name in _METRIC_WORDS:
            if re.search(rf"\b{re.escape(word)}\b", lowered):
                return name
    return None


def _print_label(submission: Path) -> str | None:
    """The label before ':' in the last print() of DS-Agent's submission.py ("final MAE on test set")."""
    if not submission.is_file():
        return None
    label = None
    for line in submission.read_text(encoding="utf-8", errors="replace").splitlines():
        match = re.search(r"print\(\s*f?[\"']([^\"':{]+):", line)
        if match:
            label = match.group(1).strip()
    return label


def _guess_modality(text: str) -> tuple[str, str]:
    lowered = text.lower()
    if "forecast" in lowered:
        return "forecasting", "forecasting"
    kind = "regression" if "regression" in lowered else "multiclass-classification"
    if "time series" in lowered or "time-series" in lowered:
        return "time-series-classification", kind
    if any(w in lowered for w in ("text", "sentence", "review", "essay", "tweet", "nlp")):
        return "text", kind
    return "tabular", kind


def _label_kind(env: Path, grading: DsagentGrading, metric: str, guessed: str) -> str:
    """The task type the labels show: AUROC grades one binary label (or several, multi-label), and a
    classification whose training labels take two values is binary, whatever the words said."""
    labels = grading.label_columns
    if metric == "auroc":
        return "binary-classification" if len(labels) <= 1 else "multilabel-classification"
    train = training_csv(env, grading.label_file, labels)
    if guessed != "multiclass-classification" or len(labels) != 1 or train is None:
        return guessed
    import pandas as pd

    values = pd.read_csv(train, usecols=list(labels)).iloc[:, 0]
    return "binary-classification" if values.nunique() == 2 else guessed


def _load_dsagent(root: Path) -> tuple[Task | None, list[str]]:
    from dsagent_cbr.tasks.dsagent_layout import analyse

    problems: list[str] = []
    env = root / "env"
    description, label, metric_name = _read_dsagent_files(root, problems)
    grading = analyse(env, problems) if not problems else None
    if problems or grading is None:
        return None, problems
    assert metric_name is not None
    return _dsagent_task(root, description, label, metric_name, grading), problems


def _read_dsagent_files(root: Path, problems: list[str]) -> tuple[str, str | None, str | None]:
    """What a DS-Agent folder's files say: the task in words, the label of the printed test score and
    the metric. Each problem found on the way (the starter's too, and a symlink out of env/) is added
    to `problems`."""
    env, scripts = root / "env", root / "scripts"
    description = (
        (scripts / "research_problem.txt").read_text(encoding="utf-8", errors="replace").strip()
    )
    if not description:
        problems.append(f"{scripts / 'research_problem.txt'}: empty")
    _check_starter(env / "train.py", problems, skeleton=False)
    label = _print_label(env / "submission.py")
    if label is None:
        problems.append(
            f"{env / 'submission.py'}: no print(\"<label>: ...\") line to read the test score from"
        )
    metric_name = _find_metric(label or "", description)
    if metric_name is None:
        problems.append(
            f"{root}: cannot tell the metric from submission.py or research_problem.txt"
        )
    escaping = [
        p.name
        for p in env.iterdir()
        if p.is_symlink() and not p.resolve().is_relative_to(env.resolve())
    ]
    if escaping:
        problems.append(
            f"{env}: {', '.join(sorted(escaping))} lead(s) outside env/ through a symlink"
        )
    return description, label, metric_name


def _dsagent_task(
    root: Path, description: str, label: str | None, metric_name: str, grading: DsagentGrading
) -> Task:
    """The Task of a DS-Agent folder that passed its checks: graded by its own submission.py, every
    file of env/ public but the starter and the test labels."""
    env = root / "env"
    modality, task_type = _guess_modality(description)
    task_type = _label_kind(env, grading, metric_name, task_type)
    hidden = {"train.py", *grading.answer_files}
    public = tuple(
        sorted(p.name for p in env.iterdir() if p.name not in hidden and not p.name.startswith("."))
    )
    metric = get_metric(metric_name)
    return Task(
        name=root.name,
        root=root,
        description=description,
        modality=modality,
        task_type=task_type,
        metric_name=metric.name,
        direction=metric.direction,
        starter=env / "train.py",
        public_dir=env,
        public_files=public,
        private_dir=env,
        answers=None,
        predictions=None,
        data_format="dsagent",
        layout="dsagent",
        test_pattern=label,
        dsagent=grading,
        test_file=grading.label_file or next((f for f in public if "test" in f.lower()), None),
    )


def discover_tasks(tasks_dir: Path) -> list[Path]:
    if not tasks_dir.is_dir():
        return []
    return sorted(p for p in tasks_dir.iterdir() if p.is_dir() and detect_layout(p) is not None)
