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
from dsagent_cbr.bank.checks import MAX_SCRIPT_CHARS, MAX_TEXT_CHARS, problem_with, problem_with_file_case

IMPORT_SUFFIXES = (".txt", ".md", ".case")
MAX_FILE_BYTES = 4 * MAX_SCRIPT_CHARS + 10_000  # UTF-8 takes at most 4 bytes a character; room for front matter

# folder name -> modality; DS-Agent's tsa_cases mix forecasting and classification, hence "time-series"
FOLDER_MODALITIES = {
    "tabular_cases": "tabular", "tabular": "tabular",
    "nlp_cases": "text", "nlp": "text", "text": "text", "text_cases": "text",
    "tsa_cases": "time-series", "time-series": "time-series", "timeseries": "time-series",
    "forecasting": "forecasting", "forecasting_cases": "forecasting",
    "time-series-classification": "time-series-classification", "tsc": "time-series-classification",
}


@dataclass
class Loaded:
    cases: list[Case] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)  # one line per file that could not be used
    skipped: list[str] = field(default_factory=list)  # one line per link met: never followed, never read


def split_front_matter(text: str) -> tuple[dict[str, Any], str]:
    """`+++` TOML front matter, then the body; text without it has empty front matter."""
    if not text.startswith("+++"):
        return {}, text
    end = text.find("\n+++", 3)
    if end < 0:
        raise ValueError("front matter opened with +++ is never closed")
    header = tomllib.loads(text[3:end])
    body = text[end + 4:]
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
    rest = stem[len(competition):].lstrip("-")
    return "writeup" if re.fullmatch(r"\d+", rest) or "place-solution" in rest else "notebook"


def read_text_file(path: Path, follow_links: bool = True) -> str:
    """UTF-8 text, or ValueError saying why the file cannot be used. A file that cannot fit the size cap
    of a case (checks.py) is refused before it is read. Without follow_links the file is opened with
    O_NOFOLLOW, so a link swapped in after the folder was listed is refused, not read through."""
    flags = os.O_RDONLY | os.O_NONBLOCK | (0 if follow_links else os.O_NOFOLLOW)  # NONBLOCK: a FIFO never hangs us
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        if exc.errno == errno.ELOOP and not follow_links:
            raise ValueError("a symbolic link (import never follows links)") from exc
        raise ValueError(f"unreadable ({exc.strerror or exc})") from exc
    with os.fdopen(fd, "rb") as fh:
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                raise ValueError("not a regular file")
            if info.st_size > MAX_FILE_BYTES:
                raise ValueError(f"{info.st_size / 1e6:.1f} MB is over the size cap of a case ({MAX_TEXT_CHARS:,} "
                                 f"characters of text, {MAX_SCRIPT_CHARS:,} of script); split it into several files")
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


def insight_from_text(text: str, *, stem: str, modality: str = "", competition: str = "",
                      source_kind: str = "", origin: str = "") -> Case:
    header, body = split_front_matter(text)
    body = body.strip()
    if not body:
        raise ValueError("no text after the front matter")
    comp = str(header.get("competition", competition))
    url = str(header.get("url", "")) or (f"https://www.kaggle.com/competitions/{comp}" if comp else "")
    return Case(kind="insight", text=body, title=str(header.get("title", stem)), competition=comp,
                source_url=url, source_kind=str(header.get("kind", header.get("source_kind", source_kind or "writeup"))),
                modality=str(header.get("modality", modality)), task_type=str(header.get("task_type", "")),
                extra={"origin": origin} if origin else {})


def import_files(root: Path) -> tuple[list[Path], list[str]]:
    """The .txt/.md/.case regular files under `root`, and one line per link met on the way. `root` is the
    user's own choice and may be a link; a link inside it may point anywhere (/etc/passwd, a key, another
    user's notes), so it is never followed: neither a linked file nor a linked folder is read."""
    if root.is_file():
        return [root], []
    files, links = [], []
    for folder, dirs, names in os.walk(root):  # followlinks=False: a linked folder is listed, not entered
        here = Path(folder)
        for name in sorted(dirs + names):
            path = here / name
            if path.is_symlink():
                links.append(f"{path}: a symbolic link; import never follows links")
            elif name in names and path.suffix.lower() in IMPORT_SUFFIXES and path.is_file():
                files.append(path)
    return sorted(files), sorted(links)


def load_import_folder(root: Path, modality: str = "", source_kind: str = "") -> Loaded:
    """Every .txt/.md/.case file under `root` (or `root` itself if it is a file) as an insight case."""
    files, links = import_files(root)
    loaded = Loaded(skipped=links)
    if not files:
        loaded.problems.append(f"{root}: no .txt, .md or .case files found")
        return loaded
    base = root.parent if root.is_file() else root
    comps = infer_competitions([p.stem for p in files])
    for path in files:
        relative = PurePath(base.name) / path.relative_to(base)
        try:
            text = read_text_file(path, follow_links=path == root)
            comp = comps[path.stem]
            case = insight_from_text(
                text, stem=path.stem, modality=modality or modality_from_folders(relative), competition=comp,
                source_kind=source_kind or infer_source_kind(path.stem, comp), origin=str(relative))
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
            loaded.cases.append(insight_from_text(read_text_file(path), stem=path.stem,
                                                  modality=modality_from_folders(relative),
                                                  origin=f"casebank/insights/{relative}"))
        except (ValueError, tomllib.TOMLDecodeError) as exc:
            loaded.problems.append(f"{path}: {exc}")
    solutions = casebank / "solutions"
    for folder in sorted(p for p in solutions.iterdir() if p.is_dir()) if solutions.is_dir() else []:
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

    return Case(kind="solution", text=description, title=f"{name} (seed solution)", task_name=name,
                script=script, metric=str(meta.get("metric", "")), modality=str(meta.get("modality", "")),
                task_type=str(meta.get("task_type", "")), valid_score=score("valid_score"),
                test_score=score("test_score"), source_kind=str(meta.get("source", "reference")),
                extra={"direction": str(meta.get("direction", "")), "train_seconds": score("train_seconds"),
                       "origin": f"casebank/solutions/{folder.name}"})


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
