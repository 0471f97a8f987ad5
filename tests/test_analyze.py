"""`cbr analyze`: a question about a data file answered in a notebook the model writes cell by cell.

These tests take milliseconds: the answer's items, the plan's steps, the notebook as prompts show it,
the prompts, and the agent's loop with a fake model (support/fakes.py) and a fake kernel. The real
command, with the real kernel in the real sandbox, is test_analyze_command.py's."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import nbformat
import pytest
from support.analysis_fakes import FakeClock, FakeKernel, cell, run

from dsagent_cbr.analysis import CellResult
from dsagent_cbr.analysis.agent import NOTEBOOK, Analysis, AnalysisConfig
from dsagent_cbr.analysis.answer import (
    answers_of,
    find_items,
    merged,
    placeholders,
)
from dsagent_cbr.analysis.answer_format import missing_names, read_format
from dsagent_cbr.analysis.steps import (
    notebook_text,
    parse_steps,
    say_plan,
)
from dsagent_cbr.analysis.summary import save_run, summary_of
from dsagent_cbr.errors import BudgetExceeded, InfrastructureError, Outcome
from dsagent_cbr.llm.parsing import ParseError
from dsagent_cbr.llm.prompts import PromptError, render, variables

FORMAT = ('@mean_close_price[mean_value], where "mean_value" is a float number rounded to two '
          "decimal places.")


# ---- the answer ----


def test_items_are_read_with_their_names_and_values():
    text = "The mean is shown.\n@mean_close_price[570.68] and @count[ 12 ]"
    assert find_items(text) == [("mean_close_price", "570.68"), ("count", "12")]
    assert placeholders(FORMAT) == {"mean_close_price": "mean_value"}
    assert find_items("no items here, @broken[ never closed\n@ok[1]") == [("ok", "1")]


def test_nested_brackets_stay_whole_and_unbalanced_ones_end_at_the_first_close():
    assert find_items("@pairs[[1, 2], [3, 4]] @list[['a', 'b']]") == [
        ("pairs", "[1, 2], [3, 4]"), ("list", "['a', 'b']")]
    # DABench's own reading, `@(\w+)\[(.*?)\]`, where the brackets do not balance on the line
    assert find_items("@odd[a[b] and more\n") == [("odd", "a[b")]


# a reply the model controls: items that never close, brackets that never balance, each 1 MB
ADVERSARIAL = ["@x[" * 350_000, "@x[[" * 260_000, "@x" + "[" * 2**20, "[" * 2**20 + "@x[" + "]" * 2**20,
               "@" + "x" * 2**20 + "[", ("@x[" + "[" * 1000 + "\n") * 1000]


@pytest.mark.parametrize("reply", ADVERSARIAL, ids=range(len(ADVERSARIAL)))
def test_reading_the_items_of_a_hostile_megabyte_takes_well_under_a_second(reply):
    """Reading was quadratic: `"@x[" * 30000` (90 kB) took minutes, and hung `cbr analyze` past its
    budget. Linear, a megabyte of the worst shapes reads in milliseconds."""
    start = time.perf_counter()
    answers_of(reply, FORMAT)
    assert time.perf_counter() - start < 1.0


def test_the_last_value_of_a_name_counts_and_the_placeholder_is_no_value():
    text = "Format: @mean_close_price[mean_value]\nFirst @mean_close_price[570.7], no: @mean_close_price[570.68]"
    assert answers_of(text, FORMAT) == [("mean_close_price", "570.68")]
    assert answers_of("@mean_close_price[mean_value]", FORMAT) == []
    fmt = "@a[x] and @b[y]"
    got = answers_of("@extra[1] @b[2]", fmt)
    assert got == [("b", "2"), ("extra", "1")] and missing_names(got, fmt) == ["a"]
    assert merged([("a", "1"), ("b", "2")], [("b", "3"), ("c", "4")]) == [("a", "1"), ("b", "3"), ("c", "4")]
    assert missing_names([], "") == []


def test_answer_files_hold_the_items_and_the_text(tmp_path):
    result = Analysis(answers=[("m", "1.5")], text="It is 1.5.\n@m[1.5]")
    summary = summary_of(AnalysisConfig("q?", answer_format="@m[v]"), result, {"seconds": 1.0})
    save_run(tmp_path, summary, result)
    assert json.loads((tmp_path / "answer.json").read_text()) == {"answers": [["m", "1.5"]],
                                                                  "text": "It is 1.5.\n@m[1.5]"}
    assert (tmp_path / "answer.md").read_text() == "It is 1.5.\n@m[1.5]\n"
    saved = json.loads((tmp_path / "summary.json").read_text())
    assert saved["outcome"] == "ok" and saved["exit_code"] == 0 and saved["format"] == "@m[v]"
    save_run(tmp_path, summary_of(AnalysisConfig("q?"), Analysis(outcome=Outcome.BUDGET), {}), Analysis())
    assert json.loads((tmp_path / "answer.json").read_text()) == {"answers": [], "text": ""}


# ---- the plan, the first cell, the notebook in a prompt ----


def test_plans_are_read_in_their_usual_shapes():
    assert parse_steps("Plan:\n1. Load the data.\n2) Compute the mean\n   of Close Price.\n3: Print it.") == [
        "Load the data.", "Compute the mean of Close Price.", "Print it."]
    assert parse_steps("**Step 1:** group by city\nStep 2. sum sales") == ["group by city", "sum sales"]
    assert parse_steps("- filter rows\n- count them") == ["filter rows", "count them"]
    with pytest.raises(ParseError, match="no numbered steps"):
        parse_steps("I would look at the data first.")
    assert say_plan(["a", "b"], done=1) == "1. a (done)\n2. b"


def test_a_link_or_pipe_inside_an_analysis_s_data_folder_is_refused_not_copied(tmp_path):
    """copytree copied what a link pointed at (a file only root may read) into the kernel's data; the
    data is now copied as a task's is (harness/workspace.copy_entry)."""
    from dsagent_cbr.analysis.session import stage_data
    from dsagent_cbr.harness.workspace import TaskDataError

    secret = tmp_path / "secret.csv"
    secret.write_text("root-only secret\n")
    secret.chmod(0o600)
    data = tmp_path / "data"
    (data / "inner").mkdir(parents=True)
    (data / "sales.csv").write_text("sales\n4\n")
    (data / "inner" / "more.csv").symlink_to(secret)
    for n, odd in enumerate((lambda p: p.symlink_to(secret), os.mkfifo)):
        (data / "inner" / "more.csv").unlink()
        odd(data / "inner" / "more.csv")
        (tmp_path / f"staged{n}").mkdir()
        with pytest.raises(TaskDataError, match=r"more.csv is (a link|not a regular file): the data of an analysis"):
            stage_data([data], tmp_path / f"staged{n}")
        assert "root-only" not in "".join(p.read_text() for p in (tmp_path / f"staged{n}").rglob("*.csv"))
    (data / "inner" / "more.csv").unlink()
    (tmp_path / "staged").mkdir()
    staged = stage_data([data], tmp_path / "staged")
    assert (staged["data"] / "sales.csv").read_text() == "sales\n4\n"


