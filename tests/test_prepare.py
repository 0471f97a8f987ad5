"""Preparing a task's data: two processes that prepare the same task at once (a bench's trials,
two terminals) run its prepare.py once, and both find the task prepared."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from support.task_copies import TASKS

# prepare.py made slow, and loud when a second copy of it starts while the first still writes
GUARDED = """import os, subprocess, sys, time
fd = os.open("writing", os.O_CREAT | os.O_EXCL | os.O_WRONLY)  # fails if another prepare.py is writing
time.sleep(1)
subprocess.run([sys.executable, "real_prepare.py"], check=True)
os.close(fd)
os.remove("writing")
with open("runs.log", "a") as log:
    log.write("ran\\n")
"""
PREPARE = "from dsagent_cbr.tasks.loader import load_task\nfrom dsagent_cbr.tasks.prepare import prepare_task\n" \
          "import sys\nprint(prepare_task(load_task(sys.argv[1])))\n"


@pytest.mark.integration
def test_two_processes_preparing_one_task_run_its_prepare_once(tmp_path: Path) -> None:
    folder = tmp_path / "concrete-strength"
    folder.mkdir()
    for name in ("task.toml", "description.md", "train.py"):
        shutil.copy2(TASKS / "concrete-strength" / name, folder / name)
    shutil.copy2(TASKS / "concrete-strength" / "prepare.py", folder / "real_prepare.py")
    (folder / "prepare.py").write_text(GUARDED)
    both = [subprocess.Popen([sys.executable, "-c", PREPARE, str(folder)], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True) for _ in range(2)]
    outputs = [p.communicate(timeout=120) for p in both]
    assert [p.returncode for p in both] == [0, 0], [err[-2000:] for _, err in outputs]
    assert sorted(out.strip() for out, _ in outputs) == ["already prepared", "prepared"]
    assert (folder / "runs.log").read_text() == "ran\n"
