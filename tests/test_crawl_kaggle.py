"""Real Scrapy crawls of a loopback server that answers like Kaggle's v1 API, with real write-up and
notebook text inside, ending in the bank; and every way the API can fail, each leaving the bank as it was."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.ingest_store import open_store, stored_insights
from support.kaggle_loopback import Loopback, install_competition, json_reply, raw_reply

from dsagent_cbr.cli import main
from dsagent_cbr.ingest.crawl import run_spider
from dsagent_cbr.ingest.kaggle_api import basic_auth

SLUG = "playground-series-s3e1"
RETRIES = 3  # RETRY_TIMES in crawlers/cbr_crawlers/settings.py

pytestmark = pytest.mark.slow


@pytest.fixture
def server() -> Loopback:
    with Loopback() as srv:
        yield srv


@pytest.fixture
def env(server: Loopback, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Point everything at the loopback server and a temporary home; returns the home."""
    home = tmp_path / "home"
    for key, value in {"CBR_HOME": str(home), "CBR_KAGGLE_API": server.api, "KAGGLE_USERNAME": server.username,
                       "KAGGLE_KEY": server.key, "CBR_CRAWL_DELAY": "0", "CBR_STORE": "faiss",
                       "CBR_BANK_DIR": str(home / "bank"), "CBR_MODEL": "none",
                       "CBR_CASEBANK_DIR": str(home / "empty-casebank")}.items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("KAGGLE_CONFIG_DIR", raising=False)
    return home


