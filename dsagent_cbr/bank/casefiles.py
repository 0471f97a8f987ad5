"""Cases from files: the shipped seed bank (casebank/), and folders of loose .txt/.md/.case files.

Parsing and inference are pure functions of names and text; reading files is kept to a few functions
that report each bad file as one line instead of stopping."""

from __future__ import annotations

import errno
import hashlib
import os
import re
import stat
import tomllib
from dataclasses import dataclass, field
from pathlib import Path, PurePath
from typing import Any

from dsagent_cbr.bank.cases import Case
from dsagent_cbr.bank.checks import (
    MAX_SCRIPT_CHARS,
    MAX_TEXT_CHARS,
    problem_with,
    problem_with_file_case,
)

IMPORT_SUFFIXES = (".txt", ".md", ".case")
# UTF-8 takes at most 4 bytes a character; room for front matter
MAX_FILE_BYTES = 4 * MAX_SCRIPT_CHARS + 10_000

# folder name -> modality; DS-Agent's tsa_cases mix forecasting and classification, hence "time-series"
FOLDER_MODALITIES = {
    "tabular_cases": "tabular",
    "tabular": "tabular",
    "nlp_cases": "text",
    "nlp": "text",
    "text": "text",
    "text_cases": "text",
    "tsa_cases": "time-series",
    "time-series": "time-series",
    "timeseries": "time-series",
    "forecasting": "forecasting",
    "forecasting_cases": "forecasting",
    "time-series-classification": "time-series-classification",
    "tsc": "time-series-classification",
}


@dataclass
class Loaded:
    cases: list[Case] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)  # one line per file that could not be used
    # a line per link, pipe, socket or device: never read
    skipped: list[str] = field(default_factory=list)


def split_front_matter(text: str) -> tuple[dict[str, Any], str]:
    """`+++` TOML front matter, then the body; text without it has empty front matter."""
    if not text.startswith("+++"):
        return {}, text
    end = text.find("\n+++", 3)
    if end < 0:
        raise ValueError("front matter opened with +++ is never closed")
    header = tomllib.loads(text[3:end])
    body = text[end + 4 :]
    return header, body.lstrip("\n")


def modality_from_folders(relative: PurePath) -> str:
    for part in reversed(relative.parts[:-1]):
        found = FOLDER_MODALITIES.get(part.lower())
        if found:
            return found
    return ""


_NUMBERED = re.compile(r"^(?P<prefix>.+?)-(?:\d+|\d+(?:st|nd|rd|th)-place.*)$")


def infer_competitions(stems: list[str]) -> dict[str, str]:
    """Competition slug per file stem, from names like `<competition>-<n>` or `<competition>-<notebook>`.

    Stems ending in a number name their competition directly; other stems take the longest such
    competition they start with, else lose a trailing number, else are their own competition."""
    known = set()
    for stem in stems:
        hit = _NUMBERED.match(stem)
        if hit:
            known.add(hit.group("prefix"))
    out = {}
    for stem in stems:
        candidates = [c for c in known if stem.startswith(c + "-") or stem == c]
        if candidates:
            out[stem] = max(candidates, key=len)
        else:
            out[stem] = re.sub(r"-\d+$", "", stem)
    return out


def infer_source_kind(stem: str, competition: str) -> str:
    """DS-Agent numbers the technical reports of a competition and names notebooks after their title."""
    rest = stem[len(competition) :].lstrip("-")
    return "writeup" if re.fullmatch(r"\d+", rest) or "place-solution" in rest else "notebook"


def read_text_file(path: Path, follow_links: bool = True) -> str:
    """UTF-8 text, or ValueError saying why the file cannot be used. A file that cannot fit the size cap
    of a case (checks.py) is refused before it is read. Without follow_links the file is opened with
    O_NOFOLLOW, so a link swapped in after the folder was listed is refused, not read through."""
    # NONBLOCK: a FIFO never hangs us
    flags = os.O_RDONLY | os.O_NONBLOCK | (0 if follow_links else os.O_NOFOLLOW)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        if exc.errno == errno.ELOOP and not follow_links:
            raise ValueError("a symbolic link (import never follows links)") from exc
        raise ValueError(f"unreadable ({exc.strerror or exc})") from exc
    return _text_of(fd)


def _text_of(fd: int) -> str:
    """The text of the open file `fd` (closed here), checked on the descriptor itself: a regular file,
    within the size cap, UTF-8, not empty; or ValueError saying why not."""
    with os.fdopen(fd, "rb") as fh:
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                raise ValueError("not a regular file")
            if info.st_size > MAX_FILE_BYTES:
                raise ValueError(
                    f"{info.st_size / 1e6:.1f} MB is over the size cap of a case ({MAX_TEXT_CHARS:,} "
                    f"characters of text, {MAX_SCRIPT_CHARS:,} of script); split it into several files"
                )
            data = fh.read(MAX_FILE_BYTES + 1)
        except OSError as exc:
            raise ValueError(f"unreadable ({exc.strerror or exc})") from exc
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ValueError(f"not UTF-8 (byte {exc.start})") from exc
    if not text.strip():
        raise ValueError("empty")
    if "\x00" in text:
        raise ValueError("binary content (NUL bytes)")
    return text


