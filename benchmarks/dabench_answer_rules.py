"""The DABench questions of a folder re-graded under cbr analyze's answer rules, an earlier
commit's beside this tree's: what cbr accepts as an answer, when it asks again, and what its answer
prompt says.

No recorded answers of a capable model exist here, so the table is computed, not measured. Each
question is answered by cbr's own agent loop (analysis/agent.py) with a fake kernel and a scripted
model that knows the label: it writes the label's values in the format's layout (a name the label
lacks gets `0`), and, when cbr asks again for an item it calls missing, writes `None` there, as the
capable model of issue 54 did. Its reply is graded by the benchmark's rule
(analysis/dabench_grade.py, the same at both commits). The table also counts the questions whose
answer prompt contradicted the format: a prompt that asked for every item on one last line where
the format puts one a line, or said "no quotes" where the format quotes a value.

    python benchmarks/dabench_answer_rules.py      # ../shared/reference/dabench, before f04e0f0
    python benchmarks/dabench_answer_rules.py --before abc1234 --folder DIR
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from earlier_commit import REPO, checkout  # noqa: E402

ITEM = re.compile(r"@(\w+)\[")
RESULTS = REPO / "benchmarks" / "results" / "dabench-answer-rules.md"


def format_names(answer_format: str) -> tuple[list[str], bool]:
    """The format's names in order and whether it puts one a line (read here, not by cbr)."""
    starts = {}
    for match in ITEM.finditer(answer_format):
        starts.setdefault(match.group(1), match.start())
    at = list(starts.values())
    gaps = [answer_format[a:b] for a, b in zip(at, at[1:], strict=False)]
    return list(starts), bool(gaps) and all("\n" in g or "\\n" in g for g in gaps)


def oracle_reply(prompt: str, answer_format: str, label: dict[str, str]) -> str:
    """The label's values in the format's layout; asked again, `None` for the lacking items."""
    names, one_a_line = format_names(answer_format)
    lacking = re.search(r"lacks the item\(s\) ([\w, ]+?)(?:,|\.)? (?:which|Give)", prompt)
    asked_again = set(lacking.group(1).split(", ")) if lacking else set()
    values = {n: "None" if n in asked_again else label.get(n, "0") for n in names}
    items = [f"@{name}[{value}]" for name, value in values.items()]
    return "From the notebook's output.\n" + ("\n" if one_a_line else " ").join(items)


def contradicts(prompt: str, answer_format: str) -> bool:
    """The answer prompt asks for a layout or a quoting the format does not use."""
    _, one_a_line = format_names(answer_format)
    quoted = re.search(r"@\w+\[[\"']", answer_format) is not None
    prompt = " ".join(prompt.split())
    one_line = "a last line holding every item" in prompt or "on one last line" in prompt
    return (one_a_line and one_line) or (quoted and "no quotes" in prompt)


class Oracle:
    """The model: a plan, a cell, and the label's values as the answer (oracle_reply)."""

    def __init__(self, answer_format: str, label: dict[str, str]) -> None:
        self.answer_format, self.label, self.prompts = answer_format, label, []

    def complete(self, role, messages, *, validate=None, **_kw):
        prompt = messages[-1]["content"]
        self.prompts.append((role, prompt))
        text = {"analyze_plan": "1. Compute the answer.",
                "analyze_cell": "```python\nprint('computed')\n```"}.get(role)
        text = text or oracle_reply(prompt, self.answer_format, self.label)
        return type("Reply", (), {"text": text, "parsed": validate(text) if validate else None})


def grade_here(folder: Path) -> dict:
    """Every question of `folder` through the dsagent_cbr on sys.path (the commit under test)."""
    from dsagent_cbr.analysis.agent import AnalysisConfig, analyze
    from dsagent_cbr.analysis.cells import CellResult
    from dsagent_cbr.analysis.dabench import grade_response, load_labels, load_questions

    class Kernel:
        data_names, data_folder = ["table.csv"], None

        def run_cell(self, code: str, timeout: float = 60.0) -> CellResult:
            return CellResult(code, ok=True, stdout="computed\n")

        def restart(self) -> None:
            pass

    labels, rows = load_labels(folder), []
    for question in load_questions(folder):
        model = Oracle(question.format, dict(labels[question.id]))
        config = AnalysisConfig(question.question, question.format, question.constraints)
        with tempfile.TemporaryDirectory() as run_dir:
            result = analyze(config, Kernel(), model, Path(run_dir))
        graded = grade_response(question, result.text, labels[question.id])
        answers = [p for role, p in model.prompts if role == "analyze_answer"]
        rows.append({"id": question.id, "accepted": result.outcome.exit_code == 0,
                     "asked_again": len(answers) > 1, "right": list(graded.right),
                     "contradicts": contradicts(answers[0], question.format)})
    return {"rows": rows}


def graded_at(root: Path, folder: Path) -> dict:
    """grade_here in a process whose dsagent_cbr is `root`'s."""
    code = (f"import json, sys; sys.path[:0] = [{str(root)!r}, {str(Path(__file__).parent)!r}]; "
            f"import dabench_answer_rules as d; "
            f"print(json.dumps(d.grade_here(__import__('pathlib').Path({str(folder)!r}))))")
    done = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(root)}, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def row(name: str, rows: list[dict]) -> str:
    n = len(rows)
    abq = sum(all(r["right"]) for r in rows) / n
    pasq = sum(sum(r["right"]) / len(r["right"]) for r in rows) / n
    uasq = sum(sum(r["right"]) for r in rows) / sum(len(r["right"]) for r in rows)
    return (f"| {name} | {n} | {sum(r['accepted'] for r in rows)} | "
            f"{sum(r['asked_again'] for r in rows)} | {sum(r['contradicts'] for r in rows)} | "
            f"{100 * abq:.2f} | {100 * pasq:.2f} | {100 * uasq:.2f} |")


def table(before: dict, after: dict, commit: str) -> str:
    pairs = list(zip(before["rows"], after["rows"], strict=True))
    regraded = [b["id"] for b, a in pairs if b["right"] != a["right"]]
    contradicted = [b["id"] for b, a in pairs if b["contradicts"] != a["contradicts"]]
    return "\n".join([
        "| answer rules | questions | accepted (exit 0) | asked again | prompt contradicts "
        "format | ABQ % | PASQ % | UASQ % |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
        row(f"before ({commit})", before["rows"]),
        row("after (this tree)", after["rows"]),
        "",
        f"Graded otherwise: {', '.join(map(str, regraded)) or 'none'}. A prompt that contradicted "
        f"the format before and not after: {', '.join(map(str, contradicted)) or 'none'}.",
    ])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    reference = REPO.parent / "shared" / "reference" / "dabench"
    parser.add_argument("--folder", type=Path, default=reference)
    parser.add_argument("--before", default="f04e0f0")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    folder = args.folder.resolve()
    with checkout(args.before, "dabench-rules-") as (root, _work):
        before = graded_at(root, folder)
    after = graded_at(REPO, folder)
    text = table(before, after, args.before)
    print(text)
    head = (f"# DABench re-graded under cbr analyze's answer rules, {args.before} and this tree\n\n"
            f"Computed, not measured, on {len(after['rows'])} questions of {folder.name}: a "
            "scripted model that knows each label answers through cbr's agent loop at each "
            "commit; when cbr asks again for an item, it writes `None` there "
            "(benchmarks/dabench_answer_rules.py).\n\n")
    args.out.write_text(head + text + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
