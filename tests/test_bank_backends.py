"""The case bank on real parts: DS-Agent's 186 reference cases, the packaged MiniLM model, Chroma embedded,
a real Chroma server subprocess, and FAISS."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from support.bank_seed import SEED_TOPICS, small_casebank

from dsagent_cbr.bank import open_bank
from dsagent_cbr.bank.casefiles import load_import_folder
from dsagent_cbr.bank.cases import Case
from dsagent_cbr.bank.embedder import loaded_models
from dsagent_cbr.cli import main as cbr
from dsagent_cbr.config import load_settings
from dsagent_cbr.errors import CbrError
from dsagent_cbr.llm.local_server import free_port, wait_ready

REPO = Path(__file__).resolve().parents[1]
REFERENCE = REPO.parent / "shared" / "reference" / "dsagent-human-insights"
needs_reference = pytest.mark.skipif(not REFERENCE.is_dir(), reason="reference cases not present")

QUERIES = [
    "gradient boosting on tabular data with categorical features and target encoding",
    "fine-tune a DeBERTa transformer to score student essays",
    "forecast daily sales of thousands of products with lag features",
    "detect freezing of gait events from accelerometer time series",
    "regression with RMSE on a synthetic playground dataset",
    "phrase similarity between patent claims with contextual embeddings",
    "ensembling LightGBM, XGBoost and CatBoost predictions",
    "quantile forecasts and uncertainty intervals for hierarchical series",
    "named entity style token classification of argumentative discourse elements",
    "protein and peptide measurements predict disease progression scores",
    "pseudo-labelling and knowledge distillation for NLP models",
    "1D convolutional network and GRU on sensor windows",
    "feature engineering with coordinates and distances for house prices",
    "stratified k-fold cross validation and early stopping",
    "binary classification evaluated by ROC AUC on medical records",
    "predict the effectiveness of argumentative writing",
    "Poisson and Tweedie loss for intermittent demand",
    "text summarisation quality: content and wording scores",
    "handling class imbalance with focal loss",
    "post-processing predictions by clipping and rounding to valid values",
]


@pytest.fixture(scope="session")
def embed_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One embedding cache for the session: the reference cases are embedded once, then served from it."""
    return tmp_path_factory.mktemp("embed") / "embeddings.sqlite"


@pytest.fixture(scope="session")
def reference_cases() -> list[Case]:
    loaded = load_import_folder(REFERENCE)
    assert not loaded.problems
    return loaded.cases


def _bank(tmp: Path, store: str, cache: Path, chroma_url: str | None = None):
    settings = load_settings(bank_dir=tmp, store=store, chroma_url=chroma_url, casebank_dir=tmp / "no-seed")
    return open_bank(settings, cache_path=cache)


