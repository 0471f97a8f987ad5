"""The attack table: every attack of tests/support/attacks.py (the first table's twelve, issue 20's
thirteen, the third round's on what the harness builds and reads), and the honest scripts once stopped as
false alarms, run through `cbr run` by an earlier commit of the package and by the working tree, in one
run; then the third round's scenarios that are not one script (benchmarks/attack_scenarios.py: a task's
data, a run folder or the bank's server made hostile, a signal mid-search), by both versions too. For each: what the run ended as, its test
score, whether the attack said it succeeded (ATTACK SUCCEEDED in its output), what leaked or changed
outside, and the peak resident memory of cbr with the processes it waited for.

Then the answers-from-packages check: every data file each task recipe reads (found by an audit hook,
tests/support/recipe_reads.py) is read from inside the sandbox of each version; a task whose source
gives a byte is exposed.

Usage: python benchmarks/attack_table.py [--before COMMIT] [--only NAME ...]"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import psutil  # noqa: E402
from attack_scenarios import SCENARIOS  # noqa: E402
from earlier_commit import REPO, checkout, prepare  # noqa: E402
from support.attacks import (  # noqa: E402
    KAGGLE_TASK,
    MARKER,
    SECRET,
    SUCCESS,
    Listener,
    attacks,
    honest,
    limits,
    source_probe,
)
from support.layouts import kaggle_sample_task  # noqa: E402
from support.recipe_reads import recipe_reads  # noqa: E402

TASKS = ("concrete-strength", "smoke-ban", "acsf1", "elec-demand")


def cbr_run(root: Path, args: list[str], env: dict[str, str]) -> tuple[int, float, float]:
    """(exit code, seconds, peak RSS in MB of cbr and the processes it waited for)."""
    start = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-m", "dsagent_cbr.cli", "run", *args], cwd=root,
                            env={**env, "PYTHONPATH": str(root)}, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    return os.waitstatus_to_exitcode(status), time.monotonic() - start, usage.ru_maxrss / 1024


def outside_changed(world: dict) -> list[str]:
    changed = []
    for path in (world["bank_dir"] / "pwned", world["task_root"] / "pwned"):
        if path.exists():
            changed.append(f"wrote {path.name} in {path.parent.name}/")
            path.unlink()
    for path in (world["bank_dir"] / "cases.jsonl", world["task_root"] / "description.md"):
        if not path.exists():
            changed.append(f"deleted {path.name}")
    # put the task back as it was, so that the next attack meets the same world
    subprocess.run(["git", "-C", str(world["task_root"]), "checkout", "--", "description.md"], capture_output=True)
    return changed


def run_attack(root: Path, world: dict, name: str, attack, work: Path, env: dict[str, str]) -> dict:
    script = work / f"{root.name}-{name}.py"
    script.write_text(attack.script)
    out = work / f"run-{root.name}-{name}"
    accepted = world["listener"].accepted
    task = world["task_dirs"].get(attack.task, root / "tasks" / attack.task)
    code, seconds, peak = cbr_run(root, [str(task), str(script), "--out", str(out),
                                         *limits(attack), "--timeout", "120"], env)
    result = json.loads((out / "result.json").read_text()) if (out / "result.json").is_file() else {}
    survivors = [p for p in psutil.process_iter(["cmdline"]) if MARKER in " ".join(p.info["cmdline"] or [])]
    for p in survivors:
        p.kill()
    output = result.get("stdout", "") + result.get("stderr", "")
    return {"status": result.get("status", f"exit {code}, no result"), "test": result.get("test_metric"),
            "succeeded": SUCCESS in output, "secret_leaked": SECRET in output, "process_survived": bool(survivors),
            "connected": world["listener"].accepted > accepted, "changed_outside": outside_changed(world),
            "seconds": round(seconds, 1), "cbr_peak_mb": round(peak)}


def exposed_tasks(root: Path, reads: dict[str, list[Path]], work: Path, env: dict[str, str]) -> list[str]:
    """The tasks whose source data a script run by this version can read a byte of."""
    paths = sorted({str(p) for files in reads.values() for p in files})
    script = work / f"{root.name}-probe.py"
    script.write_text(source_probe(paths))
    out = work / f"probe-{root.name}"
    cbr_run(root, [str(root / "tasks" / "concrete-strength"), str(script), "--out", str(out)], env)
    seen = json.loads((out / "workspace" / "seen.json").read_text())
    return sorted(name for name, files in reads.items() if any(isinstance(seen.get(str(p)), int)
                                                               and seen[str(p)] > 0 for p in files))


def cell(r: dict) -> str:
    notes = [f"test {r['test']:.4g}" if r["test"] is not None else "no score"]
    notes += ["**attack succeeded**"] * r["succeeded"] + ["secret leaked"] * r["secret_leaked"]
    notes += ["process survived"] * r["process_survived"] + ["connected"] * r["connected"] + r["changed_outside"]
    notes += [f"cbr {r['cbr_peak_mb']} MB, {r['seconds']} s"]
    return f"{r['status']} ({', '.join(notes)})"


def _said(row: dict) -> str:
    return "; ".join(f"{k}: {v}" for k, v in row.items() if k not in ("scenario", "version"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--before", default="b05006e")  # main before the third round (issue 41)
    parser.add_argument("--only", nargs="*", default=None, help="Run only these attacks.")
    parser.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "attack_table.json")
    args = parser.parse_args()
    listener = Listener()
    rows, exposed, scenarios = [], {}, []
    reads = {folder.name: recipe_reads(folder.resolve()) for folder in sorted((REPO / "tasks").iterdir())
             if (folder / "task.toml").is_file()}
    with checkout(args.before, "attack-table-") as (before, work):
        prepare((before, REPO), list(TASKS))
        home = work / "home"
        (home / ".kaggle").mkdir(parents=True)
        (home / ".kaggle" / "kaggle.json").write_text(json.dumps({"username": "u", "key": SECRET}))
        env = {**os.environ, "HOME": str(home), "OPENAI_API_KEY": SECRET, "KAGGLE_KEY": SECRET}
        kaggle = kaggle_sample_task(work / "kaggle")
        for version, root in (("before", before), ("after", REPO)):
            bank_dir = work / f"cbr-home-{version}" / "bank"
            bank_dir.mkdir(parents=True)
            world = {"answers": root / "tasks/concrete-strength/private/answers.csv", "home": home,
                     "other": root / "tasks/smoke-ban/private/answers.csv", "bank_dir": bank_dir,
                     "task_root": root / "tasks/concrete-strength", "port": listener.port, "listener": listener,
                     "task_dirs": {KAGGLE_TASK: kaggle.root}}
            venv = {**env, "CBR_HOME": str(bank_dir.parent)}
            named = {**attacks(world), **honest()}
            for name, attack in named.items():
                if args.only and name not in args.only:
                    continue
                (bank_dir / "cases.jsonl").write_text("{}\n")
                outcome = run_attack(root, world, name, attack, work, venv)
                rows.append({"attack": name, "version": version, "honest": name in honest(),
                             "original": attack.original, "expected_now": sorted(attack.statuses), **outcome})
                print(f"{version:6} {name:30} {outcome}", flush=True)
            exposed[version] = exposed_tasks(root, reads, work, venv)
            print(f"{version:6} tasks whose source data a script can read: {len(exposed[version])}/{len(reads)}")
            for name, scenario in SCENARIOS.items():
                if not args.only or name in args.only:
                    scenarios.append({"scenario": name, "version": version, **scenario(root, work, venv)})
                    print(f"{version:6} {name:30} {scenarios[-1]}", flush=True)
    listener.close()
    print(f"\nattacks through `cbr run`, before = {args.before}, after = working tree\n")
    print("| attack | before | after |\n|---|---|---|")
    for name in dict.fromkeys(r["attack"] for r in rows):
        pair = [next(x for x in rows if x["attack"] == name and x["version"] == v) for v in ("before", "after")]
        print(f"| {name}{' (honest)' if pair[0]['honest'] else ''} | {cell(pair[0])} | {cell(pair[1])} |")
    print(f"\nanswers from installed packages: {len(exposed['before'])} of {len(reads)} tasks exposed before, "
          f"{len(exposed['after'])} after ({', '.join(exposed['after']) or 'none'})")
    print("\n| scenario | before | after |\n|---|---|---|")
    for name in dict.fromkeys(r["scenario"] for r in scenarios):
        pair = [next(x for x in scenarios if x["scenario"] == name and x["version"] == v) for v in ("before", "after")]
        print(f"| {name} | {_said(pair[0])} | {_said(pair[1])} |")
    args.out.write_text(json.dumps({"command": " ".join(sys.argv), "before": args.before, "rows": rows,
                                    "exposed": exposed, "tasks": len(reads), "scenarios": scenarios}, indent=2))
    print(f"\nwritten {args.out}")


if __name__ == "__main__":
    main()
