"""The local model's speed note (llm/local_speed.py): what a measured speed says about a budget, and no note
from a server that gives no timings. The real server's note: tests/test_develop.py's local model test."""

from __future__ import annotations

import time

import pytest
from support.scripted_llm import ScriptedLLM

from dsagent_cbr.llm.local_speed import NODE_READS, NODE_WRITES, Speed, measure, note


def test_the_note_says_how_long_a_model_node_takes_and_how_many_fit():
    speed = Speed(reads=100.0, writes=25.0)  # 80 s reading and 80 s writing a node
    assert speed.node_seconds() == NODE_READS / 100 + NODE_WRITES / 25 == 160.0
    assert note(speed, None) == ("local model: reads 100 and writes 25 tokens a second here; a model node takes "
                                 "about 2m 40s")
    assert note(speed, 60.0).endswith("; the 1m 00s left of the budget has room for none")
    assert note(speed, 1800.0).endswith("; the 30m 00s left of the budget has room for 11")


@pytest.mark.integration
def test_a_server_without_timings_gives_no_note():
    with ScriptedLLM(["1 2 3"]) as server:  # an OpenAI-compatible reply without llama.cpp's timings
        assert measure(server.url) is None
    assert measure("http://127.0.0.1:9/v1", timeout=2) is None  # nothing listening: no note, no error


def test_before_an_analysis_the_note_says_when_the_budget_cannot_hold_it(monkeypatch):
    """The local model gave 0.6 tokens a second, and the analysis ended with "0 calls" and no word
    why: the speed is now said first, with what it means for the budget."""
    from dsagent_cbr.llm import local_speed

    monkeypatch.setattr(local_speed, "measure", lambda url, timeout: Speed(reads=20.0, writes=0.6))
    slow = local_speed.analysis_note("http://x", left=120.0, probe_limit=20.0)
    assert slow.startswith("local model: reads 20 and writes 0.6 tokens a second here; an "
                           "analysis of one step takes about 20m 58s, more than the 2m 00s left")
    assert slow.endswith("(--budget 42m would hold it)")
    fast_speed = Speed(reads=500.0, writes=40.0)
    monkeypatch.setattr(local_speed, "measure", lambda url, timeout: fast_speed)
    fast = local_speed.analysis_note("http://x", left=300.0, probe_limit=20.0)
    assert fast.endswith("an analysis of one step takes about 30s")


def test_a_probe_with_no_reply_in_its_time_says_so(monkeypatch):
    from dsagent_cbr.llm import local_speed

    def silent(url, timeout):
        time.sleep(timeout)
        return None

    monkeypatch.setattr(local_speed, "measure", silent)
    said = local_speed.analysis_note("http://x", left=60.0, probe_limit=1.5)
    assert said.startswith("local model: a 48-token reply took over 2 s here")
    assert "will likely not" in said
    monkeypatch.setattr(local_speed, "measure", lambda url, timeout: None)  # no timings, at once
    assert local_speed.analysis_note("http://x", left=60.0, probe_limit=1.5) is None


def test_a_local_model_too_slow_for_one_node_in_the_budget_is_left_out_of_the_search(monkeypatch):
    from dsagent_cbr.llm import local_speed

    monkeypatch.setattr(local_speed, "measure", lambda url: Speed(reads=20.0, writes=0.6))  # SmolLM2 under load
    said, worth = local_speed.search_note("http://x", left=120.0)
    assert not worth and said.endswith("has room for none: the search goes on without it")
    monkeypatch.setattr(local_speed, "measure", lambda url: Speed(reads=500.0, writes=40.0))  # 66 s a node
    said, worth = local_speed.search_note("http://x", left=120.0)
    assert worth and said.endswith("left of the budget has room for 1")
    assert local_speed.search_note("http://x", left=None)[1]  # no budget: no cut to fear
    monkeypatch.setattr(local_speed, "measure", lambda url: None)  # a server that gives no timings
    assert local_speed.search_note("http://x", left=5.0) == (None, True)
