"""Cleaning, decoding and Kaggle response parsing, on real write-up and notebook text."""

from __future__ import annotations

import json

import pytest
from support.kaggle_loopback import REFERENCE, markdown_to_html, notebook_json, reference_cases

from dsagent_cbr.ingest import kaggle_api as api
from dsagent_cbr.ingest.clean import (
    CleanError,
    clean_writeup,
    html_to_text,
    light_clean_markdown,
    normalise_whitespace,
    notebook_to_text,
)
from dsagent_cbr.ingest.encoding import DecodeError, decode_body
from dsagent_cbr.ingest.sources import guess_format

PAGE = """<html><head><title>Post</title><style>body{color:red}</style>
<script>window.track('SCRIPT-NOISE')</script></head><body>
<header><a href="/">SITE-BANNER</a></header>
<nav><ul><li>NAV-ITEM</li></ul></nav>
<div role="navigation">ROLE-NAV</div>
<article>
  <header><h1>3rd place   solution</h1></header>
  <p>We used <b>LightGBM</b> with  <code>num_leaves=63</code>.<br>Second line.</p>
  <h2>Features</h2>
  <ul><li>lat/lon rotations<ul><li>15 and 30 degrees</li></ul></li><li>distance to <a href="x">coast</a></li></ul>
  <ol><li>train</li><li>blend</li></ol>
  <table><tr><th>model</th><th>CV</th></tr><tr><td>lgbm</td><td>0.561</td></tr></table>
  <pre><code class="language-python">model = LGBMRegressor(
    num_leaves=63)</code></pre>
</article>
<footer>FOOTER-NOISE</footer>
</body></html>"""


def test_html_keeps_structure_and_drops_furniture() -> None:
    text = html_to_text(PAGE)
    for noise in ("SCRIPT-NOISE", "color:red", "SITE-BANNER", "NAV-ITEM", "ROLE-NAV", "FOOTER-NOISE"):
        assert noise not in text
    assert "# 3rd place solution" in text
    assert "## Features" in text
    assert "We used LightGBM with `num_leaves=63`.\nSecond line." in text
    assert "- lat/lon rotations\n  - 15 and 30 degrees\n- distance to coast" in text
    assert "1. train\n2. blend" in text
    assert "| model | CV |\n| --- | --- |\n| lgbm | 0.561 |" in text
    assert "```python\nmodel = LGBMRegressor(\n    num_leaves=63)\n```" in text


def test_real_writeup_survives_html_round_trip() -> None:
    writeups, _ = reference_cases("feedback-prize-2021")
    text = writeups["2"]
    cleaned = clean_writeup(markdown_to_html(text, "2nd place"))
    assert "SCRIPT-NOISE" not in cleaned and "NAV-NOISE" not in cleaned and "FOOTER-NOISE" not in cleaned
    assert "# Second Place Solution" in cleaned
    assert "weighted box fusion" in cleaned
    # every sentence-ish line of the original is still there, whitespace aside
    for line in text.splitlines():
        words = " ".join(line.split())
        if len(words) > 40 and "](" not in line and "[" not in line:
            assert words in " ".join(cleaned.split()), words


def test_markdown_light_cleaning_keeps_tables_and_drops_link_targets() -> None:
    writeups, _ = reference_cases("feedback-prize-2021")
    cleaned = light_clean_markdown(writeups["2"])
    assert "| microsoft/deberta-large | 706 | 710 | 721 |" in cleaned
    assert "[convert slow tokenizer to fast][9]" in cleaned  # reference-style link text stays
    md = "See [the notebook](https://kaggle.com/x) ![plot](a.png)\n\n[9]: https://example.org/t\n\n\n\nEnd"
    assert light_clean_markdown(md) == "See the notebook [image: plot]\n\nEnd\n"


def test_notebook_reduced_to_code_and_markdown_cells() -> None:
    _, notebooks = reference_cases("playground-series-s3e1")
    name, text = sorted(notebooks.items())[0]
    cleaned = notebook_to_text(notebook_json(text, name))
    assert "OUTPUT-NOISE" not in cleaned and "execution_count" not in cleaned
    assert f"# {name}" in cleaned
    assert "```python\nimport pandas as pd\ntrain = pd.read_csv('train.csv')\n```" in cleaned
    first_para = text.strip().split("\n\n")[0].strip()
    assert " ".join(first_para.split())[:200] in " ".join(cleaned.split())


@pytest.mark.parametrize("raw, message", [
    ('{"cells": [ {"cell_type": "code", "source": "x = 1"', "not valid notebook JSON"),
    ("<html>not a notebook</html>", "not valid notebook JSON"),
    ('{"metadata": {}}', "no 'cells' list"),
    ('{"cells": [{"cell_type": "code", "source": "  "}]}', "no code or markdown cells"),
])
def test_bad_notebooks_raise_clear_errors(raw: str, message: str) -> None:
    with pytest.raises(CleanError, match=message):
        notebook_to_text(raw)


def test_normalise_whitespace_keeps_code_indentation() -> None:
    text = "a\u00a0\u00a0b \t\r\n\r\n\r\n\r\n```\ndef f():\n        return  1\n```\n   \u200bc   d  "
    assert normalise_whitespace(text) == "a b\n\n```\ndef f():\n        return  1\n```\n   c d\n"


