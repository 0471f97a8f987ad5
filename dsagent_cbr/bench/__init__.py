"""`cbr bench`: the paper's tables from a grid of tasks x agents x trials, fanned out on Ray.

The contract (docs/bench.md says it for users):
- a grid lives in one folder: grid.json (what it is), bank-base/ (the bank every trial starts from),
  trials/<task>/<agent>/trial-<k>/ (one independent trial each: its own bank copy, CBR_HOME, run
  folder, stdout/stderr, trial.json and, once trial.json is saved, the `done` marker);
- every trial is one subprocess of the public CLI (`cbr deploy|develop|run ... --json`), so the
  harness depends on the commands' flags and their result.json/summary.json, not on internals;
- a grid resumes: a trial with a `done` marker is never run again;
- measures (success rates, ranks, normalised score, cost) are computed from the trial records alone
  (measures.py), and the tables, JSON and PNG are written by report.py.
"""