def insight_from_text(
    text: str,
    *,
    stem: str,
    modality: str = "",
    competition: str = "",
    source_kind: str = "",
    origin: str = "",
) -> Case:
    header, body = split_front_matter(text)
    body = body.strip()
    if not body:
        raise ValueError("no text after the front matter")
    comp = str(header.get("competition", competition))
    url = str(header.get("url", "")) or (
        f"https://www.kaggle.com/competitions/{comp}" if comp else ""
    )
    return Case(
        kind="insight",
        text=body,
        title=str(header.get("title", stem)),
        competition=comp,
        source_url=url,
        source_kind=str(header.get("kind", header.get("source_kind", source_kind or "writeup"))),
        modality=str(header.get("modality", modality)),
        task_type=str(header.get("task_type", "")),
        extra={"origin": origin} if origin else {},
    )


# Below the folder being imported nothing is followed, and what is listed is what is read: each folder is
# opened without following a link and listed through its descriptor, and each entry opened relative to
# that descriptor (dir_fd), checked on what was opened. A folder swapped for a link between the listing
# and the read is refused, not entered: a link may point anywhere (/etc/passwd, a key, another user's notes).
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW
# NONBLOCK: a FIFO swapped in never hangs us
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK
MAX_DEPTH = 32  # folders inside the imported one; deeper ones are skipped with a line
Found = dict[Path, str | ValueError]  # a case file's text, or why it cannot be used


class _NotPlain(Exception):
    """An entry that is a link, a pipe, a socket or a device (or became one after it was listed)."""

    def __init__(self, mode: int) -> None:
        super().__init__(mode)
        self.mode = mode


_KINDS = (
    (stat.S_ISFIFO, "a pipe (FIFO)"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISCHR, "a device"),
    (stat.S_ISBLK, "a device"),
)


def _skip_line(path: Path, mode: int) -> str:
    if stat.S_ISLNK(mode):
        return f"{path}: a symbolic link; import never follows links"
    what = next((what for test, what in _KINDS if test(mode)), None)
    # a file that became a folder, or the reverse, between the listing and the open
    if what is None:
        return f"{path}: changed while being imported; not read"
    return f"{path}: {what}; import reads regular files only and never opens it"


def _open_at(folder_fd: int, name: str, flags: int, wanted: Any) -> int:
    """A descriptor of `name` in the open folder, if what was opened is of the `wanted` kind
    (stat.S_ISDIR or stat.S_ISREG); a link is never followed."""
    try:
        fd = os.open(name, flags, dir_fd=folder_fd)
    except OSError as exc:
        # O_NOFOLLOW refuses a link with ELOOP, or with ENOTDIR beside O_DIRECTORY: say what it is now
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            raise _NotPlain(os.stat(name, dir_fd=folder_fd, follow_symlinks=False).st_mode) from exc
        raise
    mode = os.fstat(fd).st_mode
    if not wanted(mode):
        os.close(fd)
        raise _NotPlain(mode)
    return fd


def import_texts(root: Path) -> tuple[Found, list[str]]:
    """The text of each .txt/.md/.case regular file under `root` (or why it cannot be used), and one line
    per entry skipped: a link, a pipe, a socket, a device, an unreadable folder. `root` is the user's own
    choice and may be a link; nothing below it is followed."""
    if root.is_file():
        try:
            return {root: read_text_file(root)}, []
        except ValueError as exc:
            return {root: exc}, []
    found: Found = {}
    skipped: list[str] = []
    try:
        # followed: the user named it
        fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_NONBLOCK)
    except OSError as exc:
        return found, [f"{root}: not a folder that can be read ({exc.strerror or exc})"]
    try:
        _read_folder(fd, root, 0, found, skipped)
    finally:
        os.close(fd)
    return found, skipped


def _read_folder(fd: int, here: Path, depth: int, found: Found, skipped: list[str]) -> None:
    """Read the case files of the open folder `fd` (at `here`) and of the folders under it into `found`."""
    for name in sorted(os.listdir(fd)):
        path = here / name
        try:
            # lstat first: a pipe or a device is named without being opened at all
            mode = os.stat(name, dir_fd=fd, follow_symlinks=False).st_mode
            if stat.S_ISDIR(mode) and depth >= MAX_DEPTH:
                skipped.append(f"{path}: more than {MAX_DEPTH} folders deep; not looked into")
            elif stat.S_ISDIR(mode):
                inner = _open_at(fd, name, _DIR_FLAGS, stat.S_ISDIR)
                try:
                    _read_folder(inner, path, depth + 1, found, skipped)
                finally:
                    os.close(inner)
            elif not stat.S_ISREG(mode):
                skipped.append(_skip_line(path, mode))
            elif path.suffix.lower() in IMPORT_SUFFIXES:
                found[path] = _read_at(fd, name)
        except _NotPlain as odd:  # swapped since the listing
            skipped.append(_skip_line(path, odd.mode))
        except OSError as exc:  # gone or unreadable since the listing
            skipped.append(f"{path}: unreadable ({exc.strerror or exc})")


