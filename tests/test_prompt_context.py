"""What the model is told, read off the requests a scripted OpenAI-compatible server received (it
stands in for a model only): the data card's exact column names and the compute budget where code is
written, the best validation score for the logger, a nudge when a reply has no code, and the agent
bank's retained solution as deployment's example."""

from __future__ import annotations

from dataclasses import replace

import pandas as pd
import pytest
from conftest import prepared
from support.scripted_llm import ByRole, ScriptedLLM
from test_develop import LINEAR, MEAN, fenced

from dsagent_cbr.agent.deploy import DeployConfig, deploy
from dsagent_cbr.agent.develop import DevelopConfig, develop_with_model
from dsagent_cbr.bank import open_bank
from dsagent_cbr.config import load_settings
from dsagent_cbr.llm import open_llm


def prompts_of(server: ScriptedLLM, replies: ByRole, role: str) -> list[str]:
    return [r["messages"][-1]["content"] if role != "program" else "\n".join(m["content"] for m in r["messages"])
            for r, who in zip(server.requests, replies.roles, strict=True) if who == role]


@pytest.mark.slow
def test_prompts_carry_the_data_the_budget_and_the_best_score(tmp_path):
    concrete, deliveries = prepared("concrete-strength"), prepared("deliveries-time")
    settings = load_settings(home=tmp_path / "home", store="faiss", model="scripted", api_key="test",
                             base_url="http://127.0.0.1:9/v1")
    bank = open_bank(settings)
    replies = ByRole(plan=["Decision: Fit a linear regression.", "Decision: Predict the mean."],
                     program=["I would fit a linear model here.", fenced(LINEAR), fenced(MEAN)],
                     log=["Experiment Summary: linear.\nExperiment Result: improved.",
                          "Experiment Summary: mean.\nExperiment Result: worse."],
                     adapt=[fenced(deliveries.starter.read_text())])
    with ScriptedLLM(replies) as server:
        url = replace(settings, base_url=server.url)
        with open_llm(url, run_dir=tmp_path / "dev", seed=1) as client:
            summary = develop_with_model(concrete, DevelopConfig(iterations=2, n_debug=0, rerank=False, cbr=False),
                                         tmp_path / "dev", bank, client)
        with open_llm(url, run_dir=tmp_path / "dep", seed=2) as client:
            (tmp_path / "dep").mkdir()
            result = deploy(deliveries, DeployConfig(seed=2), tmp_path / "dep", bank, client, settings.tasks_dir)
        plans, programs = prompts_of(server, replies, "plan"), prompts_of(server, replies, "program")
        logs, adapts = prompts_of(server, replies, "log"), prompts_of(server, replies, "adapt")

    assert replies.roles == ["plan", "program", "program", "log", "plan", "program", "log", "adapt"]
    assert "I would fit a linear model here." in programs[1] and "no Python code" in programs[1]  # asked again
    for prompt, task in [*((p, concrete) for p in plans + programs), (adapts[0], deliveries)]:
        for column in pd.read_csv(task.public_dir / "train.csv", nrows=1).columns:
            assert f"`{column}`" in prompt, (column, prompt[:300])
    for prompt in programs + adapts:
        assert "at most 600 s of wall time" in prompt and "no GPU" in prompt and "scikit-learn" in prompt
        assert 'The script\'s `if os.environ.get("CBR_REFIT")` block stays' in prompt  # the starters have one
    assert "rmse (lower is better)" in plans[0] and "medae (lower is better)" in adapts[0]
    first = summary.best_selection
    assert summary.best_iteration == 1 and f"{first:.6g} (selection score, graded by cbr on held-back rows; " \
        "iteration 1)" in logs[1]
    # Deployment's first candidate is the solution development retained, not a hand-written reference.
    assert result.deploy.retrieved[0]["source"] == "retained" and result.deploy.retrieved[0]["task"] == "concrete-strength"
    assert "LinearRegression().fit(X_train, y_train)" in adapts[0]


def test_the_prompt_names_each_installed_library_whatever_distribution_installed_it():
    from dsagent_cbr.agent.context import library_versions

    installed = library_versions()
    assert "xgboost " in installed and "scikit-learn " in installed  # XGBoost's CPU build is xgboost-cpu
