"""Where documents come from besides Kaggle's API: local files (.html, .md, .ipynb, .py, .txt) and the
rules, shared with the page spider, that decide a document's format and kind."""

from __future__ import annotations

import os
import re
from datetime import UTC, datetime
from pathlib import Path

from bs4 import BeautifulSoup

from dsagent_cbr.ingest.clean import looks_like_html, looks_like_notebook
from dsagent_cbr.ingest.documents import ContentFormat, DocKind, RawDoc, SourceError
from dsagent_cbr.ingest.encoding import DecodeError, decode_body

SUFFIX_FORMATS: dict[str, ContentFormat] = {
    ".html": "html",
    ".htm": "html",
    ".md": "markdown",
    ".markdown": "markdown",
    ".txt": "text",
    ".case": "text",
    ".ipynb": "ipynb",
    ".py": "script",
}
MAX_FILE_BYTES = 10 * 1024 * 1024  # the same limit the crawlers use for a page


def guess_format(url_or_path: str, content_type: str, text: str) -> ContentFormat:
    path = re.sub(r"[?#].*$", "", url_or_path).lower()
    for suffix, fmt in SUFFIX_FORMATS.items():
        if path.endswith(suffix):
            return fmt
    ctype = content_type.lower()
    if "ipynb" in ctype or ("json" in ctype and looks_like_notebook(text)):
        return "ipynb"
    if "markdown" in ctype:
        return "markdown"
    if "python" in ctype:
        return "script"
    if "html" in ctype or looks_like_html(text):
        return "html"
    return "markdown" if re.search(r"^#{1,6} \S", text, re.M) else "text"


def kind_for(fmt: ContentFormat, requested: str = "auto") -> DocKind:
    if requested in ("writeup", "notebook"):
        return requested  # type: ignore[return-value]
    return "notebook" if fmt in ("ipynb", "script") else "writeup"


def html_title(text: str) -> str:
    title = BeautifulSoup(text[:200000], "html.parser").title
    return title.get_text(" ", strip=True) if title else ""


def _folder_files(folder: Path) -> tuple[list[Path], list[SourceError]]:
    """The supported regular files under a folder, sorted; a link inside it (to a file or a folder) is
    never followed, only named (the folder itself may be a link: the user gave it)."""
    files, links = [], []
    for root, dirs, names in os.walk(folder):
        for name in [*dirs, *names]:
            entry = Path(root) / name
            if entry.is_symlink():
                links.append(
                    SourceError(
                        url=str(entry),
                        reason=f"{entry}: a symbolic link; ingest never follows links",
                        stage="file",
                    )
                )
            elif name in names and entry.suffix.lower() in SUFFIX_FORMATS and entry.is_file():
                files.append(entry)
    return sorted(files), links


def read_local(
    path: Path, *, kind: str = "auto", competition: str = "", max_bytes: int = MAX_FILE_BYTES
) -> tuple[list[RawDoc], list[SourceError]]:
    """Documents from a file, or from every supported file under a folder (sorted, so runs repeat)."""
    if not path.exists():
        return [], [
            SourceError(url=str(path), reason=f"{path} does not exist", stage="file", fatal=True)
        ]
    files, errors = _folder_files(path) if path.is_dir() else ([path], [])
    if path.is_dir() and not files:
        exts = ", ".join(sorted(SUFFIX_FORMATS))
        return [], [
            *errors,
            SourceError(
                url=str(path), reason=f"{path} holds no {exts} files", stage="file", fatal=True
            ),
        ]
    docs: list[RawDoc] = []
    for rank, file in enumerate(files, 1):
        url = file.resolve().as_uri()
        size = file.stat().st_size
        if size > max_bytes:
            errors.append(
                SourceError(
                    url=url,
                    reason=f"{file.name} is {size / 2**20:.1f} MiB, over the "
                    f"{max_bytes / 2**20:.0f} MiB limit",
                    stage="file",
                )
            )
            continue
        try:
            text = decode_body(file.read_bytes())
        except DecodeError as exc:
            errors.append(SourceError(url=url, reason=f"{file.name}: {exc}", stage="file"))
            continue
        fmt = guess_format(file.name, "", text)
        title = html_title(text) if fmt == "html" else ""
        modified = (
            datetime.fromtimestamp(file.stat().st_mtime, UTC).replace(microsecond=0).isoformat()
        )
        docs.append(
            RawDoc(
                url=url,
                kind=kind_for(fmt, kind),
                content=text,
                format=fmt,
                title=title or file.stem,
                competition=competition,
                rank=rank,
                extra={"path": str(file), "modified": modified},
            )
        )
    return docs, errors
