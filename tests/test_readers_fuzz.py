"""Every reader of what a script leaves, fed random bytes and near-misses of the files it expects: CSV
headers ending in a bare \\r, quotes, NUL bytes, thousands of columns, bytes that are not UTF-8; .npy
headers that lie; JSON of the wrong types. Each returns, or raises ArtefactError (the script's failure,
one line): any other exception would be ours, and would kill `cbr run`, the search or a --resume."""

from __future__ import annotations

import io
import json
import os
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from support.layouts import every_layout

from dsagent_cbr.agent import rundir
from dsagent_cbr.harness import upload
from dsagent_cbr.harness.grading import grade, prediction_columns
from dsagent_cbr.harness.plan import Held, hold_out
from dsagent_cbr.harness.readers import (
    FEATURE_IMPORTANCE,
    FIT_ROUNDS,
    REFIT_ROUNDS,
    ArtefactError,
    csv_columns,
    harvest,
    read_csv,
    read_fit_rounds,
    read_importance,
    read_npy,
    read_refit_rounds,
    read_text,
)
from dsagent_cbr.harness.run import FIRST_FIT_VARIABLE, refit_environment
from dsagent_cbr.search import ensemble
from dsagent_cbr.tasks.model import Task
from dsagent_cbr.untrusted.adapter_shim import CBR_CLASS_SCORES

