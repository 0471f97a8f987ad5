"""The one reader of what scripts leave behind, and the scratch folder's disk count: fast tests on real
files (links, pipes, sparse files, a real cgroup hierarchy where this machine has one)."""

from __future__ import annotations

import io
import json
import os
import time
from pathlib import Path

import numpy as np
import pytest

from dsagent_cbr.harness import readers as artefacts
from dsagent_cbr.harness.readers import (
    ArtefactError,
    Missing,
    harvest,
    read_bytes,
    read_csv,
    read_importance,
    read_npy,
    read_text,
)
from dsagent_cbr.sandbox import cgroups, scratch


def _npy(array: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, array)
    return buffer.getvalue()


def test_read_bytes_takes_regular_files_only(tmp_path):
    (tmp_path / "ok.csv").write_text("id,y\n1,2\n")
    (tmp_path / "dir.csv").mkdir()
    (tmp_path / "link.csv").symlink_to(tmp_path / "ok.csv")
    os.mkfifo(tmp_path / "fifo.csv")
    (tmp_path / "big.csv").write_bytes(b"x" * 2048)
    assert read_bytes(tmp_path, "ok.csv") == b"id,y\n1,2\n"
    for name, why in [("dir.csv", "not a regular file"), ("link.csv", "not a regular file cbr may read"),
                      ("fifo.csv", "not a regular file"), ("../ok.csv", "not a file name")]:
        with pytest.raises(ArtefactError, match=why):
            read_bytes(tmp_path, name)
    with pytest.raises(Missing):
        read_bytes(tmp_path, "absent.csv")
    with pytest.raises(ArtefactError, match="at most"):
        read_bytes(tmp_path, "big.csv", limit=1024)


def test_harvest_copies_files_and_leaves_links_and_pipes(tmp_path):
    source, dest = tmp_path / "scratch", tmp_path / "workspace"
    (source / "sub").mkdir(parents=True)
    (source / "submission.csv").write_text("id,y\n")
    (source / "sub" / "model.txt").write_text("trees")
    (source / "train.csv").write_text("cbr's copy")
    info = (source / "train.csv").stat()
    (source / "answers").symlink_to("/etc/hostname")
    os.mkfifo(source / "pipe")
    left = harvest(source, dest, unchanged={"train.csv": (info.st_size, info.st_mtime_ns)}, max_bytes=2**20)
    assert sorted(str(p.relative_to(dest)) for p in dest.rglob("*") if p.is_file()) == ["sub/model.txt",
                                                                                           "submission.csv"]
    assert sorted(left) == ["answers: not a regular file", "pipe: not a regular file"]
    assert not any(p.is_symlink() for p in dest.rglob("*"))


def test_harvest_stops_at_its_byte_budget(tmp_path):
    source = tmp_path / "scratch"
    source.mkdir()
    for i in range(3):
        (source / f"f{i}").write_bytes(b"x" * 1000)
    harvest(source, tmp_path / "out", unchanged={}, max_bytes=1500)
    assert sum(p.stat().st_size for p in (tmp_path / "out").iterdir()) == 1500


def test_npy_header_is_checked_before_anything_is_allocated():
    good = np.arange(12, dtype=float).reshape(3, 4)
    assert np.array_equal(read_npy(_npy(good), "p.npy", max_items=12), good)
    fortran = np.asfortranarray(good)
    assert np.array_equal(read_npy(_npy(fortran), "p.npy", max_items=12), good)
    header = np.lib.format.header_data_from_array_1_0(np.zeros(1))
    header["shape"] = (10**12,)
    claim = io.BytesIO()
    np.lib.format.write_array_header_1_0(claim, header)
    with pytest.raises(ArtefactError, match="claims 1000000000000 values"):
        read_npy(claim.getvalue() + b"\0" * 800, "p.npy", max_items=10**13)
    with pytest.raises(ArtefactError, match="at most 5"):
        read_npy(_npy(good), "p.npy", max_items=5)
    with pytest.raises(ArtefactError, match="objects"):
        read_npy(_npy(np.array([{"a": 1}], dtype=object)), "p.npy", max_items=10)
    with pytest.raises(ArtefactError, match="not what it holds"):
        read_npy(_npy(good)[:-8], "p.npy", max_items=12)
    with pytest.raises(ArtefactError, match="not a readable"):
        read_npy(b"PK\x03\x04 not an array", "p.npy", max_items=12)


