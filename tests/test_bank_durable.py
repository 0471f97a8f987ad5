"""A bank that never loses a case, on real parts: the `cbr` command in subprocesses killed with SIGKILL,
the embedded Chroma store with its files truncated, two imports racing, the packaged MiniLM model.

The banks are small (a three-case seed folder and a few dozen to a hundred and fifty user cases) so the
tests stay fast; the user cases are what must survive."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from support.bank_seed import small_casebank

from dsagent_cbr.bank import open_bank
from dsagent_cbr.bank.cases import Case
from dsagent_cbr.cli import main as cbr
from dsagent_cbr.config import load_settings

REPO = Path(__file__).resolve().parents[1]
TOPICS = ["target encoding", "lag features", "stacking", "pseudo labels", "early stopping", "focal loss",
          "rolling means", "mixup", "quantile loss", "test-time augmentation", "k-fold blending", "dropout"]


def user_folder(root: Path, n: int, name: str = "user") -> Path:
    """n distinct short write-ups, named so that the competition comes from the file name."""
    folder = root / name / "tabular_cases"
    folder.mkdir(parents=True)
    for i in range(n):
        a, b = TOPICS[i % len(TOPICS)], TOPICS[(i * 5 + 3) % len(TOPICS)]
        (folder / f"{name}-comp-{i}.case").write_text(
            f"Write-up {i} of {name}: combine {a} with {b}, tuned over {i + 2} folds.", encoding="utf-8")
    return folder.parent


def options(bank_dir: Path, seed: Path, store: str = "chroma") -> list[str]:
    return ["--bank-dir", str(bank_dir), "--casebank-dir", str(seed), "--store", store]


def env(home: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(REPO), "CBR_HOME": str(home)}


def cbr_process(args: list[str], home: Path) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "dsagent_cbr.cli", *args], cwd=REPO, env=env(home),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def contents(bank_dir: Path, seed: Path, store: str = "chroma") -> dict[str, set[str]]:
    """Case ids by kind as a fresh `cbr` process would see them (opening recovers what a kill left)."""
    bank = open_bank(load_settings(bank_dir=bank_dir, casebank_dir=seed, store=store))
    try:
        return {kind: {c.id for c in bank.list(kind)} for kind in ("insight", "solution")}
    finally:
        bank.close()


def user_ids(bank_dir: Path) -> set[str]:
    journal = bank_dir / "journal.jsonl"
    return {json.loads(line)["case"]["id"] for line in journal.read_text().splitlines() if '"op": "add"' in line}


@pytest.mark.slow
def test_sigkill_during_rebuild_at_ten_moments_loses_no_case(tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    seed, bank_dir = small_casebank(tmp_path), tmp_path / "bank"
    assert cbr(["bank", "import", str(user_folder(tmp_path, 150)), *options(bank_dir, seed)]) == 0
    before = contents(bank_dir, seed)
    users = user_ids(bank_dir)
    assert len(users) == 150 and users <= before["insight"] and len(before["insight"]) == 153
    rebuild = ["bank", "rebuild", *options(bank_dir, seed)]
    staged = bank_dir / "journal.jsonl.next"  # written first thing by a rebuild, gone at its switch

    def start_and_wait() -> tuple[subprocess.Popen[str], float]:
        proc = cbr_process(rebuild, tmp_path)
        while not staged.exists() and proc.poll() is None:
            time.sleep(0.001)
        return proc, time.perf_counter()

    # one whole rebuild, watched: from its first write to the deletion of the old index
    old_slot = (bank_dir / "chroma.current").read_text()
    proc, began = start_and_wait()
    seen: dict[str, float] = {}
    running = True
    while running:
        running = proc.poll() is None  # one more look after the exit
        now = time.perf_counter() - began
        new_slots = [p for p in bank_dir.glob("chroma.g*") if p.is_dir() and p.name != old_slot]
        marks = {"new index begun": bool(new_slots),
                 "new index complete": any((p / ".complete").exists() for p in new_slots),
                 "switched": (bank_dir / "chroma.current").read_text() != old_slot,
                 "old index deleted": not (bank_dir / old_slot).exists()}
        for mark, done in marks.items():
            if done:
                seen.setdefault(mark, now)
        time.sleep(0.001)
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err
    assert contents(bank_dir, seed) == before
    assert list(seen) == ["new index begun", "new index complete", "switched", "old index deleted"], seen
    window = seen["old index deleted"]
    lines = []
    for i in range(10):
        at = window * i / 9
        proc, began = start_and_wait()
        time.sleep(max(0.0, began + at - time.perf_counter()))
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=60)
        capsys.readouterr()
        after = contents(bank_dir, seed)
        line = capsys.readouterr().err.strip()
        lines.append(f"kill at {at:.3f}s: {line or 'the rebuild had finished'}")
        assert after == before, lines[-1]
        assert users <= after["insight"]
        assert len(line.splitlines()) <= 1
        slots = [p.name for p in bank_dir.iterdir() if p.is_dir()]
        assert len(slots) == 1 and not staged.exists(), slots  # whatever was left is cleaned up
    with capsys.disabled():
        print("\nrebuild phases (s after its first write):", {k: round(v, 3) for k, v in seen.items()},
              *lines, sep="\n")
    assert any("rolled back" in line for line in lines)  # the kills did land inside rebuilds


@pytest.mark.slow
@pytest.mark.parametrize("cut", ["empty", "half"])
def test_truncated_chroma_file_is_reported_and_rebuild_restores_every_user_case(
        tmp_path: Path, cut: str, capsys: pytest.CaptureFixture[str]) -> None:
    seed, bank_dir = small_casebank(tmp_path), tmp_path / "bank"
    folder = user_folder(tmp_path, 30)
    opts = options(bank_dir, seed)
    assert cbr(["bank", "import", str(folder), *opts]) == 0
    before = contents(bank_dir, seed)
    current = (bank_dir / "chroma.current").read_text()
    sqlite_file = bank_dir / current / "chroma.sqlite3"
    size = sqlite_file.stat().st_size
    with sqlite_file.open("r+b") as fh:
        fh.truncate(0 if cut == "empty" else size // 2)
    capsys.readouterr()
    for command in (["stats"], ["search", "stacking"], ["list"], ["add", str(next(folder.rglob("*.case")))]):
        assert cbr(["bank", *command, *opts]) == 2, command
        captured = capsys.readouterr()
        assert captured.out == ""
        err = captured.err.strip().splitlines()
        assert len(err) == 1 and str(sqlite_file) in err[0] and "`cbr bank rebuild`" in err[0], err
    assert sqlite_file.stat().st_size == (0 if cut == "empty" else size // 2)  # nothing re-seeded over it
    assert cbr(["bank", "rebuild", *opts]) == 0
    assert contents(bank_dir, seed) == before
    bank = open_bank(load_settings(bank_dir=bank_dir, casebank_dir=seed))
    for path in sorted(folder.rglob("*.case")):
        text = path.read_text(encoding="utf-8")
        top = bank.search(text, k=1)[0]
        assert top.case.text == text and top.score > 0.99, path.name
    bank.close()


@pytest.mark.slow
def test_two_imports_of_one_folder_at_once_report_what_the_bank_holds(tmp_path: Path) -> None:
    seed, bank_dir = small_casebank(tmp_path), tmp_path / "bank"
    opts = options(bank_dir, seed)
    assert cbr(["bank", "stats", *opts]) == 0  # the seed is indexed before the race
    folder = user_folder(tmp_path, 40)
    procs = [cbr_process(["bank", "import", str(folder), *opts], tmp_path) for _ in range(2)]
    reports = [p.communicate(timeout=600) for p in procs]
    added = []
    for proc, (out, err) in zip(procs, reports, strict=True):
        assert proc.returncode == 0, err
        words = out.split()
        added.append(int(words[0]))
        assert int(words[0]) + int(words[2]) == 40, out  # "<n> added, <m> already present, ..."
    held = contents(bank_dir, seed)["insight"]
    assert sum(added) == len(held) - 3 == 40, (added, len(held))
    assert len(user_ids(bank_dir)) == 40  # the journal has each case once


@pytest.mark.slow
def test_writer_killed_between_journal_and_index_is_caught_up(tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    seed, bank_dir = small_casebank(tmp_path), tmp_path / "bank"
    settings = load_settings(bank_dir=bank_dir, casebank_dir=seed, store="faiss")
    bank = open_bank(settings)
    kept = Case(kind="insight", text="Blend gradient boosting with a linear model.", modality="tabular")
    assert bank.add([kept]).added == [kept.id]
    # as if a writer had fsynced its journal line and died before indexing: a journal line the index lacks
    lost = Case(kind="insight", text="Clip predictions to the training range.", modality="tabular")
    with (bank_dir / "journal.jsonl").open("a", encoding="utf-8") as fh:
        fh.write(json.dumps({"op": "add", "case": lost.to_dict()}) + "\n")
        fh.write('{"op": "add", "case": {"kind": "ins')  # and a torn line from the next one
    capsys.readouterr()
    again = open_bank(settings)
    assert "indexed 1 case(s)" in capsys.readouterr().err
    assert {kept.id, lost.id} <= {c.id for c in again.list("insight")}
    assert again.search(lost.text, k=1)[0].case.id == lost.id
    # a removed case stays removed through a rebuild, and its text leaves the journal
    assert again.remove([kept.id]) == [kept.id]
    assert cbr(["bank", "rebuild", *options(bank_dir, seed, "faiss")]) == 0
    ids = contents(bank_dir, seed, "faiss")
    assert kept.id not in ids["insight"] and lost.id in ids["insight"] and len(ids["solution"]) == 1
    assert kept.text not in (bank_dir / "journal.jsonl").read_text()
    # a journal cut back by hand to its header: the index's user cases are written to it again
    journal = bank_dir / "journal.jsonl"
    journal.write_text(journal.read_text().splitlines()[0] + "\n")
    capsys.readouterr()
    open_bank(settings).close()
    assert "1 case(s) the index holds were written to it again" in capsys.readouterr().err
    assert user_ids(bank_dir) == {lost.id}


@pytest.mark.slow
def test_bank_from_before_journals_keeps_its_cases(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The old layout (<bank>/faiss, no journal): opening writes the journal from the index, and a rebuild
    then keeps every user case and leaves removed seed cases out."""
    from dsagent_cbr.bank.facade import metadata_of
    from dsagent_cbr.bank.faiss_store import FaissStore
    from dsagent_cbr.bank.store import Record

    seed, bank_dir = small_casebank(tmp_path), tmp_path / "bank"
    settings = load_settings(bank_dir=bank_dir, casebank_dir=seed, store="faiss")
    bank = open_bank(settings)
    seed_cases = bank.list("insight")
    bank.close()
    (bank_dir / "journal.jsonl").unlink()
    for leftover in bank_dir.glob("faiss*"):
        if leftover.is_dir():
            leftover.rename(bank_dir / "faiss")
        else:
            leftover.unlink()
    old = FaissStore(bank_dir / "faiss")
    users = [Case(kind="insight", text=f"An old user case number {i} about stacking.", modality="tabular")
             for i in range(3)]
    vectors = np.random.default_rng(0).standard_normal((3, 384)).astype(np.float32)
    old.add("insight", [Record(c.id, metadata_of(c), json.dumps(c.to_dict())) for c in users], vectors)
    old.delete("insight", [seed_cases[0].id])  # a seed case the user had removed
    capsys.readouterr()
    opened = open_bank(settings)
    assert "recorded its 3 user case(s)" in capsys.readouterr().err
    assert {c.id for c in users} == user_ids(bank_dir)
    opened.close()
    assert cbr(["bank", "rebuild", *options(bank_dir, seed, "faiss")]) == 0
    assert not (bank_dir / "faiss").exists()
    ids = contents(bank_dir, seed, "faiss")["insight"]
    assert ids == {c.id for c in users} | {c.id for c in seed_cases[1:]}
