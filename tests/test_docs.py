"""The pages in docs/ stay true to the code: docs/cli.md is what docs/make_cli_reference.py writes from the
commands' --help now; every relative link points to a file that exists (and an anchor to a heading of
its page); every `cbr ...` command in a ```bash block parses with cbr's own click parser. Nothing here
runs a command: the README's test decides how commands run for real."""

from __future__ import annotations

import importlib.util
import re
import shlex
from pathlib import Path

import click
import pytest
from test_readme import commands_of, parse

REPO = Path(__file__).resolve().parents[1]
DOCS = REPO / "docs"
PAGES = [REPO / "README.md", *sorted(DOCS.glob("*.md"))]
# pages outside the reference's index, whose links and commands are checked too
LINKED = [*PAGES, *sorted((DOCS / "decisions").glob("*.md")), REPO / "benchmarks" / "README.md"]
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")


def generator():
    """docs/make_cli_reference.py as a module (docs/ is not a package)."""
    spec = importlib.util.spec_from_file_location("make_cli_reference", DOCS / "make_cli_reference.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def without_code(text: str) -> str:
    """Markdown with its fenced blocks and inline code left out: links and headings there are not links."""
    return re.sub(r"`[^`\n]*`", "", re.sub(r"^```.*?^```", "", text, flags=re.S | re.M))


def anchors(page: Path) -> set[str]:
    """GitHub's anchors for a page's headings: lower case, spaces to dashes, other marks dropped;
    a repeated heading gets -1, -2, ..."""
    seen: dict[str, int] = {}
    text = re.sub(r"^```.*?^```", "", page.read_text(encoding="utf-8"), flags=re.S | re.M)
    for heading in re.findall(r"^#+\s+(.*)$", text, flags=re.M):
        slug = "".join(c for c in heading.strip().lower().replace(" ", "-") if c.isalnum() or c in "-_")
        seen[slug] = seen.get(slug, -1) + 1
        if seen[slug]:
            seen[f"{slug}-{seen[slug]}"] = 0
    return set(seen)


def test_cli_reference_is_up_to_date():
    assert (DOCS / "cli.md").read_text(encoding="utf-8") == generator().render(), (
        "docs/cli.md differs from the commands' --help now: regenerate it with "
        "`python docs/make_cli_reference.py` and commit the result")


def test_every_relative_link_resolves():
    broken = []
    for page in LINKED:
        for target in LINK.findall(without_code(page.read_text(encoding="utf-8"))):
            if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # https:, mailto: ...
                continue
            path, _, anchor = target.partition("#")
            linked = (page.parent / path).resolve() if path else page
            if not linked.exists():
                broken.append(f"{page.name}: {target} (no such file)")
            elif anchor and linked.suffix == ".md" and anchor not in anchors(linked):
                broken.append(f"{page.name}: {target} (no such heading)")
    assert broken == []


def test_the_index_lists_every_page():
    listed = set(LINK.findall((DOCS / "README.md").read_text(encoding="utf-8")))
    assert [p.name for p in PAGES if p.name != "README.md" and p.name not in listed] == []


@pytest.fixture
def paths_need_not_exist(monkeypatch):
    """Every click.Path of every command accepts a path that does not exist, for the length of a test: the
    docs' commands name files that earlier commands make (credit/train.csv, writeup.md), and whether
    they exist says nothing about the command's form. Everything else is still checked."""
    from dsagent_cbr.cli import cli

    def walk(command: click.Command, ctx: click.Context) -> None:
        for param in command.params:
            if isinstance(param.type, click.Path) and param.type.exists:
                monkeypatch.setattr(param.type, "exists", False)
        if isinstance(command, click.Group):
            for name in command.list_commands(ctx):
                sub = command.get_command(ctx, name)
                walk(sub, click.Context(sub, info_name=name, parent=ctx))

    walk(cli, click.Context(cli, info_name="cbr"))


def test_every_docs_command_parses(paths_need_not_exist):
    """Each `cbr ...` command (after any VAR=value prefix) parses with cbr's click commands; optional
    `[...]` parts are taken as given without the brackets, as the README's test runs them. A
    `python SCRIPT.py` names a script that exists."""
    checked = 0
    for page in LINKED:
        for command in commands_of(page):
            command = re.sub(r"^(export\s+)?([A-Z_][A-Z0-9_]*=\S*\s+)+", "", command)
            words = shlex.split(re.sub(r"\s*\[([^\]]*)\]", r" \1", command))
            if words[:1] == ["python"] and words[1].endswith(".py"):
                assert (REPO / words[1]).is_file(), f"{page.name}: {command}"
            if words[:1] != ["cbr"]:
                continue
            try:
                parse(words[1:])
            except Exception as exc:  # click's usage errors, or parse's own assertion
                raise AssertionError(f"{page.name}: {command}: {exc}") from exc
            checked += 1
    assert checked >= 40, checked
