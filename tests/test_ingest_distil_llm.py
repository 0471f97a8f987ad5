"""`cbr ingest-kaggle --model M` through the real LLM layer (openai SDK, ledger) against a scripted
OpenAI-compatible server on 127.0.0.1: notebooks are distilled with the six questions, write-ups are
not, and a second run is answered from the distillation cache without asking the model again."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from support.ingest_store import open_store, stored_insights
from support.kaggle_loopback import Loopback, Reply, install_competition, json_reply

from dsagent_cbr.cli import main

SLUG = "playground-series-s3e1"

pytestmark = pytest.mark.slow


def scripted_answer(prompt: str) -> str:
    title = re.search(r"^# (.+)$", prompt, re.M)
    return (f"(1) Overall design: {title.group(1) if title else '?'} trains gradient-boosted trees.\n"
            "(2) Architecture: LightGBM.\n(3) Hyper-parameters: num_leaves=63.\n(4) Objective: RMSE.\n"
            "(5) Advanced techniques: 10-fold CV blending.\n(6) Tricks: rotated coordinates.")


def chat_completion(m: re.Match[str], q: dict[str, str]) -> Reply:
    request = json.loads(q["_body"])
    prompt = request["messages"][-1]["content"]
    return json_reply({"id": "cmpl-1", "object": "chat.completion", "created": 0, "model": request["model"],
                       "choices": [{"index": 0, "finish_reason": "stop",
                                    "message": {"role": "assistant", "content": scripted_answer(prompt)}}],
                       "usage": {"prompt_tokens": len(prompt) // 4, "completion_tokens": 60,
                                 "total_tokens": len(prompt) // 4 + 60}})


def test_notebooks_distilled_by_the_model_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    home = tmp_path / "home"
    with Loopback() as kaggle, Loopback() as llm:
        fixture = install_competition(kaggle, SLUG)
        llm.route(r"/v1/chat/completions", chat_completion)
        for key, value in {"CBR_HOME": str(home), "CBR_KAGGLE_API": kaggle.api, "KAGGLE_USERNAME": kaggle.username,
                           "KAGGLE_KEY": kaggle.key, "CBR_CRAWL_DELAY": "0", "CBR_STORE": "faiss",
                           "CBR_BANK_DIR": str(home / "bank"), "CBR_CASEBANK_DIR": str(home / "empty"),
                           "CBR_BASE_URL": llm.url + "/v1", "CBR_USE_CACHE": "false"}.items():
            monkeypatch.setenv(key, value)
        code = main(["ingest-kaggle", SLUG, "--top", "2", "--model", "scripted-model", "--json"])
        out, err = capsys.readouterr()
        assert code == 0, err
        assert json.loads(out)["added"] == 4

        prompts = [json.loads(body)["messages"][-1]["content"] for path, body in llm.posts]
        assert len(prompts) == 2  # the two notebooks; write-ups keep their own words
        for prompt in prompts:
            assert prompt.startswith("Below is a notebook from a top solution")
            assert "5. Advanced techniques" in prompt and "```python\nimport pandas as pd" in prompt
            assert "OUTPUT-NOISE" not in prompt

        cases = stored_insights(open_store(home))
        notebooks = {c.extra["ref"]: c for c in cases if c.source_kind == "notebook"}
        assert set(notebooks) == set(fixture.refs[:2])
        for ref, case in notebooks.items():
            assert case.text == scripted_answer(f"# {ref.split('/')[1]}")
            assert case.extra["distilled_by"] == "scripted-model" and case.extra["rank"] in (1, 2)
        writeups = [c for c in cases if c.source_kind == "writeup"]
        assert len(writeups) == 2 and all(c.extra["distilled_by"] == "none" for c in writeups)
        ledgers = list((home / "ingest-runs").glob("*/ledger.jsonl"))
        assert ledgers and sum(1 for _ in ledgers[0].open()) >= 2

        code = main(["ingest-kaggle", SLUG, "--top", "2", "--model", "scripted-model", "--json"])
        out, err = capsys.readouterr()
        assert code == 0, err
        again = json.loads(out)
        assert (again["added"], again["duplicates"]) == (0, 4)
        assert len(llm.posts) == 2  # the distillations came from the on-disk cache