def test_csv_shape_is_checked_before_parsing():
    rows = "".join(f"{i},{i / 2}\n" for i in range(10))
    frame = read_csv(f"id,y\n{rows}".encode(), "s.csv", wanted=["id", "y"], max_rows=10, max_columns=4)
    assert list(frame.columns) == ["id", "y"] and len(frame) == 10
    wide = ",".join(["id", "y", *(f"c{i}" for i in range(200_000))]).encode() + b"\n1,2\n"
    start = time.monotonic()
    with pytest.raises(ArtefactError, match="over 1024 kB|200002 columns"):
        read_csv(wide, "s.csv", wanted=["id", "y"], max_rows=10, max_columns=66)
    assert time.monotonic() - start < 5  # refused at its header, not parsed
    with pytest.raises(ArtefactError, match="more than the 5 rows"):
        read_csv(f"id,y\n{rows}".encode(), "s.csv", wanted=["id", "y"], max_rows=5, max_columns=4)
    with pytest.raises(ArtefactError, match="lacks column"):
        read_csv(b"id,z\n1,2\n", "s.csv", wanted=["id", "y"], max_rows=5, max_columns=4)


def test_feature_importance_must_match_its_schema(tmp_path):
    assert read_importance(tmp_path) is None
    path = tmp_path / artefacts.FEATURE_IMPORTANCE
    path.write_text(json.dumps({"age": 0.5, "income": 0.25}))
    assert read_importance(tmp_path) == {"age": 0.5, "income": 0.25}
    for bad in ('{"x": null}', "[1, 2]", '{"x": "high"}', "not json", json.dumps({"k" * 300: 1.0})):
        path.write_text(bad)
        with pytest.raises(ArtefactError, match=artefacts.FEATURE_IMPORTANCE):
            read_importance(tmp_path)
    path.write_text(json.dumps({f"f{i}": 1.0 for i in range(artefacts.MAX_FEATURES + 1)}))
    with pytest.raises(ArtefactError, match="at most"):
        read_importance(tmp_path)


def test_output_is_read_head_and_tail_however_large_it_claims_to_be(tmp_path):
    path = tmp_path / "stdout.txt"
    with path.open("wb") as fh:
        fh.write(b"first line\n")
        fh.truncate(2**30)  # what ftruncate(1, 1 GB) leaves: a sparse gigabyte
        fh.seek(2**30)
        fh.write(b"\nValidation rmse: 1.5\n")
    text = read_text(path, 4096)
    assert len(text) < 4200 and text.startswith("first line") and text.endswith("Validation rmse: 1.5\n")


def test_a_walked_scratch_folder_with_too_many_entries_is_over_its_limit(tmp_path, monkeypatch):
    monkeypatch.setattr(scratch, "MAX_ENTRIES", 50)
    space = scratch.Scratch(tmp_path, filesystem=False, limit_mb=100)
    space.settle()
    assert not space.over_limit()
    for i in range(60):  # empty files: no bytes, but entries that a walk could stop counting at
        (tmp_path / f"e{i}").touch()
    assert space.used_mb() is None and space.over_limit()


def test_a_walked_scratch_folder_counts_growth_only(tmp_path):
    (tmp_path / "public.bin").write_bytes(b"x" * 3 * 2**20)
    space = scratch.Scratch(tmp_path, filesystem=False, limit_mb=2)
    space.settle()
    assert not space.over_limit()
    (tmp_path / "out.bin").write_bytes(b"x" * 3 * 2**20)
    assert space.over_limit() and space.holds_file_of(3 * 2**20)


@pytest.mark.skipif(not scratch.can_make_filesystems(), reason="needs root, mkfs.ext4 and loop devices")
def test_a_scratch_filesystem_refuses_writes_past_its_size(tmp_path):
    with scratch.scratch(tmp_path, base_mb=0, limit_mb=8) as space:
        assert space.filesystem
        space.settle()
        with pytest.raises(OSError), (space.path / "fill").open("wb") as fh:
            for _ in range(64):
                fh.write(b"x" * 2**20)
                fh.flush()
        assert space.over_limit()
        point = space.path
    assert not point.exists()
    assert str(point) not in Path("/proc/self/mountinfo").read_text()


@pytest.mark.skipif(not cgroups.places(), reason="no cgroup controller can be delegated here")
def test_groups_left_by_a_dead_cbr_are_swept(tmp_path):
    import subprocess

    dead = subprocess.Popen(["true"])
    dead.wait()  # a pid that no longer runs: the cbr that made the group is gone
    place = next(iter(cgroups.places().values()))
    stale = place.folder / f"{cgroups.PREFIX}{dead.pid}-abcd1234"
    stale.mkdir()
    mine = place.folder / f"{cgroups.PREFIX}{os.getpid()}-abcd1234"
    mine.mkdir()
    try:
        group = cgroups.Cgroup.create(256, 64)
        assert group is not None
        group.remove()
        assert not stale.exists() and mine.exists()  # only the dead cbr's group goes
    finally:
        for folder in (stale, mine):
            if folder.exists():
                folder.rmdir()
