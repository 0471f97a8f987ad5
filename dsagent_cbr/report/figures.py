"""The report's charts of a run: the metric per iteration (its points shaped from the rows, then drawn)
and the feature importance; the marks every score chart shares (a search's tree too, tree_figure.py):
the best, the failures, the baselines, the score axis; and a figure's PNG with every text in it plain.

Every label in a figure is drawn as plain text (no mathtext, no TeX): a feature or column name is the
script's or the user's text."""

from __future__ import annotations

import io
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from dsagent_cbr.report.rows import fmt, leaderboard, one_line, ranked

if TYPE_CHECKING:
    from matplotlib.figure import Figure

TOP_FEATURES = 20
# A figure's labels may be untrusted text (a feature or column name from the script's importances, the
# task's metric name): drawn as they are, never parsed as mathtext (`$x^$` raises) nor handed to TeX (a
# user's matplotlibrc may turn it on). rc settings are read when a text is made, and tick labels are made
# when the figure is drawn: so figures are built and saved under these (see `plain_png`).
PLAIN_TEXT = {"text.parse_math": False, "text.usetex": False}
# any other anchor (FLAML): dashed red
LINE_STYLES = {"starter": (":", "#555"), "reference": ("-.", "#2ca02c")}

Series = tuple[list[Any], list[float]]  # x values (iterations), y values (scores)


# --- the metric per iteration: shaped ---------------------------------------------------------------


@dataclass(frozen=True)
class MetricPoints:
    """What the metrics chart shows, taken from the rows: no drawing here."""

    scored: Series  # the score each ranked row was judged by
    printed: Series  # the validation its script printed, beside a selection score
    tested: Series  # the test score: reported, never used to select
    best: tuple[Any, float] | None  # (iteration, score) of the best ranked row
    failed: list[Any]  # the iterations without a score
    scale: list[float]  # the scores a baseline is weighed against (off the scale or not)
    iterations: list[int]  # every iteration, in order


def _series(rows: list[dict[str, Any]], key: str) -> Series:
    return [r["iteration"] for r in rows], [r[key] for r in rows]


def metric_points(rows: list[dict[str, Any]], direction: str, judged: str) -> MetricPoints:
    good = [r for r in rows if ranked(r)]
    printed = [r for r in good if judged == "selection" and r.get("valid") is not None]
    best = leaderboard(good, direction)[0] if good else None
    return MetricPoints(
        scored=_series(good, "score"),
        printed=_series(printed, "valid"),
        tested=_series([r for r in good if r.get("test") is not None], "test"),
        best=(best["iteration"], best["score"]) if best else None,
        failed=[r["iteration"] for r in rows if not ranked(r)],
        scale=[r[k] for r in good for k in ("score", "test") if r.get(k) is not None],
        iterations=sorted({int(r["iteration"]) for r in rows}),
    )


# --- the metric per iteration: drawn ----------------------------------------------------------------


def build_metrics_figure(
    rows: list[dict[str, Any]],
    metric: str,
    direction: str,
    baselines: dict[str, float | None] | None = None,
    judged: str = "selection",
) -> Figure:
    """The score each row was judged by (and, faded, the printed validation and the test score) per
    iteration; failed iterations as red crosses on the axis; starter and reference scores as lines.
    Integer iterations on the x axis."""
    from matplotlib.figure import Figure

    points = metric_points(rows, direction, judged)
    fig = Figure(figsize=(10, 4), dpi=100)
    ax = fig.add_subplot()
    _draw_scores(ax, points, judged)
    baseline_lines(ax, points.scale, baselines, judged)
    draw_failed(ax, points.failed, markersize=10, mew=2.5)
    if not points.scored[0]:
        ax.text(
            0.5,
            0.5,
            "no iteration produced a score",
            transform=ax.transAxes,
            ha="center",
            va="center",
            color="#777",
        )
    _iteration_axis(ax, points.iterations)
    score_axes(ax, "iteration", metric, direction)
    fig.tight_layout()
    return fig


