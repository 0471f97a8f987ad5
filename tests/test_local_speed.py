"""The local model's speed note (llm/local_speed.py): what a measured speed says about a budget, and no note
from a server that gives no timings. The real server's note: tests/test_develop.py's local model test."""

from __future__ import annotations

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