def test_the_model_s_text_and_the_cells_output_reach_the_terminal_escaped(capsys):
    """A plan or an answer that sets the window's title, clears the screen or rewrites a line is shown
    as its escapes (commands/printing.printable), in the progress lines and the last lines alike."""
    from dsagent_cbr.clock import Clock
    from dsagent_cbr.commands.analyze_cmd import _print, _say

    hostile = "\x1b]0;pwned\x07\x1b[2J\rdone"
    _say(Clock(60.0), f"plan: 1. {hostile}")
    summary = {"error": hostile, "seconds": 1.0, "cells_run": 1, "cells_failed": 0, "tokens": 1, "cost_usd": 0.0,
               "calls": 1, "outcome": "ok", "stopped": hostile, "answers": [("m", hostile)], "exit_code": 0}
    _print(summary, Path("/runs/r"), hostile)
    out, err = capsys.readouterr()
    assert not [c for c in out + err if c in "\x1b\x07\r"]
    assert "@m[\\x1b]0;pwned\\x07\\x1b[2J\\rdone]" in out and "plan: 1. \\x1b]0;pwned" in err


def test_the_notebook_in_a_prompt_keeps_the_first_cell_and_the_latest_outputs():
    cells = [CellResult("describe()", ok=True, stdout="columns " * 100)]
    cells += [CellResult(f"step_{n}()", ok=True, stdout=f"out-{n} " + "x" * 1000) for n in range(20)]
    text = notebook_text(cells, total=5000)
    assert "columns" in text and "out-19" in text and "out-0 " not in text
    assert all(f"step_{n}()" in text for n in range(20))  # every cell's code stays
    assert "[output left out" in text
    failed = CellResult("1/0", ok=False, error="ZeroDivisionError: division by zero")
    assert "ZeroDivisionError" in notebook_text([failed])
    assert notebook_text([]) == "(no cells yet)"


