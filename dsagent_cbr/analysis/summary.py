"""What an analysis run leaves besides its notebook and journal: answer.md, answer.json and
summary.json, the facts `cbr analyze --json` prints."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import Any

from dsagent_cbr.analysis.agent import Analysis, AnalysisConfig
from dsagent_cbr.analysis.answer import write_answer
from dsagent_cbr.analysis.run_record import KIND, SUMMARY
from dsagent_cbr.files import write_json_atomic


def summary_of(config: AnalysisConfig, result: Analysis, facts: dict[str, Any]) -> dict[str, Any]:
    """The run in one JSON object; `facts` are the command's (data, model, seed, seconds, usage)."""
    settings = {k: v for k, v in asdict(config).items() if k not in ("question", "examples")}
    return {
        "kind": KIND,
        "question": config.question,
        "format": config.answer_format,
        "constraints": config.constraints,
        "answers": [[name, value] for name, value in result.answers],
        "missing": result.missing,
        "outcome": str(result.outcome),
        "exit_code": result.outcome.exit_code,
        "stopped": result.stopped,
        "error": result.error,
        "plan": result.plan,
        "steps": result.steps,
        "cells_run": result.cells_run,
        "cells_failed": result.cells_failed,
        "cells_kept": len(result.kept),
        **facts,
        "config": settings,
        "final": True,
    }


def save_start(run_dir: Path, config: AnalysisConfig, facts: dict[str, Any]) -> None:
    """summary.json as the run begins, so that `cbr runs` lists it while it goes on (or after a
    kill): the question, the data and the model, not final."""
    write_json_atomic(
        run_dir / SUMMARY,
        {
            "kind": KIND,
            "question": config.question,
            "format": config.answer_format,
            **facts,
            "final": False,
        },
    )


def save_run(run_dir: Path, summary: dict[str, Any], result: Analysis) -> None:
    write_answer(run_dir, result.answers, result.text)
    write_json_atomic(run_dir / SUMMARY, summary)