FUZZ = settings(max_examples=40, deadline=None, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
# auroc against answers; labels, whose form only is checked (no answers); log loss over class columns
CSV_TASKS = ["holdout", "kaggle-sample-labels", "kaggle-probability-columns"]
NPY_TASKS = ["npy-classification", "npy-forecasting"]


@pytest.fixture(scope="module")
def tasks(tmp_path_factory) -> dict[str, Task]:
    return every_layout(tmp_path_factory.mktemp("layouts"))


@pytest.fixture(scope="module")
def space(tmp_path_factory) -> Path:
    """A workspace the examples overwrite in turn (hypothesis runs them one at a time)."""
    return tmp_path_factory.mktemp("workspace")


def _held(task: Task) -> Held:
    held = hold_out(task)
    assert held is not None
    return held


def _total(call):
    """What `call` returns, or None if it raised ArtefactError; anything else it raises fails the test."""
    try:
        return call()
    except ArtefactError:
        return None


# CSV: near-misses of a real submission ------------------------------------------------------------

CELLS = ["0", "1", "0.25", "-3", "7.0", " 7 ", "1e400", "-1e400", "nan", "inf", "", "9" * 25,
         "-" + "9" * 400, "yes", "no", "short", "tall", "RED", "walk", '"', '"x""y"', "a,b", "\x00",
         "\u00e9", "0x1f", "1_0"]
ENDINGS = ["\n", "\r\n", "\r", "\n\n", ""]
SPLICES = [b"\r", b"\n", b"\x00", b'"', b",", b"\xff", b"\xed\xa0\x80", b"\xef\xbb\xbf", b"\xc3", b"\r\n"]
ODD_NAMES = ["", "id", '"q"', "a\rb", "x y", "Unnamed: 0", "\x00", "short"]


@st.composite
def near_csv(draw, names: list[str], ids: list[str] | None, rows: int) -> bytes:
    """A CSV of `names` (the first holding `ids`, if given) that is right or almost: columns shuffled,
    added (a few or thousands) or odd, cells odd here and there, quotes, line endings of every kind, and
    stray bytes spliced in."""
    header = draw(st.permutations(names)) + draw(st.lists(st.sampled_from(ODD_NAMES), max_size=2))
    header += [f"c{i}" for i in range(draw(st.sampled_from([0, 0, 0, 2, 70, 5000])))]
    keys = draw(st.one_of(st.just(ids), st.lists(st.sampled_from(ids), max_size=12))) if ids else None
    count = len(keys) if keys is not None else draw(st.sampled_from([rows, rows, 0, 1, rows + 1]))
    fill = draw(st.sampled_from(["0.5", "1", "0", "yes", "short", "RED", "walk", "x"]))
    table = [[fill] * (len(names) + draw(st.integers(-1, 1))) for _ in range(count)]
    for row, column, cell in draw(st.lists(st.tuples(st.integers(0), st.integers(0), st.sampled_from(CELLS)),
                                           max_size=6)):
        if table and table[row % len(table)]:
            table[row % len(table)][column % len(table[row % len(table)])] = cell
    if keys is not None:
        first = header.index(names[0]) if names[0] in header else 0
        for line, key in zip(table, keys, strict=True):
            line.insert(min(first, len(line)), key)
    quote = draw(st.booleans())
    cells = [[f'"{c}"' if quote else c for c in line] for line in [header, *table]]
    head_end, row_end = draw(st.sampled_from(ENDINGS)), draw(st.sampled_from(ENDINGS))
    text = ",".join(cells[0]) + head_end + row_end.join(",".join(line) for line in cells[1:])
    raw = draw(st.sampled_from([b"", b"", b"\xef\xbb\xbf"])) + text.encode("utf-8", errors="surrogatepass")
    for at, piece in draw(st.lists(st.tuples(st.integers(0), st.sampled_from(SPLICES)), max_size=3)):
        at %= len(raw) + 1
        raw = raw[:at] + piece + raw[at:]
    return raw


HEADERS = [b"id,price\n", b"id,kind\r", b"id,churned\r\n", b'"id","BLUE","GREEN","RED"\n', b"short,tall\n",
           b""]
RANDOM = st.one_of(st.binary(max_size=600),
                   st.builds(bytes.__add__, st.sampled_from(HEADERS), st.binary(max_size=300)))


def _csv_of(task: Task, held: Held) -> st.SearchStrategy[bytes]:
    ids = ensemble.row_ids(task, held)
    return st.one_of(RANDOM, near_csv([str(task.id_column), *prediction_columns(task)], ids, len(ids)))


# .npy: headers that lie, and real arrays of every dtype -----------------------------------------------

DESCRS = ["<f8", "<i8", "|b1", "<U3", ">U2", "|S2", "<c16", "|O", "<M8[D]", "|V8", "<U0", ("<f8", (3,)),
          [("a", "<f8")], [("a", "<f8", (2**70,))], ("<f8",), (), 5, "", "<f8\x00", "f8,f8"]
LENGTHS = [0, 1, 2, 3, -1, -2, True, 2**64, 10**12]
PARSER_BOMBS = ["(" * 300, "[" * 9000, "-" * 9000 + "1", "1+" * 4000 + "1", "{[1]: 2}", "'\\N{}'",
                "x" * 10_001]


@st.composite
def lying_npy(draw, rows: int) -> bytes:
    """An .npy file whose header is right or lies: shapes, dtypes and orders numpy never writes, a header
    length that is off, versions cbr does not read, a header of random text, data of any length."""
    shape = draw(st.one_of(st.sampled_from([(rows,), (rows, 1), (rows, 6), ()]),
                           st.lists(st.sampled_from([*LENGTHS, rows]), max_size=3).map(tuple)))
    header = repr({"descr": draw(st.sampled_from(DESCRS)),
                   "fortran_order": draw(st.sampled_from([False, True, 1])), "shape": shape})
    cut = header[: draw(st.integers(0, 80))]
    header = draw(st.one_of(st.just(header), st.text(max_size=60), st.just(cut),
                            st.sampled_from(PARSER_BOMBS)))
    body = header.encode("latin-1", errors="replace")
    body += b" " * (-(len(body) + 11) % 64) + b"\n"
    version = draw(st.sampled_from([1, 1, 2, 3]))
    length = len(body) + draw(st.sampled_from([0, 0, 0, -3, 5]))
    size = draw(st.sampled_from([0, 8, 16, 8 * rows, 12 * rows, 48 * rows, 8 * 6 * rows]))
    data = draw(st.one_of(st.binary(min_size=size, max_size=size), st.binary(max_size=64)))
    width = 2 if version == 1 else 4
    return b"\x93NUMPY" + bytes([version, 0]) + max(length, 0).to_bytes(width, "little") + body + data


def _saved(array: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, array, allow_pickle=False)
    return buffer.getvalue()


def _header(fields: dict) -> bytes:
    buffer = io.BytesIO()
    np.lib.format.write_array_header_1_0(buffer, fields)
    return buffer.getvalue()


def _npy_text(header: str) -> bytes:
    """An .npy file's first bytes with `header` as its header, whatever that says."""
    body = header.encode("latin-1") + b" " * (-(len(header) + 11) % 64) + b"\n"
    return b"\x93NUMPY\x01\x00" + len(body).to_bytes(2, "little") + body


def _npy_of(rows: int, labels: list[str]) -> st.SearchStrategy[bytes]:
    dtypes = st.one_of(hnp.scalar_dtypes(), hnp.unicode_string_dtypes(max_len=4),
                       hnp.byte_string_dtypes(max_len=4))
    shapes = st.sampled_from([(rows,), (rows, 1), (rows, 6), (rows, 3, 2), (3,), (0,), ()])
    arrays = hnp.arrays(dtypes, shapes) | hnp.arrays("<U4", (rows,), elements=st.sampled_from(labels))
    return st.one_of(st.binary(max_size=400), lying_npy(rows), arrays.map(_saved))


# The readers themselves ---------------------------------------------------------------------------------


@FUZZ
@given(raw=st.one_of(RANDOM, near_csv(["id", "y"], None, 5)), max_rows=st.integers(0, 8))
def test_csv_readers_take_any_bytes(raw, max_rows):
    columns = _total(lambda: csv_columns(raw, "s.csv"))
    assert columns is None or all(isinstance(c, str) for c in columns)
    wanted = [c for c in (columns or ["id"]) if c][:2] or ["id"]
    frame = _total(lambda: read_csv(raw, "s.csv", wanted=wanted, max_rows=max_rows, max_columns=8))
    assert frame is None or (list(frame.columns) == list(dict.fromkeys(wanted)) and len(frame) <= max_rows)


@FUZZ
@given(raw=_npy_of(6, ["a", "b"]), max_items=st.sampled_from([0, 6, 36, 10**6]))
def test_npy_reader_takes_any_bytes(raw, max_items):
    array = _total(lambda: read_npy(raw, "p.npy", max_items=max_items))
    assert array is None or (array.ndim >= 1 and array.size <= max_items and array.dtype.kind in "biufSU")
    if array is not None and array.dtype.kind == "U" and array.size:
        pd.DataFrame(array.reshape(len(array), -1)).to_csv().encode("utf-8")  # its text can be written out


JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
                    lambda inner: st.lists(inner, max_size=4)
                    | st.dictionaries(st.text(max_size=8), inner, max_size=4),
                    max_leaves=12)
