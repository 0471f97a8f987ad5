"""The bank's durable parts without an embedding model: input checks, the journal, the lock, damaged-file
detection, and finishing or rolling back what an interrupted rebuild left."""

from __future__ import annotations

import json
import os
import re
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from dsagent_cbr.bank.casefiles import load_import_folder, read_text_file
from dsagent_cbr.bank.cases import Case
from dsagent_cbr.bank.checks import MAX_TEXT_CHARS, problem_with
from dsagent_cbr.bank.embedder import EmbeddingCache
from dsagent_cbr.bank.integrity import sqlite_problem
from dsagent_cbr.bank.journal import BankLock, CaseJournal
from dsagent_cbr.bank.places import FolderPlace, recover
from dsagent_cbr.bank.store import Record

REPO = Path(__file__).resolve().parents[1]


def insight(text: str, **fields: str) -> Case:
    return Case(kind="insight", text=text, **fields)


def test_checks_refuse_values_outside_the_allowed_sets() -> None:
    assert problem_with(insight("fine", modality="tabular", task_type="regression", source_kind="writeup")) is None
    assert problem_with(insight("fine", modality="time-series")) is None  # DS-Agent's tsa_cases
    assert "newline" in problem_with(insight("x", modality="a\nb"))
    assert "control character" in problem_with(insight("x", title="tab\there"))
    assert "modality must be one of" in problem_with(insight("x", modality="images"))
    assert "task type must be one of" in problem_with(insight("x", task_type="classification"))
    assert "source kind" in problem_with(insight("x", source_kind="reference"))
    assert "kind must be" in problem_with(Case(kind="note", text="x"))  # type: ignore[arg-type]
    assert "script" in problem_with(Case(kind="solution", text="task", script=" "))
    assert "over the cap" in problem_with(insight("w " * (MAX_TEXT_CHARS // 2 + 1)))
    assert problem_with(insight("w " * (MAX_TEXT_CHARS // 2 - 1))) is None


def test_import_reports_bad_values_and_huge_files_per_file(tmp_path: Path) -> None:
    folder = tmp_path / "tabular_cases"
    folder.mkdir()
    (folder / "ok-1.md").write_text("Target encoding won.", encoding="utf-8")
    (folder / "bad-1.md").write_text('+++\nmodality = "a\\nb"\n+++\nText.\n', encoding="utf-8")
    (folder / "long-1.md").write_text("word " * 30_000, encoding="utf-8")  # 149,999 characters once stripped
    huge = folder / "huge-1.txt"
    with huge.open("wb") as fh:  # 50 MB: refused from its size, without being read
        fh.truncate(50_000_000)
    loaded = load_import_folder(folder)
    assert [c.title for c in loaded.cases] == ["ok-1"]
    problems = "\n".join(loaded.problems)
    assert "bad-1.md: modality 'a\\nb' contains a newline" in problems
    assert "long-1.md: text of 149,999 characters is over the cap" in problems
    assert "huge-1.txt: 50.0 MB is over the size cap of a case" in problems
    started = time.perf_counter()
    with pytest.raises(ValueError):
        read_text_file(huge)
    assert time.perf_counter() - started < 0.5


def _import_folder_with_links(tmp_path: Path) -> Path:
    """A folder with one good file, links out of it (a file, a folder, /etc/passwd), and a file that
    claims to be a case a run retained."""
    outside = tmp_path / "outside"
    (outside / "tabular_cases").mkdir(parents=True)
    (outside / "secret.md").write_text("OUTSIDE-SECRET: never to be imported.", encoding="utf-8")
    (outside / "tabular_cases" / "elsewhere-1.md").write_text("OUTSIDE-FOLDER text.", encoding="utf-8")
    folder = tmp_path / "import" / "tabular_cases"
    folder.mkdir(parents=True)
    (folder / "good-1.md").write_text("Target encoding won.", encoding="utf-8")
    (folder / "secret-1.md").symlink_to(outside / "secret.md")
    (folder / "passwd-1.txt").symlink_to("/etc/passwd")
    (folder / "more").symlink_to(outside / "tabular_cases", target_is_directory=True)
    (folder / "claims-1.md").write_text('+++\nsource_kind = "retained"\n+++\nA retained-looking case.\n',
                                        encoding="utf-8")
    (folder / "claims-2.md").write_text('+++\nkind = "retained"\n+++\nAnother one.\n', encoding="utf-8")
    return folder.parent


def test_import_never_follows_links_and_refuses_retained(tmp_path: Path) -> None:
    folder = _import_folder_with_links(tmp_path)
    loaded = load_import_folder(folder)
    assert [c.title for c in loaded.cases] == ["good-1"]
    assert not any("OUTSIDE" in c.text or "root:" in c.text for c in loaded.cases)
    assert sorted(Path(line.split(":")[0]).name for line in loaded.skipped) == ["more", "passwd-1.txt", "secret-1.md"]
    assert all("symbolic link" in line for line in loaded.skipped)
    problems = sorted(loaded.problems)
    assert len(problems) == 2 and all("source kind 'retained' is only for cases a run retains" in p for p in problems)
    assert "claims-1.md" in problems[0] and "claims-2.md" in problems[1]


def test_import_command_names_each_link_and_the_retained_rule(tmp_path: Path) -> None:
    folder = _import_folder_with_links(tmp_path)
    proc = subprocess.run([sys.executable, "-m", "dsagent_cbr.cli", "bank", "import", str(folder), "--store", "faiss",
                           "--bank-dir", str(tmp_path / "bank"), "--casebank-dir", str(tmp_path / "no-seed")],
                          capture_output=True, text=True, timeout=120, cwd=REPO)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    skipped = [line for line in proc.stderr.splitlines() if line.startswith("skipped ")]
    assert len(skipped) == 3 and all("never follows links" in line for line in skipped)
    assert "2 file(s) cannot be imported" in proc.stderr and proc.stderr.count("only for cases a run retains") == 2
    assert not (tmp_path / "bank" / "journal.jsonl").exists() or "OUTSIDE" not in (
        tmp_path / "bank" / "journal.jsonl").read_text()


def _swap_for_link(folder: Path, outside: Path) -> None:
    folder.rename(folder.with_name("moved-away"))
    folder.symlink_to(outside, target_is_directory=True)


@pytest.mark.parametrize("moment", ["after the listing", "after the lstat"])
def test_import_refuses_a_folder_swapped_for_a_link_before_the_read(tmp_path: Path, monkeypatch, moment) -> None:
    """An attacker owning the folder swaps a subfolder for a link to another place while the import runs:
    once the folder was listed (the entry is then seen as a link), or once the entry was looked at and
    found a folder (it is then opened with O_NOFOLLOW, which refuses the link)."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "stolen-1.md").write_text("OUTSIDE-SECRET: never to be imported.", encoding="utf-8")
    root = tmp_path / "import"
    (root / "sub").mkdir(parents=True)
    (root / "good-1.md").write_text("Target encoding won.", encoding="utf-8")
    (root / "sub" / "stolen-1.md").write_text("The subfolder's own case.", encoding="utf-8")
    real_listdir, real_stat, swapped = os.listdir, os.stat, []

    def listdir(fd=None):
        names = real_listdir(fd)
        if moment == "after the listing" and "sub" in names and not swapped:
            _swap_for_link(root / "sub", outside)
            swapped.append(True)
        return names

    def fake_stat(name, *, dir_fd=None, follow_symlinks=True):
        found = real_stat(name, dir_fd=dir_fd, follow_symlinks=follow_symlinks)
        if moment == "after the lstat" and name == "sub" and dir_fd is not None and not swapped:
            _swap_for_link(root / "sub", outside)
            swapped.append(True)
        return found

    monkeypatch.setattr(os, "listdir", listdir)
    monkeypatch.setattr(os, "stat", fake_stat)
    loaded = load_import_folder(root)
    monkeypatch.undo()
    assert swapped and (root / "sub").is_symlink()
    assert [c.title for c in loaded.cases] == ["good-1"] and not loaded.problems
    assert not any("OUTSIDE" in c.text for c in loaded.cases)
    assert loaded.skipped == [f"{root / 'sub'}: a symbolic link; import never follows links"]


def test_import_skips_pipes_without_opening_them(tmp_path: Path) -> None:
    folder = tmp_path / "import"
    (folder / "deeper").mkdir(parents=True)
    (folder / "good-1.md").write_text("Target encoding won.", encoding="utf-8")
    os.mkfifo(folder / "deeper" / "feed-1.md")  # opened for reading, it would block until a writer came
    os.mkfifo(folder / "notes")
    started = time.perf_counter()
    loaded = load_import_folder(folder)
    assert time.perf_counter() - started < 5
    assert [c.title for c in loaded.cases] == ["good-1"] and not loaded.problems
    assert loaded.skipped == [f"{folder / 'deeper' / 'feed-1.md'}: a pipe (FIFO); import reads regular files "
                              "only and never opens it", f"{folder / 'notes'}: a pipe (FIFO); import reads "
                              "regular files only and never opens it"]


def test_read_without_following_refuses_a_link(tmp_path: Path) -> None:
    (tmp_path / "real.md").write_text("text", encoding="utf-8")
    (tmp_path / "link.md").symlink_to(tmp_path / "real.md")
    assert read_text_file(tmp_path / "link.md") == "text"  # `bank add FILE`: the user named it
    with pytest.raises(ValueError, match="symbolic link"):
        read_text_file(tmp_path / "link.md", follow_links=False)


def test_journal_replays_adds_removes_and_reseeds(tmp_path: Path) -> None:
    journal = CaseJournal(tmp_path / "journal.jsonl")
    journal.create()
    a, b, seed = insight("case a"), insight("case b"), insight("a seed case")
    journal.append([{"op": "add", "case": a.to_dict()}, {"op": "add", "case": b.to_dict()}])
    journal.append([{"op": "remove", "ids": [a.id, seed.id]}])
    state = journal.state()
    assert list(state.cases) == [b.id] and state.removed == {a.id, seed.id}
    journal.append([{"op": "reseed"}, {"op": "add", "case": a.to_dict()}])
    state = journal.state()
    assert list(state.cases) == [b.id, a.id] and state.removed == set()
    # compaction keeps the meaning and drops the texts of removed cases
    journal.append([{"op": "remove", "ids": [b.id]}])
    ident, _ = journal.create(CaseJournal.compacted(journal.state()), staged=True)
    journal.commit_staged()
    assert journal.ident() == ident
    assert list(journal.state().cases) == [a.id] and "case b" not in journal.path.read_text()


def test_journal_ignores_and_cuts_a_torn_last_line(tmp_path: Path) -> None:
    journal = CaseJournal(tmp_path / "journal.jsonl")
    journal.create([{"op": "add", "case": insight("kept").to_dict()}])
    with journal.path.open("ab") as fh:  # a writer killed in the middle of its line
        fh.write(b'{"op": "add", "case": {"kind": "insight", "te')
    assert [c.text for c in journal.state().cases.values()] == ["kept"]
    size = journal.append([{"op": "add", "case": insight("next").to_dict()}])
    assert size == journal.size()
    assert [c.text for c in journal.state().cases.values()] == ["kept", "next"]
    assert all(json.loads(line) for line in journal.path.read_text().splitlines())


def test_lock_is_exclusive_across_processes_and_reentrant_within_one(tmp_path: Path) -> None:
    lock = BankLock(tmp_path)
    probe = ("import fcntl, sys; fh = open(sys.argv[1], 'a')\n"
             "try:\n    fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB); print('free')\n"
             "except BlockingIOError:\n    print('held')\n")
    with lock(), lock():  # the same process takes it again without deadlock
        held = subprocess.run([sys.executable, "-c", probe, str(lock.path)], capture_output=True, text=True)
        assert held.stdout.strip() == "held"
    free = subprocess.run([sys.executable, "-c", probe, str(lock.path)], capture_output=True, text=True)
    assert free.stdout.strip() == "free"


def _sqlite(path: Path, rows: int = 400) -> None:
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE t (x TEXT)")
    db.executemany("INSERT INTO t VALUES (?)", [("x" * 200,)] * rows)
    db.commit()
    db.close()


def test_sqlite_damage_is_seen_from_the_header(tmp_path: Path) -> None:
    good = tmp_path / "good.sqlite3"
    _sqlite(good)
    assert sqlite_problem(good) is None
    data = good.read_bytes()
    half = tmp_path / "half.sqlite3"
    half.write_bytes(data[:len(data) // 2])
    assert "cut short" in sqlite_problem(half)
    empty = tmp_path / "empty.sqlite3"
    empty.write_bytes(b"")
    assert sqlite_problem(empty) == "is empty (0 bytes)"
    other = tmp_path / "other.sqlite3"
    other.write_bytes(b"hello" * 100)
    assert sqlite_problem(other) == "is not an SQLite database"
    assert sqlite_problem(tmp_path / "absent.sqlite3") == "is missing"


def test_damaged_embedding_cache_is_set_aside_with_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "embeddings.sqlite"
    cache = EmbeddingCache(path)
    cache.put_many("m", {f"h{i}": np.ones(384, np.float32) for i in range(200)})
    cache.close()
    data = path.read_bytes()
    path.write_bytes(data[:len(data) // 2])
    again = EmbeddingCache(path)
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "is only a cache" in err[0] and str(path) in err[0]
    assert again.count() == 0 and (tmp_path / "embeddings.sqlite.damaged").is_file()


def _faiss_slot(place: FolderPlace, slot: str, ids: list[str], complete: bool) -> None:
    store = place.open(slot, fresh=True)
    vectors = np.eye(len(ids), 8, dtype=np.float32)
    store.add("insight", [Record(i, {}, "{}") for i in ids], vectors)
    if complete:
        place.mark_complete(slot, store)


@pytest.mark.parametrize(("complete", "switched", "word", "in_use"), [
    (False, False, "rolled back", ["a"]),  # killed while filling the new store
    (True, False, "finished", ["a", "b"]),  # killed after the new store was complete, before the switch
    (True, True, "finished", ["a", "b"]),  # killed after the switch, before the old store was deleted
])
def test_interrupted_rebuild_is_finished_or_rolled_back(tmp_path: Path, complete: bool, switched: bool, word: str,
                                                        in_use: list[str]) -> None:
    place = FolderPlace(tmp_path, "faiss", chroma=False)
    _faiss_slot(place, "faiss.g1-aa", ["a"], complete=True)
    place.point_to("faiss.g1-aa")
    _faiss_slot(place, "faiss.g2-bb", ["a", "b"], complete=complete)
    if switched:
        place.point_to("faiss.g2-bb")
    line = recover(place)
    assert line is not None and word in line
    assert place.slots() == [place.current()]
    assert sorted(place.open(place.current()).ids("insight")) == in_use
    assert recover(place) is None  # nothing left over the second time
    assert not list(tmp_path.glob(".discard-*"))


def test_first_generation_is_the_old_layout(tmp_path: Path) -> None:
    place = FolderPlace(tmp_path, "faiss", chroma=False)
    assert place.current() is None
    (tmp_path / "faiss").mkdir()  # a bank made before generations
    (tmp_path / "faiss-hnsw.g3-cc").mkdir()  # another store kind's folder is not ours
    assert place.current() == "faiss" and place.slots() == ["faiss"]
    assert re.fullmatch(r"faiss\.g1-[0-9a-f]{6}", place.new_slot())
    assert place.new_slot() != place.new_slot()  # a rolled-back generation's name never comes back


@pytest.mark.parametrize("name", ["records.jsonl", "vectors.npy"])
def test_truncated_faiss_file_is_named_with_the_fix(tmp_path: Path, name: str) -> None:
    from dsagent_cbr.errors import CbrError

    place = FolderPlace(tmp_path, "faiss", chroma=False)
    _faiss_slot(place, "faiss.g1-aa", ["a", "b", "c"], complete=True)
    target = tmp_path / "faiss.g1-aa" / "insight" / name
    target.write_bytes(target.read_bytes()[: target.stat().st_size // 2])
    with pytest.raises(CbrError) as caught:
        place.open("faiss.g1-aa").ids("insight")
    message = str(caught.value)
    assert str(target) in message and "`cbr bank rebuild`" in message and "\n" not in message


def test_without_roll_back_an_unfinished_generation_is_left_alone(tmp_path: Path) -> None:
    """On a shared server an unfinished newer generation may be a teammate's rebuild at work."""
    place = FolderPlace(tmp_path, "faiss", chroma=False)
    _faiss_slot(place, "faiss.g1-aa", ["a"], complete=True)
    place.point_to("faiss.g1-aa")
    _faiss_slot(place, "faiss.g2-bb", ["a"], complete=False)
    assert recover(place, roll_back=False) is None and place.slots() == ["faiss.g1-aa", "faiss.g2-bb"]
    assert "rolled back" in recover(place) and place.slots() == ["faiss.g1-aa"]
