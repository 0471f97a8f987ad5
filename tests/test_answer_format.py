"""Answers as the format asks (analysis/answer_format.py, the analyze_answer prompt): an empty value
taken as written, an item the format asks for only in some case never demanded, quotes where the
format quotes, one item a line where the format puts one a line. Each case runs the agent's loop
with a fake model and kernel (support/analysis_fakes.py): milliseconds."""

from __future__ import annotations

from support.analysis_fakes import cell, run

from dsagent_cbr.analysis.answer_format import missing_names, read_format
from dsagent_cbr.analysis.dabench_grade import extract_answers, grade
from dsagent_cbr.errors import Outcome


def answered(tmp_path, answer_format: str, *answers: str):
    replies = {"analyze_plan": ["1. Compute it."], "analyze_cell": [cell("print(4)")],
               "analyze_answer": list(answers)}
    return run(tmp_path, replies, answer_format=answer_format)


def test_an_empty_value_is_taken_as_written_and_graded_right(tmp_path):
    """`@outlier_years[]` was called missing: cbr asked again, the model had to invent `[None]`."""
    fmt = "@outlier_years[year1,year2,...] where the list holds the years that are outliers."
    result, model, _ = answered(tmp_path, fmt, "No year is an outlier.\n@outlier_years[]")
    assert result.outcome == Outcome.OK and result.answers == [("outlier_years", "")]
    assert model.roles.count("analyze_answer") == 1  # never asked again
    assert "written as nothing between the brackets" in model.prompts[-1]
    assert grade(extract_answers(result.text), [("outlier_years", "")]) == [True]


def test_an_item_asked_for_only_in_some_case_is_not_demanded(tmp_path):
    fmt = ('@p_value[p] @correlation_status[status], where "p" is rounded to four decimals and '
           '"status" is "weak" or "strong", given only when p >= 0.05.')
    assert read_format(fmt).required == ["p_value"]
    result, model, _ = answered(tmp_path, fmt, "The test is significant.\n@p_value[0.0123]")
    assert result.outcome == Outcome.OK and model.roles.count("analyze_answer") == 1
    assert "@correlation_status[status]: asked for only in some case" in model.prompts[-1]
    # the item asked for in every case is still demanded, and only it
    result, model, _ = answered(tmp_path / "b", fmt, "@correlation_status[weak]", "@p_value[0.2]")
    assert "lacks the item(s) p_value," in model.prompts[-1]
    assert result.outcome == Outcome.OK and missing_names(result.answers, fmt) == []
    # a quoted value before "only if" says when the value is given, not whether the item is
    valued = read_format('@is_normal[answer] where answer is "yes" only if p > 0.05, else "no"')
    assert valued.required == ["is_normal"]


def test_quotes_go_where_the_format_quotes_and_nowhere_else(tmp_path):
    """The prompt said "no quotes" to every format: a label written `"AGE00135039"` was lost."""
    fmt = '@station_id["station"] @count[n], where "station" is the id of the station.'
    result, model, _ = answered(tmp_path, fmt, '@station_id["AGE00135039"] @count[12]')
    prompt = model.prompts[-1]
    assert '- @station_id["station"]: the value inside quotes' in prompt
    assert "- @count[n]\n" in prompt
    assert "no quotes" not in prompt
    assert result.answers == [("station_id", '"AGE00135039"'), ("count", "12")]
    assert grade(extract_answers(result.text), [("station_id", '"AGE00135039"')]) == [True]


def test_one_item_a_line_where_the_format_puts_one_a_line(tmp_path):
    lines = '@mean_volume[mean]\\n@std_dev_volume[std]\nwhere "mean" and "std" are rounded.'
    assert read_format(lines).one_a_line and read_format(lines.replace("\n", "\\n")).one_a_line
    _, model, _ = answered(tmp_path, lines, "@mean_volume[1.5]\n@std_dev_volume[0.2]")
    assert "each item on a line of its own" in model.prompts[-1]
    assert "last line" not in model.prompts[-1]
    inline = "@mean_volume[mean], @std_dev_volume[std] where both are rounded."
    assert not read_format(inline).one_a_line
    _, model, _ = answered(tmp_path / "b", inline, "@mean_volume[1.5], @std_dev_volume[0.2]")
    assert "the items together on one last line" in model.prompts[-1]


def test_names_are_shown_as_the_format_writes_them(tmp_path):
    fmt = "@Highest_Monthly_Average_Close_Price[month, year, average_close_price]"
    asked = read_format(fmt)
    assert asked.names == ["Highest_Monthly_Average_Close_Price"] and not asked.items[0].quoted
    _, model, _ = answered(tmp_path, fmt, "@Highest_Monthly_Average_Close_Price[1, 2018, 88.32]")
    assert "- @Highest_Monthly_Average_Close_Price[month, year, average_close_price]" in (
        model.prompts[-1])
    assert "separated by a comma and a space" in model.prompts[-1]
