"""The client against real HTTP servers on loopback: retries, clear errors, budget, cache, ledger."""

from __future__ import annotations

import json

import pytest
from support.scripted_llm import ScriptedLLM

from dsagent_cbr.config import load_settings
from dsagent_cbr.errors import CbrError
from dsagent_cbr.llm import open_llm
from dsagent_cbr.llm.cache import ResponseCache
from dsagent_cbr.llm.client import MAX_REPLY_CHARS, LLMClient
from dsagent_cbr.llm.ledger import BudgetExceeded, Ledger
from dsagent_cbr.llm.local_server import free_port
from dsagent_cbr.llm.models import ModelSpec, resolve_model, settings_model

HELLO = [{"role": "user", "content": "say hello"}]
RATE_LIMITED = (429, {"error": {"message": "slow down", "type": "rate_limit"}})


def client_for(url: str, tmp_path, **kw) -> LLMClient:
    spec = ModelSpec("test", "test-model", "compatible", url, "key", input_price=1000.0, output_price=2000.0)
    return LLMClient(spec, ledger=Ledger(tmp_path / "ledger.jsonl", kw.pop("max_cost", None),
                                         kw.pop("max_tokens", None)), backoff=0.01, **kw)


@pytest.mark.integration
def test_retries_429_then_succeeds(tmp_path):
    with ScriptedLLM([RATE_LIMITED, RATE_LIMITED, "hello there"]) as server:
        reply = client_for(server.url, tmp_path).complete("plan", HELLO)
        assert reply.text == "hello there" and len(server.requests) == 3
    records = [json.loads(line) for line in (tmp_path / "ledger.jsonl").read_text().splitlines()]
    assert len(records) == 1 and records[0]["completion_tokens"] == 2 and records[0]["role"] == "plan"
    assert records[0]["cost"] == pytest.approx((2 * 1000 + 2 * 2000) / 1e6)


@pytest.mark.integration
def test_a_reply_past_the_cap_is_cut_and_the_ledger_says_so(tmp_path):
    """A 150 MB reply once took 700 MB of memory and 430 MB of run files: cbr keeps MAX_REPLY_CHARS of
    a reply, and its ledger line says how much it left out; a reply within the cap is kept whole."""
    with ScriptedLLM(["x" * (MAX_REPLY_CHARS + 1234), "y" * MAX_REPLY_CHARS]) as server:
        client = client_for(server.url, tmp_path)
        long, whole = client.complete("plan", HELLO), client.complete("plan", HELLO)
    assert (len(long.text), long.cut) == (MAX_REPLY_CHARS, 1234)
    assert (len(whole.text), whole.cut) == (MAX_REPLY_CHARS, 0)
    records = [json.loads(line) for line in (tmp_path / "ledger.jsonl").read_text().splitlines()]
    assert [r["reply_cut"] for r in records] == [1234, 0]
    assert Ledger(tmp_path / "ledger.jsonl").records[0].reply_cut == 1234  # read back on a resume


@pytest.mark.integration
def test_retries_are_bounded(tmp_path):
    with ScriptedLLM([RATE_LIMITED] * 10) as server:
        with pytest.raises(CbrError, match="kept failing after 3 tries"):
            client_for(server.url, tmp_path, max_retries=2).complete("plan", HELLO)
        assert len(server.requests) == 3


@pytest.mark.integration
def test_a_call_past_the_search_s_deadline_is_out_of_time_not_a_failing_server(tmp_path):
    import time

    from dsagent_cbr.errors import OutOfTime

    def slow(messages):
        time.sleep(1.5)
        return "too late"

    with ScriptedLLM(slow) as server:
        client = client_for(server.url, tmp_path)
        with pytest.raises(OutOfTime, match="budget ended"):
            client.complete("plan", HELLO, timeout=0.3)
        assert len(server.requests) == 1  # not retried: the budget, not the server, ended it
        assert client.complete("plan", HELLO, timeout=30).text == "too late"  # a deadline that leaves room


