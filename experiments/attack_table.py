"""The attack table: every attack of tests/test_sandbox_attacks.py run through `cbr run` by an earlier
commit of the package (default d8da0f4, before the bubblewrap sandbox) and by the working tree, in one
run, printing for each what the run ended as and the test score it got. A test score of 0.0 (RMSE on
concrete-strength) means the attack reached the answers.
Usage: python experiments/attack_table.py [--before COMMIT]"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import psutil  # noqa: E402
from earlier_commit import REPO, cbr, checkout, prepare  # noqa: E402
from test_sandbox_attacks import MARKER, SECRET, Listener, attacks  # noqa: E402


def run_attack(root: Path, task: Path, script: Path, out: Path, env: dict[str, str], new: bool) -> dict:
    limits = ["--memory", "200"] + (["--disk", "200"] if new else [])
    proc = cbr(root, "run", str(task), str(script), "--out", str(out), *limits, "--timeout", "120", env=env,
               timeout=600)
    result = json.loads((out / "result.json").read_text()) if (out / "result.json").is_file() else {}
    leaked = SECRET in proc.stdout + proc.stderr + result.get("stdout", "") + result.get("stderr", "")
    survivors = [p for p in psutil.process_iter(["cmdline"]) if MARKER in " ".join(p.info["cmdline"] or [])]
    for p in survivors:
        p.kill()
    return {"status": result.get("status", f"exit {proc.returncode}"), "test": result.get("test_metric"),
            "secret_leaked": leaked, "process_survived": bool(survivors)}


def outside_changed(world: dict) -> list[str]:
    changed = []
    for path in (world["bank_dir"] / "pwned", world["task"].root / "pwned"):
        if path.exists():
            changed.append(f"wrote {path.name} in {path.parent.name}/")
            path.unlink()
    for path in (world["bank_dir"] / "cases.jsonl", world["task"].root / "description.md"):
        if not path.exists():
            changed.append(f"deleted {path.name}")
    # put the task back as it was, so that the next attack meets the same world
    subprocess.run(["git", "-C", str(world["task"].root), "checkout", "--", "description.md"], capture_output=True)
    return changed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--before", default="d8da0f4")
    parser.add_argument("--out", type=Path, default=REPO / "experiments" / "results" / "attack_table.json")
    args = parser.parse_args()
    listener = Listener()
    rows = []
    with checkout(args.before, "attack-table-") as (before, work):
        from dsagent_cbr.tasks.loader import load_task

        prepare((before, REPO), ["concrete-strength", "smoke-ban"])
        home = work / "home"
        (home / ".kaggle").mkdir(parents=True)
        (home / ".kaggle" / "kaggle.json").write_text(json.dumps({"username": "u", "key": SECRET}))
        env = {**os.environ, "HOME": str(home), "OPENAI_API_KEY": SECRET, "KAGGLE_KEY": SECRET}
        for version, root in (("before", before), ("after", REPO)):
            task = load_task(root / "tasks" / "concrete-strength")
            bank_dir = work / f"cbr-home-{version}" / "bank"
            bank_dir.mkdir(parents=True)
            world = {"task": task, "answers": task.private_dir / "answers.csv", "home": home, "bank_dir": bank_dir,
                     "other": root / "tasks" / "smoke-ban" / "private" / "answers.csv", "listener": listener}
            for name, (script, _) in attacks(world).items():
                (bank_dir / "cases.jsonl").write_text("{}\n")
                path = work / f"{version}-{name}.py"
                path.write_text(script)
                accepted = listener.accepted
                outcome = run_attack(root, task.root, path, work / f"run-{version}-{name}",
                                     {**env, "CBR_HOME": str(bank_dir.parent)}, version == "after")
                outcome["connected"] = listener.accepted > accepted
                outcome["changed_outside"] = outside_changed(world)
                rows.append({"attack": name, "version": version, **outcome})
                print(f"{version:6} {name:28} {outcome}", flush=True)
    listener.close()
    print(f"\nattacks through `cbr run`, before = {args.before}, after = working tree\n")
    print("| attack | before | after |\n|---|---|---|")
    for name in dict.fromkeys(r["attack"] for r in rows):
        cells = []
        for version in ("before", "after"):
            r = next(x for x in rows if x["attack"] == name and x["version"] == version)
            notes = [f"test {r['test']:.4g}" if r["test"] is not None else "no score"]
            notes += ["secret leaked"] * r["secret_leaked"] + ["process survived"] * r["process_survived"]
            notes += ["connected"] * r["connected"] + r["changed_outside"]
            cells.append(f"{r['status']} ({', '.join(notes)})")
        print(f"| {name} | {cells[0]} | {cells[1]} |")
    args.out.write_text(json.dumps({"command": " ".join(sys.argv), "before": args.before, "rows": rows}, indent=2))
    print(f"\nwritten {args.out}")


if __name__ == "__main__":
    main()
