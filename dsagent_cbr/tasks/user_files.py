"""Reading the files a user gives cbr: a CSV file, or a Kaggle competition folder.

A CSV file is read with its own field separator. A file that does not read gets one sentence
(NewTaskError).

It is apart from tasks/create.py because `cbr predict` reads a user's file the same way. Reading knows
nothing of the task made from the files."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from dsagent_cbr.tasks.infer import NewTaskError

SAMPLE_NAMES = ("sample_submission.csv", "samplesubmission.csv", "sample_submission_file.csv")

SEPARATORS = (",", ";", "\t", "|")
SEPARATOR_WORDS = {",": "a comma", ";": "a semicolon", "\t": "a tab", "|": "a vertical bar"}


def separator(path: Path) -> str:
    """The file's field separator: the one its header line holds most of, a comma on a tie. A file
    saved by a spreadsheet set to a European locale is separated by semicolons."""
    with path.open("rb") as fh:
        head = fh.readline(1 << 16).decode("utf-8", errors="replace")
    counts = {sep: head.count(sep) for sep in SEPARATORS}
    return max(SEPARATORS, key=counts.__getitem__)  # the first of the most: a comma on a tie


def read_csv(path: Path, what: str) -> Any:
    """The file as a frame; one not separated by commas is read with its own separator, which the
    frame's attrs["separator"] keeps (the task's files are written with commas)."""
    import pandas as pd

    if not path.is_file():
        raise NewTaskError(f"{what} {path} does not exist.")
    sep = separator(path)
    # a semicolon goes with a decimal comma ("1,5"), in the locales that write them
    options = {"sep": sep, "decimal": "," if sep == ";" else ".", "low_memory": False}
    by = "" if sep == "," else f" separated by {SEPARATOR_WORDS[sep]} ({sep!r})"
    try:
        frame = pd.read_csv(path, **options)
    except pd.errors.EmptyDataError as exc:
        raise NewTaskError(f"{what} {path} is empty: it has no header and no rows.") from exc
    except UnicodeDecodeError:
        try:
            frame = pd.read_csv(path, encoding="latin-1", **options)
        except (pd.errors.ParserError, ValueError) as exc:
            raise NewTaskError(
                f"{what} {path} does not parse as CSV{by}: {_first_line(exc)}."
            ) from exc
    except (pd.errors.ParserError, ValueError) as exc:
        raise NewTaskError(f"{what} {path} does not parse as CSV{by}: {_first_line(exc)}.") from exc
    if len(frame) == 0:
        raise NewTaskError(f"{what} {path} has a header but no rows.")
    if any(str(c).startswith("Unnamed: ") for c in frame.columns) and frame.columns.size > 1:
        unnamed = [str(c) for c in frame.columns if str(c).startswith("Unnamed: ")]
        raise NewTaskError(
            f"{what} {path} has {len(unnamed)} column(s) without a name in its header."
        )
    if sep != ",":
        frame.attrs["separator"] = sep
    return frame


def _first_line(exc: Exception) -> str:
    return str(exc).strip().splitlines()[0].rstrip(".") if str(exc).strip() else type(exc).__name__


def kaggle_files(folder: Path) -> tuple[Path, Path | None, Path | None, str | None]:
    """train.csv, test.csv and sample_submission.csv of a Kaggle competition folder (names matched
    without regard to case), and the first line of source.txt if the folder has one."""
    if not folder.is_dir():
        raise NewTaskError(f"{folder} is not a folder.")
    by_name = {p.name.lower(): p for p in folder.iterdir() if p.is_file()}
    train = by_name.get("train.csv")
    if train is None:
        raise NewTaskError(f"{folder} has no train.csv.")
    sample = next((by_name[n] for n in SAMPLE_NAMES if n in by_name), None)
    if sample is None:
        sample = next(
            (p for n, p in sorted(by_name.items()) if "submission" in n and n.endswith(".csv")),
            None,
        )
    source = by_name.get("source.txt")
    line = (
        source.read_text(encoding="utf-8", errors="replace").strip().splitlines()[0]
        if source
        else None
    )
    return train, by_name.get("test.csv"), sample, line or None