@pytest.mark.integration
def test_bad_key_and_unknown_model_are_one_sentence(tmp_path):
    with ScriptedLLM([(401, {"error": {"message": "bad key"}}), (404, {"error": {"message": "no model"}})]) as server:
        client = client_for(server.url, tmp_path)
        with pytest.raises(CbrError, match="rejected the API key"):
            client.complete("plan", HELLO)
        with pytest.raises(CbrError, match="does not know the model"):
            client.complete("plan", HELLO)


def test_unreachable_server(tmp_path):
    client = client_for(f"http://127.0.0.1:{free_port()}/v1", tmp_path, max_retries=1)
    with pytest.raises(CbrError, match="Cannot reach the model server"):
        client.complete("plan", HELLO)


@pytest.mark.integration
def test_budget_stops_cleanly(tmp_path):
    with ScriptedLLM(["one two three"] * 5) as server:
        client = client_for(server.url, tmp_path, max_tokens=8)
        client.complete("plan", HELLO)
        client.complete("plan", [{"role": "user", "content": "again"}])
        with pytest.raises(BudgetExceeded):
            client.complete("plan", [{"role": "user", "content": "third"}])
        assert len(server.requests) == 2
    assert len((tmp_path / "ledger.jsonl").read_text().splitlines()) == 2


@pytest.mark.integration
def test_a_resumed_ledger_skips_a_line_torn_by_a_kill(tmp_path):
    """A call whose record was cut mid-write never returned: the resumed run does not count it, and the
    next record starts on a line of its own."""
    with ScriptedLLM(["one two three"]) as server:
        client_for(server.url, tmp_path).complete("plan", HELLO)
    path = tmp_path / "ledger.jsonl"
    path.write_bytes(path.read_bytes() + b'{"role": "plan", "mod')
    ledger = Ledger(path)
    assert len(ledger.records) == 1
    ledger.record(ledger.records[0])
    assert [json.loads(line)["role"] for line in path.read_text().splitlines()] == ["plan", "plan"]


@pytest.mark.integration
def test_cache_answers_only_a_repeat_of_the_same_trial(tmp_path):
    """The cache key holds the trial seed and each call's sampling parameters: rerunning trial 7 is
    answered from the cache, another trial or another temperature is a new sample."""
    cache = ResponseCache(tmp_path / "cache.sqlite")
    with ScriptedLLM(["first answer", "second answer", "third answer"]) as server:
        a = client_for(server.url, tmp_path, cache=cache, seed=7).complete("plan", HELLO, temperature=0.5)
        b = client_for(server.url, tmp_path, cache=cache, seed=7).complete("plan", HELLO, temperature=0.5)
        c = client_for(server.url, tmp_path, cache=cache, seed=8).complete("plan", HELLO, temperature=0.5)
        d = client_for(server.url, tmp_path, cache=cache, seed=7).complete("plan", HELLO, temperature=0.7)
        assert a.text == b.text == "first answer" and c.text == "second answer" and d.text == "third answer"
        assert len(server.requests) == 3
        assert server.requests[0]["seed"] != server.requests[1]["seed"]
    records = [json.loads(line) for line in (tmp_path / "ledger.jsonl").read_text().splitlines()]
    assert [r["cached"] for r in records] == [False, True, False, False]
    assert records[1]["prompt_tokens"] == records[1]["completion_tokens"] == 0 and records[1]["cost"] == 0


@pytest.mark.integration
def test_a_reply_that_fails_to_parse_is_never_cached(tmp_path):
    from dsagent_cbr.llm.parsing import ParseError, extract_code

    cache = ResponseCache(tmp_path / "cache.sqlite")
    with ScriptedLLM(["no code at all", "```python\nprint(1)\n```"]) as server:
        with pytest.raises(ParseError):
            client_for(server.url, tmp_path, cache=cache, seed=3).complete("program", HELLO, validate=extract_code)
        again = client_for(server.url, tmp_path, cache=cache, seed=3).complete("program", HELLO, validate=extract_code)
        assert again.parsed == "print(1)\n" and len(server.requests) == 2


