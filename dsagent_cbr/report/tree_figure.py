"""What the report adds for a search: the tree as a picture (each node's score against the time it
ended, edges to the nodes it grew from, the selected node marked, the starter and reference as lines)
and what each operator gained (how often its node beat the best so far, and by how much in all)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from dsagent_cbr.agent.record import Operator
from dsagent_cbr.report.figures import baseline_lines, draw_best, draw_failed, score_axes
from dsagent_cbr.report.rows import ranked

if TYPE_CHECKING:
    from matplotlib.figure import Figure

COLOURS = {
    Operator.DRAFT: "#1f77b4",
    Operator.TRANSPLANT: "#2ca02c",
    Operator.TUNE: "#9467bd",
    Operator.ENSEMBLE: "#ff7f0e",
    Operator.ADAPT: "#bcbd22",
    Operator.PLAN: "#17becf",
    Operator.IMPROVE: "#8c564b",
    Operator.DEBUG: "#e377c2",
}


def _ended(row: dict[str, Any]) -> float:
    """When the node ended, as it stamped it (a record from before nodes did: its start and script's time)."""
    if row.get("ended") is not None:
        return float(row["ended"])
    return float(row.get("started") or 0.0) + float(row.get("wall_time") or 0.0)


def _sources(row: dict[str, Any]) -> list[int]:
    """The nodes a node grew from: its parent, or an ensemble's members."""
    if row.get("members"):
        return [int(k) for k in row["members"]]
    return [row["parent"]] if row.get("parent") is not None else []


def build_tree_figure(
    rows: list[dict[str, Any]],
    metric: str,
    direction: str,
    best: int | None,
    baselines: dict[str, float | None] | None = None,
) -> Figure:
    from matplotlib.figure import Figure

    fig = Figure(figsize=(10, 4.5), dpi=100)
    ax = fig.add_subplot()
    graded = {r["iteration"]: r for r in rows if ranked(r)}
    _draw_edges(ax, graded)
    _draw_nodes(ax, graded)
    if best in graded:
        draw_best(ax, _ended(graded[best]), graded[best]["score"], f"selected (node {best})")
    draw_failed(ax, [_ended(r) for r in rows if not ranked(r)], markersize=8, mew=2)
    baseline_lines(ax, [r["score"] for r in graded.values()], baselines, "selection")
    score_axes(ax, "seconds into the run (when the node ended)", metric, direction)
    fig.tight_layout()
    return fig


def _draw_edges(ax: Any, graded: dict[Any, dict[str, Any]]) -> None:
    """A grey line from each graded node to each graded node it grew from."""
    for r in graded.values():
        for source in (graded[s] for s in _sources(r) if s in graded):
            ax.plot(
                [_ended(source), _ended(r)],
                [source["score"], r["score"]],
                "-",
                color="#bbb",
                lw=0.8,
                zorder=1,
            )


def _draw_nodes(ax: Any, graded: dict[Any, dict[str, Any]]) -> None:
    """The graded nodes as dots, a colour per operator."""
    for operator, colour in COLOURS.items():
        nodes = [r for r in graded.values() if r.get("operator") == operator]
        if nodes:
            ax.plot(
                [_ended(r) for r in nodes],
                [r["score"] for r in nodes],
                "o",
                color=colour,
                label=operator,
                zorder=3,
            )


def operator_gains(
    rows: list[dict[str, Any]], direction: str, starter: float | None
) -> list[dict[str, Any]]:
    """Per operator, in the order first used: nodes, graded nodes, how many set a new best so far (the
    starter's score the first to beat) and the sum of those steps, as improvements (positive is better)."""
    sign = 1.0 if direction == "maximize" else -1.0
    best, table = starter, {}
    for r in rows:
        entry = table.setdefault(
            r.get("operator") or "—",
            {
                "operator": r.get("operator") or "—",
                "nodes": 0,
                "graded": 0,
                "new_best": 0,
                "gain": 0.0,
            },
        )
        entry["nodes"] += 1
        if r.get("status") != "ok" or r.get("score") is None:
            continue
        entry["graded"] += 1
        if best is None or sign * (r["score"] - best) > 0:
            entry["new_best"] += 1
            entry["gain"] += 0.0 if best is None else sign * (r["score"] - best)
            best = r["score"]
    return list(table.values())
