# Runs untrusted, inside the analysis kernel's sandbox: cbr analyze's first cell holds this file
# whole, then calls it once per data file. It reads each file as it really is (the separator
# sniffed by csv.Sniffer, the encoding checked and else detected by charset_normalizer, never
# assumed) and says exactly what it holds: column names as Python sees them (repr, so a space at an
# end shows), types, missing values, first rows, and anything odd (a header row repeated inside the
# data, a column that is all missing, numbers read as text). It imports nothing of cbr: the notebook
# runs again anywhere.
import codecs
import csv
import json
import os

import pandas as pd

SAMPLE_CHARS = 16_384  # of a text table, for the sniffer: whole lines of it, at most 50
CHUNK_BYTES = 1 << 20
MAX_COLUMNS_LISTED = 60
TEXT_SHOWN = 2000
CHAOS_MARGIN = 0.1  # charset_normalizer's measure of how garbled a decoding reads
BOMS = (
    (codecs.BOM_UTF8, "utf-8-sig"),
    (codecs.BOM_UTF16_LE, "utf-16"),
    (codecs.BOM_UTF16_BE, "utf-16"),
)


def sniff_encoding(path):
    """The file's encoding: a byte-order mark's, else UTF-8 when every byte of it decodes as UTF-8,
    else what charset_normalizer finds most likely."""
    with open(path, "rb") as fh:
        head = fh.read(4)
        for bom, name in BOMS:
            if head.startswith(bom):
                return name
        fh.seek(0)
        decoder = codecs.getincrementaldecoder("utf-8")()
        try:
            while chunk := fh.read(CHUNK_BYTES):
                decoder.decode(chunk)
            decoder.decode(b"", final=True)
            return "utf-8"
        except UnicodeDecodeError:
            pass
    from charset_normalizer import from_path

    best = from_path(path).best()
    # on a short table the detector cannot tell cp1252 from a Mac or Central European code page
    # (Latin-1 text came out as mac_latin2): cp1252, far the likelier, wins when it reads as cleanly
    western = from_path(path, cp_isolation=["cp1252"]).best()
    if western is not None and (best is None or western.chaos <= best.chaos + CHAOS_MARGIN):
        return "cp1252"
    return best.encoding if best is not None else "latin-1"


def sniff_separator(path, encoding):
    """The separator csv.Sniffer finds in the file's first whole lines; a tab for .tsv and a comma
    for the others when it finds none."""
    with open(path, encoding=encoding, errors="replace", newline="") as fh:
        sample = fh.read(SAMPLE_CHARS)
    lines = sample.splitlines()
    lines = lines[:-1] if len(sample) == SAMPLE_CHARS and len(lines) > 1 else lines
    try:
        return csv.Sniffer().sniff("\n".join(lines[:50]), delimiters=",;\t|").delimiter
    except csv.Error:
        return "\t" if path.lower().endswith((".tsv", ".tab")) else ","


def read_table(path):
    """The table at `path`, and the call that reads it so (shown, for reading it again)."""
    ext = os.path.splitext(path)[1].lower()
    if ext in (".parquet", ".pq"):
        return pd.read_parquet(path), f"pd.read_parquet({path!r})"
    if ext in (".xlsx", ".xlsm", ".xls"):
        return pd.read_excel(path), f"pd.read_excel({path!r})  # its first sheet"
    if ext == ".feather":
        return pd.read_feather(path), f"pd.read_feather({path!r})"
    if ext in (".jsonl", ".ndjson"):
        return pd.read_json(path, lines=True), f"pd.read_json({path!r}, lines=True)"
    if ext == ".json":
        with open(path, encoding=sniff_encoding(path)) as fh:
            return pd.DataFrame(json.load(fh)), f"pd.DataFrame(json.load(open({path!r})))"
    encoding = sniff_encoding(path)
    sep = sniff_separator(path, encoding)
    frame = pd.read_csv(path, sep=sep, encoding=encoding)
    return frame, f"pd.read_csv({path!r}, sep={sep!r}, encoding={encoding!r})"


def read_text(path):
    with open(path, encoding=sniff_encoding(path), errors="replace") as fh:
        return fh.read()


def read_json(path):
    with open(path, encoding=sniff_encoding(path)) as fh:
        return json.load(fh)


def header_rows(frame):
    """The rows that repeat the header: every value the column's own name (a file made of joined
    files); the first column's values are looked at first, so a large table costs one column."""
    if frame.empty or frame.shape[1] < 2:
        return []
    names = [str(name).strip() for name in frame.columns]
    first = frame.iloc[:, 0].astype(str).str.strip() == names[0]
    candidates = frame[first.to_numpy()]
    same = candidates.astype(str).apply(lambda column: column.str.strip()) == names
    return list(candidates.index[same.all(axis=1).to_numpy()])