# ---- the prompts ----


ANALYZE_ROLES = ["analyze_plan", "analyze_replan", "analyze_cell", "analyze_debug", "analyze_answer"]


@pytest.mark.parametrize("role", ANALYZE_ROLES)
def test_each_analyze_prompt_renders_and_refuses_a_missing_variable(role):
    values = {name: f"<{name}>" for name in variables(role)}
    text = render(role, **values)
    assert "<question>" in text and "{{" not in text
    first = sorted(values)[0]
    with pytest.raises(PromptError, match=first):
        render(role, **{k: v for k, v in values.items() if k != first})


def test_optional_parts_show_only_when_given():
    plan = {name: "" for name in variables("analyze_plan")} | {"question": "q", "max_steps": 4}
    assert "Past analyses" not in render("analyze_plan", **plan)
    assert "Past analyses of other questions" in render("analyze_plan", **plan | {"examples": "case 1"})
    asked = read_format("@m[v]")
    answer = {name: "" for name in variables("analyze_answer")} | {
        "answer_format": "@m[v]", **asked.for_prompt()}
    assert "- @m[v]\n" in render("analyze_answer", **answer)
    again = render("analyze_answer", **answer | {"missing": "m", "previous": "It is 3."})
    assert "lacks the item(s) m" in again and "It is 3." in again
    assert "@m[v]" not in render("analyze_answer", **answer | {"answer_format": ""})
    cell = render("analyze_cell", **{name: "x" for name in variables("analyze_cell")})
    assert cell.count("```python") == 1 and "pandas, numpy" in cell and "no\nnetwork" in cell


# ---- the loop, with a fake model and a fake kernel ----


def test_a_failing_cell_fixed_by_debug_leaves_only_the_fix_in_the_notebook(tmp_path):
    result, model, kernel = run(tmp_path, {
        "analyze_plan": ["1. Compute the mean of sales.\n2. Print it."],
        "analyze_cell": [cell("mean = df['Sales'].mean()  # wrong"), cell("print(mean)")],
        "analyze_debug": [cell("mean = df['sales'].mean()")],
        "analyze_answer": ["The mean is 4.\n@mean_sales[4.00]"],
    }, FakeKernel(errors={"wrong": "KeyError: 'Sales'"}))
    assert result.outcome == Outcome.OK and result.answers == [("mean_sales", "4.00")]
    assert model.roles == ["analyze_plan", "analyze_cell", "analyze_debug", "analyze_cell", "analyze_answer"]
    assert "KeyError: 'Sales'" in model.prompts[2] and "# wrong" in model.prompts[2]
    assert result.cells_run == 4 and result.cells_failed == 1
    assert [s["attempts"] for s in result.steps] == [2, 1]
    notebook = nbformat.read(tmp_path / NOTEBOOK, as_version=4)
    assert [c.source for c in notebook.cells] == [kernel.runs[0], "mean = df['sales'].mean()", "print(mean)"]
    journal = [json.loads(line) for line in (tmp_path / "journal.jsonl").read_text().splitlines()]
    failed = [r for r in journal if r["role"] == "cell" and not r["output"]["ok"]]
    assert len(failed) == 1 and failed[0]["output"]["error"] == "KeyError: 'Sales'"
    assert any("step 1/2: the cell failed (KeyError: 'Sales'); fix 1" in line for line in result.lines)


