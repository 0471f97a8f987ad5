"""An adapted script as a model edits it, and its edit wrapped again.

A script the structural adapter made holds the case's code behind the run-time shim
(untrusted/adapter_shim.py), some 300 lines that fit the case to this task. A model asked to improve such a
script should read and return the case's model, not the shim. `editable` shows the case's train_model and
predict in the task's starter, under a comment saying what the shim hands them and what it makes of what
predict returns. `rewrapped` adapts the model's reply again under the same account of the case, so that the
shim's rules stay those the comment stated."""

from __future__ import annotations

import re
from dataclasses import dataclass

from dsagent_cbr.adapter.adapt import CaseSolution, adapt_solution, splice, unwrap_adapted
from dsagent_cbr.python_syntax import parse as parse_python
from dsagent_cbr.tasks.model import Task

CASE_NAME = re.compile(r"# --- transplanted from case (.+?) by the cbr structural adapter ---")
FORMS = {
    "frame": "a pandas DataFrame",
    "series": "a pandas Series",
    "list": "a list",
    "array": "a NumPy array",
}


@dataclass(frozen=True)
class Editable:
    view: str  # the task's starter, its train_model/predict the case's, under the shim's contract
    account: dict  # the shim's account of the case: its kind and the forms of its inputs
    case: str  # the case the script was transplanted from


def editable(script: str, task: Task) -> Editable | None:
    """The adapted `script` as a model edits it; None for a script the adapter did not make."""
    inner, account = unwrap_adapted(script)
    if account is None:
        return None
    starter_text = task.starter.read_text(encoding="utf-8")
    block = f"{contract(account)}\n{inner.rstrip()}\n"
    named = CASE_NAME.search(script)
    view = splice(starter_text, parse_python(starter_text), block)
    return Editable(view, account, named.group(1) if named else "solution")


def rewrapped(reply: str, edit: Editable, task: Task) -> str:
    """The model's edit of `edit.view`, its train_model/predict wrapped by the shim as before.
    Raises AdapterError when the reply has no train_model/predict to wrap."""
    case = CaseSolution(reply, task.modality, task.task_type, task.metric_name, edit.case)
    return adapt_solution(case, task, account=edit.account).code


def contract(account: dict) -> str:
    """What the shim does around train_model/predict, as a comment for the model that edits them."""
    x_form = FORMS.get(str(account.get("x_kind")), "the form the code takes")
    lines = [
        "cbr's adapter wraps train_model and predict below to fit this task. Edit them and what they use:",
        "the adapter wraps your edit again the same way, and keeps the rest of this script as it is.",
        f"- X_train, X_valid and predict's X come as {x_form}.",
    ]
    if account.get("modality") == "tabular" and not account.get("raw"):
        lines.append(
            "- Their text columns come as integer codes of the training categories (-1 for one unseen in "
            "training), except a column the code names in quotes, which comes as text."
        )
    lines += _target_lines(account)
    return "\n".join(f"# {line}" for line in lines)


def _target_lines(account: dict) -> list[str]:
    y_form = FORMS.get(str(account.get("y_kind")), "the form the code takes")
    case, output = account.get("case"), account.get("output")
    if output == "value" and case in ("regression", "forecasting"):
        log = (
            " of log1p(target); predictions go back through expm1"
            if account.get("log_target")
            else ""
        )
        return [
            f"- y_train and y_valid come as {y_form}{log}.",
            "- predict returns the predicted values.",
        ]
    if output == "value":
        return [
            f"- y_train and y_valid come as {y_form} of the codes of the target's quantile bins.",
            "- predict returns bin codes or a probability per bin; the adapter reads the bins' weighted mean.",
        ]
    return [
        f"- y_train and y_valid come as {y_form} of class codes 0 to k-1 (the classes in sorted order).",
        "- predict returns class codes, or a probability per class (rows x k). Where the task grades "
        "probabilities, the adapter first runs a copy of predict whose .predict( calls are .predict_proba(.",
    ]