NEAR_JSON = [b'{"x": null}', b'{"x": 1e999}', b"[[1, 2], [3, 0]]", b"[[1, 2, 3]]", b'[["1", 2]]',
             b'{"a": 1, "a": "x"}', b"[" * 20_000, b'{"' + b"k" * 300 + b'": 1}', b'{"\\ud800": 1}',
             b"[[1, " + b"9" * 5000 + b"]]", b"\xff{}"]


@FUZZ
@given(raw=st.one_of(st.binary(max_size=200), st.sampled_from(NEAR_JSON),
                     JSON.map(lambda v: json.dumps(v).encode())))
def test_json_readers_take_any_bytes(space, raw):
    (space / FEATURE_IMPORTANCE).write_bytes(raw)
    (space / REFIT_ROUNDS).write_bytes(raw)
    importance = _total(lambda: read_importance(space))
    assert importance is None or all(isinstance(v, float) and np.isfinite(v) for v in importance.values())
    json.dumps(importance)  # what publish_outputs writes of it
    rounds = read_refit_rounds(space)  # it only informs: an unreadable file is None, never an error
    assert rounds is None or all(len(pair) == 2 and min(pair) > 0 for pair in rounds)
    str(rounds)  # the refit's note prints them: no int too long for str()
    (space / FIT_ROUNDS).write_bytes(raw)
    first_fit = read_fit_rounds(space)  # None: the refit learns the rounds from its own validation fit
    if first_fit is not None:  # passed on to the refit as read
        assert all(r is None or r > 0 for r in first_fit["calls"] + first_fit["models"])
        assert json.loads(refit_environment(True, first_fit)[FIRST_FIT_VARIABLE]) == first_fit


@FUZZ
@given(raw=st.binary(max_size=3000), limit=st.integers(2, 2000))
def test_text_is_read_from_any_bytes(space, raw, limit):
    (space / "stdout.txt").write_bytes(raw)
    text = read_text(space / "stdout.txt", limit)
    assert isinstance(text, str) and len(text.encode("utf-8")) <= 3 * limit + 100  # writable, and bounded


NAMES = st.binary(min_size=1, max_size=12).filter(
    lambda b: b"/" not in b and b"\0" not in b and b not in (b".", b".."))


def _make(path: Path, kind: str, data: bytes) -> None:
    if os.path.lexists(path):  # taken (writing to a pipe made before would block)
        return
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        if kind == "file":
            path.write_bytes(data)
        elif kind == "link":  # to a file outside, or to nothing: never to a folder the tree is made through
            path.symlink_to("/etc/hostname" if data else "missing")
        else:
            os.mkfifo(path)
    except OSError:  # a folder's name taken by a file or a link
        pass


