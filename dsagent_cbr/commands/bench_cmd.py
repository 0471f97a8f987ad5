"""`cbr bench run` (a grid of tasks x agents x trials on Ray) and `cbr bench report` (tables from grids)."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from dsagent_cbr.commands.bench_dabench import dabench
from dsagent_cbr.commands.options import budget_seconds
from dsagent_cbr.config import BENCHMARKS_DIR, load_settings
from dsagent_cbr.errors import CbrError

if TYPE_CHECKING:
    from dsagent_cbr.bench.spec import GridSpec

DEFAULT_TASKS = "smoke-ban,titanic-survival,deliveries-time"
UNSUPPORTED = "unsupported.json"
OUT_DIR = "bench"  # the tables' default folder, under the current folder: where the user is, as for any task


@click.group()
def bench() -> None:
    """Run experiment grids on Ray and tabulate them the paper's way."""


bench.add_command(dabench)


@bench.command("run")
@click.option(
    "--tasks",
    "task_selection",
    default=DEFAULT_TASKS,
    show_default=True,
    help="Tasks, comma-separated: each a task folder's path or a name (found in ./tasks, then ./, "
    "then among the recipes, as every command finds one), or deployment, development, all "
    "(groups of the recipes).",
)
@click.option(
    "--agents",
    default="deploy:cbr",
    show_default=True,
    help="deploy[:cbr|zero-shot|one-shot-random], develop[:full|no-rerank|no-cbr|search], flaml:SECONDS, "
    "autogluon:SECONDS, starter, reference (comma-separated).",
)
@click.option(
    "--models",
    default="none,local",
    show_default=True,
    help="Models for deploy and develop agents.",
)
@click.option("--trials", type=int, default=2, show_default=True, help="Trials per task and agent.")
@click.option(
    "--anchor-trials",
    type=int,
    default=1,
    show_default=True,
    help="Trials of flaml, autogluon, starter, reference.",
)
@click.option(
    "--seed", type=int, default=0, show_default=True, help="Trial k runs with seed SEED+k."
)
@click.option(
    "--timeout", type=float, default=600.0, show_default=True, help="Time limit per script run (s)."
)
@click.option(
    "--memory",
    type=float,
    default=8192.0,
    show_default=True,
    help="Memory limit per script run (MB).",
)
@click.option(
    "--iterations", "-T", type=int, default=5, show_default=True, help="develop's iterations."
)
@click.option(
    "--budget",
    default="5m",
    show_default=True,
    metavar="DURATION",
    help="develop:search's wall clock per trial, as 5m or 300 (flaml:300 and autogluon:300 are its equals).",
)
@click.option("--store", type=click.Choice(["chroma", "faiss"]), default="faiss", show_default=True)
@click.option("--max-cost", type=float, default=None, help="Dollar budget per trial (paid models).")
@click.option(
    "--base-bank",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Bank folder every trial starts from (default: a fresh seed bank).",
)
@click.option(
    "--parallel", type=int, default=None, help="Trials at once (default: this machine's cores)."
)
@click.option("--address", default=None, help="Join this Ray cluster instead of starting Ray here.")
@click.option(
    "--name", default=None, help="Name of the grid and its tables (default: from the grid's hash)."
)
@click.option(
    "--grid",
    "grid_dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Grid folder (default: <runs dir>/bench/<name>); the same folder resumes.",
)
@click.option(
    "--out-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help=f"Where the tables go (default: ./{OUT_DIR} in the current folder).",
)
def run(
    task_selection: str,
    agents: str,
    models: str,
    trials: int,
    anchor_trials: int,
    seed: int,
    timeout: float,
    memory: float,
    iterations: int,
    budget: str,
    store: str,
    max_cost: float | None,
    base_bank: Path | None,
    parallel: int | None,
    address: str | None,
    name: str | None,
    grid_dir: Path | None,
    out_dir: Path | None,
) -> None:
    """Run (or resume) a grid: every trial an independent CLI run with its own seed and bank copy."""
    from dsagent_cbr.bench import grid
    from dsagent_cbr.bench.spec import GridSpec, parse_agents

    settings = load_settings()
    if trials < 1 or anchor_trials < 1:
        raise CbrError("--trials and --anchor-trials must be at least 1.")
    parsed = parse_agents(
        [a for a in agents.split(",") if a.strip()],
        [m.strip() for m in models.split(",") if m.strip()],
    )
    folders = grid.select_tasks(task_selection, settings.tasks_dir)
    spec = GridSpec(
        tasks=list(folders),
        task_folders={t: str(f) for t, f in folders.items()},
        agents=[a.label for a in parsed],
        trials=trials,
        anchor_trials=anchor_trials,
        seed=seed,
        timeout=timeout,
        memory_mb=memory,
        iterations=iterations,
        budget=budget_seconds(budget),
        store=store,
        max_cost=max_cost,
    )
    name = name or f"grid-{spec.digest()}"
    folder = (grid_dir or settings.runs_dir / "bench" / name).resolve()
    run_grid(spec, folder, name, base_bank, parallel, address, out_dir)


