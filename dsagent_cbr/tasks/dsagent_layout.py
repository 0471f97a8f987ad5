"""DS-Agent/MLAgentBench task folders: how to grade one without showing a script its labels.

In that layout `env/submission.py` defines `submit_predictions_for_test_set(y_pred)` (or, in older
folders, `(y_true, y_pred)`), which reads the labelled test data and prints `final <METRIC> on test set:
<score>`. Left as it is, the script sees the labels and prints its own test score. So we read, by AST:
- which files submission.py reads by name: a file the starter also reads (test.csv) holds features and
  labels, and its label columns are the column names submission.py mentions; a file only submission.py
  reads (answer.csv, y_test.npy) holds nothing but answers and is left out of the workspace;
- with the two-argument form, the label columns are those the starter passes as y_true.
What a script then sees of the folder is the harness's to build (harness/workspace.py: the test file's
label columns hold one constant each, submission.py only saves the predictions), and the grader runs the
folder's own submission.py outside the script's reach (harness/dsagent_grader.py)."""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

from dsagent_cbr.python_syntax import parse as parse_python
from dsagent_cbr.tasks.headers import csv_header

SUBMIT = "submit_predictions_for_test_set"


@dataclass(frozen=True)
class DsagentGrading:
    arity: int  # 1: submit(y_pred); 2: submit(y_true, y_pred)
    label_file: str | None  # the shared data file whose label columns are hidden
    label_columns: tuple[str, ...]
    answer_files: tuple[str, ...]  # files only the grader reads: never in the workspace


def training_csv(env: Path, label_file: str | None, label_columns: tuple[str, ...]) -> Path | None:
    """The csv the starter trains on: named for training, not the test file, holding the label columns."""
    for path in sorted(env.glob("*.csv")):
        if (
            path.name != label_file
            and "train" in path.name.lower()
            and set(label_columns) <= set(csv_header(path))
        ):
            return path
    return None


def _strings(tree: ast.AST) -> set[str]:
    return {
        n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)
    }


def _constants(module: ast.Module) -> dict[str, set[str]]:
    """Module-level names bound to strings or lists of strings: LABELS = ["a", "b"], TARGET = "y"."""
    out: dict[str, set[str]] = {}
    for node in module.body:
        if isinstance(node, ast.Assign) and isinstance(
            node.value, ast.Constant | ast.List | ast.Tuple
        ):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    out[target.id] = _strings(node.value)
    return out


def _subscripted(tree: ast.AST, constants: dict[str, set[str]] | None = None) -> set[str]:
    """Names used as df["col"], df[["a", "b"]], df[LABELS[0]] or df.col: how code takes label columns
    (an id column appears in set_index("id") or on="id" instead, and must stay in the workspace)."""
    constants = constants or {}
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Subscript):
            out |= _strings(node.slice)
            for name in ast.walk(node.slice):
                if isinstance(name, ast.Name):
                    out |= constants.get(name.id, set())
        elif isinstance(node, ast.Attribute):
            out.add(node.attr)
    return out


def _file_name(text: str) -> str:
    return text[2:] if text.startswith("./") else text


def _submit_def(tree: ast.Module) -> ast.FunctionDef | None:
    return next((n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == SUBMIT), None)


def _y_true_strings(starter: ast.Module) -> set[str]:
    """String constants in the first argument of the starter's submit call, following one assignment."""
    call = next(
        (
            n
            for n in ast.walk(starter)
            if isinstance(n, ast.Call) and getattr(n.func, "id", None) == SUBMIT and n.args
        ),
        None,
    )
    if call is None:
        return set()
    first, constants = call.args[0], _constants(starter)
    found = _subscripted(first, constants)
    names = {n.id for n in ast.walk(first) if isinstance(n, ast.Name)}
    for node in ast.walk(starter):
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id in names for t in node.targets
        ):
            found |= _subscripted(node.value, constants)
    return found


def analyse(env: Path, problems: list[str]) -> DsagentGrading | None:
    """How to grade the folder without showing its labels; each problem found is one line in `problems`."""
    where = env / "submission.py"
    try:
        submission = parse_python(where.read_text(encoding="utf-8"))
        starter = parse_python((env / "train.py").read_text(encoding="utf-8"))
    except (OSError, SyntaxError, UnicodeDecodeError) as exc:
        problems.append(f"{where}: cannot be read as Python ({exc})")
        return None
    fn = _submit_def(submission)
    if fn is None:
        problems.append(f"{where}: defines no {SUBMIT}()")
        return None
    arity = len(fn.args.posonlyargs) + len(fn.args.args)
    files = {p.name for p in env.iterdir() if p.is_file()}
    starter_reads = {_file_name(s) for s in _strings(starter)} & files
    read = ({_file_name(s) for s in _strings(submission)} & files) - {"submission.py", "train.py"}
    answer_files = tuple(sorted(read - starter_reads))
    shared = sorted(f for f in read & starter_reads if f.endswith(".csv"))
    mentioned = (
        _subscripted(submission, _constants(submission)) if arity < 2 else _y_true_strings(starter)
    )
    if arity >= 2 and not shared:
        shared = sorted(f for f in starter_reads if f.endswith(".csv") and "test" in f.lower())
    label_file, columns = None, ()
    for name in shared:
        cols = tuple(c for c in csv_header(env / name) if c in mentioned)
        if cols:
            label_file, columns = name, cols
            break
    if arity >= 2 and not columns:
        problems.append(
            f"{env / 'train.py'}: cannot tell which test columns it passes to {SUBMIT} as y_true"
        )
        return None
    if not columns and not answer_files:
        problems.append(
            f"{where}: cannot tell where it reads the test answers from (name the file and the "
            "label columns as strings)"
        )
        return None
    return DsagentGrading(arity, label_file, columns, answer_files)