def _read_at(folder_fd: int, name: str) -> str | ValueError:
    """The text of the regular file `name` in the open folder, or why it cannot be used."""
    try:
        return _text_of(_open_at(folder_fd, name, _FILE_FLAGS, stat.S_ISREG))
    except ValueError as exc:
        return exc
    except OSError as exc:
        return ValueError(f"unreadable ({exc.strerror or exc})")


def load_import_folder(root: Path, modality: str = "", source_kind: str = "") -> Loaded:
    """Every .txt/.md/.case file under `root` (or `root` itself if it is a file) as an insight case."""
    found, skipped = import_texts(root)
    loaded = Loaded(skipped=sorted(skipped))
    files = sorted(found)
    if not files:
        loaded.problems.append(f"{root}: no .txt, .md or .case files found")
        return loaded
    base = root.parent if root.is_file() else root
    comps = infer_competitions([p.stem for p in files])
    for path in files:
        relative = PurePath(base.name) / path.relative_to(base)
        try:
            text = found[path]
            if isinstance(text, ValueError):
                raise text
            comp = comps[path.stem]
            case = insight_from_text(
                text,
                stem=path.stem,
                modality=modality or modality_from_folders(relative),
                competition=comp,
                source_kind=source_kind or infer_source_kind(path.stem, comp),
                origin=str(relative),
            )
            refused = problem_with(case) or problem_with_file_case(case)
            if refused:
                raise ValueError(refused)
        except (ValueError, tomllib.TOMLDecodeError) as exc:
            loaded.problems.append(f"{path}: {exc}")
            continue
        loaded.cases.append(case)
    return loaded


def load_seed(casebank: Path) -> Loaded:
    """The shipped bank: insights/**/*.md and solutions/<task>/{task.md, solution.py, meta.toml}."""
    loaded = Loaded()
    for path in sorted((casebank / "insights").rglob("*.md")):
        try:
            relative = path.relative_to(casebank / "insights")
            loaded.cases.append(
                insight_from_text(
                    read_text_file(path),
                    stem=path.stem,
                    modality=modality_from_folders(relative),
                    origin=f"casebank/insights/{relative}",
                )
            )
        except (ValueError, tomllib.TOMLDecodeError) as exc:
            loaded.problems.append(f"{path}: {exc}")
    solutions = casebank / "solutions"
    for folder in (
        sorted(p for p in solutions.iterdir() if p.is_dir()) if solutions.is_dir() else []
    ):
        try:
            loaded.cases.append(solution_from_folder(folder))
        except (ValueError, tomllib.TOMLDecodeError) as exc:
            loaded.problems.append(f"{folder}: {exc}")
    return loaded


def solution_from_folder(folder: Path) -> Case:
    missing = [n for n in ("task.md", "solution.py", "meta.toml") if not (folder / n).is_file()]
    if missing:
        raise ValueError(f"incomplete solution case, missing {', '.join(missing)}")
    meta = tomllib.loads(read_text_file(folder / "meta.toml"))
    description = read_text_file(folder / "task.md").strip()
    script = read_text_file(folder / "solution.py")
    name = str(meta.get("task", folder.name))

    def score(key: str) -> float | None:
        value = meta.get(key)
        return float(value) if isinstance(value, int | float) else None

    return Case(
        kind="solution",
        text=description,
        title=f"{name} (seed solution)",
        task_name=name,
        script=script,
        metric=str(meta.get("metric", "")),
        modality=str(meta.get("modality", "")),
        task_type=str(meta.get("task_type", "")),
        valid_score=score("valid_score"),
        test_score=score("test_score"),
        source_kind=str(meta.get("source", "reference")),
        extra={
            "direction": str(meta.get("direction", "")),
            "train_seconds": score("train_seconds"),
            "origin": f"casebank/solutions/{folder.name}",
        },
    )


def fingerprint(casebank: Path) -> str:
    """Changes whenever a seed file is added, removed or edited."""
    digest = hashlib.sha256()
    patterns = [(casebank / "insights", "*.md"), (casebank / "solutions", "*")]
    for base, pattern in patterns:
        if not base.is_dir():
            continue
        for path in sorted(p for p in base.rglob(pattern) if p.is_file()):
            digest.update(str(path.relative_to(casebank)).encode())
            digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()[:20]