def cbr(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def test_spider_follows_the_api(server: Loopback, env: Path) -> None:
    fixture = install_competition(server, SLUG)
    result = run_spider("kaggle", {"competition": SLUG, "top": 3})
    assert result.meta["title"] == "Playground Series S3E1" and result.meta["tags"] == ["tabular", "regression"]
    notebooks = sorted((d for d in result.docs if d.kind == "notebook"), key=lambda d: d.rank or 0)
    writeups = sorted((d for d in result.docs if d.kind == "writeup"), key=lambda d: d.rank or 0)
    # the three most voted notebooks, ranked by votes although the listing came least voted first
    assert [d.extra["ref"] for d in notebooks] == fixture.refs[:3]
    assert [d.votes for d in notebooks] == [500, 463, 426]
    assert all(d.format == "ipynb" and json.loads(d.content)["nbformat"] == 4 for d in notebooks)
    # write-ups: this competition's solution topics only, best placed first, bodies fetched one by one
    assert [d.title for d in writeups] == ["1st place solution", "2nd place solution", "3rd place solution"]
    assert writeups[0].url == f"https://www.kaggle.com/competitions/{SLUG}/discussion/4000"
    assert writeups[0].format == "html" and writeups[1].format == "markdown"
    assert "AutoGluon" in writeups[0].content
    assert result.errors == []
    assert server.hits["/robots.txt"] == 1
    assert server.hits["/api/v1/kernels/pull"] == 3 and server.hits["/api/v1/discussions/9001/get"] == 0
    # responses are cached under the cbr home, the API key is not
    cached = [p for p in (env / "cache" / "scrapy-http").rglob("*") if p.is_file()]
    assert any(p.name == "request_headers" for p in cached)
    token = basic_auth(server.username, server.key).split()[1].encode()
    assert not any(token in p.read_bytes() or server.key.encode() in p.read_bytes() for p in cached)


def test_ingest_kaggle_end_to_end_and_rerun_adds_nothing(server: Loopback, env: Path,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    fixture = install_competition(server, SLUG)
    code, out, err = cbr(capsys, "ingest-kaggle", SLUG, "--top", "4", "--json")
    assert code == 0, err
    summary = json.loads(out)
    assert (summary["added"], summary["duplicates"], summary["failed"]) == (7, 0, 0)  # 4 notebooks + 3 writeups

    cases = stored_insights(open_store(env))
    assert len(cases) == 7
    by_url = {c.source_url: c for c in cases}
    top = by_url[f"https://www.kaggle.com/code/{fixture.refs[0]}"]
    assert top.source_kind == "notebook" and top.competition == SLUG and top.modality == "tabular"
    assert top.extra["rank"] == 1 and top.extra["votes"] == 500 and top.extra["ref"] == fixture.refs[0]
    assert top.extra["fetched_at"].startswith("20") and top.extra["distilled_by"] == "none"
    assert "OUTPUT-NOISE" not in top.text and "```python" in top.text
    first = by_url[f"https://www.kaggle.com/competitions/{SLUG}/discussion/4000"]
    assert first.source_kind == "writeup" and first.extra["place"] == 1 and first.title == "1st place solution"
    assert "SCRIPT-NOISE" not in first.text and "NAV-NOISE" not in first.text and "AutoGluon" in first.text

    pulls = server.hits["/api/v1/kernels/pull"]
    code, out, err = cbr(capsys, "ingest-kaggle", SLUG, "--top", "4", "--json")
    assert code == 0, err
    again = json.loads(out)
    assert (again["added"], again["duplicates"], again["failed"]) == (0, 7, 0)
    assert len(stored_insights(open_store(env))) == 7
    assert server.hits["/api/v1/kernels/pull"] == pulls  # answered from the HTTP cache


def _bank_is_empty(home: Path) -> bool:
    return stored_insights(open_store(home)) == []


@pytest.mark.parametrize("status, expected, hits", [
    (403, "refused access (HTTP 403)", 1),
    (404, "has no competition playground-series-s3e1 (HTTP 404)", 1),
    (429, f"rate-limiting us (HTTP 429) on competition playground-series-s3e1 after {RETRIES} retries", RETRIES + 1),
    (500, f"server failed (HTTP 500) on competition playground-series-s3e1 after {RETRIES} retries", RETRIES + 1),
])
def test_http_errors_stop_cleanly(server: Loopback, env: Path, capsys: pytest.CaptureFixture[str], status: int,
                                  expected: str, hits: int) -> None:
    install_competition(server, SLUG)
    server.reply("/api/v1/competitions/list", json_reply({"code": status, "message": "no"}, status))
    code, out, err = cbr(capsys, "ingest-kaggle", SLUG)
    assert code == 2
    assert expected.lower() in err.lower()
    assert server.hits["/api/v1/competitions/list"] == hits
    assert server.hits["/api/v1/kernels/list"] == 0
    assert _bank_is_empty(env)


def test_bad_credentials_give_401(server: Loopback, env: Path, capsys: pytest.CaptureFixture[str],
                                  monkeypatch: pytest.MonkeyPatch) -> None:
    install_competition(server, SLUG)
    monkeypatch.setenv("KAGGLE_KEY", "wrong")
    code, out, err = cbr(capsys, "ingest-kaggle", SLUG)
    assert code == 2 and "rejected the credentials (HTTP 401)" in err and "kaggle.json" in err
    assert _bank_is_empty(env)


def test_missing_credentials_stop_before_crawling(server: Loopback, env: Path, tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str],
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KAGGLE_USERNAME")
    monkeypatch.delenv("KAGGLE_KEY")
    monkeypatch.setenv("KAGGLE_CONFIG_DIR", str(tmp_path / "no-such"))
    code, out, err = cbr(capsys, "ingest-kaggle", SLUG)
    assert code == 2 and "No Kaggle credentials" in err
    assert sum(server.hits.values()) == 0


def test_malformed_json(server: Loopback, env: Path, capsys: pytest.CaptureFixture[str]) -> None:
    install_competition(server, SLUG)
    server.reply("/api/v1/competitions/list", raw_reply(b'[{"ref": "playground-series-s3e1", "title": ',
                                                        "application/json"))
    code, out, err = cbr(capsys, "ingest-kaggle", SLUG)
    assert code == 2 and "malformed JSON for competitions/list" in err
    assert _bank_is_empty(env)


def test_unknown_competition(server: Loopback, env: Path, capsys: pytest.CaptureFixture[str]) -> None:
    install_competition(server, SLUG)
    code, out, err = cbr(capsys, "ingest-kaggle", "no-such-competition")
    assert code == 2 and "Kaggle has no competition named 'no-such-competition'" in err
    assert _bank_is_empty(env)


def test_notebook_that_is_not_json(server: Loopback, env: Path, capsys: pytest.CaptureFixture[str]) -> None:
    fixture = install_competition(server, SLUG, bad_notebook='{"cells": [{"cell_type": "code", "source": ')
    code, out, err = cbr(capsys, "ingest-kaggle", SLUG, "--top", "1", "--no-writeups")
    assert code == 2
    assert "not valid notebook JSON" in out and fixture.refs[0].split("/")[1].replace("-", " ").lower() in out.lower()
    assert "Nothing from playground-series-s3e1 could be ingested; the bank is unchanged" in err
    assert _bank_is_empty(env)


HUGE = {"blob": {"source": "x" * (20 * 1024 * 1024), "kernelType": "notebook"}}


@pytest.mark.parametrize("reply, reason", [
    (json_reply({"code": 404}, 404), "Kaggle has no notebook {ref} (HTTP 404)"),
    (json_reply(HUGE), "notebook {ref} is larger than the download size limit (10 MiB)"),
    (json_reply({"metadata": {}}), "Kaggle's answer to kernels/pull for {ref} has no 'blob'"),
])
def test_one_notebook_failing_is_reported_and_the_rest_is_kept(server: Loopback, env: Path,
                                                               capsys: pytest.CaptureFixture[str],
                                                               reply: tuple, reason: str) -> None:
    fixture = install_competition(server, SLUG)
    broken = fixture.refs[1]
    kernel = broken.split("/")[1]
    original = next(h for p, h in server.routes if p.pattern.startswith("/api/v1/kernels/pull"))
    server.route(r"/api/v1/kernels/pull", lambda m, q: reply if q.get("kernelSlug") == kernel else original(m, q))
    code, out, err = cbr(capsys, "ingest-kaggle", SLUG, "--top", "3", "--no-writeups", "--json")
    assert code == 0, err
    summary = json.loads(out)
    assert (summary["added"], summary["failed"]) == (2, 1)
    failed = next(o for o in summary["outcomes"] if o["status"] == "failed")
    assert failed["reason"] == reason.format(ref=broken)
    assert len(stored_insights(open_store(env))) == 2


def test_competition_without_writeups(server: Loopback, env: Path, capsys: pytest.CaptureFixture[str]) -> None:
    install_competition(server, SLUG, writeups=False)
    code, out, err = cbr(capsys, "ingest-kaggle", SLUG, "--no-notebooks")
    assert code == 2
    assert "has no solution write-ups in its discussion forum" in err
    assert "Nothing to ingest from playground-series-s3e1; the bank is unchanged" in err
    assert _bank_is_empty(env)

    # with notebooks asked for too, the notebooks go in and the missing write-ups are reported
    code, out, err = cbr(capsys, "ingest-kaggle", SLUG, "--top", "2")
    assert code == 0, err
    assert "added 2, duplicates 0, failed 1" in out
    assert "has no solution write-ups" in out
    assert len(stored_insights(open_store(env))) == 2
