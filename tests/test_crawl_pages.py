"""The page spider against a loopback web server: real write-up pages in, and pages that must be
refused (wrong encoding, oversized, forbidden by robots.txt, missing) out with a clear reason."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.ingest_store import open_store, stored_insights
from support.kaggle_loopback import (
    Loopback,
    markdown_to_html,
    notebook_json,
    raw_reply,
    reference_cases,
)

from dsagent_cbr.cli import main
from dsagent_cbr.ingest.crawl import run_spider

pytestmark = pytest.mark.slow

HTML = "text/html; charset=utf-8"


@pytest.fixture
def server() -> Loopback:
    with Loopback() as srv:
        yield srv


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "home"
    for key, value in {"CBR_HOME": str(home), "CBR_CRAWL_DELAY": "0", "CBR_STORE": "faiss",
                       "CBR_BANK_DIR": str(home / "bank"), "CBR_MODEL": "none",
                       "CBR_CASEBANK_DIR": str(home / "empty-casebank")}.items():
        monkeypatch.setenv(key, value)
    return home


def test_pages_good_and_bad(server: Loopback, home: Path) -> None:
    writeups, notebooks = reference_cases("feedback-prize-2021")
    blog = markdown_to_html(writeups["2"], "Feedback Prize 2nd place")
    readme = writeups["1"]
    nb_name, nb_text = sorted(notebooks.items())[0]
    server.reply("/blog/2nd-place.html", raw_reply(blog.encode(), HTML))
    server.reply("/repo/README.md", raw_reply(readme.encode(), "text/plain; charset=utf-8"))
    server.reply("/nb/solution.ipynb", raw_reply(notebook_json(nb_text, nb_name).encode(), "application/json"))
    server.reply("/latin1.html", raw_reply("<p>Caf\u00e9 features: r\u00e9sum\u00e9 of the approach</p>".encode(
        "latin-1"), "text/html; charset=ISO-8859-1"))
    server.reply("/mojibake.html", raw_reply("<p>Caf\u00e9 \u2013 no charset</p>".encode("cp1252"), "text/html"))
    server.reply("/huge.html", raw_reply(b"<p>" + b"x" * (20 * 1024 * 1024) + b"</p>", HTML))
    server.reply("/private/secret.html", raw_reply(b"<p>secret</p>", HTML))
    urls = [server.url + p for p in ("/blog/2nd-place.html", "/repo/README.md", "/nb/solution.ipynb",
                                     "/latin1.html", "/mojibake.html", "/huge.html", "/private/secret.html",
                                     "/gone.html")]
    result = run_spider("pages", {"urls": ",".join(urls), "competition": "feedback-prize-2021"})
    docs = {d.url.removeprefix(server.url): d for d in result.docs}
    errors = {e.url.removeprefix(server.url): e.reason for e in result.errors}

    assert set(docs) == {"/blog/2nd-place.html", "/repo/README.md", "/nb/solution.ipynb", "/latin1.html"}
    assert docs["/blog/2nd-place.html"].format == "html" and docs["/blog/2nd-place.html"].kind == "writeup"
    assert docs["/blog/2nd-place.html"].title == "Feedback Prize 2nd place"
    assert docs["/repo/README.md"].format == "markdown" and docs["/repo/README.md"].content == readme
    assert docs["/nb/solution.ipynb"].kind == "notebook" and docs["/nb/solution.ipynb"].format == "ipynb"
    assert "Café features: résumé" in docs["/latin1.html"].content
    assert all(d.competition == "feedback-prize-2021" for d in docs.values())

    assert "is not UTF-8" in errors["/mojibake.html"] and "declares no charset" in errors["/mojibake.html"]
    assert "larger than the download size limit (10 MiB)" in errors["/huge.html"]
    assert "robots.txt" in errors["/private/secret.html"]
    assert "HTTP 404" in errors["/gone.html"]
    assert server.hits["/private/secret.html"] == 0


def test_cbr_ingest_url_into_the_bank(server: Loopback, home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    writeups, _ = reference_cases("feedback-prize-2021")
    server.reply("/blog/post.html", raw_reply(markdown_to_html(writeups["2"], "2nd place").encode(), HTML))
    server.reply("/bad.html", raw_reply("<p>d\u00e9j\u00e0 vu</p>".encode("latin-1"), "text/html"))
    code = main(["ingest", server.url + "/blog/post.html", server.url + "/bad.html", "--competition",
                 "feedback-prize-2021", "--json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    summary = json.loads(out)
    assert (summary["added"], summary["failed"]) == (1, 1)
    assert "not UTF-8" in next(o["reason"] for o in summary["outcomes"] if o["status"] == "failed")
    [case] = stored_insights(open_store(home))
    assert case.source_url == server.url + "/blog/post.html" and case.competition == "feedback-prize-2021"
    assert case.source_kind == "writeup" and "weighted box fusion" in case.text and "SCRIPT-NOISE" not in case.text


def test_cbr_ingest_only_bad_pages_leaves_bank_unchanged(server: Loopback, home: Path,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    server.reply("/huge.html", raw_reply(b"<p>" + b"y" * (20 * 1024 * 1024) + b"</p>", HTML))
    code = main(["ingest", server.url + "/huge.html"])
    out, err = capsys.readouterr()
    assert code == 2
    assert "Nothing to ingest; the bank is unchanged." in err and "larger than the download size limit" in err
    assert stored_insights(open_store(home)) == []
