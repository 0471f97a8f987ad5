"""The LLM roles of the agent, each a small function: build the prompt, call the model, parse.

Prompts live in dsagent_cbr/llm/prompts/<role>.md; parsing is in dsagent_cbr.llm.parsing. A reply
that cannot be parsed raises ParseError, which the develop loop journals before going on."""

from __future__ import annotations

from typing import Any

from dsagent_cbr.bank.cases import Case
from dsagent_cbr.llm import parsing
from dsagent_cbr.llm.prompts import render
from dsagent_cbr.tasks.model import Task

CASE_CHARS = 3000  # a case is cut to this length in prompts: every token is paid for on every call
# Replies longer than these are rambling (small models run on to the end of their context); scripts
# are bounded by the client's default.
MAX_REPLY_TOKENS = {"rerank": 64, "plan": 600, "log": 300}


def _ask(client: Any, role: str, temperature: float, **variables: Any) -> str:
    messages = [{"role": "user", "content": render(role, **variables)}]
    return client.complete(role, messages, temperature=temperature, max_tokens=MAX_REPLY_TOKENS.get(role)).text


def rerank(client: Any, task: Task, log: str, cases: list[Case], temperature: float) -> list[int]:
    """Indices into `cases`, most useful first (the model answers '[2] > [1] > [3]')."""
    listing = "\n\n".join(f"[{i}] {c.text[:CASE_CHARS]}" for i, c in enumerate(cases, 1))
    text = _ask(client, "rerank", temperature, task=task.description, log=log, cases=listing, n=len(cases))
    return [i - 1 for i in parsing.parse_ranking(text, len(cases))]


def plan(client: Any, task: Task, log: str, script: str, case: str | None, temperature: float) -> dict[str, str]:
    case_text = case[:CASE_CHARS] if case else "(no case: plan from your own knowledge)"
    text = _ask(client, "plan", temperature, task=task.description, log=log, script=script, case=case_text)
    sections = parsing.parse_plan(text)
    return {"decision": sections["decision"], "raw": text}


def program(client: Any, task: Task, script: str, instruction: str, temperature: float) -> str:
    text = _ask(client, "program", temperature, task=task.description, script=script, instruction=instruction)
    return parsing.extract_code(text)


def debug(client: Any, task: Task, original: str, instruction: str, failing: str, error: str, log: str,
          temperature: float) -> str:
    text = _ask(client, "debug", temperature, task=task.description, original=original, instruction=instruction,
                script=failing, error=error, log=log)
    return parsing.parse_debug(text)["code"]


def summarize(client: Any, task: Task, instruction: str, before: str, after: str, observation: str,
              temperature: float) -> str:
    import difflib

    diff = "\n".join(difflib.unified_diff(before.splitlines(), after.splitlines(), "before.py", "after.py",
                                          lineterm="", n=1))
    return _ask(client, "log", temperature, task=task.description, instruction=instruction, diff=diff[:6000],
                observation=observation).strip()


def adapt_messages(task: Task, examples: list[tuple[str, str, str]]) -> list[dict[str, str]]:
    """The deployment prompt: example tasks with their starters and solutions, then the new task."""
    shown = "\n\n".join(
        f"## Example task {i}\n{desc}\n\n### Its starter train.py\n```python\n{starter}\n```\n\n"
        f"### Its solution\n```python\n{solution}\n```" for i, (desc, starter, solution) in enumerate(examples, 1))
    content = render("adapt", examples=shown or "(no example)", task=task.description,
                     starter=task.starter.read_text(encoding="utf-8"))
    return [{"role": "user", "content": content}]


def extract_script(reply: str) -> str:
    return parsing.extract_code(reply)
