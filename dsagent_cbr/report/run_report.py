"""The report of a run: a leaderboard, the metric per iteration and feature importance, as Markdown and as
one self-contained HTML page (images inlined as PNG data URIs, no network).

Contract: `write_report(run_dir, record)` writes, from the run's record (record.py) and nothing else but
the scripts its rows name and the feature-importance file, each atomically, in run_dir: `rows.json` (the
rows, each with the `model` family and `params` its script trains), `metrics.png`, `importance.png` (when
the run kept feature importance), `tree.png` (a search), `report.md` and `report.html`. It may be
called after every iteration.
Every label in a figure is drawn as plain text (figures.py). A figure that cannot be drawn is logged and
named in the report by one line; it never ends the run. Every value report.md prints has its HTML
characters escaped (report.html is escaped by Jinja), and a table cell its pipes, so that no string a
script or a user's data left is markup.
Only rows with status "ok" and a score are ranked, by the score they were judged by (the selection
score; the printed validation only for a task without selection rows) in the metric's direction; the
printed validation is shown beside it, flagged where it claims much more, and the test score is shown,
never used to rank. A row without a script path shows the last script found
in its step-NN/ folder."""

from __future__ import annotations

import base64
import html
import json
import logging
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dsagent_cbr.agent.estimate import estimate_line
from dsagent_cbr.agent.model_family import UNKNOWN, describe_model
from dsagent_cbr.agent.record import Estimate, Refit, Row, RunRecord, overclaims
from dsagent_cbr.agent.refit import submission_line
from dsagent_cbr.agent.rundir import step_path
from dsagent_cbr.files import write_bytes_atomic, write_text_atomic
from dsagent_cbr.report.figures import (
    TOP_FEATURES,
    build_importance_figure,
    build_metrics_figure,
    plain_png,
)
from dsagent_cbr.report.rows import fmt, fmt_seconds, leaderboard, one_line, ranked
from dsagent_cbr.report.tree_figure import build_tree_figure, operator_gains

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    Figures = list[tuple[str, str, Callable[[], Figure]]]  # (file name, what it shows, builder)

log = logging.getLogger(__name__)


# --- what the report reads and draws ---------------------------------------------------------------------


def _script_of(run_dir: Path, row: dict[str, Any]) -> Path | None:
    if row["script"]:
        return run_dir / row["script"]
    for attempt in range(int(row["debug_attempts"] or 0), -1, -1):
        path = step_path(run_dir, int(row["iteration"]), attempt) / "script.py"
        if path.is_file():
            return path
    return None


def completed_rows(run_dir: Path, record: RunRecord) -> list[dict[str, Any]]:
    """The record's rows as plain values, each with its script's model family and parameters."""
    return [_complete(Path(run_dir), row) for row in record.model_dump(mode="json")["rows"]]


def _complete(run_dir: Path, row: dict[str, Any]) -> dict[str, Any]:
    """The row with the model family and parameters of its script, and the script's path when the row
    named none."""
    script = _script_of(run_dir, row)
    try:
        info = describe_model(script.read_text(encoding="utf-8")) if script else None
    except OSError:
        info = None
    row["model"], row["params"] = (info.family, info.params) if info else (UNKNOWN, "")
    if row.get("members"):  # its script runs others: say what it blends
        row["model"] = f"ensemble of {len(row['members'])}"
        row["params"] = ", ".join(f"node {k}: {w:g}" for k, w in row["members"].items())
    if script and not row["script"] and script.is_relative_to(run_dir):
        row["script"] = str(script.relative_to(run_dir))
    return row


def _draw(figures: Figures) -> tuple[dict[str, bytes], dict[str, str]]:
    """Each (file name, what it shows, builder) drawn: the PNGs by file name, and for each that could not
    be drawn the one line the report shows instead (the failure itself is logged)."""
    images, not_drawn = {}, {}
    for name, what, build in figures:
        try:
            images[name] = plain_png(build)
        # Broad on purpose: matplotlib raises many types (ValueError from a parser or an image too large,
        # RuntimeError, OverflowError, KeyError and OSError from fonts, MemoryError...), and a picture is
        # never worth a run. BaseException (Ctrl-C, SystemExit) still goes through.
        except Exception as exc:
            log.warning("cbr: the %s (%s) could not be drawn", what, name, exc_info=True)
            not_drawn[name] = (
                f"The {what} could not be drawn ({type(exc).__name__}); the log says why."
            )
    return images, not_drawn


def _read_importance(run_dir: Path, name: Any) -> tuple[dict[str, float] | None, str | None]:
    """The importance mapping, or None and why it could not be read."""
    if not name:
        return None, None
    # it lives in the run folder, however the record named that folder
    path = run_dir / Path(name).name
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        values = {str(k): float(v) for k, v in data.items()}
    except (OSError, ValueError, TypeError, AttributeError) as exc:
        return None, f"feature importance in {path} could not be read ({type(exc).__name__})"
    return (values, None) if values else (None, f"feature importance in {path} is empty")