def test_decode_body_is_strict() -> None:
    assert decode_body("café".encode()) == "café"
    assert decode_body("café".encode("latin-1"), "text/html; charset=ISO-8859-1") == "café"
    assert decode_body(b'<meta charset="windows-1252"><p>caf\xe9</p>') == '<meta charset="windows-1252"><p>café</p>'
    with pytest.raises(DecodeError, match="not UTF-8 .* declares no charset"):
        decode_body("café".encode("latin-1"), "text/html")
    with pytest.raises(DecodeError, match="says it is utf-8"):
        decode_body(b"caf\xe9", "text/html; charset=utf-8")
    with pytest.raises(DecodeError, match="unknown charset"):
        decode_body(b"x", "text/html; charset=klingon")


def test_guess_format() -> None:
    assert guess_format("https://x.org/README.md", "text/plain", "# T") == "markdown"
    assert guess_format("https://x.org/nb", "application/json", '{"cells": []}') == "ipynb"
    assert guess_format("https://x.org/post", "text/html; charset=utf-8", "<p>a</p>") == "html"
    assert guess_format("https://raw.githubusercontent.com/a/b/main/run.py?x=1", "text/plain", "x=1") == "script"


# ---------------------------------------------------------------- Kaggle API shapes


def test_kaggle_urls_follow_the_official_client() -> None:
    base = "https://www.kaggle.com/api/v1"
    assert api.kernels_list_url(base, "titanic", 5) == \
        f"{base}/kernels/list?competition=titanic&sortBy=voteCount&pageSize=5&page=1"
    assert api.kernel_pull_url(base, "alice/my-nb") == f"{base}/kernels/pull?userName=alice&kernelSlug=my-nb"
    assert api.competitions_list_url(base, "titanic") == f"{base}/competitions/list?search=titanic&page=1"
    assert api.topic_get_url(base, 42) == f"{base}/discussions/42/get"


def test_find_competition_accepts_both_envelopes() -> None:
    comps = [{"ref": "https://www.kaggle.com/competitions/titanic-2"}, {"ref": "titanic", "title": "Titanic"}]
    assert api.find_competition(comps, "titanic")["title"] == "Titanic"
    assert api.find_competition({"competitions": comps}, "titanic")["title"] == "Titanic"
    assert api.find_competition(comps, "house-prices") is None
    with pytest.raises(api.ApiFormatError, match="not a list"):
        api.find_competition({"message": "oops"}, "titanic")


def test_top_kernels_rank_by_votes() -> None:
    kernels = [{"ref": "a/x", "totalVotes": 3}, {"ref": "b/y", "totalVotes": 30}, {"ref": "bad"},
               {"ref": "c/z", "totalVotes": 30}]
    assert [k["ref"] for k in api.top_kernels(kernels, 2)] == ["b/y", "c/z"]


def test_writeup_topics_keep_this_competitions_solutions() -> None:
    topics = {"topics": [
        {"id": 1, "title": "Question about the data", "url": "/competitions/s/discussion/1", "votes": 50},
        {"id": 2, "title": "12th place solution", "url": "/competitions/s/discussion/2", "votes": 9},
        {"id": 3, "title": "1st Place Solution", "url": "/competitions/s/discussion/3", "votes": 1},
        {"id": 4, "title": "2nd place solution", "url": "/competitions/other/discussion/4", "votes": 99},
        {"id": 5, "title": "Our approach (LB 0.9)", "url": "https://www.kaggle.com/competitions/s/discussion/5"},
    ]}
    assert [t["id"] for t in api.writeup_topics(topics, "s", 10)] == [3, 2, 5]
    assert api.writeup_topics({"topics": [], "totalCount": 0}, "s", 10) == []


def test_status_reasons_are_actionable() -> None:
    assert "kaggle.json" in api.status_reason(401, "competition x")
    assert "accept the competition's rules" in api.status_reason(403, "competition x")
    assert "after 3 retries" in api.status_reason(429, "competition x", 3)
    assert "HTTP 503" in api.status_reason(503, "competition x", 3)


def test_credentials_from_env_then_file(tmp_path) -> None:  # type: ignore[no-untyped-def]
    assert api.load_credentials({"KAGGLE_USERNAME": "u", "KAGGLE_KEY": "k"}) == ("u", "k")
    (tmp_path / "kaggle.json").write_text(json.dumps({"username": "fu", "key": "fk"}))
    assert api.load_credentials({"KAGGLE_CONFIG_DIR": str(tmp_path)}) == ("fu", "fk")
    from dsagent_cbr.errors import CbrError

    with pytest.raises(CbrError, match="No Kaggle credentials"):
        api.load_credentials({}, home=tmp_path / "nobody")
    (tmp_path / "kaggle.json").write_text("{not json")
    with pytest.raises(CbrError, match="is not a kaggle.json"):
        api.load_credentials({"KAGGLE_CONFIG_DIR": str(tmp_path)})


def test_reference_corpus_is_there() -> None:
    assert REFERENCE.is_dir(), f"the reference corpus is expected at {REFERENCE}"
