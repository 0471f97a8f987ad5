"""The data card of a csv task, from small files built here: a wide table's numbered look-alike columns
summarised a group per line with every column accounted for, every level of a categorical of few levels
with its share, and a narrow table described as before."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from dsagent_cbr.tasks.datacard import csv_card


def card_of(folder, train: pd.DataFrame, target: str = "target", test: pd.DataFrame | None = None) -> str:
    train.to_csv(folder / "train.csv", index=False)
    files = ["train.csv"]
    if test is not None:
        test.to_csv(folder / "test.csv", index=False)
        files.append("test.csv")
    return csv_card(folder, files, target=[target], id_column="id", metric="auroc", direction="maximize",
                    task_type="binary-classification")


def table_rows(card: str) -> list[str]:
    return [ln.split("`")[1] for ln in card.splitlines() if ln.startswith("| `")]


def group_lines(card: str) -> list[str]:
    lines = card.splitlines()
    after = lines[lines.index("Column groups:") + 1 :] if "Column groups:" in lines else []
    return [ln for ln in after if ln.startswith("- ")]


def wide_frame(rows: int = 30) -> pd.DataFrame:
    """150 columns: id, target, 100 pixels, 4 scores (the last the target of one test), 2 × 19 sensors
    numbered with a gap, two numbered columns too few to group and four plain ones."""
    rng = np.random.default_rng(0)
    columns: dict[str, object] = {"id": np.arange(rows), "target": rng.integers(0, 2, rows)}
    columns |= {f"pixel{i}": rng.integers(0, 256, rows) for i in range(100)}
    columns |= {f"score_{i}": rng.random(rows) for i in range(1, 5)}
    for i in [*range(1, 10), *range(11, 21)]:
        columns[f"sensor_{i}_mean"] = rng.normal(size=rows)
        columns[f"sensor_{i}_std"] = rng.random(rows)
    columns |= {"x1": rng.random(rows), "x2": rng.random(rows), "colour": "red", "note": "n", "age": 3,
                "height": 1.5}
    frame = pd.DataFrame(columns)
    frame.loc[::3, "sensor_4_mean"] = np.nan
    frame.loc[0, "pixel7"], frame.loc[1, "pixel8"] = 0, 255  # the ends of the pixels' range
    return frame


def test_a_wide_table_is_summarised_by_groups_and_every_column_is_accounted_for(tmp_path):
    frame = wide_frame()
    assert frame.shape[1] == 150
    card = card_of(tmp_path, frame)
    groups = group_lines(card)
    assert groups == [
        "- `pixel0` … `pixel99` (100 columns): int64, missing 0%, values 0 to 255",
        f"- `score_1` … `score_4` (4 columns): float64, missing 0%, values {_range(frame, 'score_')}",
        "- `sensor_{n}_mean` for n in 1–9, 11–20 (19 columns): float64, missing 0% to 33.3% "
        f"(`sensor_4_mean` only), values {_range(frame, 'sensor_', '_mean')}",
        f"- `sensor_{{n}}_std` for n in 1–9, 11–20 (19 columns): float64, missing 0%, "
        f"values {_range(frame, 'sensor_', '_std')}",
    ]
    rows = table_rows(card)
    assert rows == ["id", "target", "x1", "x2", "colour", "note", "age", "height"]  # too few to group: one by one
    grouped = sum(int(re.search(r"\((\d+) columns\)", g).group(1)) for g in groups)
    assert len(rows) + grouped == 150
    assert "150 columns: 8 listed one by one, 142 in 4 groups of one name pattern and dtype" in card
    assert "`train.csv`: 30 rows × 150 columns" in card and "more columns, not described" not in card
    assert card == card_of(tmp_path, frame)  # deterministic


def _range(frame: pd.DataFrame, before: str, after: str = "") -> str:
    values = frame[[c for c in frame.columns if c.startswith(before) and c.endswith(after)]]
    return f"{float(values.min().min()):.4g} to {float(values.max().max()):.4g}"


def test_the_target_and_id_stay_in_the_table_when_named_like_a_group(tmp_path):
    frame = wide_frame()
    card = card_of(tmp_path, frame, target="score_4")
    assert "- `score_1` … `score_3` (3 columns): float64" in card
    assert "score_4" in table_rows(card) and "target" in table_rows(card)  # `target` is a plain column here
    assert "Distribution of `score_4` in `train.csv`" in card


def test_a_thousand_column_card_stays_short_and_other_files_name_groups(tmp_path):
    rng = np.random.default_rng(1)
    frame = pd.DataFrame({"id": range(20), "target": rng.integers(0, 2, 20),
                          **{f"f_{i:03d}": rng.random(20) for i in range(1000)}})
    test = frame.drop(columns="target").assign(extra=1)  # not the training columns: named in a sentence
    card = card_of(tmp_path, frame, test=test)
    assert len(card) < 3000, len(card)
    assert "- `f_000` … `f_999` (1,000 columns): float64, missing 0%" in card
    assert "`test.csv` columns: `id`, `f_000` … `f_999` (1,000 columns), `extra`." in card


def test_dates_as_column_names_make_one_group_in_file_order(tmp_path):
    # Month and day vary (the year is written as it is): no single number orders them, the file does.
    dates = pd.date_range("2020-01-22", periods=60).strftime("%-m/%-d/%y")
    frame = pd.DataFrame({"id": range(5), "target": [0, 1, 0, 1, 0], **{d: range(5) for d in dates}})
    card = card_of(tmp_path, frame)
    assert "- `{n}/{n}/20`, from `1/22/20` to `3/21/20` in the file's order (60 columns): int64" in card


def test_a_categorical_of_few_levels_shows_every_level_with_its_share(tmp_path):
    colours = ["red"] * 40 + ["green"] * 30 + ["blue"] * 15 + ["cyan"] * 10 + ["magenta"] * 5
    long = ["a" * 80, "b" * 80, "c" * 80] * 33 + ["a" * 80]
    frame = pd.DataFrame({"id": range(100), "colour": colours, "town": [f"town {i % 20}" for i in range(100)],
                          "flag": [i % 4 == 0 for i in range(100)], "long": long, "target": [0, 1] * 50})
    card = card_of(tmp_path, frame)
    row = {ln.split("`")[1]: ln for ln in card.splitlines() if ln.startswith("| `")}
    assert row["colour"] == '| `colour` | str | 5 | "red" 40%, "green" 30%, "blue" 15%, "cyan" 10%, "magenta" 5% |'
    assert row["town"] == '| `town` | str | 20 | "town 0", "town 1" |'  # many levels: two examples as before
    assert row["flag"] == "| `flag` | bool | 2 | False 75%, True 25% |"
    assert f'"{"a" * 59}…" 34%, "{"b" * 59}…" 33%, "{"c" * 59}…" 33%' in row["long"]  # cut as examples are
    assert "| column | dtype | distinct | examples, or every level and its share of rows |" in card


def test_a_level_share_counts_missing_rows_and_rare_levels_are_not_zero(tmp_path):
    frame = pd.DataFrame({"id": range(300), "kind": ["x"] * 200 + ["y"] * 99 + ["z"], "target": [0, 1] * 150})
    frame.loc[:29, "kind"] = None
    card = card_of(tmp_path, frame)
    assert '| `kind` | str | 10.0% | 3 | "x" 57%, "y" 33%, "z" <1% |' in card


def test_a_narrow_table_is_described_column_by_column_as_before(tmp_path):
    frame = pd.DataFrame({"id": [1, 2, 3, 4], "f1": [0.5, None, 1.5, 2.0], "f2": [1, 2, 3, 4],
                          "f3": [7, 7, 8, 9], "target": [0, 1, 1, 0]})
    card = card_of(tmp_path, frame)
    assert card == (
        "## Data card\n\n"
        "- `train.csv`: 4 rows × 5 columns\n"
        "- Id column: `id`\n"
        "- Target: `target` (binary-classification)\n"
        "- Metric: auroc (higher is better)\n"
        '- Distribution of `target` in `train.csv`: 2 classes: "0" 2 (50.0%), "1" 2 (50.0%)\n'
        "\n"
        "Columns of `train.csv`:\n"
        "\n"
        "| column | dtype | missing | distinct | examples |\n"
        "|---|---|---:|---:|---|\n"
        "| `id` | int64 | 0% | 4 | 1, 2 |\n"
        "| `f1` | float64 | 25.0% | 3 | 0.5, 1.5 |\n"
        "| `f2` | int64 | 0% | 4 | 1, 2 |\n"
        "| `f3` | int64 | 0% | 3 | 7, 8 |\n"
        "| `target` | int64 | 0% | 2 | 0, 1 |\n")


def test_up_to_forty_numbered_columns_are_not_grouped(tmp_path):
    frame = pd.DataFrame({"id": range(3), "target": [0, 1, 0], **{f"f{i}": [i, i, i] for i in range(38)}})
    card = card_of(tmp_path, frame)
    assert len(table_rows(card)) == 40 and not group_lines(card) and "Column groups" not in card