def test_a_step_failing_every_attempt_has_the_rest_of_the_plan_written_again(tmp_path):
    bad = cell("fit_model()  # impossible")
    result, model, _ = run(tmp_path, {
        "analyze_plan": ["1. Fit a model.\n2. Print its score."],
        "analyze_cell": [bad, cell("print(df['sales'].mean())"), bad],
        "analyze_debug": [bad, bad, bad, bad],
        "analyze_replan": ["1. Compute the mean instead."],
        "analyze_answer": ["@mean_sales[4.0]"],
    }, FakeKernel(errors={"impossible": "ValueError: cannot fit"}), n_debug=2, replans=1)
    assert model.roles[:5] == ["analyze_plan", "analyze_cell", "analyze_debug", "analyze_debug",
                               "analyze_replan"]
    assert "Step 1 kept failing" in model.prompts[4] and "ValueError: cannot fit" in model.prompts[4]
    assert result.plan == ["Compute the mean instead."] and result.outcome == Outcome.OK
    assert [(s["ok"], s.get("replanned", False)) for s in result.steps] == [(False, True), (True, False)]

    # a second step that cannot be done, once the re-plan is spent, is left undone
    again, model, _ = run(tmp_path / "again", {
        "analyze_plan": ["1. Fit a model.\n2. Fit another."],
        "analyze_cell": [bad, bad],
        "analyze_debug": [],
        "analyze_answer": ["@mean_sales[unknown]"],
    }, FakeKernel(errors={"impossible": "ValueError: cannot fit"}), n_debug=0, replans=0)
    assert [s["ok"] for s in again.steps] == [False, False] and again.outcome == Outcome.OK


def test_a_reply_without_code_is_a_failed_attempt(tmp_path):
    result, model, _ = run(tmp_path, {
        "analyze_plan": ["1. Compute the mean."],
        "analyze_cell": ["I would compute the mean."],
        "analyze_debug": [cell("print(4)")],
        "analyze_answer": ["@mean_sales[4]"],
    })
    assert "(no code)" in model.prompts[2] and "no ```python block" in model.prompts[2]
    assert result.outcome == Outcome.OK and result.cells_run == 2
    # a fix without code leaves the failing cell, its code and its error, to the next fix
    _, model, _ = run(tmp_path / "b", {
        "analyze_plan": ["1. Compute the mean."],
        "analyze_cell": [cell("mean = df['Sales'].mean()")],
        "analyze_debug": ["It is the column's name.", cell("print(4)")],
        "analyze_answer": ["@mean_sales[4]"],
    }, FakeKernel(errors={"Sales": "KeyError: 'Sales'"}))
    assert "df['Sales']" in model.prompts[3] and "no ```python block" in model.prompts[3]
    assert "KeyError: 'Sales'" in model.prompts[3]


def test_a_plan_that_cannot_be_read_becomes_one_step(tmp_path):
    result, _, _ = run(tmp_path, {
        "analyze_plan": ["Let me think about it."],
        "analyze_cell": [cell("print(4)")],
        "analyze_answer": ["@mean_sales[4]"],
    })
    assert len(result.plan) == 1 and result.outcome == Outcome.OK


def test_when_the_budget_runs_out_the_answer_comes_from_the_cells_so_far(tmp_path):
    clock = FakeClock(100.0)  # 20 s kept for the answer; each cell costs 30 s
    result, model, kernel = run(tmp_path, {
        "analyze_plan": ["1. a\n2. b\n3. c\n4. d"],
        "analyze_cell": [cell("print('a')"), cell("print('b')")],
        "analyze_answer": ["@mean_sales[4]"],
    }, FakeKernel(clock=clock, seconds=30.0), clock=clock)
    assert model.roles == ["analyze_plan", "analyze_cell", "analyze_cell", "analyze_answer"]
    assert "cut short" in model.prompts[-1] and result.outcome == Outcome.OK
    assert "time budget ended" in result.stopped and len(result.kept) == 3
    assert kernel.timeouts[0] == 60.0 and kernel.timeouts[2] == pytest.approx(20.0)
    assert model.timeouts[-1] == pytest.approx(10.0)  # the answer may use the reserve too


