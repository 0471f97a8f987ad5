"""No command is silent for more than saying.SILENCE seconds (ten): each command below is run
in-process with its slow step replaced by a fake that sleeps, and the time between any two lines it
writes (stdout and stderr alike, from its start to its end) is measured. The promise is scaled down
to half a second so that the fakes sleep for about one."""

from __future__ import annotations

import io
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from dsagent_cbr import saying
from dsagent_cbr.cli import main
from dsagent_cbr.errors import CbrError

SCALED = 0.5  # seconds: the promise, scaled down
SLOW = 1.2  # seconds a fake step sleeps: more than twice the promise


class Stamped(io.StringIO):
    """A stream that notes when each line was written."""

    def __init__(self, times: list[float]) -> None:
        super().__init__()
        self.times = times

    def write(self, text: str) -> int:
        if text.strip():
            self.times.append(time.monotonic())
        return super().write(text)


def run_timed(monkeypatch, argv: list[str]) -> tuple[int, float, str]:
    """(exit code, the longest silence in seconds, what the command wrote)."""
    times: list[float] = []
    out, err = Stamped(times), Stamped(times)
    monkeypatch.setattr("sys.stdout", out)
    monkeypatch.setattr("sys.stderr", err)
    start = time.monotonic()
    try:
        code = main(argv)
    except SystemExit as exc:  # a run's own outcome (errors.py), as `cbr` exits with it
        code = int(exc.code or 0)
    stamps = [start, *times, time.monotonic()]
    monkeypatch.undo()  # the streams back before pytest reports
    return (
        code,
        max(b - a for a, b in zip(stamps, stamps[1:], strict=False)),
        out.getvalue() + err.getvalue(),
    )


@pytest.fixture
def here(tmp_path, monkeypatch) -> Path:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("CBR_HOME", str(tmp_path / "home"))
    monkeypatch.setattr(saying, "SILENCE", SCALED)
    frame = pd.DataFrame({"x": range(40), "y": [i % 2 for i in range(40)]})
    frame.to_csv(tmp_path / "table.csv", index=False)
    return tmp_path


def a_task(here: Path) -> Path:
    assert (
        main(
            [
                "tasks",
                "new",
                "tasks/t",
                "--train",
                "table.csv",
                "--target",
                "y",
                "--holdout",
                "0.25",
            ]
        )
        == 0
    )
    return here / "tasks" / "t"


def sleeps(*_, **__):
    time.sleep(SLOW)
    raise CbrError("the fake step failed.")


def test_the_promise_is_ten_seconds():
    assert saying.SILENCE == 10.0 and saying.SHARE * saying.SILENCE * (1 + 1 / 40) < 10.0


def test_a_step_that_says_nothing_is_spoken_for(here, monkeypatch):
    def quiet_step():
        with saying.doing("thinking hard", announce=False):
            time.sleep(SLOW)

    times: list[float] = []
    monkeypatch.setattr("sys.stderr", Stamped(times))
    start = time.monotonic()
    quiet_step()
    lines = __import__("sys").stderr.getvalue().splitlines()
    monkeypatch.undo()
    stamps = [start, *times, time.monotonic()]
    assert max(b - a for a, b in zip(stamps, stamps[1:], strict=False)) <= SCALED
    assert lines and all(line.startswith("still thinking hard: ") for line in lines)


def test_develop_says_what_it_is_doing(here, monkeypatch):
    from dsagent_cbr.agent.progress import heartbeat
    from dsagent_cbr.agent.record import RunRecord

    task = a_task(here)

    def search(task, config, run_dir, bank, progress, **_):
        progress.update(iteration=0, role="execute", left=20.0)
        with heartbeat(progress, iteration=0, role="execute"):
            time.sleep(SLOW)
        return RunRecord(
            kind="search",
            task=task.name,
            model="none",
            metric="auroc",
            direction="maximize",
            run_dir=str(run_dir),
        )

    monkeypatch.setattr("dsagent_cbr.bank.embedder.warm_up", lambda name: None)
    monkeypatch.setattr("dsagent_cbr.search.loop.develop_search", search)
    code, silence, said = run_timed(
        monkeypatch, ["develop", str(task), "--budget", "20s", "--store", "faiss"]
    )
    assert code == 1 and silence <= SCALED, said
    assert "developing t (auroc) within 20s with no model: runs/t/" in said
    assert "iteration 0 (execute): still running after 0 s" in said


def test_predict_says_what_it_is_doing(here, monkeypatch):
    task = a_task(here)
    run = here / "runs" / "t" / "r1"
    run.mkdir(parents=True)
    (run / "best_solution.py").write_text(task.joinpath("train.py").read_text())
    (run / "config.json").write_text(f'{{"task_dir": "{task}"}}')
    pd.DataFrame({"x": [1, 2]}).to_csv(here / "new.csv", index=False)
    monkeypatch.setattr("dsagent_cbr.harness.run.run_script", sleeps)
    code, silence, said = run_timed(monkeypatch, ["predict", str(run), "new.csv"])
    assert code == 2 and silence <= SCALED, said
    assert "running best_solution.py in the sandbox: predicting 2 rows of new.csv" in said
    assert "still running best_solution.py" in said


def test_bank_list_says_it_indexes_the_seed_bank(here, monkeypatch):
    from dsagent_cbr.bank.facade import CaseBank

    def embed(self, cases):
        time.sleep(SLOW / 2)  # twice: insights, then solutions
        vectors = np.random.default_rng(0).normal(size=(len(cases), 384)).astype("float32")
        return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)

    monkeypatch.setattr(CaseBank, "_embed_cases", embed)
    code, silence, said = run_timed(monkeypatch, ["bank", "list", "--retained", "--store", "faiss"])
    assert code == 0 and silence <= SCALED, said
    assert said.startswith("indexing ") and " case(s) of the seed bank " in said
    assert "still indexing " in said


def test_ingest_kaggle_says_it_crawls(here, monkeypatch):
    monkeypatch.setattr("dsagent_cbr.ingest.kaggle_api.load_credentials", lambda *a, **k: None)
    monkeypatch.setattr("dsagent_cbr.ingest.crawl.run_spider", sleeps)
    code, silence, said = run_timed(monkeypatch, ["ingest-kaggle", "some-competition"])
    assert code == 2 and silence <= SCALED, said
    assert said.startswith("crawling Kaggle's competition some-competition: its top notebooks")


def test_a_command_without_steps_of_its_own_is_spoken_for(here, monkeypatch):
    monkeypatch.setattr("dsagent_cbr.tasks.create.create_task", sleeps)
    code, silence, said = run_timed(
        monkeypatch, ["tasks", "new", "tasks/u", "--train", "table.csv", "--holdout", "0.2"]
    )
    assert code == 2 and silence <= SCALED, said
    assert said.startswith("still running cbr tasks new: 0s")