@settings(max_examples=20, deadline=None, database=None)
@given(entries=st.lists(st.tuples(st.lists(NAMES, min_size=1, max_size=3),
                                  st.sampled_from(["file", "link", "fifo"]),
                                  st.binary(max_size=64)),
                        max_size=6))
def test_harvest_takes_any_tree_and_says_what_it_left_in_writable_lines(entries):
    with tempfile.TemporaryDirectory() as scratch:
        source, dest = Path(scratch) / "s", Path(scratch) / "d"
        source.mkdir()
        for parts, kind, data in sorted(entries, key=lambda entry: entry[1] == "link"):  # links last
            _make(Path(os.fsdecode(os.path.join(bytes(source), *parts))), kind, data)
        left = harvest(source, dest, unchanged={}, max_bytes=100)
        ("\n".join(left) + "\n").encode("utf-8")  # run.py writes them to left-behind.txt


# What reads the readers' output: grading, the ensemble, the upload --------------------------------------


@pytest.mark.parametrize("name", CSV_TASKS)
def test_csv_predictions_of_any_bytes_are_graded_or_refused(tasks, space, name):
    task, held = tasks[name], _held(tasks[name])
    ids = ensemble.row_ids(task, held)

    @FUZZ
    @given(raw=_csv_of(task, held), with_held=st.booleans())
    def check(raw, with_held):
        (space / task.predictions).write_bytes(raw)
        grades = _total(lambda: grade(task, space, held if with_held else None))
        assert grades is None or grades.test is None or isinstance(grades.test, float)
        member = ensemble.load(task, held, ids, 1, space, "")
        assert member is None or len(member.values) == len(ids)
        upload_ = _total(lambda: upload.test_rows_only(task, held, raw))
        assert upload_ is not None or grades is None or not with_held  # what was graded can be uploaded
        rundir.publish_outputs(space / "run", task, "print(1)\n", space, held)

    (space / "run").mkdir(exist_ok=True)
    check()


@pytest.mark.parametrize("name", NPY_TASKS)
def test_npy_predictions_of_any_bytes_are_graded_or_refused(tasks, space, name):
    task, held = tasks[name], _held(tasks[name])
    rows = held.test_rows + held.rows

    @FUZZ
    @given(raw=_npy_of(rows, ["walk", "run", "sit"]), with_held=st.booleans())
    def check(raw, with_held):
        (space / task.predictions).write_bytes(raw)
        _total(lambda: grade(task, space, held if with_held else None))
        member = ensemble.load(task, held, [], 1, space, "")
        assert member is None or len(member.values) == rows
        _total(lambda: upload.test_rows_only(task, held, raw))
        rundir.publish_outputs(space / "run", task, "print(1)\n", space, held)

    (space / "run").mkdir(exist_ok=True)
    check()


def test_class_scores_of_any_bytes_are_read_or_ignored(space):
    frame = pd.DataFrame({"id": [str(i) for i in range(8)], "kind": ["short", "tall"] * 4})

    @FUZZ
    @given(raw=st.one_of(RANDOM, near_csv(["short", "tall"], None, len(frame))))
    def check(raw):
        (space / CBR_CLASS_SCORES).write_bytes(raw)
        scores, classes = ensemble.class_scores(space, frame, ["kind"])
        assert (scores is None and classes == ()) or (scores.shape == (len(frame), len(classes)))

    check()


# The known breaks, plainly --------------------------------------------------------------------------------


def test_a_submission_written_with_bare_cr_line_ends_is_the_script_s_failure(tasks, tmp_path):
    """pandas' to_csv(lineterminator="\\r") left a header csv.reader could not split: an uncaught
    _csv.Error that killed `cbr run`, `cbr develop` and every --resume."""
    task, held = tasks["holdout"], _held(tasks["holdout"])
    ids = ensemble.row_ids(task, held)
    frame = pd.DataFrame({"id": ids, "churned": 0.5})
    frame.to_csv(tmp_path / task.predictions, index=False, lineterminator="\r")
    with pytest.raises(ArtefactError, match=r"bare \\r"):
        grade(task, tmp_path, held)
    assert ensemble.load(task, held, ids, 1, tmp_path, "") is None
    with pytest.raises(ArtefactError):
        csv_columns(b"id,price\rfoo\n1,2\n", "submission.csv")


