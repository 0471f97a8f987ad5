"""Runs untrusted, inside the sandbox, as a search node's script (and its blend function on the host too, so
that what a user re-runs blends as the search graded). cbr's ensemble of search nodes, as a script a user can run again: each member script runs in turn in
this folder, its predictions are set aside, and their blend (a weighted mean; where the metric takes
labels, the class with the highest weighted mean probability when every member wrote its class
probabilities, else a weighted vote) is written where the task expects its predictions.

cbr fills PLAN, MEMBERS and BOOTSTRAP. Each member runs as the harness runs a script, under cbr's
bootstrap: a refit keeps each member's early-stopping points (PLAN's first_fits: the rounds its first fit
kept, as the search's refit of it was told) and its boosters stop at the deadline, as when the search
refit it; run by hand (BOOTSTRAP empty), a member runs bare. During the search the host
blends the members' graded predictions with this same `blend`, so the script re-makes what was graded."""

import json
import os
import subprocess
import sys

import numpy as np

PLAN = {"predictions": "submission.csv", "id": None, "columns": [], "vote": False, "weights": [], "classes": None}
CLASS_SCORES = "cbr_class_scores.csv"  # where an adapted member writes its class probabilities (untrusted/adapter_shim.py)
MEMBERS = []  # the member scripts' code, in PLAN["weights"] order
BOOTSTRAP = ""  # the text of cbr's untrusted/bootstrap.py


def blend(predictions, weights, vote, scores=None, classes=None):
    """One array from the members' arrays (rows first, all the same shape): the weighted mean, or in
    each cell the label with the most weight (ties go to the heavier member, listed first); with
    `scores` (each member's class probabilities, rows by `classes`), each row's class with the highest
    weighted mean probability."""
    w = np.asarray(weights, dtype=float)
    if not vote:
        return np.tensordot(w / w.sum(), np.stack([np.asarray(p, dtype=float) for p in predictions]), axes=1)
    if scores is not None:
        mean = np.tensordot(w / w.sum(), np.stack([np.asarray(s, dtype=float) for s in scores]), axes=1)
        chosen = np.asarray(classes).astype(str)[mean.argmax(axis=1)].reshape(np.shape(predictions[0]))
    else:
        stacked = np.stack([np.asarray(p).astype(str) for p in predictions])
        w = (w + 1e-9 * np.arange(len(w), 0, -1)).reshape(-1, *[1] * (stacked.ndim - 1))
        labels = np.unique(stacked)
        tally = np.stack([(w * (stacked == label)).sum(axis=0) for label in labels])
        chosen = labels[tally.argmax(axis=0)]
    kinds = [np.asarray(p).dtype for p in predictions]
    return chosen.astype(np.result_type(*kinds)) if all(k.kind in "iuf" for k in kinds) else chosen


def _read(path):
    """A member's predictions: the array, or (csv) the target columns in the first member's row order."""
    if path.endswith(".npy"):
        return np.load(path, allow_pickle=False), None
    import pandas as pd

    frame = pd.read_csv(path, dtype={PLAN["id"]: str}).set_index(PLAN["id"])
    return frame[PLAN["columns"]], frame.index


def _scores(order, ids):
    """A member's class probabilities (its predictions' rows, a column per class) in the rows `ids`."""
    import pandas as pd

    scores = pd.read_csv(CLASS_SCORES, dtype=float)[[str(c) for c in PLAN["classes"]]]
    scores.index = order
    return scores.loc[ids].to_numpy()


def _environment(k):
    """Member k's environment: in a refit, the rounds its first fit's boosters kept, where cbr knew them."""
    first_fits = PLAN.get("first_fits") or []
    told = os.environ.get("CBR_REFIT") and k < len(first_fits) and first_fits[k] is not None
    return {**os.environ, "CBR_FIRST_FIT": json.dumps(first_fits[k])} if told else dict(os.environ)


def main():
    kept, scores, ids = [], [], None
    for k, code in enumerate(MEMBERS):
        name = f"cbr_member_{k}.py"
        with open(name, "w", encoding="utf-8") as fh:
            fh.write(code)
        bootstrapped = [sys.executable, "-c", BOOTSTRAP, name]
        subprocess.run(bootstrapped if BOOTSTRAP else [sys.executable, name], check=True, env=_environment(k))
        values, order = _read(PLAN["predictions"])
        ids = order if ids is None else ids
        kept.append(values if order is None else values.loc[ids].to_numpy())
        if PLAN["classes"]:
            scores.append(_scores(order, ids))
        os.replace(PLAN["predictions"], f"cbr_member_{k}_{PLAN['predictions']}")
    blended = blend(kept, PLAN["weights"], PLAN["vote"], scores if PLAN["classes"] else None, PLAN["classes"])
    print(f"Blended {len(MEMBERS)} solutions with weights {PLAN['weights']}")
    if ids is None:
        np.save(PLAN["predictions"], blended)
        return
    import pandas as pd

    out = pd.DataFrame(blended, columns=PLAN["columns"])
    out.insert(0, PLAN["id"], list(ids))
    out.to_csv(PLAN["predictions"], index=False)


if __name__ == "__main__":
    main()
