"""The DABench table: our three figures beside what the seed papers report, and ours by level and
by concept."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class SeedFigure:
    system: str
    model: str
    reported_by: str
    abq: float  # accuracy by question, in percent


# The papers' own figures: accuracy by question on the WHOLE public validation set (257 questions over
# 52 files), the only figure they all report. Our folder may hold a part of it (65 questions), so the
# rows are context, not a row-for-row comparison. TaskWeaver's own paper gives 0.70 (GPT-3.5) and 0.88
# (GPT-4), kept here in percent.
SEED_PAPERS: tuple[SeedFigure, ...] = (
    SeedFigure("Data Interpreter", "GPT-4o", "its own paper", 94.93),
    SeedFigure("Data Interpreter", "GPT-4o", "re-run by DatawiseAgent's authors", 75.78),
    SeedFigure("TaskWeaver", "GPT-4o", "seed papers", 85.99),
    SeedFigure("DatawiseAgent", "GPT-4o", "its own paper", 85.99),
    SeedFigure("ReAct", "GPT-4o", "seed papers", 81.32),
    SeedFigure("AutoGen", "GPT-4o", "seed papers", 73.54),
    SeedFigure("TaskWeaver", "GPT-3.5", "its own paper", 70.0),
    SeedFigure("TaskWeaver", "GPT-4", "its own paper", 88.0),
)

FULL_SET = 257


def _pct(value: float) -> str:
    return f"{100 * value:.2f}"


def _row(name: str, f: dict) -> str:
    return (
        f"| {name} | {f['questions']} | {f['sub_answers']} | {_pct(f['ABQ'])} | "
        f"{_pct(f['PASQ'])} | {_pct(f['UASQ'])} |"
    )


def _breakdown(title: str, groups: dict[str, dict]) -> list[str]:
    lines = [
        f"### By {title}",
        "",
        f"| {title} | questions | sub-answers | ABQ % | PASQ % | UASQ % |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    lines += [_row(name, f) for name, f in groups.items()]
    return lines + [""]


def markdown_table(
    figures: dict,
    label: str,
    seed_figures: tuple[SeedFigure, ...] = SEED_PAPERS,
    title: str = "InfiAgent-DABench",
) -> str:
    """Markdown: our figures beside the seed papers' (ABQ only; the others they do not all give;
    none for a set that is not DABench's), then ours by level and by concept. ABQ, PASQ and UASQ are
    in percent."""
    ours = figures["overall"]
    lines = [
        f"## {title}",
        "",
        "| system | model | reported by | questions | ABQ % | PASQ % | UASQ % |",
        "|---|---|---|---:|---:|---:|---:|",
        f"| {label} | | this run | {ours['questions']} | {_pct(ours['ABQ'])} | "
        f"{_pct(ours['PASQ'])} | {_pct(ours['UASQ'])} |",
    ]
    lines += [
        f"| {s.system} | {s.model} | {s.reported_by} | {FULL_SET} | {s.abq:.2f} | – | – |"
        for s in seed_figures
    ]
    context = (
        f"The seed papers' rows are their own figures on the whole validation set ({FULL_SET} "
        f"questions); this run answered {ours['questions']}, so the rows are not comparable row for "
        "row. "
        if seed_figures
        else ""
    )
    lines += [
        "",
        f"{context}ABQ: accuracy by question; PASQ: proportional accuracy by sub-question; UASQ: "
        "uniform accuracy by sub-question.",
        "",
    ]
    lines += _breakdown("level", figures["by_level"])
    lines += _breakdown("concept", figures["by_concept"])
    return "\n".join(lines)
