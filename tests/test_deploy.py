"""cbr deploy on real deployment tasks: the paper's one-pass measure kept apart from final success."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import replace

import pytest
from conftest import prepared
from support.local_model import LOCAL_BOUNDS
from support.scripted_llm import DROP, ScriptedLLM

from dsagent_cbr.agent.deploy import DeployConfig, deploy
from dsagent_cbr.bank import open_bank
from dsagent_cbr.config import load_settings
from dsagent_cbr.llm import open_llm
from dsagent_cbr.sandbox.bubblewrap import SandboxPolicy


@pytest.fixture
def settings(tmp_path):
    return load_settings(home=tmp_path / "home", store="faiss", model="scripted", base_url="http://127.0.0.1:9/v1",
                         api_key="test")


@pytest.mark.slow
def test_one_pass_and_fallback_are_kept_apart(settings, tmp_path):
    task = prepared("smoke-ban")
    prepared("mlc-churn")
    bank = open_bank(settings)
    broken = "```python\nimport pandas as pd\nprint(undefined_name)\n```"
    with ScriptedLLM([broken, broken, broken]) as server:
        with open_llm(replace(settings, base_url=server.url), run_dir=tmp_path) as client:
            res = deploy(task, DeployConfig(policy=SandboxPolicy(timeout=300)), tmp_path / "a", bank, client, settings.tasks_dir)
            facts = res.deploy
            assert facts.retrieved[0]["task"] == "mlc-churn" and facts.retrieved[0]["similarity"] > 0
            assert facts.one_pass is False and "NameError" in facts.llm_error
            assert res.solved and facts.solved_by == "adapter" and res.best_test > 0.6
            (tmp_path / "b").mkdir()
            off = deploy(task, DeployConfig(fallback=False), tmp_path / "b", bank, client, settings.tasks_dir)
            assert off.deploy.one_pass is False and not off.solved and off.best_test is None
        prompt = server.requests[0]["messages"][0]["content"]
    assert "Example task 1" in prompt and task.description[:200] in prompt and "mlc-churn" not in task.description
    saved = json.loads((tmp_path / "a" / "summary.json").read_text())
    assert saved["deploy"]["one_pass"] is False and saved["solved"] is True and saved["tokens"] > 0
    assert (tmp_path / "a" / "best_solution.py").is_file() and (tmp_path / "a" / "reply.md").read_text() == broken
    assert (tmp_path / "a" / "submission.csv").is_file() and (tmp_path / "a" / "prompt.md").is_file()


@pytest.mark.slow
def test_zero_shot_sends_no_example(settings, tmp_path):
    task = prepared("titanic-survival")
    bank = open_bank(settings)
    with ScriptedLLM(["no code here"]) as server:
        with open_llm(replace(settings, base_url=server.url), run_dir=tmp_path) as client:
            res = deploy(task, DeployConfig(strategy="zero-shot", fallback=False), tmp_path / "z", bank, client,
                         settings.tasks_dir)
        assert "(no example)" in server.requests[0]["messages"][0]["content"]
    assert res.deploy.retrieved == [] and res.deploy.one_pass is False and "no Python code" in res.deploy.llm_error


@pytest.mark.slow
def test_real_local_model_deploy_ends_graded(tmp_path):
    task = prepared("titanic-survival")
    prepared("mlc-churn")
    env = {**os.environ, "CBR_HOME": str(tmp_path / "home"), **LOCAL_BOUNDS}
    proc = subprocess.run([sys.executable, "-m", "dsagent_cbr.cli", "deploy", str(task.root), "--model", "local",
                           "--store", "faiss", "--runs-dir", str(tmp_path / "runs"), "--timeout", "300", "--json"],
                          env=env, capture_output=True, text=True, timeout=1500)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout)
    facts = result["deploy"]
    assert result["solved"] and result["best_test"] is not None
    assert isinstance(facts["one_pass"], bool)  # recorded as it really was, whichever way
    assert facts["solved_by"] == ("llm" if facts["one_pass"] else "adapter")
    assert result["tokens"] > 0


@pytest.mark.slow
def test_a_script_that_runs_is_one_pass(settings, tmp_path):
    task = prepared("titanic-survival")
    bank = open_bank(settings)
    reply = f"Here is the solution.\n```python\n{task.starter.read_text()}```"
    with ScriptedLLM([reply]) as server, open_llm(replace(settings, base_url=server.url), run_dir=tmp_path) as client:
        res = deploy(task, DeployConfig(), tmp_path / "o", bank, client, settings.tasks_dir)
    # the model's script ran and was graded (one pass), but it is the starter's own guess: no solution,
    # so the adapter walks on to one that beats it
    assert res.deploy.one_pass is True and "no better than the starter's random guess" in res.deploy.llm_error
    assert res.deploy.solved_by == "adapter" and res.solved and res.best_test is not None
    assert res.best_selection > res.baselines["starter"]


@pytest.mark.slow
def test_repeats_are_independent_samples(settings, tmp_path):
    """Two trials of the same deploy at temperature 0.7, cache on: two requests, two seeds."""
    task = prepared("titanic-survival")
    bank = open_bank(settings)
    reply = f"```python\n{task.starter.read_text()}```"
    with ScriptedLLM([reply, reply]) as server:
        for seed in (1, 2):
            with open_llm(replace(settings, base_url=server.url), run_dir=tmp_path / f"r{seed}", seed=seed) as client:
                deploy(task, DeployConfig(seed=seed, fallback=False), tmp_path / f"r{seed}", bank, client,
                       settings.tasks_dir)
        assert len(server.requests) == 2
        assert server.requests[0]["seed"] != server.requests[1]["seed"]
        assert server.requests[0]["temperature"] == 0.7


@pytest.mark.integration
def test_a_server_that_does_not_answer_stops_the_command_before_any_work(tmp_path):
    task = prepared("titanic-survival")
    env = {**os.environ, "CBR_HOME": str(tmp_path / "home"), "CBR_BASE_URL": "http://127.0.0.1:9/v1",
           "CBR_API_KEY": "test"}
    for command in ("deploy", "develop"):
        argv = [command, str(task.root), "--model", "scripted", "--runs-dir", str(tmp_path / "runs")]
        proc = subprocess.run([sys.executable, "-m", "dsagent_cbr.cli", *argv], env=env, capture_output=True, text=True,
                              timeout=60)
        assert proc.returncode == 2 and "No model server answers at http://127.0.0.1:9/v1" in proc.stderr, proc.stderr
        assert not (tmp_path / "runs").exists()  # no run folder for a run that could not start


@pytest.mark.slow
def test_a_dead_server_is_not_the_models_failure(settings, tmp_path):
    """The server dies once the run has begun (each call's connection is closed unanswered): the run says
    so, exits 3 (ours), and counts no one-pass; a spent budget exits 4, also not the model's."""
    task = prepared("titanic-survival")
    with ScriptedLLM(lambda messages: DROP) as server:
        env = {**os.environ, "CBR_HOME": str(tmp_path / "home"), "CBR_BASE_URL": server.url,
               "CBR_API_KEY": "test", "CBR_MAX_RETRIES": "0"}
        dead_server_deploys(task, env, tmp_path)


def dead_server_deploys(task, env, tmp_path):
    proc = subprocess.run([sys.executable, "-m", "dsagent_cbr.cli", "deploy", str(task.root), "--model", "scripted",
                           "--store", "faiss", "--runs-dir", str(tmp_path / "runs")], env=env, capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 3 and "Cannot reach the model server" in proc.stderr and "Traceback" not in proc.stderr
    saved = json.loads(next((tmp_path / "runs").glob("titanic-survival/*/summary.json")).read_text())
    assert saved["outcome"] == "infrastructure" and saved["deploy"]["one_pass"] is None and not saved["solved"]
    budget = subprocess.run([sys.executable, "-m", "dsagent_cbr.cli", "deploy", str(task.root), "--model", "scripted",
                             "--store", "faiss", "--runs-dir", str(tmp_path / "runs"), "--max-cost", "0"],
                            env=env, capture_output=True, text=True, timeout=600)
    assert budget.returncode == 4 and "budget" in budget.stdout and "Traceback" not in budget.stderr
