"""Turn fetched pages, markdown and notebooks into plain text that keeps what carries meaning:
headings, lists, tables and code. Navigation, scripts, styles and notebook outputs are dropped.

Everything here is pure (str in, str out) so it is tested without a network or a disk."""

from __future__ import annotations

import json
import re
from typing import Any

from bs4 import BeautifulSoup, Comment, NavigableString, Tag

# Elements that never hold a writeup's content.
_DROP_TAGS = (
    "script",
    "style",
    "noscript",
    "template",
    "nav",
    "aside",
    "form",
    "iframe",
    "svg",
    "canvas",
    "button",
    "input",
    "select",
    "textarea",
    "link",
    "meta",
    "head",
)
_DROP_ROLES = {"navigation", "banner", "contentinfo", "search", "menu", "menubar", "complementary"}
_BLOCKS = {
    "p",
    "div",
    "section",
    "article",
    "main",
    "body",
    "html",
    "figure",
    "figcaption",
    "dl",
    "dd",
    "dt",
    "details",
    "summary",
    "center",
    "header",
    "footer",
    "hgroup",
    "address",
}
_HTML_HINT = re.compile(
    r"<(p|div|h[1-6]|ul|ol|li|table|pre|br|span|a|code|article|body|html)\b[^>]*>", re.I
)
_ZERO_WIDTH = dict.fromkeys(map(ord, "\u200b\u200c\u200d\u2060\ufeff"), None)


class CleanError(ValueError):
    """The content cannot be turned into text (e.g. a notebook that is not notebook JSON)."""


def looks_like_html(text: str) -> bool:
    return len(_HTML_HINT.findall(text[:20000])) >= 2


# ---------------------------------------------------------------- whitespace


def normalise_whitespace(text: str) -> str:
    """Unify line ends, drop invisible characters, trim lines and collapse blank runs; lines inside
    fenced code keep their indentation and inner spacing."""
    text = (
        text.replace("\r\n", "\n").replace("\r", "\n").translate(_ZERO_WIDTH).replace("\u00a0", " ")
    )
    out: list[str] = []
    in_code = False
    for raw in text.split("\n"):
        line = raw.rstrip()
        if line.lstrip().startswith("```"):
            in_code = not in_code
            out.append(line.strip())
            continue
        if not in_code:
            line = line.replace("\t", "    ")
            indent = len(line) - len(line.lstrip(" "))
            # keep a little indentation (nested lists), squeeze the rest of the line
            line = " " * min(indent, 4) + re.sub(r" {2,}", " ", line.strip())
        out.append(line)
    joined = "\n".join(out)
    joined = re.sub(r"\n{3,}", "\n\n", joined)
    return joined.strip("\n").strip() + ("\n" if joined.strip() else "")


# ---------------------------------------------------------------- HTML


def html_to_text(html: str) -> str:
    """Render an HTML page as markdown-like text: '#' headings, '-' and '1.' lists, pipe tables,
    fenced code. The page's <article> or <main> is used when it has one."""
    soup = BeautifulSoup(html, "html.parser")
    for node in soup.find_all(string=lambda s: isinstance(s, Comment)):
        node.extract()
    for tag in soup.find_all(_DROP_TAGS):
        tag.decompose()
    for tag in soup.find_all(["header", "footer"]):
        # a page's banner and footer go; an article's own header holds its title and stays
        if not tag.decomposed and tag.find_parent("article") is None:
            tag.decompose()
    for tag in soup.find_all(attrs={"role": True}):
        if not tag.decomposed and str(tag.get("role", "")).lower() in _DROP_ROLES:
            tag.decompose()
    for tag in soup.find_all(attrs={"aria-hidden": "true"}):
        if not tag.decomposed:
            tag.decompose()
    root: Tag = soup.find("article") or soup.find("main") or soup.body or soup  # type: ignore[assignment]
    return normalise_whitespace(_render_children(root))


def _inline(node: Tag | NavigableString) -> str:
    """Text of an inline run, spaces squeezed (code spans keep backticks)."""
    if isinstance(node, NavigableString):
        return re.sub(r"\s+", " ", str(node))
    if node.name == "br":
        return "\n"
    if node.name == "code":
        return f"`{node.get_text()}`"
    if node.name == "img":
        alt = str(node.get("alt") or "").strip()
        return f"[image: {alt}]" if alt else ""
    return "".join(_inline(c) for c in node.children if isinstance(c, Tag | NavigableString))


def _render_children(node: Tag) -> str:
    parts: list[str] = []
    inline_run: list[str] = []

    def flush() -> None:
        text = "".join(inline_run).strip()
        if text:
            parts.append(text)
        inline_run.clear()

    for child in node.children:
        if isinstance(child, NavigableString):
            inline_run.append(_inline(child))
            continue
        if not isinstance(child, Tag):
            continue
        block = _render_block(child)
        if block is None:
            inline_run.append(_inline(child))
        else:
            flush()
            if block.strip():
                parts.append(block)
    flush()
    return "\n\n".join(parts)