def test_model_resolution_layers(monkeypatch, tmp_path):
    assert resolve_model("none").provider == "none"
    spec = resolve_model("mixtral", environ={"CBR_BASE_URL": "http://localhost:8000/v1"})
    assert spec.name == "mistralai/Mixtral-8x7B-Instruct-v0.1" and spec.base_url == "http://localhost:8000/v1"
    with pytest.raises(CbrError, match="CBR_BASE_URL"):
        resolve_model("mixtral", environ={})
    with pytest.raises(CbrError, match="OPENAI_API_KEY"):
        resolve_model("gpt-4o", environ={})
    with pytest.raises(CbrError, match="Unknown model 'nonee'"):
        resolve_model("nonee", environ={"OPENAI_API_KEY": "k"})
    assert resolve_model("nonee", environ={"CBR_BASE_URL": "http://localhost:8000/v1"}).name == "nonee"
    assert resolve_model("gpt-3.5", environ={"OPENAI_API_KEY": "k"}).name == "gpt-3.5-turbo"
    assert resolve_model("local").gguf.suffix == ".gguf"
    config = tmp_path / "cbr.toml"
    config.write_text('model = "gpt-4o"\nmax_cost = 2.5\n')
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("CBR_MODEL", "mixtral")
    settings = load_settings(max_cost=1.0)
    assert settings.model == "mixtral" and settings.max_cost == 1.0  # env beats file, flag beats file
    monkeypatch.setenv("CBR_BASE_URL", "http://localhost:11434/v1")
    monkeypatch.setenv("CBR_MODEL_NAME", "mixtral:8x7b")
    assert settings_model(load_settings()).name == "mixtral:8x7b"  # an Ollama tag, from the environment
    assert settings_model(load_settings(model_name="mixtral:q4")).name == "mixtral:q4"


@pytest.mark.slow
def test_real_local_model_completes_and_is_stopped(tmp_path):
    settings = load_settings(model="local", home=tmp_path / "home")
    with open_llm(settings, run_dir=tmp_path) as client:
        url = client.spec.base_url
        reply = client.complete("plan", [{"role": "user", "content": "Name one machine learning model."}],
                                max_tokens=40)
        assert reply.text.strip() and reply.completion_tokens > 0 and reply.prompt_tokens > 0
        again = client.complete("plan", [{"role": "user", "content": "Name another one."}], max_tokens=40,
                                temperature=0.0, seed=0)
        assert again.text.strip() and again.completion_tokens > 0
    ledger = [json.loads(line) for line in (tmp_path / "ledger.jsonl").read_text().splitlines()]
    assert len(ledger) == 2 and ledger[0]["completion_tokens"] == reply.completion_tokens
    import urllib.request

    with pytest.raises(OSError):
        urllib.request.urlopen(f"{url}/models", timeout=2)


def server_pids(port: int) -> list[int]:
    from pathlib import Path

    pids = []
    for proc in Path("/proc").iterdir():
        try:
            argv = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"dsagent_cbr.llm.local_server" in argv and str(port).encode() in argv:
            pids.append(int(proc.name))
    return pids


@pytest.mark.slow
def test_local_server_stops_when_its_parent_is_killed(tmp_path):
    import os
    import signal
    import subprocess
    import sys
    import time

    port = free_port()
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, time\n"
         "from dsagent_cbr.llm.local_server import local_server\n"
         "from dsagent_cbr.llm.models import smollm2_gguf\n"
         f"with local_server(smollm2_gguf(), port={port}):\n"
         "    print('ready', flush=True)\n"
         "    time.sleep(600)\n"], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "ready"
        assert server_pids(port), "the server should be running while its parent lives"
        os.kill(holder.pid, signal.SIGKILL)  # no finally block runs: the server must notice by itself
        holder.wait()
        deadline = time.monotonic() + 30
        while server_pids(port) and time.monotonic() < deadline:
            time.sleep(0.5)
        assert not server_pids(port)
    finally:
        for pid in server_pids(port):
            os.kill(pid, signal.SIGKILL)