@contextmanager
def _serve_chroma(data: Path, port: int | None = None) -> Iterator[str]:
    exe = shutil.which("chroma")
    if exe is None:
        pytest.skip("the chroma command is not installed")
    port = port or free_port()
    proc = subprocess.Popen([exe, "run", "--host", "127.0.0.1", "--port", str(port), "--path", str(data)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_ready(f"{url}/api/v2/heartbeat", proc, 60, what="The chroma server")
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.fixture(scope="module")
def chroma_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with _serve_chroma(tmp_path_factory.mktemp("chroma-server")) as url:
        yield url


@pytest.fixture
def empty_chroma_server(tmp_path: Path) -> Iterator[str]:
    """A server of the test's own: what a rebuild carries over depends on everything the server holds."""
    with _serve_chroma(tmp_path / "chroma-server") as url:
        yield url


@pytest.fixture(scope="module")
def faiss_reference(tmp_path_factory: pytest.TempPathFactory, embed_cache: Path, reference_cases: list[Case]):
    bank = _bank(tmp_path_factory.mktemp("faiss-ref"), "faiss", embed_cache)
    bank.add(reference_cases)
    return bank


@pytest.mark.slow
@needs_reference
def test_import_twice_adds_186_then_0(tmp_path: Path, embed_cache: Path, faiss_reference) -> None:
    # faiss_reference has filled the session cache; a copy lets the CLI's own bank reuse it
    bank_dir = tmp_path / "bank"
    bank_dir.mkdir()
    shutil.copy(embed_cache, bank_dir / "embeddings.sqlite")
    args = ["bank", "import", str(REFERENCE), "--store", "faiss", "--bank-dir", str(bank_dir),
            "--casebank-dir", str(tmp_path / "no-seed")]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop("CBR_EMBEDDING_CACHE", None)  # the bank's own cache, the copy
    out = subprocess.run([sys.executable, "-m", "dsagent_cbr.cli", *args], capture_output=True, text=True,
                         cwd=REPO, env=env, timeout=600)
    assert out.returncode == 0, out.stderr
    assert "186 added, 0 already present" in out.stdout
    again = subprocess.run([sys.executable, "-m", "dsagent_cbr.cli", *args], capture_output=True, text=True,
                           cwd=REPO, env=env, timeout=600)
    assert again.returncode == 0, again.stderr
    assert "0 added, 186 already present" in again.stdout
    stats = _bank(bank_dir, "faiss", embed_cache).stats()
    assert stats["insight"]["count"] == 186
    assert stats["insight"]["by_modality"] == {"text": 68, "tabular": 53, "time-series": 65}


@pytest.mark.slow
@needs_reference
def test_backends_agree_on_top5(tmp_path: Path, embed_cache: Path, reference_cases: list[Case], faiss_reference,
                                chroma_server: str) -> None:
    embedded = _bank(tmp_path / "chroma", "chroma", embed_cache)
    server = _bank(tmp_path / "server", "chroma", embed_cache, chroma_url=chroma_server)
    for bank in (embedded, server):
        assert len(bank.add(reference_cases).added) == 186
        assert bank.embedder.stats.computed == 0  # all from the session cache
    for query in QUERIES:
        want = [h.case.id for h in faiss_reference.search(query, k=5)]
        assert [h.case.id for h in embedded.search(query, k=5)] == want, query
        assert [h.case.id for h in server.search(query, k=5)] == want, query
        scores = [h.score for h in faiss_reference.search(query, k=5)]
        assert scores == sorted(scores, reverse=True) and -1.0 <= scores[-1] <= scores[0] <= 1.0
    # metadata filters on both kinds of store
    for bank in (faiss_reference, embedded, server):
        hits = bank.search(QUERIES[0], k=5, where={"modality": "text"})
        assert len(hits) == 5 and {h.case.modality for h in hits} == {"text"}
        hits = bank.search(QUERIES[1], k=5, where={"modality": "time-series", "kind": "writeup"})
        assert len(hits) == 5 and all(h.case.modality == "time-series" and h.case.source_kind == "writeup"
                                      for h in hits)
        listed = bank.list("insight", where={"modality": ["tabular", "text"]})
        assert len(listed) == 53 + 68
    assert loaded_models() == 1  # many banks, one model in the process


@pytest.mark.slow
@needs_reference
def test_filters_task_type_and_exclude_task(tmp_path: Path, embed_cache: Path) -> None:
    for store in ("faiss", "chroma"):
        bank = _bank(tmp_path / store, store, embed_cache)
        cases = [Case(kind="solution", text=f"Predict house prices from {n} rooms and area.", script="print(1)",
                      task_name=f"t{n}", modality="tabular", task_type="regression" if n % 2 else "binary-classification")
                 for n in range(6)]
        assert len(bank.add(cases).added) == 6
        hits = bank.search("house prices", kind="solution", k=10, where={"task_type": "regression"},
                           exclude_task="t1")
        assert {h.case.task_name for h in hits} == {"t3", "t5"}
        assert bank.search("x", kind="insight", k=3) == []


@pytest.mark.slow
def test_bad_import_files_are_reported_and_bank_unchanged(tmp_path: Path, embed_cache: Path) -> None:
    folder = tmp_path / "tabular_cases"
    folder.mkdir()
    (folder / "good-comp-1.case").write_text("Target encoding and LightGBM won this one.", encoding="utf-8")
    (folder / "empty-comp-1.case").write_text("  \n", encoding="utf-8")
    (folder / "latin-comp-1.md").write_bytes("caf\xe9 au lait".encode("latin-1"))
    (folder / "broken-front-1.md").write_text("+++\ntitle = 'x'\nno end", encoding="utf-8")
    bank_dir = tmp_path / "bank"
    first = _bank(bank_dir, "faiss", embed_cache)
    first.add([Case(kind="insight", text="An existing case about CatBoost.", modality="tabular")])
    before = first.stats()["insight"]["count"]
    code = cbr(["bank", "import", str(folder), "--store", "faiss", "--bank-dir", str(bank_dir),
                "--casebank-dir", str(tmp_path / "no-seed")])
    assert code == 2
    after = _bank(bank_dir, "faiss", embed_cache)
    assert after.stats()["insight"]["count"] == before == 1
    # with --skip-bad the good file goes in and gets its modality and competition from its names
    assert cbr(["bank", "import", str(folder), "--store", "faiss", "--bank-dir", str(bank_dir), "--skip-bad",
                "--casebank-dir", str(tmp_path / "no-seed")]) == 0
    good = [c for c in _bank(bank_dir, "faiss", embed_cache).list("insight") if c.competition == "good-comp"]
    assert len(good) == 1 and good[0].modality == "tabular" and good[0].source_kind == "writeup"


def test_bad_import_lines(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = tmp_path / "nlp_cases"
    folder.mkdir()
    (folder / "a-1.case").write_text("", encoding="utf-8")
    (folder / "b-1.txt").write_bytes(b"\xff\xfe\x00bad")
    (folder / "c-1.md").write_text("fine text", encoding="utf-8")
    loaded = load_import_folder(folder)
    assert len(loaded.cases) == 1 and loaded.cases[0].modality == "text"
    assert len(loaded.problems) == 2
    assert any("a-1.case: empty" in p for p in loaded.problems)
    assert any("b-1.txt: not UTF-8" in p for p in loaded.problems)
    code = cbr(["bank", "import", str(folder), "--store", "faiss", "--bank-dir", str(tmp_path / "bank")])
    err = capsys.readouterr().err
    assert code == 2 and "2 file(s) cannot be imported" in err
    assert err.count("a-1.case") == 1 and err.count("b-1.txt") == 1


@pytest.mark.slow
def test_embedding_cache_avoids_reembedding(tmp_path: Path) -> None:
    cache = tmp_path / "cache.sqlite"
    cases = [Case(kind="insight", text=f"Insight number {i}: use {m} with early stopping.", modality="tabular")
             for i, m in enumerate(["LightGBM", "XGBoost", "CatBoost"])]
    bank = _bank(tmp_path / "a", "faiss", cache)
    bank.add(cases)
    assert bank.embedder.stats.computed == 3
    bank.rebuild()  # same texts, same model: nothing goes through the model again
    assert bank.embedder.stats.computed == 3 and bank.embedder.stats.cached >= 3
    other = _bank(tmp_path / "b", "chroma", cache)
    other.add(cases + [Case(kind="insight", text="A new one about target encoding.")])
    assert other.embedder.stats.computed == 1
    assert [h.case.id for h in other.search("CatBoost", k=3)][:1] == [h.case.id for h in bank.search("CatBoost")][:1]
    # opening with a model that cannot load must not cost the bank its cases
    with pytest.raises(CbrError):
        open_bank(load_settings(bank_dir=tmp_path / "a", store="faiss", casebank_dir=tmp_path / "no-seed",
                                embedding_model=str(tmp_path / "no-such-model")), cache_path=cache)
    assert len(_bank(tmp_path / "a", "faiss", cache).list("insight")) == 3


@pytest.mark.slow
def test_seed_bank_builds_once_and_follows_edits(tmp_path: Path) -> None:
    seed = small_casebank(tmp_path)
    (seed / "solutions" / "half-written").mkdir()
    settings = load_settings(bank_dir=tmp_path / "bank", store="faiss", casebank_dir=seed)
    bank = open_bank(settings)
    assert bank.stats()["insight"]["count"] == 3 and bank.stats()["solution"]["count"] == 1
    assert any("half-written" in p for p in bank.seed_problems)
    toy = bank.list("solution")[0]
    assert toy.task_name == "toy" and toy.test_score == 1.5 and toy.modality == "tabular"
    again = open_bank(settings)
    assert again.embedder.stats.computed == 0 and again.embedder.stats.cached == 0  # fingerprint unchanged
    (seed / "insights" / "tabular" / "seed-1.md").write_text(
        '+++\ntitle = "seed 1"\nmodality = "tabular"\n+++\nUse LightGBM very wisely.\n', encoding="utf-8")
    edited = open_bank(settings)
    assert edited.embedder.stats.computed == 1  # only the edited case went through the model
    texts = sorted(c.text for c in edited.list("insight"))
    assert texts == sorted([f"Use {SEED_TOPICS[0]}.", "Use LightGBM very wisely.", f"Use {SEED_TOPICS[2]}."])
    edited.remove([toy.id])  # a seed case the user removes stays removed when the bank is opened again
    assert open_bank(settings).list("solution") == []


@pytest.mark.slow
def test_rebuild_on_a_chroma_server_switches_everyone_and_keeps_others_cases(
        tmp_path: Path, embed_cache: Path, empty_chroma_server: str, capsys: pytest.CaptureFixture[str]) -> None:
    """Two bank folders (two machines) share one server: a rebuild from one makes new collections from its
    journal, carries over the other's cases, and the other follows the switch."""
    import chromadb

    mine = _bank(tmp_path / "mine", "chroma", embed_cache, chroma_url=empty_chroma_server)
    theirs = _bank(tmp_path / "theirs", "chroma", embed_cache, chroma_url=empty_chroma_server)
    own = [Case(kind="insight", text=f"Mine {i}: stack gradient boosting models.", modality="tabular")
           for i in range(3)]
    other = Case(kind="insight", text="Theirs: pseudo-label the test set with a confident model.", modality="text")
    assert len(mine.add(own).added) == 3 and theirs.add([other]).added == [other.id]
    mine.remove([own[0].id])
    capsys.readouterr()
    assert cbr(["bank", "rebuild", "--chroma-url", empty_chroma_server, "--bank-dir", str(tmp_path / "mine"),
                "--casebank-dir", str(tmp_path / "no-seed")]) == 0
    assert "Carried over 1 case(s)" in capsys.readouterr().err
    client = chromadb.HttpClient(host="127.0.0.1", port=int(empty_chroma_server.rsplit(":", 1)[1]))
    names = {c if isinstance(c, str) else c.name for c in client.list_collections()}
    current = client.get_collection("cbr-bank-current").metadata["current"]
    assert current.startswith("cbr-g") and {f"{current}-insight", f"{current}-meta"} <= names
    assert "cbr-insight" not in names  # the old generation is gone
    expected = {own[1].id, own[2].id, other.id}
    assert {c.id for c in _bank(tmp_path / "mine", "chroma", embed_cache, empty_chroma_server).list("insight")} == expected
    # the other machine, opened before the switch, writes into the new collections
    late = Case(kind="insight", text="Theirs again: clip predictions to the training range.", modality="tabular")
    assert theirs.add([late]).added == [late.id]
    assert {c.id for c in _bank(tmp_path / "mine", "chroma", embed_cache, empty_chroma_server).list("insight")} == \
        expected | {late.id}


@pytest.mark.slow
def test_a_chroma_server_dying_mid_run_is_ours_and_resume_recovers(tmp_path: Path) -> None:
    """The server dies while the search runs: the run ends with exit 3 and a record that says
    infrastructure (not completed); with the server back, --resume finishes the run."""
    import json
    import time

    from conftest import prepared

    task, data, port = prepared("concrete-strength"), tmp_path / "chroma-data", free_port()
    env = {**os.environ, "CBR_HOME": str(tmp_path / "home")}
    args = ["--model", "none", "--runs-dir", str(tmp_path / "runs"), "--chroma-url", f"http://127.0.0.1:{port}"]
    with _serve_chroma(data, port):
        # the bank is opened at the start; cases are retrieved only when a move needs them, so with one node
        # (a draft) the first use of the dead server is the retain
        run = subprocess.Popen([sys.executable, "-m", "dsagent_cbr.cli", "develop", str(task.root), "--budget", "90s",
                                "-T", "1", *args], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        journal = None
        for _ in range(600):  # until the first node has started: the server was checked, and the search runs
            journal = next((tmp_path / "runs").glob("*/*/journal.jsonl"), None) if (tmp_path / "runs").is_dir() else None
            if journal and '"role": "started"' in journal.read_text():
                break
            time.sleep(0.2)
        assert journal is not None
    out, err = run.communicate(timeout=300)
    summary = json.loads((journal.parent / "summary.json").read_text())
    assert run.returncode == 3 and "Traceback" not in err and "stopped answering" in err, err[-2000:]
    assert summary["outcome"] == "infrastructure" and "Chroma" in summary["stopped"]
    with _serve_chroma(data, port):
        again = subprocess.run([sys.executable, "-m", "dsagent_cbr.cli", "develop", "--resume", str(journal.parent),
                                *args], env=env, capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stderr[-2000:]
    assert json.loads((journal.parent / "summary.json").read_text())["outcome"] == "ok"