def _render_block(tag: Tag) -> str | None:
    """Markdown for a block element, or None when the tag is inline."""
    name = tag.name
    if re.fullmatch(r"h[1-6]", name):
        return "#" * int(name[1]) + " " + _inline(tag).strip()
    if name == "pre":
        code = tag.get_text()
        lang = ""
        inner = tag.find("code")
        if isinstance(inner, Tag):
            for cls in inner.get("class") or []:
                if str(cls).startswith("language-"):
                    lang = str(cls)[len("language-") :]
        return f"```{lang}\n{code.strip(chr(10))}\n```"
    if name in ("ul", "ol"):
        return _render_list(tag, ordered=name == "ol", depth=0)
    if name == "table":
        return _render_table(tag)
    if name == "blockquote":
        inner = _render_children(tag)
        return "\n".join("> " + line if line else ">" for line in inner.split("\n"))
    if name == "hr":
        return "---"
    if name in _BLOCKS:
        return _render_children(tag)
    return None


def _render_list(tag: Tag, ordered: bool, depth: int) -> str:
    lines: list[str] = []
    for number, li in enumerate(tag.find_all("li", recursive=False), 1):
        marker = f"{number}." if ordered else "-"
        nested: list[str] = []
        own: list[str] = []
        for child in li.children:
            if isinstance(child, Tag) and child.name in ("ul", "ol"):
                nested.append(_render_list(child, ordered=child.name == "ol", depth=depth + 1))
            elif isinstance(child, Tag) and child.name == "pre":
                nested.append(_render_block(child) or "")
            elif isinstance(child, Tag) and child.name == "p":
                own.append(_inline(child).strip())
            elif isinstance(child, Tag | NavigableString):
                own.append(_inline(child))
        text = re.sub(r"\s+", " ", " ".join(own)).strip()
        lines.append("  " * depth + f"{marker} {text}".rstrip())
        lines.extend(n for n in nested if n)
    return "\n".join(lines)


def _render_table(tag: Tag) -> str:
    rows: list[list[str]] = []
    for tr in tag.find_all("tr"):
        cells = [
            re.sub(r"\s+", " ", c.get_text(" ")).strip().replace("|", "\\|")
            for c in tr.find_all(["th", "td"])
        ]
        if cells:
            rows.append(cells)
    if not rows:
        return ""
    width = max(len(r) for r in rows)
    rows = [r + [""] * (width - len(r)) for r in rows]
    lines = ["| " + " | ".join(rows[0]) + " |", "| " + " | ".join(["---"] * width) + " |"]
    lines += ["| " + " | ".join(r) + " |" for r in rows[1:]]
    return "\n".join(lines)


# ---------------------------------------------------------------- markdown writeups


# never across lines: real posts hold broken markup such as "![](" left by an earlier cleaning
_IMAGE = re.compile(r"!\[([^\]\n]*)\]\([^)\n]*\)")
_INLINE_LINK = re.compile(r"(?<!!)\[([^\]\n]+)\]\((?:https?://|/|#)[^)\n]*\)")
_LINK_DEF = re.compile(r"^\s*\[[^\]]+\]:\s*\S+.*$", re.M)


def light_clean_markdown(text: str) -> str:
    """The paper's light cleaning of a writeup: images and link targets go, the words stay."""
    text = _IMAGE.sub(lambda m: f"[image: {m.group(1)}]" if m.group(1).strip() else "", text)
    text = _INLINE_LINK.sub(r"\1", text)
    text = _LINK_DEF.sub("", text)
    return normalise_whitespace(text)


def clean_writeup(content: str) -> str:
    """A writeup arrives as HTML (pages, most forum posts) or markdown (READMEs, some posts)."""
    text = html_to_text(content) if looks_like_html(content) else content
    return light_clean_markdown(text)


# ---------------------------------------------------------------- notebooks


def _cell_source(cell: dict[str, Any]) -> str:
    source = cell.get("source", "")
    if isinstance(source, list):
        return "".join(str(s) for s in source)
    return str(source)


def notebook_to_text(raw: str, *, language: str = "python") -> str:
    """Code and markdown cells of an .ipynb, in order; outputs, metadata and raw cells dropped."""
    try:
        nb = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise CleanError(
            f"not valid notebook JSON ({exc.msg} at line {exc.lineno}, column {exc.colno})"
        ) from exc
    if not isinstance(nb, dict) or not isinstance(nb.get("cells", None), list):
        if isinstance(nb, dict) and isinstance(nb.get("worksheets"), list):  # nbformat 3
            cells = [
                c for ws in nb["worksheets"] if isinstance(ws, dict) for c in ws.get("cells", [])
            ]
        else:
            raise CleanError("JSON but not a notebook: no 'cells' list")
    else:
        cells = nb["cells"]
    lang = str(((nb.get("metadata") or {}).get("kernelspec") or {}).get("language") or language)
    parts: list[str] = []
    for cell in cells:
        if not isinstance(cell, dict):
            continue
        kind = cell.get("cell_type")
        src = _cell_source(
            cell if kind != "code" or "source" in cell else {"source": cell.get("input", "")}
        )
        if not src.strip():
            continue
        if kind == "markdown":
            parts.append(light_clean_markdown(src).strip())
        elif kind == "code":
            parts.append(f"```{lang}\n{src.strip(chr(10))}\n```")
    if not parts:
        raise CleanError("the notebook has no code or markdown cells with content")
    return normalise_whitespace("\n\n".join(parts))


def script_to_text(source: str, *, language: str = "python") -> str:
    """A Kaggle script kernel or a .py file: kept as one code block."""
    if not source.strip():
        raise CleanError("the script is empty")
    return normalise_whitespace(f"```{language}\n{source.strip(chr(10))}\n```")


def looks_like_notebook(raw: str) -> bool:
    return raw.lstrip().startswith("{") and ('"cells"' in raw or '"nbformat"' in raw)
