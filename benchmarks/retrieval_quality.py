"""Does retrieval find insights of the right modality, and deployment tasks their development twin?

Imports DS-Agent's 186 human-insight cases into a temporary bank. For every task folder under tasks/ it
takes the top-5 insights for the task's description and counts how many share the task's modality
family: tabular, text, or time series. DS-Agent's tsa_cases hold forecasting and time-series
classification together (imported as "time-series"), so a forecasting or time-series-classification
task matches any time-series case. Also prints, for every deployment task, the most similar development
task by description next to the paired_with its task.toml declares. Writes JSON.

    python benchmarks/retrieval_quality.py [--reference ../shared/reference/dsagent-human-insights]
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
import tomllib
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click
import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from dsagent_cbr.bank.cases import modality_family  # noqa: E402

DEFAULT_REFERENCE = REPO.parent / "shared" / "reference" / "dsagent-human-insights"


@dataclass
class TaskInfo:
    name: str
    modality: str
    stage: str
    paired_with: list[str]
    description: str


def read_tasks(tasks_dir: Path, names: list[str] | None = None) -> list[TaskInfo]:
    """Task folders with a readable task.toml and description.md (half-written ones are skipped)."""
    out = []
    for folder in sorted(p for p in tasks_dir.iterdir() if p.is_dir()):
        if names and folder.name not in names:
            continue
        try:
            meta = tomllib.loads((folder / "task.toml").read_text(encoding="utf-8"))
            description = (folder / "description.md").read_text(encoding="utf-8")
        except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError):
            continue
        if not description.strip() or "modality" not in meta:
            continue
        out.append(TaskInfo(str(meta.get("name", folder.name)), str(meta["modality"]),
                            str(meta.get("stage", "development")), list(meta.get("paired_with", [])), description))
    return out


def modality_table(rows: list[dict[str, Any]]) -> dict[str, Any]:
    by: dict[str, list[float]] = defaultdict(list)
    for r in rows:
        by[r["modality"]].append(r["match"])
    table = {m: {"tasks": len(v), "match": float(np.mean(v))} for m, v in sorted(by.items())}
    allv = [r["match"] for r in rows]
    table["overall"] = {"tasks": len(allv), "match": float(np.mean(allv)) if allv else float("nan")}
    return table


def evaluate(bank: Any, tasks: list[TaskInfo], k: int = 5, plain_query: bool = False) -> dict[str, Any]:
    from dsagent_cbr.bank import doctext

    rows = []
    for t in tasks:
        query = t.description if plain_query else doctext.task_query(t.description, t.modality)
        hits = bank.search(query, kind="insight", k=k)
        fam = modality_family(t.modality)
        got = [modality_family(h.case.modality) for h in hits]
        rows.append({"task": t.name, "modality": t.modality, "stage": t.stage,
                     "match": sum(g == fam for g in got) / max(len(got), 1),
                     "top": [{"id": h.case.id, "title": h.case.title, "modality": h.case.modality,
                              "score": round(h.score, 4)} for h in hits]})
    return {"per_task": rows, "table": modality_table(rows)}


def nearest_development(bank: Any, tasks: list[TaskInfo]) -> list[dict[str, Any]]:
    """Cosine similarity between task descriptions, embedded the way the bank embeds solution cases."""
    from dsagent_cbr.bank import doctext
    from dsagent_cbr.bank.cases import Case

    dev = [t for t in tasks if t.stage == "development"]
    dep = [t for t in tasks if t.stage == "deployment"]
    if not dev or not dep:
        return []
    dev_vecs = np.stack([bank.embedder.embed_documents(doctext.document_chunks(
        Case(kind="solution", text=t.description, script="-"))).mean(axis=0) for t in dev])
    dev_vecs /= np.linalg.norm(dev_vecs, axis=1, keepdims=True)
    out = []
    for t in dep:
        q = bank.embedder.embed_query(doctext.query_text(t.description))
        sims = dev_vecs @ q
        order = np.argsort(-sims)
        out.append({"task": t.name, "modality": t.modality, "nearest": dev[order[0]].name,
                    "similarity": round(float(sims[order[0]]), 4), "paired_with": t.paired_with,
                    "agrees": dev[order[0]].name in t.paired_with if t.paired_with else None,
                    "ranking": [dev[i].name for i in order[:5]]})
    return out


def import_reference(reference: Path, bank_dir: Path, store: str, cache: Path, seed: bool = False) -> Any:
    from dsagent_cbr.bank import open_bank
    from dsagent_cbr.bank.casefiles import load_import_folder
    from dsagent_cbr.config import load_settings

    settings = load_settings(bank_dir=bank_dir, store=store, chroma_url="")
    bank = open_bank(settings, seed=seed, cache_path=cache)
    loaded = load_import_folder(reference)
    if loaded.problems:
        raise SystemExit("reference files could not be read:\n" + "\n".join(loaded.problems))
    bank.add(loaded.cases)
    return bank


@click.command()
@click.option("--reference", type=click.Path(exists=True, file_okay=False, path_type=Path),
              default=DEFAULT_REFERENCE, show_default=True, help="Folder of DS-Agent insight cases.")
@click.option("--tasks-dir", type=click.Path(exists=True, file_okay=False, path_type=Path),
              default=REPO / "tasks", show_default=True)
@click.option("--task", "names", multiple=True, help="Only these tasks (repeatable).")
@click.option("--store", type=click.Choice(["chroma", "faiss"]), default="faiss", show_default=True)
@click.option("--cache", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Embedding cache (default: <home>/cache/embeddings.sqlite).")
@click.option("--raw-text", is_flag=True,
              help="Baseline: embed each case's raw text (first 256 word pieces) and the raw description.")
@click.option("--reference-only", is_flag=True,
              help="Baseline: only the reference cases, without the shipped seed insights the agent's bank has.")
@click.option("--plain-query", is_flag=True,
              help="Baseline: query with the bare description, not the agent's query (declared modality first).")
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path),
              default=REPO / "benchmarks" / "results" / "retrieval_quality.json", show_default=True)
def main(reference: Path, tasks_dir: Path, names: tuple[str, ...], store: str, cache: Path | None,
         raw_text: bool, reference_only: bool, plain_query: bool, out: Path) -> None:
    from dsagent_cbr.bank import doctext
    from dsagent_cbr.config import load_settings

    if raw_text:
        doctext.document_chunks = lambda case: [case.text]
        doctext.query_text = lambda text: text

    cache = cache or load_settings().cache_path / "embeddings.sqlite"
    tasks = read_tasks(tasks_dir, list(names) or None)
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        bank = import_reference(reference, Path(tmp), store, cache, seed=not reference_only)
        result = evaluate(bank, tasks, plain_query=plain_query)
        result["deployment"] = nearest_development(bank, tasks)
        result["cases"] = bank.stats()["insight"]["count"]
        bank.close()
    result["seconds"] = round(time.perf_counter() - started, 1)
    result["store"] = store
    result["seed"] = not reference_only
    result["query"] = "description" if plain_query else "declared modality + description"
    result["text"] = "raw" if raw_text else "cleaned, mean of up to 4 chunks"
    click.echo(f"{result['cases']} insight cases ({'reference only' if reference_only else 'seed + reference'}; query: {result['query']}), {len(tasks)} tasks, top-5 modality-family match:")
    click.echo(f"{'modality':<28}{'tasks':>6}{'match':>8}")
    for m, row in result["table"].items():
        click.echo(f"{m:<28}{row['tasks']:>6}{row['match']:>8.3f}")
    for r in result["per_task"]:
        if r["match"] < 1:
            click.echo(f"  {r['task']} ({r['modality']}): {r['match']:.1f} — "
                       + ", ".join(h['modality'] for h in r['top']))
    if result["deployment"]:
        click.echo("\ndeployment task -> nearest development task (declared paired_with)")
        for d in result["deployment"]:
            flag = {True: "agrees", False: "differs", None: "none declared"}[d["agrees"]]
            click.echo(f"  {d['task']:<26} -> {d['nearest']:<26} {d['similarity']:.3f}  "
                       f"({', '.join(d['paired_with']) or '-'}; {flag})")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2), encoding="utf-8")
    click.echo(f"\nwrote {out}")


if __name__ == "__main__":
    main()