def test_class_scores_with_a_bare_cr_in_their_header_are_ignored(tasks, tmp_path):
    task, held = tasks["kaggle-sample-labels"], _held(tasks["kaggle-sample-labels"])
    ids = ensemble.row_ids(task, held)
    pd.DataFrame({"id": ids, "kind": "short"}).to_csv(tmp_path / task.predictions, index=False)
    (tmp_path / CBR_CLASS_SCORES).write_bytes(b"short,tall\r" + b"0.9,0.1\r" * len(ids))
    member = ensemble.load(task, held, ids, 1, tmp_path, "")
    assert member is not None and member.scores is None and member.classes == ()
    (tmp_path / CBR_CLASS_SCORES).write_bytes(b"short\r,tall\n" + b"0.9,0.1\n" * len(ids))
    labels = pd.DataFrame({"kind": ["short"] * len(ids)})
    assert ensemble.class_scores(tmp_path, labels, ["kind"]) == (None, ())


def test_other_bytes_that_raised_on_the_host_are_the_script_s_failure(tmp_path):
    with pytest.raises(ArtefactError, match="not a readable CSV"):  # OverflowError in pandas
        read_csv(b"id,y\n1," + b"9" * 400 + b"\n", "s.csv", wanted=["id", "y"], max_rows=5, max_columns=4)
    marked = read_csv(b"\xef\xbb\xbfid,y\n1,2\n", "s.csv", wanted=["id", "y"], max_rows=5, max_columns=4)
    assert list(marked) == ["id", "y"]  # a byte-order mark is no part of the first name
    text = _npy_text("{'descr': '<U1', 'fortran_order': False, 'shape': (2,)}")
    for raw in (_saved(np.float64(1.0)),  # a lone value: len() of it raised TypeError in the ensemble
                _header({"descr": "<f8", "fortran_order": False, "shape": (2**64, 0)}),  # reshape raised
                text + b"\x00\xd8\x00\x00a\x00\x00\x00",  # a lone surrogate: SystemError when written out
                *(_npy_text(bomb) for bomb in PARSER_BOMBS)):  # TokenError, MemoryError, RecursionError, ...
        with pytest.raises(ArtefactError):
            read_npy(raw, "p.npy", max_items=100)
    (tmp_path / "s").mkdir()
    (tmp_path / os.fsdecode(b"s/\xff\xfe")).symlink_to("/etc/hostname")
    left = harvest(tmp_path / "s", tmp_path / "d", unchanged={}, max_bytes=100)
    assert left == ["\ufffd\ufffd: not a regular file"]


def test_a_column_of_ints_no_float_holds_is_the_script_s_failure(tasks, tmp_path):
    """pandas keeps a column of -1 and 10**400 as Python ints: astype(float) raised OverflowError."""
    task, held = tasks["holdout"], _held(tasks["holdout"])
    ids = ensemble.row_ids(task, held)
    values = ["-1", "9" * 400, *["1"] * (len(ids) - 2)]
    rows = "".join(f"{i},{v}\n" for i, v in zip(ids, values, strict=True))
    (tmp_path / task.predictions).write_text("id,churned\n" + rows)
    with pytest.raises(ArtefactError, match="not numeric"):
        grade(task, tmp_path, held)
    assert ensemble.load(task, held, ids, 1, tmp_path, "") is None
    (tmp_path / CBR_CLASS_SCORES).write_text("short,tall\n-1,1\n" + "9" * 400 + ",2\n")
    assert ensemble.class_scores(tmp_path, pd.DataFrame({"kind": ["short", "tall"]}), ["kind"]) == (None, ())


def test_what_was_graded_can_be_uploaded_and_what_cannot_be_read_is_refused(tasks, tmp_path):
    """The upload re-reads a graded submission: a row with cells past the header (which the grader drops)
    made pandas raise there, and a header whose quote ran past its line made it look up a column pandas
    did not see (KeyError)."""
    task, held = tasks["holdout"], _held(tasks["holdout"])
    ids = ensemble.row_ids(task, held)
    rows = "".join(f"{i},0.5{',1,2' if k % 7 == 0 else ''}\n" for k, i in enumerate(ids))  # 2 cells too many
    raw = ("id,churned\n" + rows).encode()
    (tmp_path / task.predictions).write_bytes(raw)
    assert grade(task, tmp_path, held).test is not None
    uploaded = pd.read_csv(io.BytesIO(upload.test_rows_only(task, held, raw)))
    assert list(uploaded.columns) == ["id", "churned"] and len(uploaded) == held.test_rows
    for bad in (b'"churned","id\n",""\n1,2\n', b"\x00id,churned\n1,2\n", b"id,churned\n\xff,1\n"):
        with pytest.raises(ArtefactError):
            upload.test_rows_only(task, held, bad)
