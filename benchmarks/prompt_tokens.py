"""Tokens per develop iteration and per deploy call, before and after this project's prompt changes,
measured in one run.

Both versions of the package run the real `cbr develop -T 1` and `cbr deploy` on the same task
against one recording OpenAI-compatible server that gives both the same replies (a plan, a working
script, a log entry; a script for deploy). "Before" is a git worktree of an earlier commit (default
d8da0f4, the last commit before the data card, the budget line and rerank-on-summaries). Every
prompt the server received is then tokenised by the SmolLM2 tokenizer of the local model (llama.cpp's
/tokenize), so the figures are tokens a real chat model would be sent.
Usage: python benchmarks/prompt_tokens.py [--before COMMIT] [--task concrete-strength]"""

from __future__ import annotations

import argparse
import json
import os
import sys
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from earlier_commit import REPO, cbr, checkout, prepare  # noqa: E402
from support.scripted_llm import ScriptedLLM  # noqa: E402  (the test suite's recording server)

PLAN = ("Reflection: a random guess so far.\nReasoning: the case trains gradient boosting.\nThought: fit a model.\n"
        "Check: one step.\nDecision: Replace the random guess with a linear regression.")
LOG = "Experiment Summary: a linear regression.\nExperiment Result: it ran; validation improved."
OPENINGS = {"You are helping a data scientist choose": "rerank", "You are a data scientist planning": "plan",
            "Edit the script below": "program", "A script written for this task fails": "debug",
            "Summarise one experiment": "log", "Here are solved machine-learning tasks": "adapt"}


def linear_script(starter: str) -> str:
    return starter.replace(
        '    return {"low": float(y_train.min()), "high": float(y_train.max())}',
        "    from sklearn.linear_model import LinearRegression\n    return LinearRegression().fit(X_train, y_train)",
    ).replace("    rng = np.random.default_rng(0)\n    return rng.uniform(model[\"low\"], model[\"high\"], size=len(X))",
              "    return model.predict(X)")


def role_of(messages: list[dict]) -> str:
    text = messages[-1]["content"]
    return next((r for opening, r in OPENINGS.items() if text.startswith(opening)), "other")


def run_version(name: str, root: Path, task: str, server: ScriptedLLM, home: Path) -> None:
    env = {**os.environ, "CBR_HOME": str(home), "CBR_BASE_URL": server.url, "CBR_API_KEY": "test"}
    folder = root / "tasks" / task
    for args in (["develop", str(folder), "-T", "1", "--n-debug", "1"], ["deploy", str(folder)]):
        server.requests.append({"version": name, "command": args[0]})
        proc = cbr(root, *args, "--model", "scripted", "--store", "faiss", "--runs-dir", str(home / "runs"),
                   "--no-cache", env=env)
        if proc.returncode not in (0, 1):
            raise SystemExit(f"{name} {args[0]} failed:\n{proc.stderr[-3000:]}")


def tokenizer() -> tuple[object, str]:
    from dsagent_cbr.llm.local_server import local_server
    from dsagent_cbr.llm.models import smollm2_gguf

    manager = local_server(smollm2_gguf())
    return manager, manager.__enter__()


def count(base: str, text: str) -> int:
    root = base.removesuffix("/v1")
    body = json.dumps({"content": text}).encode()
    req = urllib.request.Request(f"{root}/tokenize", body, {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=120) as resp:
        return len(json.loads(resp.read())["tokens"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--before", default="d8da0f4")
    parser.add_argument("--task", default="concrete-strength")
    parser.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "prompt_tokens.json")
    args = parser.parse_args()
    with checkout(args.before, "prompt-tokens-") as (before, work):
        prepare((before, REPO), [args.task])
        starter = (REPO / "tasks" / args.task / "train.py").read_text()
        script = f"```python\n{linear_script(starter)}```"

        def reply(messages: list[dict]) -> str:
            role = role_of(messages)
            return {"rerank": "[1] > [2] > [3] > [4] > [5]", "plan": PLAN, "log": LOG}.get(role, script)

        with ScriptedLLM(reply) as server:
            run_version("before", before, args.task, server, work / "home-before")
            run_version("after", REPO, args.task, server, work / "home-after")
        manager, base = tokenizer()
        try:
            table: dict[str, dict[str, dict[str, int]]] = {}
            version = command = ""
            for request in server.requests:
                if "version" in request:
                    version, command = request["version"], request["command"]
                    continue
                text = "\n".join(m["content"] for m in request["messages"])
                role = role_of(request["messages"])
                cell = table.setdefault(f"{command}:{role}", {}).setdefault(version, {"calls": 0, "tokens": 0})
                cell["calls"] += 1
                cell["tokens"] += count(base, text)
        finally:
            manager.__exit__(None, None, None)
    print(f"prompt tokens (SmolLM2 tokenizer), task {args.task}, before = {args.before}, after = working tree\n")
    print("| call | before | after | after / before |\n|---|---:|---:|---:|")
    totals = {"before": 0, "after": 0}
    for key, cells in table.items():
        b, a = cells.get("before", {}).get("tokens", 0), cells.get("after", {}).get("tokens", 0)
        if key.startswith("develop:"):
            totals["before"] += b
            totals["after"] += a
        print(f"| {key} | {b} | {a} | {a / b:.2f} |" if b else f"| {key} | {b} | {a} | — |")
    print(f"| develop iteration (all roles) | {totals['before']} | {totals['after']} | "
          f"{totals['after'] / totals['before']:.2f} |")
    args.out.write_text(json.dumps({"command": " ".join(sys.argv), "before": args.before, "task": args.task,
                                    "tokenizer": "SmolLM2-135M-Instruct via llama.cpp /tokenize", "calls": table,
                                    "develop_iteration": totals}, indent=2))
    print(f"\nwritten {args.out}")


if __name__ == "__main__":
    main()
