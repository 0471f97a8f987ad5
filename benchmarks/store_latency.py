"""Query latency and build time of the vector stores on synthetic banks (random unit vectors, dim 384).

Backends: Chroma (embedded, through our ChromaStore), FAISS exact inner product (IndexFlatIP), FAISS HNSW
(M=32, efSearch=64) and NumPy brute force (one matrix-vector product + argpartition). Latency is per
single query (k=5), p50/p95 over --queries random queries after a few warm-up queries. HNSW and Chroma
are approximate, so their recall@5 against brute force is printed too.

    python benchmarks/store_latency.py --sizes 10000,100000 [--chroma-max 100000]
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click
import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

K = 5


def unit_vectors(n: int, dim: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    out = np.empty((n, dim), dtype=np.float32)
    for start in range(0, n, 100_000):  # in blocks: 1M x 384 float64 would be 3 GB
        block = rng.standard_normal((min(100_000, n - start), dim), dtype=np.float32)
        out[start:start + len(block)] = block / np.linalg.norm(block, axis=1, keepdims=True)
    return out


def latencies(search: Callable[[np.ndarray], list[int]], queries: np.ndarray) -> tuple[list[float], list[list[int]]]:
    for q in queries[:3]:
        search(q)
    times, results = [], []
    for q in queries:
        t0 = time.perf_counter()
        results.append(search(q))
        times.append((time.perf_counter() - t0) * 1000)
    return times, results


def bench_numpy(data: np.ndarray) -> tuple[Callable, float]:
    t0 = time.perf_counter()
    matrix = np.ascontiguousarray(data)
    build = time.perf_counter() - t0

    def search(q: np.ndarray) -> list[int]:
        scores = matrix @ q
        top = np.argpartition(-scores, K)[:K]
        return top[np.argsort(-scores[top])].tolist()

    return search, build


def bench_faiss(data: np.ndarray, hnsw: bool, query_threads: int) -> tuple[Callable, float]:
    import faiss

    from dsagent_cbr.bank.faiss_store import build_index

    t0 = time.perf_counter()
    index = build_index(data, hnsw=hnsw)  # built with every OpenMP thread
    build = time.perf_counter() - t0
    if query_threads > 0:
        # one query at a time gains nothing from OpenMP and on a busy machine loses a lot to it
        faiss.omp_set_num_threads(query_threads)

    def search(q: np.ndarray) -> list[int]:
        return index.search(q.reshape(1, -1), K)[1][0].tolist()

    return search, build


def bench_chroma(data: np.ndarray, folder: Path) -> tuple[Callable, float]:
    from dsagent_cbr.bank.chroma_store import ChromaStore
    from dsagent_cbr.bank.store import Record

    store = ChromaStore(path=folder)
    records = [Record(str(i), {"modality": "tabular"}, "{}") for i in range(len(data))]
    t0 = time.perf_counter()
    step = 50_000  # our store adds all-or-nothing per call; feed it in slices to bound memory
    for start in range(0, len(data), step):
        store.add("insight", records[start:start + step], data[start:start + step])
    build = time.perf_counter() - t0
    col = store._col("insight")

    def search(q: np.ndarray) -> list[int]:
        got = col.query(query_embeddings=[q], n_results=K, include=[])
        return [int(i) for i in got["ids"][0]]

    return search, build


def recall(results: list[list[int]], truth: list[list[int]]) -> float:
    return float(np.mean([len(set(r) & set(t)) / K for r, t in zip(results, truth, strict=True)]))


def run(sizes: list[int], dim: int, n_queries: int, backends: list[str], chroma_max: int,
        faiss_threads: int = 1) -> list[dict[str, Any]]:
    import faiss

    default_threads = faiss.omp_get_max_threads()
    rows = []
    queries = unit_vectors(n_queries, dim, seed=1)
    for n in sizes:
        data = unit_vectors(n, dim, seed=0)
        truth: list[list[int]] = []
        for name in backends:
            if name == "chroma" and n > chroma_max:
                rows.append({"n": n, "backend": name, "skipped": f"n > --chroma-max {chroma_max}"})
                continue
            with tempfile.TemporaryDirectory() as tmp:
                if name == "numpy":
                    search, build = bench_numpy(data)
                elif name == "faiss-flat":
                    search, build = bench_faiss(data, hnsw=False, query_threads=faiss_threads)
                elif name == "faiss-hnsw":
                    search, build = bench_faiss(data, hnsw=True, query_threads=faiss_threads)
                else:
                    search, build = bench_chroma(data, Path(tmp))
                times, results = latencies(search, queries)
                faiss.omp_set_num_threads(default_threads)
                del search
            if name == "numpy":
                truth = results
            row = {"n": n, "backend": name, "build_s": round(build, 3),
                   "p50_ms": round(float(np.percentile(times, 50)), 4),
                   "p95_ms": round(float(np.percentile(times, 95)), 4),
                   "recall_at_5": round(recall(results, truth), 3) if truth else None}
            rows.append(row)
            click.echo(f"  n={n:>8} {name:<11} build {row['build_s']:>8.2f}s  p50 {row['p50_ms']:>8.3f} ms  "
                       f"p95 {row['p95_ms']:>8.3f} ms", err=True)
    base = {r["n"]: r for r in rows if r["backend"] == "numpy" and "p50_ms" in r}
    for r in rows:
        if "p50_ms" in r and r["n"] in base:
            r["p50_vs_numpy"] = round(r["p50_ms"] / base[r["n"]]["p50_ms"], 3)
            r["p95_vs_numpy"] = round(r["p95_ms"] / base[r["n"]]["p95_ms"], 3)
    return rows


def table(rows: list[dict[str, Any]]) -> str:
    lines = [f"{'n':>9} {'backend':<11} {'build s':>9} {'p50 ms':>9} {'p95 ms':>9} {'p50/np':>7} {'p95/np':>7} "
             f"{'recall@5':>8}"]
    for r in rows:
        if "skipped" in r:
            lines.append(f"{r['n']:>9} {r['backend']:<11} skipped: {r['skipped']}")
            continue
        rec = "" if r["recall_at_5"] is None else f"{r['recall_at_5']:.3f}"
        lines.append(f"{r['n']:>9} {r['backend']:<11} {r['build_s']:>9.2f} {r['p50_ms']:>9.3f} {r['p95_ms']:>9.3f} "
                     f"{r.get('p50_vs_numpy', 0):>7.3f} {r.get('p95_vs_numpy', 0):>7.3f} {rec:>8}")
    return "\n".join(lines)


@click.command()
@click.option("--sizes", default="10000,100000,1000000", show_default=True, help="Bank sizes, comma-separated.")
@click.option("--dim", default=384, show_default=True)
@click.option("--queries", "n_queries", default=200, show_default=True, help="Timed queries per backend.")
@click.option("--backends", default="numpy,faiss-flat,faiss-hnsw,chroma", show_default=True)
@click.option("--chroma-max", default=1_000_000, show_default=True,
              help="Skip Chroma above this size (its 1M build takes long on a small machine).")
@click.option("--faiss-threads", default=1, show_default=True,
              help="OpenMP threads for FAISS queries (0: FAISS's default, all cores).")
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path),
              default=REPO / "benchmarks" / "results" / "store_latency.json", show_default=True)
def main(sizes: str, dim: int, n_queries: int, backends: str, chroma_max: int, faiss_threads: int,
         out: Path) -> None:
    import os
    import platform

    names = [b.strip() for b in backends.split(",") if b.strip()]
    if "numpy" in names:  # brute force first: it is the reference for recall and the ratios
        names = ["numpy"] + [b for b in names if b != "numpy"]
    rows = run([int(s) for s in sizes.split(",")], dim, n_queries, names, chroma_max, faiss_threads)
    click.echo(table(rows))
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"dim": dim, "k": K, "queries": n_queries, "cpus": os.cpu_count(), "faiss_threads": faiss_threads,
                               "machine": platform.platform(), "rows": rows}, indent=2), encoding="utf-8")
    click.echo(f"wrote {out}")


if __name__ == "__main__":
    main()
