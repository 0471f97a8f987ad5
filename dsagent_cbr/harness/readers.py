"""The one door from a script's workspace to the host: everything cbr takes from what a script left is
read here, as untrusted input.

`harvest` carries the script's files out of its scratch folder into the run folder once the script is
dead: regular files only, each opened without following a link and copied through its descriptor;
links, pipes, sockets and devices stay behind, and so does anything past the count and size bounds.
The readers below then parse those copies with their size and shape checked before any parsing, within
a time cap, and JSON against its schema: a file claiming a billion rows or columns, an .npy header
claiming 10^12 values, or `{"x": null}` where numbers belong is an ArtefactError (the script's failure,
one line), never an exception of ours and never an allocation on the host."""

from __future__ import annotations

import contextlib
import csv
import io
import math
import os
import stat
import time
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dsagent_cbr.bounded import Unreadable, read_open

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd

MAX_FILES = 10_000  # files harvested from one workspace; the rest stay behind
MAX_ENTRIES = 100_000  # entries a harvest looks at, folders included
MAX_FILE_BYTES = 512 * 2**20  # the largest file any reader takes
HEADER_BYTES = 2**20  # a CSV header line longer than this is not a header
CSV_CHUNK_ROWS = 20_000
CSV_SECONDS = 60.0
_COPY = 2**20


FEATURE_IMPORTANCE = "cbr_feature_importance.json"  # written beside the predictions by bootstrap.py
MAX_FEATURES = 1000
# bootstrap.py: [first fit's rounds, refit's own rounds] per model early-stopped or cut short
REFIT_ROUNDS = "cbr_refit_rounds.json"
# bootstrap.py: a first fit's rounds, {"calls": per booster trained, "models": per early-stopped model,
# "unwatched": per booster trained, the rounds one that watched no validation rows built}
FIT_ROUNDS = "cbr_fit_rounds.json"
FitRounds = dict[str, list[int | None]]


class ArtefactError(Exception):
    """A file the script left cannot be taken as it must be; the message says why, in one line."""


class Missing(ArtefactError):
    """The script did not write the file at all."""


def _open_regular(folder: Path, relative: str) -> int:
    """A descriptor of folder/relative if, and only if, every part of the path is a real folder or file:
    no link followed on the way, not a pipe (which would block), not a device (which could be endless)."""
    parts = Path(relative).parts
    if not parts or any(p in ("", ".", "..") for p in parts) or Path(relative).is_absolute():
        raise ArtefactError(f"{relative!r} is not a file name inside the workspace")
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    try:
        for part in parts[:-1]:
            inner = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
            os.close(fd)
            fd = inner
        target = os.open(parts[-1], os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=fd)
    finally:
        os.close(fd)
    if not stat.S_ISREG(os.fstat(target).st_mode):
        os.close(target)
        raise ArtefactError(f"{relative} is not a regular file")
    return target


def read_bytes(folder: Path, name: str, limit: int = MAX_FILE_BYTES) -> bytes:
    """The bytes of a regular file in `folder`, at most `limit` of them (more is an error)."""
    try:
        fd = _open_regular(folder, name)
    except FileNotFoundError:
        raise Missing(f"the script wrote no {name}") from None
    except OSError as exc:
        raise ArtefactError(f"{name} is not a regular file cbr may read ({exc.strerror})") from exc
    try:
        return read_open(fd, name, limit)
    except Unreadable as exc:
        raise ArtefactError(str(exc)) from None


def _copy_file(source: Path, relative: str, dest: Path, budget: int) -> int:
    fd = _open_regular(source, relative)
    target = dest / relative
    target.parent.mkdir(parents=True, exist_ok=True)
    copied = 0
    with os.fdopen(fd, "rb") as src, target.open("wb") as out:
        while copied < budget and (block := src.read(min(_COPY, budget - copied))):
            out.write(block)
            copied += len(block)
    return copied