def test_no_time_left_for_an_answer_ends_with_the_budget_outcome(tmp_path):
    clock = FakeClock(100.0)
    result, model, _ = run(tmp_path, {
        "analyze_plan": ["1. a"],
        "analyze_cell": [cell("print('a')")],
    }, FakeKernel(clock=clock, seconds=49.0), clock=clock)
    assert model.roles == ["analyze_plan", "analyze_cell"]
    assert result.outcome == Outcome.BUDGET and result.answers == [] and "before an answer" in result.stopped
    assert (tmp_path / NOTEBOOK).is_file()


def test_an_answer_lacking_a_name_is_asked_for_once_more(tmp_path):
    replies = {"analyze_plan": ["1. a"], "analyze_cell": [cell("print(4)")],
               "analyze_answer": ["The mean is 4.", "@mean_sales[4.00]"]}
    result, model, _ = run(tmp_path, replies)
    assert "lacks the item(s) mean_sales" in model.prompts[-1] and "The mean is 4." in model.prompts[-1]
    assert result.outcome == Outcome.OK and result.answers == [("mean_sales", "4.00")]
    replies = {"analyze_plan": ["1. a"], "analyze_cell": [cell("print(4)")],
               "analyze_answer": ["The mean is 4.", "Still 4."]}
    failed, _, _ = run(tmp_path / "b", replies)
    assert failed.outcome == Outcome.AGENT_FAILURE and failed.missing == ["mean_sales"]
    assert failed.text == "Still 4." and failed.outcome.exit_code == 1


def test_a_dead_model_server_is_ours_and_the_notebook_is_still_written(tmp_path):
    dead = InfrastructureError("Cannot reach the model server at http://x (is it running?).")
    result, _, _ = run(tmp_path, {"analyze_plan": ["1. a\n2. b"], "analyze_cell": [cell("print(1)"), dead]})
    assert result.outcome == Outcome.INFRASTRUCTURE and result.outcome.exit_code == 3
    assert "Cannot reach" in result.error and len(result.kept) == 2
    assert len(nbformat.read(tmp_path / NOTEBOOK, as_version=4).cells) == 2
    spent = BudgetExceeded("The run's cost budget of $0.0100 is spent.")
    result, _, _ = run(tmp_path / "b", {"analyze_plan": ["1. a"], "analyze_cell": [cell("print(1)")],
                                        "analyze_answer": [spent]})
    assert result.outcome == Outcome.BUDGET and result.outcome.exit_code == 4 and result.answers == []
    stopped, _, _ = run(tmp_path / "c", {"analyze_plan": [KeyboardInterrupt()]})
    assert stopped.outcome == Outcome.INTERRUPTED and len(stopped.kept) == 1


def test_a_cell_that_kills_the_kernel_has_the_kept_cells_run_again(tmp_path):
    kernel = FakeKernel(errors={"hog": "die"})
    result, _, _ = run(tmp_path, {
        "analyze_plan": ["1. a\n2. b"],
        "analyze_cell": [cell("x = 1"), cell("hog()")],
        "analyze_debug": [cell("y = 2")],
        "analyze_answer": ["@mean_sales[1]"],
    }, kernel)
    assert kernel.restarts == 1 and result.outcome == Outcome.OK
    assert kernel.runs[3:5] == [kernel.runs[0], "x = 1"]  # the kept cells, again
    assert [c.code for c in result.kept][1:] == ["x = 1", "y = 2"]


def test_prompts_see_the_question_format_and_data_and_examples_only_the_plan(tmp_path):
    _, model, _ = run(tmp_path, {
        "analyze_plan": ["1. a"], "analyze_cell": [cell("print(4)")], "analyze_answer": ["@mean_sales[4]"],
    }, examples="A past analysis: the median of prices.")
    assert all("What is the mean of sales?" in p and "sales.csv" in p for p in model.prompts[:2])
    assert "median of prices" in model.prompts[0] and "median of prices" not in model.prompts[1]
    assert "out of # Runs untrusted" in model.prompts[0]  # the first cell's output
    # its code as prompts show it: the calls, not cbr's helpers
    assert "df = describe('sales.csv', 'df', 'table')" in model.prompts[0]
    assert "def sniff_encoding" not in model.prompts[0]