def run_grid(
    spec: GridSpec,
    folder: Path,
    name: str,
    base_bank: Path | None,
    parallel: int | None,
    address: str | None,
    out_dir: Path | None,
) -> None:
    """Open (or resume) the grid in `folder`, run its trials not finished before, tabulate every
    finished one, and fail when a trial failed for reasons of ours."""
    from dsagent_cbr.bench import engine, grid
    from dsagent_cbr.tasks.loader import load_task
    from dsagent_cbr.tasks.prepare import prepare_task

    resumed = grid.open_grid(folder, spec)
    for task in spec.tasks:
        prepare_task(load_task(spec.folder(task)))
    bank = grid.ensure_base_bank(folder, spec.store, base_bank) if grid.needs_bank(spec) else None
    work = grid.plan(folder, spec, bank)
    (folder / UNSUPPORTED).write_text(json.dumps(work.unsupported, indent=2), encoding="utf-8")
    click.echo(
        f"grid {folder}{' (resumed)' if resumed else ''}: {len(work.jobs) + len(work.finished)} trials, "
        f"{len(work.finished)} finished before, {len(work.jobs)} to run"
        + (f", {len(work.unsupported)} task/agent pairs not supported" if work.unsupported else "")
    )
    ran: dict[str, Any] = {}
    if work.jobs:
        ran = engine.run_jobs(
            work.jobs, parallel or os.cpu_count() or 1, address, _trial_printer(len(work.jobs))
        )
    records = grid.load_records(folder, spec)
    _write_report(
        records,
        work.unsupported,
        [folder],
        name,
        out_dir,
        {
            "ray_cpus": ran.get("cluster_cpus"),
            "parallel": ran.get("parallel"),
            "ran": len(work.jobs),
            "skipped_finished": len(work.finished),
        },
    )
    _fail_on_ours(records)


def _fail_on_ours(records: list[dict[str, Any]]) -> None:
    """A trial that failed for reasons of ours (not the agent's) fails the command: running it again
    runs those trials again."""
    infra = sum(r.get("outcome") == "infrastructure" for r in records)
    if infra:
        raise CbrError(
            f"{infra} trial(s) failed for reasons of ours (see the report); "
            "the same command runs them again."
        )


def _trial_printer(total: int) -> Callable[[dict[str, Any]], None]:
    """A line per trial as it ends: its outcome, score, reason and seconds."""
    done = 0

    def show(record: dict[str, Any]) -> None:
        nonlocal done
        done += 1
        test, selection = record.get("test_metric"), record.get("selection_metric")
        score = (
            f" test={test:.5g}"
            if isinstance(test, (int, float))
            # a user's task may have no test
            else f" selection={selection:.5g}"
            if isinstance(selection, (int, float))
            else ""
        )
        click.echo(
            f"[{done}/{total}] {record['id']}: {record['outcome']}{score}"
            + (f" ({record['reason']})" if record.get("reason") else "")
            + (f" {record['wall_seconds']:.1f}s" if "wall_seconds" in record else "")
        )

    return show


@bench.command("report")
@click.argument("grids", nargs=-1, required=True, type=click.Path(file_okay=False, path_type=Path))
@click.option("--name", required=True, help="Name of the tables: bench-NAME.{json,md,png}.")
@click.option(
    "--out-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help=f"Where the tables go (default: ./{OUT_DIR} in the current folder).",
)
def report(grids: tuple[Path, ...], name: str, out_dir: Path | None) -> None:
    """Tabulate one or more grid folders together (ranks pool every agent of every grid on a task)."""
    from dsagent_cbr.bench import grid
    from dsagent_cbr.bench.spec import GridSpec

    records, unsupported = [], []
    for folder in grids:
        spec_file = folder / grid.SPEC_FILE
        # checked here, not by click, so the README's examples parse before a grid exists
        if not folder.is_dir():
            raise CbrError(
                f"{folder} does not exist: name the folder of a grid `cbr bench run` made."
            )
        if not spec_file.is_file():
            raise CbrError(f"{folder} is not a grid folder (no {grid.SPEC_FILE}).")
        spec = GridSpec.from_dict(json.loads(spec_file.read_text(encoding="utf-8")))
        records += grid.load_records(folder, spec)
        if (folder / UNSUPPORTED).is_file():
            unsupported += json.loads((folder / UNSUPPORTED).read_text(encoding="utf-8"))
    _write_report(records, unsupported, list(grids), name, out_dir, {})


def _write_report(
    records: list[dict[str, Any]],
    unsupported: list[dict[str, str]],
    grids: list[Path],
    name: str,
    out_dir: Path | None,
    extra: dict[str, Any],
) -> None:
    from dsagent_cbr.bench import report as tables
    from dsagent_cbr.bench.anchor_lines import draw_anchors

    if not records:
        raise CbrError("No finished trials to tabulate yet.")
    draw_anchors(records)
    # the suite's anchors (random and reference scores of the recipes) stay the repository's, wherever the tables go
    baselines = tables.load_baselines(BENCHMARKS_DIR / "results" / "baselines.json")
    result = tables.build(
        records, baselines, tables.stamp(records, grids=[str(g) for g in grids], **extra)
    )
    result["unsupported"] = [
        dict(t) for t in sorted({tuple(sorted(u.items())) for u in unsupported})
    ]
    paths = tables.write(result, name, out_dir or Path.cwd() / OUT_DIR)
    text = tables.markdown(result, f"cbr bench: {name}")
    click.echo("\n" + text.split("\n## Per task and agent")[0].rstrip())
    click.echo("\nwritten " + ", ".join(str(p) for p in paths))