def harvest(
    source: Path, dest: Path, *, unchanged: dict[str, tuple[int, int]], max_bytes: int
) -> list[str]:
    """Copy the regular files the script made or changed under `source` into `dest` (cbr's files it did
    not touch, named in `unchanged` with their (size, mtime_ns), are not copied again). Returns one line
    per thing left behind."""
    dest.mkdir(parents=True, exist_ok=True)
    left: list[str] = []
    files = 0
    seen = 0
    budget = max_bytes
    stack = [""]
    while stack:
        folder = stack.pop()
        try:
            entries = sorted(os.scandir(source / folder), key=lambda e: e.name)
        except OSError:
            continue
        seen += len(entries)
        if seen > MAX_ENTRIES:
            left.append(
                f"{_shown(folder) or '.'}: more than {MAX_ENTRIES} entries; the rest were not "
                "looked at"
            )
            break
        for entry in entries:
            relative = os.path.join(folder, entry.name)
            try:
                info = entry.stat(follow_symlinks=False)
            except OSError:  # gone, or a name the filesystem will not look up
                continue
            if stat.S_ISDIR(info.st_mode):
                stack.append(relative)
            elif not stat.S_ISREG(info.st_mode):
                left.append(f"{_shown(relative)}: not a regular file")
            elif unchanged.get(relative) != (info.st_size, info.st_mtime_ns):
                files += 1
                if files > MAX_FILES or budget <= 0:
                    left.append(f"{_shown(relative)}: past the harvest's bounds")
                    continue
                with contextlib.suppress(OSError, ArtefactError):
                    budget -= _copy_file(source, relative, dest, budget)
    return left


def _shown(relative: str) -> str:
    """A file name as text that can be written out: a name that is not UTF-8 comes from os.scandir with
    lone surrogates, which no UTF-8 file takes."""
    return os.fsencode(relative).decode("utf-8", errors="replace")


