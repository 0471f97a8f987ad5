"""cbr's first cell describes the data exactly (analysis/describe.py, untrusted/describe_data.py):
column names as Python sees them, the separator and encoding sniffed, and what is odd. The cell runs
here in-process, in a temporary folder (the real kernel runs it in test_analyze_command.py's slow tests)."""

from __future__ import annotations

import json

import pytest

from dsagent_cbr.analysis.describe import data_files, data_line, first_cell, looks_tabular


def described(folder, monkeypatch, capsys, names: list[str]) -> tuple[dict, str]:
    """Run the first cell over `names` in `folder`: its variables and what it printed."""
    monkeypatch.chdir(folder)
    code, _ = first_cell(data_files(names, folder))
    scope: dict = {}
    exec(compile(code, "first-cell", "exec"), scope)
    return scope, capsys.readouterr().out


def test_a_semicolon_table_in_latin_1_is_read_into_its_columns(tmp_path, monkeypatch, capsys):
    """Read as a comma-separated UTF-8 file it was one column, and the first cell said ok."""
    rows = ["Région;Prix;Quantité"] + [f"Île-{n};{n},5;{n}" for n in range(200)]
    (tmp_path / "ventes.csv").write_bytes("\n".join(rows).encode("latin-1"))
    scope, out = described(tmp_path, monkeypatch, capsys, ["ventes.csv"])
    assert list(scope["df"].columns) == ["Région", "Prix", "Quantité"] and len(scope["df"]) == 200
    assert "sep=';', encoding=" in out and "encoding='utf-8'" not in out
    assert "'Prix' holds numbers read as text" in out  # a decimal comma


def test_names_show_their_spaces_and_odd_rows_and_columns_are_named(tmp_path, monkeypatch, capsys):
    head = "DATE, WINDSPEED,avg. num. agents staffed "
    rows = [f"2020-01-0{d},{d}.5,{d}" for d in range(1, 8)]
    (tmp_path / "calls.csv").write_text("\n".join([head, *rows, head, "2020-01-09,1.0,4"]) + "\n")
    (tmp_path / "notes.csv").write_text("id,notes\n1,\n2,\n")
    scope, out = described(tmp_path, monkeypatch, capsys, ["calls.csv", "notes.csv"])
    assert "' WINDSPEED'" in out and "'avg. num. agents staffed '" in out
    assert "' WINDSPEED' has a space at an end" in out
    assert "1 row(s) repeat the header inside the data, at index 7" in out
    assert "'notes' is missing in every row" in out
    assert scope["df_calls"].shape == (9, 3)


def test_several_files_tables_json_and_documentation_each_described(tmp_path, monkeypatch, capsys):
    (tmp_path / "flights.tsv").write_text("carrier\tdelay\nUA\t3\nAA\t-1\n")
    (tmp_path / "airlines.json").write_text(json.dumps([{"carrier": "UA", "name": "United"}]))
    (tmp_path / "fees.json").write_text(json.dumps({"rules": [{"id": 1, "fee": 0.2}], "v": 2}))
    (tmp_path / "manual.md").write_text("# Manual\n\n## Delays\nA delay is in minutes.\n")
    (tmp_path / "notes.txt").write_text("Read the manual first.\n")
    (tmp_path / "logo.bin").write_bytes(b"\x00\x01")
    names = ["flights.tsv", "airlines.json", "fees.json", "manual.md", "notes.txt", "logo.bin"]
    files = data_files(names, tmp_path)
    assert [(f.kind, f.variable) for f in files] == [
        ("table", "df_flights"), ("table", "df_airlines"), ("json", "json_fees"),
        ("text", "text_manual"), ("text", "text_notes"), ("other", "file_logo")]
    scope, out = described(tmp_path, monkeypatch, capsys, names)
    assert scope["df_flights"]["delay"].sum() == 2
    assert scope["df_airlines"].loc[0, "name"] == "United"
    assert scope["json_fees"]["v"] == 2 and scope["text_manual"].startswith("# Manual")
    assert "its headings: # Manual | ## Delays" in out and "'rules': a list of 1 item(s)" in out
    assert "== logo.bin: a file of 2 bytes, not read" in out
    line = data_line(files)
    assert "flights.tsv (a table, loaded as df_flights by the first cell)" in line
    assert "manual.md (text, loaded as text_manual" in line


def test_a_file_that_cannot_be_read_leaves_the_others_described(tmp_path, monkeypatch, capsys):
    (tmp_path / "broken.json").write_text("[{not json")
    (tmp_path / "ok.csv").write_text("a,b\n1,2\n")
    scope, out = described(tmp_path, monkeypatch, capsys, ["broken.json", "ok.csv"])
    assert "== broken.json: could not be read as table" in out and scope["df_broken"] is None
    assert scope["df_ok"].shape == (1, 2)


def test_the_only_table_is_df_and_prompts_see_the_cell_without_its_helpers():
    files = data_files(["sales.csv", "README.md"])
    assert [f.variable for f in files] == ["df", "text_readme"]
    code, shown = first_cell(files)
    assert "def sniff_encoding" in code and "def sniff_encoding" not in shown
    assert "df = describe('sales.csv', 'df', 'table')" in shown and shown.splitlines()[-1] in code
    assert [f.variable for f in data_files(["a.csv", "a.tsv"])] == ["df_a", "df_a_2"]


@pytest.mark.parametrize(("head", "table"), [
    ("a\tb\n1\t2\n3\t4\n", True), ("a;b\n1;2\n", True),
    ("Read me, then\nthe data.\n", False), ("one line\n", False)])
def test_a_txt_file_is_a_table_when_its_lines_share_a_separator(head, table):
    assert looks_tabular(head) is table


def test_parquet_and_excel_tables_are_read_by_their_engines(tmp_path, monkeypatch, capsys):
    import pandas as pd

    frame = pd.DataFrame({"carrier": ["UA", "AA"], "seats": [180, 150]})
    frame.to_parquet(tmp_path / "planes.parquet")
    frame.to_excel(tmp_path / "planes.xlsx", index=False)
    scope, out = described(tmp_path, monkeypatch, capsys, ["planes.parquet", "planes.xlsx"])
    assert scope["df_planes"]["seats"].sum() == 330 == scope["df_planes_2"]["seats"].sum()
    assert "pd.read_parquet('planes.parquet')" in out and "pd.read_excel('planes.xlsx')" in out
