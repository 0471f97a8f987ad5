"""The ingest pipeline on real texts: clean -> dedup -> distil (cached) -> store, with provenance."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.ingest_store import MemoryStore, open_store, stored_insights
from support.kaggle_loopback import notebook_json, reference_cases

from dsagent_cbr.bank.cases import Case
from dsagent_cbr.errors import BudgetExceeded, CbrError
from dsagent_cbr.ingest.distil import Distiller, cache_key
from dsagent_cbr.ingest.documents import RawDoc, SourceError
from dsagent_cbr.ingest.pipeline import ingest, modality_from_tags

SLUG = "playground-series-s3e1"


def corpus_docs() -> list[RawDoc]:
    writeups, notebooks = reference_cases(SLUG)
    docs = [RawDoc(url=f"https://www.kaggle.com/competitions/{SLUG}/discussion/{n}", kind="writeup", content=t,
                   format="markdown", title=f"writeup {n}", competition=SLUG, rank=int(n), votes=100 - int(n))
            for n, t in sorted(writeups.items())]
    docs += [RawDoc(url=f"https://www.kaggle.com/code/k{i}/{n}", kind="notebook", content=notebook_json(t, n),
                    format="ipynb", title=n, competition=SLUG, rank=i + 1, votes=50 - i, author=f"k{i}")
             for i, (n, t) in enumerate(sorted(notebooks.items())[:3])]
    return docs


class CountingModel:
    """The completion function the distiller is given; counts calls so caching can be checked."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []

    def __call__(self, kind: str, text: str) -> str:
        self.calls.append((kind, text))
        first = next(line for line in text.splitlines() if line.strip())
        return f"(1) Overall design: a {kind} about {first[:60]}\n(6) Tricks: none noted."


@pytest.mark.slow  # real bank: loads the embedding model
def test_ingest_real_texts_with_provenance(tmp_path: Path) -> None:
    store = open_store(tmp_path)
    docs = corpus_docs()
    report = ingest(docs, store, Distiller("none"), modality="tabular")
    assert report.counts() == {"added": len(docs), "duplicates": 0, "failed": 0}
    cases = {c.source_url: c for c in stored_insights(store)}
    assert len(cases) == len(docs)
    writeup = cases[docs[0].url]
    assert writeup.kind == "insight" and writeup.source_kind == "writeup" and writeup.competition == SLUG
    assert writeup.modality == "tabular"
    assert writeup.extra["rank"] == 1 and writeup.extra["votes"] == 99 and writeup.extra["fetched_at"]
    assert writeup.extra["distilled_by"] == "none" and len(writeup.extra["content_sha256"]) == 64
    assert "AutoGluon" in writeup.text
    notebook = cases[docs[-1].url]
    # without a model a notebook is stored as its cleaned code and markdown
    assert notebook.source_kind == "notebook" and "```python\nimport pandas as pd" in notebook.text
    assert notebook.extra["author"] == "k2"

    again = ingest(corpus_docs(), store, Distiller("none"), modality="tabular")
    assert again.counts() == {"added": 0, "duplicates": len(docs), "failed": 0}
    assert len(stored_insights(store)) == len(docs)


@pytest.mark.slow  # real bank: loads the embedding model
def test_duplicate_content_in_one_batch(tmp_path: Path) -> None:
    store = open_store(tmp_path)
    doc = corpus_docs()[0]
    copy = RawDoc(**{**doc.__dict__, "url": doc.url + "?mirror=1", "content": doc.content + "\n\n\n  "})
    report = ingest([doc, copy], store, Distiller("none"))
    assert report.counts() == {"added": 1, "duplicates": 1, "failed": 0}
    assert "same content as writeup 1" in report.duplicates[0].reason


@pytest.mark.slow  # real bank: loads the embedding model
def test_bad_notebook_fails_alone_and_leaves_store_unchanged(tmp_path: Path) -> None:
    store = open_store(tmp_path)
    bad = RawDoc(url="https://www.kaggle.com/code/x/broken", kind="notebook", content='{"cells": [ {"cell_type"',
                 format="ipynb", title="broken")
    report = ingest([bad], store, Distiller("none"),
                    source_errors=[SourceError("https://k/api", "Kaggle has no notebook list (HTTP 404)", "nb")])
    assert report.counts() == {"added": 0, "duplicates": 0, "failed": 2}
    assert "notebook broken: not valid notebook JSON" in report.failed[1].reason
    assert stored_insights(store) == []


