"""`cbr ingest-kaggle SLUG` and `cbr ingest PATH_OR_URL`: crawl or read documents, then clean, distil
and add them to the insight bank, and say what was added, what was a duplicate and what failed (why)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import click

from dsagent_cbr.clock import say_duration
from dsagent_cbr.commands.options import bank_options, json_option
from dsagent_cbr.config import Settings, load_settings
from dsagent_cbr.errors import CbrError
from dsagent_cbr.saying import doing, heard

MODALITY_CHOICES = ("auto", "tabular", "text", "forecasting", "time-series-classification")

_common = [
    click.option(
        "--model", default=None, help="Model that distils notebooks ('none' stores cleaned text)."
    ),
    click.option(
        "--condense-writeups", is_flag=True, help="Also condense write-ups with the model."
    ),
    click.option(
        "--modality",
        type=click.Choice(MODALITY_CHOICES),
        default="auto",
        show_default=True,
        help="Modality recorded on the cases (auto: from the competition's tags).",
    ),
    click.option(
        "--max-cost",
        type=float,
        default=None,
        help="Stop cleanly when this many dollars are spent.",
    ),
    json_option,
]


def common_options(func: Callable[..., Any]) -> Callable[..., Any]:
    for option in reversed(_common):
        func = option(func)
    return bank_options(func)


@click.command("ingest-kaggle")
@click.argument("slug")
@click.option(
    "--top",
    type=click.IntRange(1, 100),
    default=10,
    show_default=True,
    help="How many notebooks (by votes) and write-ups to take.",
)
@click.option(
    "--notebooks/--no-notebooks",
    default=True,
    show_default=True,
    help="Take the top public notebooks.",
)
@click.option(
    "--writeups/--no-writeups", default=True, show_default=True, help="Take the solution write-ups."
)
@click.option(
    "--api-url",
    default=None,
    help="Kaggle API base URL (env CBR_KAGGLE_API; default Kaggle's v1 API).",
)
@common_options
def ingest_kaggle(
    slug: str, top: int, notebooks: bool, writeups: bool, api_url: str | None, **common: Any
) -> None:
    """Crawl a Kaggle competition (top notebooks by votes, solution write-ups) into the insight bank."""
    from dsagent_cbr.ingest import kaggle_api
    from dsagent_cbr.ingest.crawl import run_spider

    if not (notebooks or writeups):
        raise CbrError("Nothing to crawl: --no-notebooks and --no-writeups leave no source.")
    settings = _settings(common)
    kaggle_api.load_credentials()  # fail before the crawl, with the places credentials are looked for
    base = kaggle_api.api_base(override=api_url)
    crawling = f"crawling Kaggle's competition {slug}: its top notebooks and write-ups"
    with _spinner(crawling, common["as_json"]) as tick:
        result = run_spider(
            "kaggle",
            {
                "competition": slug,
                "top": top,
                "notebooks": int(notebooks),
                "writeups": int(writeups),
            },
            env={"CBR_KAGGLE_API": base, "CBR_HOME": str(settings.home)},
            on_tick=tick,
        )
    if result.fatal:
        raise CbrError(
            _sentence(result.fatal[0].reason), details=[e.reason for e in result.errors[1:]]
        )
    if not result.docs:
        raise CbrError(
            f"Nothing to ingest from {slug}; the bank is unchanged.",
            details=[e.reason for e in result.errors],
        )
    modality = common["modality"]
    if modality == "auto":
        from dsagent_cbr.ingest.pipeline import modality_from_tags

        modality = modality_from_tags(result.meta.get("tags", []), result.meta.get("category", ""))
    _ingest_and_report(result.docs, result.errors, settings, common, modality, source=slug)


@click.command("ingest")
@click.argument("sources", nargs=-1, required=True, metavar="PATH_OR_URL...")
@click.option(
    "--kind",
    type=click.Choice(["auto", "writeup", "notebook"]),
    default="auto",
    show_default=True,
    help="What the documents are (auto: .ipynb/.py are notebooks, the rest write-ups).",
)
@click.option(
    "--competition", default="", help="Competition the documents belong to (recorded on the cases)."
)
@common_options
def ingest(sources: tuple[str, ...], kind: str, competition: str, **common: Any) -> None:
    """Ingest write-ups or notebooks from files, folders (.html .md .txt .ipynb .py) or web pages."""
    from dsagent_cbr.ingest.documents import RawDoc, SourceError
    from dsagent_cbr.ingest.sources import read_local

    settings = _settings(common)
    urls = [s for s in sources if s.startswith(("http://", "https://"))]
    docs: list[RawDoc] = []
    errors: list[SourceError] = []
    for source in sources:
        if source in urls:
            continue
        found, failed = read_local(Path(source).expanduser(), kind=kind, competition=competition)
        docs += found
        errors += failed
    if urls:
        from dsagent_cbr.ingest.crawl import run_spider

        if any("," in u for u in urls):
            raise CbrError("A URL with a comma cannot be crawled; quote-encode it as %2C.")
        with _spinner(f"fetching {len(urls)} page(s)", common["as_json"]) as tick:
            result = run_spider(
                "pages",
                {"urls": ",".join(urls), "kind": kind, "competition": competition},
                env={"CBR_HOME": str(settings.home)},
                on_tick=tick,
            )
        docs += result.docs
        errors += result.errors
    if not docs:
        raise CbrError(
            "Nothing to ingest; the bank is unchanged.", details=[e.reason for e in errors]
        )
    modality = "" if common["modality"] == "auto" else common["modality"]
    _ingest_and_report(docs, errors, settings, common, modality, source=", ".join(sources))


# ---------------------------------------------------------------- shared


def _settings(common: dict[str, Any]) -> Settings:
    return load_settings(
        model=common["model"],
        store=common["store"],
        bank_dir=common["bank_dir"],
        chroma_url=common["chroma_url"],
        max_cost=common["max_cost"],
    )


def _sentence(text: str) -> str:
    text = text.strip()
    text = text[:1].upper() + text[1:]
    return text if text.endswith((".", "!", "?")) else text + "."


def _ingest_and_report(
    docs: list[Any],
    errors: list[Any],
    settings: Settings,
    common: dict[str, Any],
    modality: str,
    source: str,
) -> None:
    from dsagent_cbr.bank import open_bank
    from dsagent_cbr.ingest.pipeline import ingest as run_pipeline

    # crawls finish in any order; a stable order makes summaries (and first-seen duplicates) repeatable
    docs = sorted(docs, key=lambda d: (d.competition, d.kind != "writeup", d.rank or 0, d.url))
    bank = open_bank(settings)
    try:
        with (
            _distiller(settings, common["condense_writeups"]) as distil,
            _progress(len(docs), common["as_json"]) as advance,
        ):
            report = run_pipeline(
                docs, bank, distil, source_errors=errors, modality=modality, on_progress=advance
            )
    finally:
        bank.close()
    if common["as_json"]:
        click.echo(
            json.dumps({"source": source, "model": settings.model, **report.to_dict()}, indent=2)
        )
    else:
        _print_summary(report, source)
    if report.failed and not report.added and not report.duplicates:
        raise CbrError(f"Nothing from {source} could be ingested; the bank is unchanged.")


@contextmanager
def _distiller(settings: Settings, condense_writeups: bool) -> Iterator[Any]:
    from dsagent_cbr.ingest.distil import Distiller

    cache_dir = settings.cache_path / "distil"
    if settings.model == "none":
        yield Distiller("none")
        return
    from dsagent_cbr.llm import open_llm

    run_dir = settings.home / "ingest-runs" / datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
    run_dir.mkdir(parents=True, exist_ok=True)
    with open_llm(settings, run_dir=run_dir) as client:
        yield Distiller(
            settings.model, _llm_complete(client), cache_dir, condense_writeups=condense_writeups
        )


def _llm_complete(client: Any) -> Callable[[str, str], str]:
    from dsagent_cbr.llm.prompts import render

    def complete(kind: str, text: str) -> str:
        prompt = render("distil", kind=kind, text=text)
        return client.complete(
            "distil", [{"role": "user", "content": prompt}], temperature=0.0
        ).text

    return complete


@contextmanager
def _spinner(label: str, quiet: bool) -> Iterator[Callable[[int], None]]:
    """A step that says its label, and how long it has run whenever it is silent (saying.py): on a
    terminal on a live status line, with the items crawled so far; otherwise one line each time."""
    from rich.console import Console

    console = Console(stderr=True)
    if quiet or not console.is_terminal:
        with doing(label):
            yield lambda n: None
        return
    with console.status(f"{label}…") as status:
        items = [0]

        def show(took: float) -> None:
            status.update(f"{label}… {items[0]} item(s), {say_duration(took, exact=False)}")

        with doing(label, announce=False, speak=show) as step:

            def tick(n: int) -> None:
                items[0] = n
                show(time.monotonic() - step.started)
                heard()

            yield tick


@contextmanager
def _progress(total: int, quiet: bool) -> Iterator[Callable[[str], None]]:
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    console = Console(stderr=True)
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        disable=quiet or not console.is_terminal,
        transient=True,
    ) as progress:
        task = progress.add_task("ingesting", total=total)
        started = False

        def advance(label: str) -> None:
            nonlocal started
            if started:
                progress.advance(task)
            started = True
            progress.update(task, description=f"ingesting {label[:50]}")

        yield advance
        progress.update(task, completed=total)


def _print_summary(report: Any, source: str) -> None:
    """Plain lines, one per document, so the summary reads the same in a terminal, a log or a pipe."""
    counts = report.counts()
    click.echo(
        f"{source}: added {counts['added']}, duplicates {counts['duplicates']}, failed {counts['failed']}"
    )
    for o in report.outcomes:
        mark = {"added": "+", "duplicate": "=", "failed": "!"}[o.status]
        detail = f" [{o.case_id}]" if o.status == "added" else f": {o.reason}"
        click.echo(f"  {mark} {o.status:<9} {o.kind or '-':<8} {o.label}{detail}")