def numbers_as_text(frame):
    """Text columns whose values nearly all read as numbers: a stray value, a thousands comma."""
    found = []
    for index, dtype in enumerate(frame.dtypes):
        if not (dtype.kind == "O" or pd.api.types.is_string_dtype(dtype)):
            continue
        values = frame.iloc[:, index].dropna().astype(str).head(2000)
        numbers = pd.to_numeric(values.str.replace(",", "", regex=False), errors="coerce")
        if len(values) and numbers.notna().mean() >= 0.9:
            stray = values[numbers.isna()]
            example = f", such as {stray.iloc[0]!r}" if len(stray) else ""
            found.append(f"{frame.columns[index]!r} holds numbers read as text{example}")
    return found


def oddities(frame):
    """What a reader of the table would trip on, one line each."""
    names = list(frame.columns)
    odd = [
        f"{name!r} has a space at an end"
        for name in names
        if isinstance(name, str) and name != name.strip()
    ]
    odd += [
        f"{name!r} is a column with no name in the file"
        for name in names
        if str(name).startswith("Unnamed: ")
    ]
    odd += [
        f"{name!r} is a name the file repeats (pandas renamed it)"
        for name in names
        if isinstance(name, str)
        and "." in name
        and name.rsplit(".", 1)[1].isdigit()
        and name.rsplit(".", 1)[0] in names
    ]
    odd += [
        f"{names[i]!r} is missing in every row"
        for i in range(len(names))
        if len(frame) and frame.iloc[:, i].isna().all()
    ]
    repeated = header_rows(frame)
    if repeated:
        odd.append(
            f"{len(repeated)} row(s) repeat the header inside the data, at index "
            f"{', '.join(map(str, repeated[:10]))}"
        )
    empty = int(frame.isna().all(axis=1).sum()) if frame.shape[1] else 0
    if empty:
        odd.append(f"{empty} row(s) are missing in every column")
    return odd + numbers_as_text(frame)


def describe_table(frame, path, variable, how):
    print(f"== {path}: a table, loaded as {variable} by {how}")
    print(f"{frame.shape[0]} rows, {frame.shape[1]} columns")
    print("columns (each name as Python sees it: index it exactly so), type, missing values:")
    listed = list(enumerate(frame.columns))[:MAX_COLUMNS_LISTED]
    width = max((len(repr(name)) for _, name in listed), default=0)
    for index, name in listed:
        column = frame.iloc[:, index]
        print(f"  {name!r:<{width}}  {str(column.dtype):<14} {int(column.isna().sum())} missing")
    if frame.shape[1] > MAX_COLUMNS_LISTED:
        print(f"  ... and {frame.shape[1] - MAX_COLUMNS_LISTED} more columns")
    print("first rows:")
    print(frame.head().to_string(max_colwidth=40))
    odd = oddities(frame)
    print("odd: none found" if not odd else "odd:\n  - " + "\n  - ".join(odd))
    print()


def outline(value, depth=0):
    """A JSON value's shape: keys and types, a list's length and its first item, three levels."""
    pad = "  " * (depth + 1)
    if isinstance(value, dict):
        lines = [f"an object of {len(value)} key(s)"]
        for key, item in list(value.items())[:30]:
            shown = outline(item, depth + 1) if depth < 2 else type(item).__name__
            lines.append(f"{pad}{key!r}: {shown}")
        return "\n".join(lines + ([f"{pad}..."] if len(value) > 30 else []))
    if isinstance(value, list):
        first = outline(value[0], depth + 1) if value and depth < 2 else ""
        return f"a list of {len(value)} item(s)" + (f", the first {first}" if first else "")
    return f"{type(value).__name__} {json.dumps(value)[:60]}"


def describe_json(value, path, variable):
    print(f"== {path}: JSON, loaded as {variable} by json.load")
    print(outline(value))
    print()


def describe_text(text, path, variable):
    lines = text.splitlines()
    print(f"== {path}: text of {len(text)} characters in {len(lines)} lines, loaded as {variable}")
    headings = [line.strip() for line in lines if line.lstrip().startswith("#")]
    if headings:
        print("its headings: " + " | ".join(headings[:40]))
    print(text[:TEXT_SHOWN])
    if len(text) > TEXT_SHOWN:
        print(
            f"[... {len(text) - TEXT_SHOWN} more characters: print({variable}[{TEXT_SHOWN}:]) "
            "shows them]"
        )
    print()


def describe_other(path):
    print(f"== {path}: a file of {os.path.getsize(path)} bytes, not read (its kind is not known)")
    print()


def describe(path, variable, kind):
    """The file read as `kind` (table, json, text, other) and described; what it holds, or None
    when it could not be read (said, so that one bad file leaves the others described)."""
    try:
        if kind == "table":
            frame, how = read_table(path)
            describe_table(frame, path, variable, how)
            return frame
        if kind == "json":
            value = read_json(path)
            describe_json(value, path, variable)
            return value
        if kind == "text":
            text = read_text(path)
            describe_text(text, path, variable)
            return text
        describe_other(path)
    except Exception as exc:  # the file's fault: said, and the other files still described
        print(f"== {path}: could not be read as {kind}: {type(exc).__name__}: {exc}")
        print()
    return None