def _draw_scores(ax: Any, points: MetricPoints, judged: str) -> None:
    """The judged scores as a line, the printed validation and the test score faded beside them, and
    the best marked."""
    if points.scored[0]:
        ax.plot(*points.scored, "o-", color="#1f77b4", label=judged, zorder=3)
    if points.printed[0]:
        label = "validation the script printed (not used to select)"
        ax.plot(*points.printed, "^:", color="#888", alpha=0.7, label=label)
    if points.tested[0]:
        label = "test (reported, not used to select)"
        ax.plot(*points.tested, "s--", color="#ff7f0e", alpha=0.8, label=label)
    if points.best is not None:
        draw_best(ax, *points.best, f"best {judged} (iteration {points.best[0]})")


def _iteration_axis(ax: Any, iterations: list[int]) -> None:
    from matplotlib.ticker import MaxNLocator

    if iterations:
        ax.set_xlim(iterations[0] - 0.5, iterations[-1] + 0.5)
        if len(iterations) <= 25:
            ax.set_xticks(iterations)
        else:
            ax.xaxis.set_major_locator(MaxNLocator(integer=True))


# --- the marks every score chart shares -------------------------------------------------------------


def draw_best(ax: Any, x: float, score: float, label: str) -> None:
    ax.plot([x], [score], "*", color="#f2c14e", markersize=20, zorder=2, label=label)


def draw_failed(ax: Any, xs: list[Any], *, markersize: float, mew: float) -> None:
    """Red crosses on the x axis whatever the y range: x in data units, y in axes units."""
    if xs:
        ax.plot(
            xs,
            [0.0] * len(xs),
            "x",
            color="#d62728",
            markersize=markersize,
            mew=mew,
            transform=ax.get_xaxis_transform(),
            clip_on=False,
            label="failed (no score)",
        )


def baseline_lines(
    ax: Any, scores: list[float], baselines: dict[str, float | None] | None, judged: str
) -> None:
    """The starter's, the reference's and an AutoML anchor's scores as lines; one far off the rows' scores
    (a random starter often is) is named above the plot rather than squashing the iterations flat."""
    off_scale = []
    for name, value in (baselines or {}).items():
        if value is None:
            continue
        style, colour = LINE_STYLES.get(name, ("--", "#d62728"))
        label = f"{name} {'validation' if name == 'reference' else judged} {fmt(value)}"
        low, high = (min(scores), max(scores)) if scores else (value, value)
        reach = 2 * max(high - low, 0.1 * abs(high))
        if not low - reach <= value <= high + reach:
            off_scale.append(f"{'↑' if value > high else '↓'} {label} (off the scale)")
        else:
            ax.axhline(value, linestyle=style, color=colour, label=label)
    if off_scale:
        ax.set_title("   ".join(off_scale), loc="left", fontsize=8, color="#555")


def score_axes(ax: Any, xlabel: str, metric: str, direction: str) -> None:
    """Room above and below, the axes named, scores as they are, a grid, and a legend when any."""
    ax.margins(y=0.15)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(f"{metric} ({'lower' if direction == 'minimize' else 'higher'} is better)")
    ax.ticklabel_format(axis="y", useOffset=False)  # scores as they are, not as an offset to decode
    ax.grid(alpha=0.3)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=8, loc="best", framealpha=0.85)


# --- feature importance, and the PNG -----------------------------------------------------------------


def build_importance_figure(importance: dict[str, float], top: int = TOP_FEATURES) -> Figure:
    """Horizontal bars of the `top` features by absolute importance, the largest at the top."""
    from matplotlib.figure import Figure

    items = sorted(importance.items(), key=lambda kv: abs(kv[1]), reverse=True)[:top][::-1]
    fig = Figure(figsize=(10, 0.8 + 0.28 * max(len(items), 1)), dpi=100)
    ax = fig.add_subplot()
    ax.barh([one_line(k, 40) for k, _ in items], [v for _, v in items], color="#4c72b0")
    ax.set_xlabel("importance")
    ax.tick_params(axis="y", labelsize=8)
    ax.grid(axis="x", alpha=0.3)
    fig.tight_layout()
    return fig


def _png(fig: Figure) -> bytes:
    buffer = io.BytesIO()
    # a little wider than the HTML page's column: scaled down, sharp
    fig.savefig(buffer, format="png", dpi=110)
    return buffer.getvalue()


def plain_png(build: Callable[[], Figure]) -> bytes:
    """The PNG of the figure `build` makes, every text in it plain: built and drawn under PLAIN_TEXT."""
    import matplotlib

    with matplotlib.rc_context(PLAIN_TEXT):
        return _png(build())