def read_text(path: Path, limit: int) -> str:
    """The head and tail of a text file the script wrote to (its stdout, say), never more than `limit`
    characters in all, however large the file claims to be."""
    half = limit // 2
    try:
        with path.open("rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            if size <= limit:
                return fh.read(limit).decode("utf-8", errors="replace")
            head = fh.read(half)
            fh.seek(size - half)
            tail = fh.read(half)
    except OSError:
        return ""
    cut = size - 2 * half
    return (
        f"{head.decode('utf-8', errors='replace')}\n... [{cut} bytes cut] ...\n"
        f"{tail.decode('utf-8', errors='replace')}"
    )


def csv_columns(raw: bytes, name: str) -> list[str]:
    """The header of a CSV, read by itself: its first line, up to the first \\n. A line over HEADER_BYTES is
    an error, and so is one the csv module cannot split strictly (a bare \\r inside it, a quote left open
    at its end, text after a closing quote): pandas may read another header from such a line."""
    end = raw.find(b"\n", 0, HEADER_BYTES + 1)
    if end < 0 and len(raw) > HEADER_BYTES:
        raise ArtefactError(
            f"{name}'s first line is over {HEADER_BYTES // 1024} kB: not a CSV header"
        )
    # utf-8-sig: a leading byte-order mark is no part of the first column's name (pandas drops it too)
    line = raw[: end if end >= 0 else len(raw)].decode("utf-8-sig", errors="replace")
    try:
        return next(csv.reader([line], strict=True), [])
    except csv.Error as exc:  # the above, or a field over csv's size limit
        why = (
            "a bare \\r inside it: lines must end in \\n or \\r\\n"
            if "\r" in line
            else _first_line(exc)
        )
        raise ArtefactError(f"{name}'s header line cannot be read as CSV ({why})") from exc


def read_csv(
    raw: bytes,
    name: str,
    *,
    wanted: list[str],
    max_rows: int,
    max_columns: int,
    seconds: float = CSV_SECONDS,
) -> pd.DataFrame:
    """The `wanted` columns of a CSV the script wrote, after its header passed the shape check; parsing
    stops past `max_rows` rows (an error) and past `seconds`."""
    import pandas as pd

    columns = csv_columns(raw, name)
    if len(columns) > max_columns:
        raise ArtefactError(
            f"{name} has {len(columns)} columns; at most {max_columns} are expected"
        )
    missing = [c for c in wanted if c not in columns]
    if missing:
        raise ArtefactError(f"{name} lacks column(s) {', '.join(missing)}")
    deadline, chunks = time.monotonic() + seconds, []
    try:
        reader = pd.read_csv(
            io.BytesIO(raw), usecols=wanted, nrows=max_rows + 1, chunksize=CSV_CHUNK_ROWS
        )
        for chunk in reader:
            chunks.append(chunk)
            if time.monotonic() > deadline:
                raise ArtefactError(f"{name} took over {seconds:g} s to parse")
    # ParserError and UnicodeDecodeError are ValueErrors, named for the reader; OverflowError: an integer
    # column with a value past uint64 ("int too large to convert to float")
    except (ValueError, pd.errors.ParserError, UnicodeDecodeError, OverflowError) as exc:
        raise ArtefactError(f"{name} is not a readable CSV ({_first_line(exc)})") from exc
    frame = pd.concat(chunks, ignore_index=True) if chunks else pd.DataFrame(columns=wanted)
    if len(frame) > max_rows:
        raise ArtefactError(f"{name} has more than the {max_rows} rows expected")
    return frame


# predictions are numbers or labels: no objects, records, raw bytes, dates or complex
NPY_KINDS = "biufSU"


def read_npy(raw: bytes, name: str, *, max_items: int) -> np.ndarray:
    """An .npy array whose header has been checked first: numbers or strings only, not a lone value, at
    most `max_items` values, and exactly the bytes the header promises (so the array never costs more
    than the file); its text, if any, is Unicode (else printing or writing it would raise)."""
    import numpy as np

    shape, fortran, dtype, offset = _npy_header(raw, name)
    if dtype.kind not in NPY_KINDS or dtype.itemsize == 0:
        raise ArtefactError(
            f"{name} holds Python objects, records or empty values, not numbers or strings"
        )
    if not shape or any(n < 0 for n in shape):
        raise ArtefactError(f"{name} has shape {shape}: not an array of rows")
    items = math.prod(shape)
    if items > max_items:
        raise ArtefactError(f"{name} claims {items} values; at most {max_items} are expected")
    if len(raw) - offset != items * dtype.itemsize:
        raise ArtefactError(
            f"{name}'s header claims {items} values of {dtype.itemsize} bytes, not what it holds"
        )
    flat = np.frombuffer(raw, dtype=dtype, count=items, offset=offset)
    if dtype.kind == "U":
        codes = flat.view(np.dtype("u4").newbyteorder(dtype.byteorder))
        if ((codes > 0x10FFFF) | ((codes >= 0xD800) & (codes <= 0xDFFF))).any():
            raise ArtefactError(f"{name} holds text with characters that are not Unicode")
    try:
        return flat.reshape(shape, order="F" if fortran else "C").copy()
    # "maximum supported dimension": a zero-size array with an absurd shape
    except ValueError as exc:
        why = _first_line(exc)
        raise ArtefactError(f"{name} has shape {shape}, which numpy cannot make ({why})") from exc


def _npy_header(raw: bytes, name: str) -> tuple[tuple[int, ...], bool, np.dtype, int]:
    """The shape, order and dtype an .npy header states, and where its data starts."""
    import tokenize

    import numpy as np

    fp = io.BytesIO(raw)
    try:
        version = np.lib.format.read_magic(fp)
        if version == (1, 0):
            shape, fortran, dtype = np.lib.format.read_array_header_1_0(fp)
        elif version == (2, 0):
            shape, fortran, dtype = np.lib.format.read_array_header_2_0(fp)
        else:
            raise ArtefactError(
                f"{name} is an .npy file of version {version}, which cbr does not read"
            )
    # numpy parses the header (at most 10 kB) with ast.literal_eval, then, for a Python 2 header, with
    # tokenize, and builds a dtype from whatever the descr holds; each raises in its own way: TypeError for
    # {[1]: 2}, IndexError for a 1-tuple descr, TokenError for "[[[", RecursionError for "1+1+...+1" and
    # MemoryError (the parser's stack, not the host's memory) for 9000 unary minuses
    except (
        ValueError,
        OSError,
        EOFError,
        SyntaxError,
        TypeError,
        IndexError,
        tokenize.TokenError,
        RecursionError,
        MemoryError,
    ) as exc:
        raise ArtefactError(f"{name} is not a readable .npy array ({_first_line(exc)})") from exc
    # int(): numpy lets True be a length
    return (tuple(int(n) for n in shape), fortran, dtype, fp.tell())


def read_json(raw: bytes, name: str, schema: Any) -> Any:
    """JSON validated against a pydantic TypeAdapter."""
    from pydantic import ValidationError

    try:
        return schema.validate_json(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "the top level"
        raise ArtefactError(
            f"{name} is not what cbr expects there ({where}: {first['msg']})"
        ) from exc


@cache
def _importance_schema() -> Any:
    from typing import Annotated

    from pydantic import FiniteFloat, StringConstraints, TypeAdapter

    return TypeAdapter(dict[Annotated[str, StringConstraints(max_length=200)], FiniteFloat])


def read_importance(folder: Path) -> dict[str, float] | None:
    """The feature importances left beside the predictions ({feature: finite number}, at most
    MAX_FEATURES), None when there are none; anything else there is an ArtefactError."""
    try:
        raw = read_bytes(folder, FEATURE_IMPORTANCE, limit=2**20)
    except Missing:
        return None
    importance = read_json(raw, FEATURE_IMPORTANCE, _importance_schema())
    if len(importance) > MAX_FEATURES:
        raise ArtefactError(
            f"{FEATURE_IMPORTANCE} names {len(importance)} features; at most {MAX_FEATURES} are kept"
        )
    return importance


@cache
def _rounds_schema() -> Any:
    from typing import Annotated

    from pydantic import Field, PositiveInt, TypeAdapter

    pair = Annotated[list[PositiveInt], Field(min_length=2, max_length=2)]
    return TypeAdapter(Annotated[list[pair], Field(max_length=100)])


def read_refit_rounds(folder: Path) -> list[list[int]] | None:
    """What a refit's early-stopped models kept, and where its deadline cut one that watched no rows
    short of its first fit's rounds: [the first fit's rounds, the refit's own] per model (empty: none was
    cut short); None when the refit left no such file or an unreadable one."""
    try:
        return read_json(
            read_bytes(folder, REFIT_ROUNDS, limit=2**16), REFIT_ROUNDS, _rounds_schema()
        )
    except ArtefactError:
        return None


@cache
def _fit_rounds_schema() -> Any:
    from typing import Annotated, NotRequired

    from pydantic import Field, TypeAdapter
    from typing_extensions import TypedDict  # pydantic's choice before Python 3.12

    rounds = Annotated[int, Field(gt=0, le=10**7)]  # passed on in the refit's environment
    calls = Annotated[list[rounds | None], Field(max_length=100)]
    models = Annotated[list[rounds], Field(max_length=100)]
    unwatched = NotRequired[calls]
    fields = {"calls": calls, "models": models, "unwatched": unwatched}
    return TypeAdapter(TypedDict("FitRounds", fields))


def read_fit_rounds(folder: Path) -> FitRounds | None:
    """The rounds a first fit's boosters kept, for its refit to stop at: {"calls": per booster in the
    order trained (None: not stopped early), "models": per early-stopped model}; None when the run left no
    such file or an unreadable one (the refit then learns them from its own validation fit)."""
    try:
        return read_json(
            read_bytes(folder, FIT_ROUNDS, limit=2**16), FIT_ROUNDS, _fit_rounds_schema()
        )
    except ArtefactError:
        return None


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0][:300] if text else type(exc).__name__
