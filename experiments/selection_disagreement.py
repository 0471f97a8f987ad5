"""How often the validation a script prints and cbr's selection score disagree on the best of several
scripts, and what each choice scores on test: over every run folder found (develop, the no-model
search, deploy), and over the pools of `experiments/adapter_pairs.py` (every seed solution adapted to
every other task of its modality: one pool of candidates per target task).

For each run or pool with at least two scripts that both printed a validation score and were graded on
the selection rows, the best is taken both ways; where they differ, the test scores of the two choices
are set side by side (the test is read here only to report, as everywhere).

    python experiments/selection_disagreement.py runs/ [more folders] [--pairs adapter_pairs.json]
                                                 [--json experiments/results/x.json]
"""

from __future__ import annotations

import json
import sys
from collections import defaultdict
from pathlib import Path

import click

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from dsagent_cbr.agent.record import SUMMARY, Row, RunRecord, load_record  # noqa: E402
from dsagent_cbr.errors import CbrError  # noqa: E402


def _best(rows: list[Row], key: str, maximize: bool) -> Row:
    return sorted(rows, key=lambda r: getattr(r, key), reverse=maximize)[0]


def compare(record: RunRecord) -> dict[str, object] | None:
    """The two choices of one run, or None where it had fewer than two rows scored both ways."""
    rows = [r for r in record.rows if r.status == "ok" and r.valid is not None and r.selection is not None]
    return _choices(rows, record.direction == "maximize", {"run": record.run_dir, "task": record.task,
                                                            "kind": record.kind, "model": record.model})


def _choices(rows: list[Row], maximize: bool, about: dict[str, object]) -> dict[str, object] | None:
    if len(rows) < 2:
        return None
    by_valid, by_selection = _best(rows, "valid", maximize), _best(rows, "selection", maximize)
    return {**about, "rows": len(rows), "disagree": by_valid.iteration != by_selection.iteration,
            "test_by_valid": by_valid.test, "test_by_selection": by_selection.test,
            "selection_better_on_test": _better(by_selection.test, by_valid.test, maximize)}


def pools(path: Path) -> list[dict[str, object]]:
    """adapter_pairs.py's rows, one pool per target task and layout: its adapted seed solutions."""
    grouped: dict[tuple[str, str], list[dict]] = defaultdict(list)
    for row in json.loads(path.read_text())["rows"]:
        if row.get("ran") and row.get("valid") is not None and row.get("selection") is not None:
            grouped[(row["target"], row["layout"])].append(row)
    found = []
    for (target, layout), items in sorted(grouped.items()):
        rows = [Row(iteration=i, valid=r["valid"], selection=r["selection"], test=r["score"])
                for i, r in enumerate(items)]
        about = {"run": f"{path.name}: {target} [{layout}]", "task": target, "kind": "adapter pool", "model": "none"}
        found.append(_choices(rows, items[0]["direction"] == "maximize", about))
    return [f for f in found if f is not None]


def _better(a: float | None, b: float | None, maximize: bool) -> bool | None:
    if a is None or b is None or a == b:
        return None
    return a > b if maximize else a < b


def records(folders: tuple[Path, ...]) -> list[RunRecord]:
    found = []
    for folder in folders:
        for summary in sorted(folder.rglob(SUMMARY)):
            try:
                found.append(load_record(summary.parent))
            except CbrError:
                continue
    return found


@click.command()
@click.argument("folders", nargs=-1, type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--pairs", type=click.Path(exists=True, dir_okay=False, path_type=Path), default=None,
              help="experiments/adapter_pairs.py's JSON: its adapted solutions as one pool per target task.")
@click.option("--json", "out", type=click.Path(dir_okay=False, path_type=Path), default=None)
def main(folders: tuple[Path, ...], pairs: Path | None, out: Path | None) -> None:
    found = records(folders)
    compared = [c for c in (compare(r) for r in found) if c is not None] + (pools(pairs) if pairs else [])
    groups: dict[str, list[dict[str, object]]] = defaultdict(list)
    for c in compared:
        groups[f"{c['kind']}@{c['model']}"].append(c)
    click.echo(f"{len(found)} run records; {len(compared)} with two or more rows scored both ways\n")
    click.echo("| runs | compared | disagree | where they disagree: selection's choice better on test / worse / tie |")
    click.echo("|---|---:|---:|---|")
    for name, items in sorted(groups.items()) + [("all", compared)]:
        split = [c for c in items if c["disagree"]]
        better = sum(c["selection_better_on_test"] is True for c in split)
        worse = sum(c["selection_better_on_test"] is False for c in split)
        click.echo(f"| {name} | {len(items)} | {len(split)} | {better} / {worse} / {len(split) - better - worse} |")
    for c in compared:
        if c["disagree"]:
            click.echo(f"- {c['task']} ({c['kind']}@{c['model']}): test {c['test_by_valid']} by printed validation, "
                       f"{c['test_by_selection']} by selection  [{c['run']}]")
    if out:
        out.write_text(json.dumps({"folders": [str(f) for f in folders], "runs": compared}, indent=2) + "\n")


if __name__ == "__main__":
    main()