@pytest.mark.slow  # real bank: loads the embedding model
def test_notebooks_distilled_once_then_from_cache(tmp_path: Path) -> None:
    model = CountingModel()
    cache = tmp_path / "distil"
    docs = corpus_docs()
    n_notebooks = sum(d.kind == "notebook" for d in docs)
    store = open_store(tmp_path)
    first = ingest(docs, store, Distiller("gpt-x", model, cache))
    assert first.counts()["added"] == len(docs)
    assert len(model.calls) == n_notebooks and all(kind == "notebook" for kind, _ in model.calls)
    distilled = [c for c in store.list("insight") if c.source_kind == "notebook"]
    assert all(c.text.startswith("(1) Overall design: a notebook") for c in distilled)
    assert all(c.extra["distilled_by"] == "gpt-x" for c in distilled)

    second = ingest(corpus_docs(), store, Distiller("gpt-x", model, cache))
    assert len(model.calls) == n_notebooks  # every answer came from the disk cache
    assert second.counts() == {"added": 0, "duplicates": len(docs), "failed": 0}

    ingest(corpus_docs(), open_store(tmp_path / "other"), Distiller("gpt-y", model, cache))  # another model
    assert len(model.calls) == 2 * n_notebooks

    ingest(corpus_docs()[:1], open_store(tmp_path / "third"), Distiller("gpt-x", model, cache,
                                                                         condense_writeups=True))
    assert model.calls[-1][0] == "writeup"
    assert len(list(cache.rglob("*.json"))) == 2 * n_notebooks + 1


def test_cache_key_depends_on_model_and_text() -> None:
    assert cache_key("m", "notebook", "a") != cache_key("m", "notebook", "b")
    assert cache_key("m", "notebook", "a") != cache_key("n", "notebook", "a")
    assert cache_key("m", "notebook", "a") == cache_key("m", "notebook", "a")


@pytest.mark.slow  # real bank: loads the embedding model
def test_empty_model_answer_is_a_failure_not_a_case(tmp_path: Path) -> None:
    store = open_store(tmp_path)
    report = ingest(corpus_docs()[-1:], store, Distiller("m", lambda kind, text: "  ", tmp_path / "cache"))
    assert report.counts()["failed"] == 1 and "returned an empty answer" in report.failed[0].reason
    assert stored_insights(store) == []


def test_store_refusing_the_batch_raises_and_nothing_is_half_written(tmp_path: Path) -> None:
    class Refusing(MemoryStore):
        def add(self, cases: list[Case]) -> object:
            raise CbrError("the embedder is not installed")

    store = Refusing()
    with pytest.raises(CbrError, match="left unchanged: the embedder is not installed"):
        ingest(corpus_docs(), store, Distiller("none"))
    assert store.list() == []


def test_infer_modality_from_tags() -> None:
    assert modality_from_tags(["tabular", "regression"]) == "tabular"
    assert modality_from_tags(["nlp", "text"]) == "text"
    assert modality_from_tags(["time series analysis"]) == "forecasting"
    assert modality_from_tags([]) == ""


@pytest.mark.slow  # real bank: loads the embedding model
def test_budget_spent_keeps_what_was_distilled(tmp_path: Path) -> None:
    model = CountingModel()

    def one_call_budget(kind: str, text: str) -> str:
        if model.calls:
            raise BudgetExceeded("the $0.01 budget is spent")
        return model(kind, text)

    docs = corpus_docs()
    store = open_store(tmp_path)
    report = ingest(docs, store, Distiller("m", one_call_budget, tmp_path / "cache"))
    n_notebooks = sum(d.kind == "notebook" for d in docs)
    # write-ups need no model; one notebook was distilled before the budget ran out
    assert report.counts() == {"added": len(docs) - n_notebooks + 1, "duplicates": 0, "failed": n_notebooks - 1}
    assert all(o.reason == "not distilled: the $0.01 budget is spent" for o in report.failed)
    assert len(stored_insights(store)) == len(docs) - n_notebooks + 1
