"""`cbr ingest` on local files and folders: real write-ups, a notebook and a script go in; a broken
notebook and a non-UTF-8 file are refused with their reasons; running it again adds nothing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.ingest_store import open_store, stored_insights
from support.kaggle_loopback import markdown_to_html, notebook_json, reference_cases

from dsagent_cbr.cli import main
from dsagent_cbr.ingest.sources import read_local

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "home"
    for key, value in {"CBR_HOME": str(home), "CBR_STORE": "faiss", "CBR_BANK_DIR": str(home / "bank"),
                       "CBR_MODEL": "none", "CBR_CASEBANK_DIR": str(home / "empty-casebank")}.items():
        monkeypatch.setenv(key, value)
    return home


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    writeups, notebooks = reference_cases("feedback-prize-2021")
    docs = tmp_path / "docs"
    (docs / "nested").mkdir(parents=True)
    (docs / "2nd-place.md").write_text(writeups["2"], encoding="utf-8")
    (docs / "nested" / "1st-place.html").write_text(markdown_to_html(writeups["1"], "1st place"), encoding="utf-8")
    name, text = sorted(notebooks.items())[0]
    (docs / "solution.ipynb").write_text(notebook_json(text, name), encoding="utf-8")
    (docs / "train.py").write_bytes((REPO / "tasks" / "concrete-strength" / "train.py").read_bytes())
    (docs / "broken.ipynb").write_text('{"cells": [{"cell_type": "markdown", "source": "half', encoding="utf-8")
    (docs / "latin.md").write_bytes("# R\u00e9sum\u00e9\n\nCaf\u00e9 features".encode("latin-1"))
    (docs / "data.csv").write_text("a,b\n1,2\n")  # not a document: ignored
    return docs


def test_read_local_formats(folder: Path) -> None:
    docs, errors = read_local(folder, competition="feedback-prize-2021")
    by_name = {Path(d.extra["path"]).name: d for d in docs}
    assert set(by_name) == {"2nd-place.md", "1st-place.html", "solution.ipynb", "train.py", "broken.ipynb"}
    assert by_name["1st-place.html"].format == "html" and by_name["1st-place.html"].title == "1st place"
    assert by_name["solution.ipynb"].kind == "notebook" and by_name["train.py"].kind == "notebook"
    assert by_name["2nd-place.md"].kind == "writeup" and by_name["2nd-place.md"].url.startswith("file://")
    assert [e.reason for e in errors] == [
        "latin.md: the page is not UTF-8 (invalid byte 0xe9 at offset 3) and declares no charset"]


def test_read_local_never_follows_a_link_out_of_the_folder(folder: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.md").write_text("# host notes\n\nnot for the bank", encoding="utf-8")
    (folder / "linked.md").symlink_to(outside / "secret.md")
    (folder / "linked-folder").symlink_to(outside)
    docs, errors = read_local(folder, competition="feedback-prize-2021")
    assert not [d for d in docs if "host notes" in d.content]
    assert sorted(Path(e.url).name for e in errors if "symbolic link" in e.reason) == ["linked-folder", "linked.md"]


@pytest.mark.slow  # real bank: loads the embedding model
def test_cbr_ingest_folder_twice(folder: Path, home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["ingest", str(folder), "--competition", "feedback-prize-2021", "--modality", "text"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "added 4, duplicates 0, failed 2" in out
    assert "not valid notebook JSON" in out and "latin.md: the page is not UTF-8" in out
    cases = {Path(c.extra["path"]).name: c for c in stored_insights(open_store(home))}
    assert set(cases) == {"2nd-place.md", "1st-place.html", "solution.ipynb", "train.py"}
    assert all(c.competition == "feedback-prize-2021" and c.modality == "text" for c in cases.values())
    assert "weighted box fusion" in cases["2nd-place.md"].text
    assert cases["train.py"].source_kind == "notebook" and cases["train.py"].text.startswith("```python\n")

    code = main(["ingest", str(folder), "--competition", "feedback-prize-2021", "--modality", "text", "--json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    again = json.loads(out)
    assert (again["added"], again["duplicates"], again["failed"]) == (0, 4, 2)
    assert len(stored_insights(open_store(home))) == 4


def test_cbr_ingest_missing_path(home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["ingest", str(tmp_path / "nowhere.md")])
    out, err = capsys.readouterr()
    assert code == 2 and "Nothing to ingest; the bank is unchanged." in err and "nowhere.md does not exist" in err
