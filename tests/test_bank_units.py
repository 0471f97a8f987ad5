"""Fast checks of the bank's pure parts: file-name inference, front matter, filters, text cleaning."""

from __future__ import annotations

from pathlib import PurePath

import pytest

from dsagent_cbr.bank.casefiles import (
    infer_competitions,
    infer_source_kind,
    modality_from_folders,
    split_front_matter,
)
from dsagent_cbr.bank.cases import Case
from dsagent_cbr.bank.doctext import clean_text, document_chunks
from dsagent_cbr.bank.store import matches, parse_where, to_chroma_where
from dsagent_cbr.errors import CbrError


def test_competition_from_file_names() -> None:
    stems = ["playground-series-s3e1-1", "playground-series-s3e1-catboost-xgboost-blend",
             "m5-forecasting-accuracy-3", "m5-forecasting-accuracy-m5-lightgbm-model", "lonely-notebook-7",
             "feedback-prize-2021-12th-place-solution-original", "feedback-prize-2021-2"]
    got = infer_competitions(stems)
    assert got["playground-series-s3e1-1"] == "playground-series-s3e1"
    assert got["playground-series-s3e1-catboost-xgboost-blend"] == "playground-series-s3e1"
    assert got["m5-forecasting-accuracy-m5-lightgbm-model"] == "m5-forecasting-accuracy"
    assert got["lonely-notebook-7"] == "lonely-notebook"
    assert got["feedback-prize-2021-12th-place-solution-original"] == "feedback-prize-2021"
    assert infer_source_kind("feedback-prize-2021-2", "feedback-prize-2021") == "writeup"
    assert infer_source_kind("m5-forecasting-accuracy-m5-lightgbm-model", "m5-forecasting-accuracy") == "notebook"


def test_modality_from_folder_names() -> None:
    assert modality_from_folders(PurePath("refs/nlp_cases/a.case")) == "text"
    assert modality_from_folders(PurePath("tabular_cases/x/a.case")) == "tabular"
    assert modality_from_folders(PurePath("tsa_cases/a.case")) == "time-series"
    assert modality_from_folders(PurePath("forecasting/a.md")) == "forecasting"
    assert modality_from_folders(PurePath("misc/a.md")) == ""


def test_front_matter() -> None:
    header, body = split_front_matter('+++\ntitle = "T"\nmodality = "text"\n+++\nBody here.\n')
    assert header == {"title": "T", "modality": "text"} and body.strip() == "Body here."
    assert split_front_matter("plain") == ({}, "plain")
    with pytest.raises(ValueError):
        split_front_matter("+++\ntitle = 1\n")


def test_filters() -> None:
    clauses = parse_where({"modality": ["text", "tabular"], "kind": "writeup", "task_name": {"$ne": "a"}})
    assert matches({"modality": "text", "kind": "writeup", "task_name": "b"}, clauses)
    assert not matches({"modality": "text", "kind": "writeup", "task_name": "a"}, clauses)
    assert not matches({"modality": "forecasting", "kind": "writeup"}, clauses)
    assert to_chroma_where(parse_where({"modality": "text"})) == {"modality": {"$eq": "text"}}
    assert "$and" in to_chroma_where(clauses)
    with pytest.raises(CbrError):
        parse_where({"x": {"$gt": 1}})


def test_cleaning_drops_courtesy_and_links() -> None:
    text = ("Thanks to Kaggle for hosting this competition!\n![img](http://x/y.png)\n"
            "We trained [LightGBM](https://lightgbm.io) on lag features. See https://example.com/a")
    out = clean_text(text)
    assert "Thanks" not in out and "http" not in out and "LightGBM on lag features" in out
    case = Case(kind="insight", text="word " * 1000, competition="c")
    assert len(document_chunks(case)) == 4


def test_faiss_store_two_writers_and_atomic_swap(tmp_path) -> None:
    import numpy as np

    from dsagent_cbr.bank.faiss_store import FaissStore
    from dsagent_cbr.bank.store import Record

    rng = np.random.default_rng(0)
    vecs = rng.standard_normal((3, 8)).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    a, b = FaissStore(tmp_path), FaissStore(tmp_path)
    a.add("insight", [Record("x", {"modality": "text"}, "{}")], vecs[:1])
    b.add("insight", [Record("y", {"modality": "tabular"}, "{}")], vecs[1:2])  # b started before x existed
    assert FaissStore(tmp_path).ids("insight") == {"x", "y"}
    with pytest.raises(CbrError):
        a.add("insight", [Record("z", {}, "{}"), Record("x", {}, "{}")], vecs[:2])
    assert FaissStore(tmp_path).ids("insight") == {"x", "y"}  # nothing of the refused batch went in
    hits = FaissStore(tmp_path).query("insight", vecs[1], k=5, where={"modality": "tabular"})
    assert [h.id for h in hits] == ["y"] and hits[0].score == pytest.approx(1.0, abs=1e-5)
    assert not list(tmp_path.glob(".insight-*"))  # no temporary folder left behind


def test_banks_share_the_embedding_cache_the_settings_name(tmp_path) -> None:
    from dsagent_cbr.bank.facade import open_bank
    from dsagent_cbr.config import load_settings

    shared = tmp_path / "shared" / "embeddings.sqlite"
    for name in ("one", "two"):
        settings = load_settings({"CBR_EMBEDDING_CACHE": str(shared)}, home=tmp_path / name, store="faiss")
        bank = open_bank(settings, seed=False)
        assert bank.embedder.cache.path == shared
        bank.close()
    own = open_bank(load_settings({}, home=tmp_path / "three", store="faiss"), seed=False)
    assert own.embedder.cache.path == tmp_path / "three" / "bank" / "embeddings.sqlite"
    own.close()
