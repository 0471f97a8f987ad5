"""Telling a damaged store file from a good one before a library trips over it.

A truncated SQLite file opens without complaint when it is empty (SQLite takes it for a new database, and
Chroma then starts an empty bank) and fails later, deep inside Chroma, when it is cut short. Its header
records how many pages the database has, so a cut is visible from the file size alone."""

from __future__ import annotations

from pathlib import Path

from dsagent_cbr.errors import CbrError
from dsagent_cbr.saying import say

_MAGIC = b"SQLite format 3\x00"


def sqlite_problem(path: Path) -> str | None:
    """Why the SQLite file at `path` is not whole, or None when its header and size agree."""
    try:
        size = path.stat().st_size
        with path.open("rb") as fh:
            header = fh.read(100)
    except FileNotFoundError:
        return "is missing"
    except OSError as exc:
        return f"cannot be read ({exc.strerror or exc})"
    if size == 0:
        return "is empty (0 bytes)"
    if len(header) < 100 or not header.startswith(_MAGIC):
        return "is not an SQLite database"
    if any(path.with_name(path.name + suffix).exists() for suffix in ("-journal", "-wal")):
        # a transaction in flight: SQLite settles the size itself when it opens the file
        return None
    page_size = int.from_bytes(header[16:18], "big")
    page_size = 65536 if page_size == 1 else page_size
    pages = int.from_bytes(header[28:32], "big")
    # the page count is only kept up to date when these agree
    header_valid = header[24:28] == header[92:96]
    if page_size < 512 or (header_valid and pages and size < pages * page_size):
        return f"is cut short ({size:,} of {pages * page_size:,} bytes)"
    if size % page_size:
        return f"is cut short ({size:,} bytes is not a whole number of {page_size}-byte pages)"
    return None


def damaged(what: Path | str, why: str) -> CbrError:
    """The one sentence for a store file we cannot trust: which file, what is wrong, and the fix."""
    return CbrError(
        f"The bank's index file {what} {why}; run `cbr bank rebuild` to rebuild the index from "
        "the bank's journal and seed files (no case is lost)."
    )


def notice(line: str) -> None:
    """One line on stderr about something the bank did on its own (a recovery, a cache set aside)."""
    say(line)