# --- the report ----------------------------------------------------------------------------------------


def md_text(value: Any) -> str:
    """A value as report.md prints it: &, < and > escaped, so that a viewer rendering inline HTML shows
    the text, not markup, and brackets escaped, so that no `![x](http://...)` a script printed becomes an
    image a viewer fetches. Quotes stay: report.md puts no value inside a tag, where they would matter."""
    return html.escape(str(value), quote=False).replace("[", "\\[").replace("]", "\\]")


def md_cell(value: Any) -> str:
    """A table cell's text: on one line, its pipes escaped, so that it stays one cell."""
    return " ".join(str(value).split()).replace("|", "\\|")


@cache
def _templates(markdown: bool = False) -> Any:
    """The templates: HTML escaped by Jinja's autoescape; Markdown by `md_text`, the finalize of every
    `{{ }}` it prints, so that no untrusted string depends on a filter someone must remember."""
    from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape

    env = Environment(
        loader=PackageLoader("dsagent_cbr.report", "templates"),
        undefined=StrictUndefined,
        autoescape=False if markdown else select_autoescape(["html"]),
        finalize=md_text if markdown else None,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    env.filters["cell"] = md_cell
    return env


def _status(row: dict[str, Any]) -> str:
    if row["status"] == "ok" or not row["error"]:
        return str(row["status"])
    return f"{row['status']}: {one_line(row['error'], 110)}"


def _judged(summary: dict[str, Any]) -> str:
    """The score the rows carry: the selection score where the task has selection rows."""
    return "selection" if summary.get("selection_rows") else "validation"


def _facts(rows: list[dict[str, Any]], summary: dict[str, Any]) -> list[tuple[str, str]]:
    direction = summary["direction"]
    judged = _judged(summary)
    best = summary.get("best_iteration")
    n_ranked = sum(ranked(r) for r in rows)
    facts = [
        ("task", summary.get("task", "")),
        ("model", summary.get("model", "")),
        (
            "metric",
            f"{summary.get('metric', '')} ({'lower' if direction == 'minimize' else 'higher'} is better)",
        ),
        ("iterations", f"{len(rows)} ({n_ranked} with a score, {len(rows) - n_ranked} failed)"),
    ]
    if judged == "selection":
        facts.append(
            (
                "scored by",
                f"the selection score: cbr's grade of {summary.get('selection_rows')} labelled "
                "rows it held back from every script",
            )
        )
    else:
        facts.append(
            ("scored by", "the validation line the script printed (the task has no selection rows)")
        )
    if summary.get("selected_by") not in ("selection", "validation"):
        facts.append(("chosen", f"the {summary.get('selected_by')}"))
    if best is not None:
        selected = f"iteration {best}: {judged} {fmt(summary.get('best_score'))}"
        if judged == "selection":
            selected += f", its printed validation {fmt(summary.get('best_valid'))}"
        if summary.get("best_test") is not None:
            selected += f", test {fmt(summary.get('best_test'))}"
        facts.append(("selected", selected))
    else:
        facts.append(("selected", "none (no iteration succeeded)"))
    estimate = summary.get("estimate")
    sure = estimate_line(
        Estimate.model_validate(estimate) if estimate else None, summary.get("selection_rows")
    )
    if sure:
        facts.append(("how sure", sure))
    baselines = summary.get("baselines") or {}
    given = [f"{k} {fmt(v)}" for k, v in baselines.items() if v is not None]
    if given:
        facts.append(("baselines", ", ".join(given)))
    if summary.get("submission"):
        refit = summary.get("refit")
        refit = Refit.model_validate(refit) if refit else None
        source = summary.get("submission_from", "selected")
        facts.append(("submission", submission_line(refit, source, summary.get("run_dir", "RUN"))))
    facts.append(("stopped", summary.get("stopped", "")))
    if summary.get("tokens"):
        facts.append(
            ("cost", f"${float(summary['cost_usd']):.4f} for {summary.get('tokens', 0)} tokens")
        )
    return facts


def _flag(row: dict[str, Any], direction: str) -> str:
    return " ⚠" if overclaims(Row.model_validate(row), direction) else ""


def _leaderboard_rows(
    rows: list[dict[str, Any]], direction: str, best: int | None
) -> list[dict[str, Any]]:
    """The leaderboard's lines: ranked rows by score, numbered, then the failed ones."""
    board = leaderboard(rows, direction)
    n_ranked = sum(ranked(r) for r in rows)
    rank = {id(r): n for n, r in enumerate(board[:n_ranked], 1)}
    return [
        {
            "rank": rank.get(id(r), "—"),
            "label": r["candidate"] or r["iteration"],
            "model": r["model"],
            "params": r["params"] or "—",
            "score": fmt(r["score"]),
            "valid": fmt(r["valid"]) + _flag(r, direction),
            "test": fmt(r["test"]),
            "wall_time": fmt_seconds(r["wall_time"]),
            "status": _status(r),
            "ok": ranked(r),
            "best": best is not None and r["iteration"] == best,
            "script": r["script"] or "",
        }
        for r in board
    ]


def _iteration_rows(rows: list[dict[str, Any]], direction: str) -> list[dict[str, Any]]:
    """The iterations' lines, in the order they ran."""
    return [
        {
            "label": r["candidate"] or r["iteration"],
            "case": one_line(r["case"], 60),
            "step": one_line(r["step"], 160),
            "status": r["status"],
            "debug": r["debug_attempts"],
            "score": fmt(r["score"]),
            "valid": fmt(r["valid"]) + _flag(r, direction),
            "test": fmt(r["test"]),
            "retained": "yes" if r["retained"] else "",
            "ok": ranked(r),
        }
        for r in rows
    ]


def _model_errors(summary: dict[str, Any]) -> list[dict[str, Any]]:
    """The model's errors, one line each; none for a run without a model."""
    if summary.get("model") == "none":
        return []
    return [
        {
            "iteration": e.get("iteration"),
            "role": e.get("role"),
            "error": one_line(e.get("error"), 300),
        }
        for e in summary.get("model_errors") or []
    ]


def _view(
    title: str,
    rows: list[dict[str, Any]],
    summary: dict[str, Any],
    importance_note: str | None,
    images: dict[str, bytes],
) -> dict[str, Any]:
    """Everything both templates show, as display strings."""
    direction = summary["direction"]
    best = summary.get("best_iteration")
    return {
        "title": title,
        "facts": _facts(rows, summary),
        "metric": summary.get("metric", ""),
        "direction": direction,
        "judged": _judged(summary),
        "label": "candidate" if rows and all(r["candidate"] for r in rows) else "iteration",
        "leaderboard": _leaderboard_rows(rows, direction, best),
        "iterations": _iteration_rows(rows, direction),
        "has_test": any(r["test"] is not None for r in rows),
        "has_step": any(r["step"] != r["case"] for r in rows),  # the search's step is its case
        "overclaims": any(_flag(r, direction) for r in rows),
        "errors": _model_errors(summary),
        "importance_note": importance_note,
        "top_features": TOP_FEATURES,
        "best_solution": "best_solution.py" if best is not None else None,
        "images": {name: base64.b64encode(data).decode("ascii") for name, data in images.items()},
    }


def _figures(
    record: RunRecord,
    rows: list[dict[str, Any]],
    summary: dict[str, Any],
    importance: dict[str, float] | None,
) -> Figures:
    """The run's figures, each still to be drawn: the metric, the importance when kept, a search's tree."""
    metric, direction = str(summary.get("metric", "")), summary["direction"]
    figures: Figures = [
        (
            "metrics.png",
            f"chart of {metric} per iteration",
            lambda: build_metrics_figure(
                rows, metric, direction, summary.get("baselines"), _judged(summary)
            ),
        )
    ]
    if importance:
        figures.append(
            (
                "importance.png",
                "feature importance chart",
                lambda: build_importance_figure(importance),
            )
        )
    if record.kind == "search":
        figures.append(
            (
                "tree.png",
                "search tree",
                lambda: build_tree_figure(
                    rows, metric, direction, record.best_iteration, summary["baselines"]
                ),
            )
        )
    return figures


def write_report(run_dir: Path, record: RunRecord) -> None:
    run_dir, title = Path(run_dir), f"cbr {record.kind}: {record.task}"
    summary = record.model_dump(mode="json")
    rows = completed_rows(run_dir, record)
    write_text_atomic(run_dir / "rows.json", json.dumps(rows, indent=2, default=str))
    importance, note = _read_importance(run_dir, summary.get("feature_importance"))
    operators, search = [], record.kind == "search"
    if search:
        gains = operator_gains(rows, summary["direction"], record.baselines.get("starter"))
        operators = [{**o, "gain": fmt(o["gain"])} for o in gains]
    images, not_drawn = _draw(_figures(record, rows, summary, importance))
    for name, data in images.items():
        write_bytes_atomic(run_dir / name, data)
    view = {
        **_view(title, rows, summary, note, images),
        "operators": operators,
        "search": search,
        "not_drawn": not_drawn,
    }
    for name in ("report.md", "report.html"):
        page = _templates(markdown=name.endswith(".md")).get_template(name)
        write_text_atomic(run_dir / name, page.render(**view))
