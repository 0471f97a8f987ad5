"""`cbr predict` for a run whose submission is a blend: each member's script runs on the new rows as the
run's submission had it, and their predictions are blended on the host with the run's weights, as the run
blended them (search/refits.py).

A member is refit on every labelled row, or runs as its first fit where the run submitted that (its refit
was not ready in time, or not used). The blend's own script, best_solution.py, refits every member: on
credit, a run that submitted node 1's refit (weight 0.98) beside node 2's first fit (0.02) got other
predictions from it than its submission's, by up to 0.0065."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from dsagent_cbr.agent.record import Operator, Refit, Row, load_record
from dsagent_cbr.agent.rundir import row_workspace
from dsagent_cbr.errors import CbrError
from dsagent_cbr.harness.plan import Held
from dsagent_cbr.harness.readers import ArtefactError, read_fit_rounds
from dsagent_cbr.harness.run import run_script
from dsagent_cbr.sandbox.bubblewrap import SandboxPolicy
from dsagent_cbr.saying import doing
from dsagent_cbr.search import ensemble
from dsagent_cbr.tasks.model import Task


@dataclass(frozen=True)
class Fit:
    """A member of the submitted blend: its node, its weight, and whether the submission took its refit."""

    node: Row
    weight: float
    refit: bool

    def said(self) -> str:
        return f"node {self.node.iteration} ({self.weight:g}, {'refit' if self.refit else 'first fit'})"


def submitted_blend(run_dir: Path) -> list[Fit] | None:
    """The members of the run's selected blend, as its submission took them; None where the run's
    selection is no blend (or the run kept no record of one)."""
    try:
        record = load_record(run_dir)
    except CbrError:
        return None
    rows = {row.iteration: row for row in record.rows}
    best = rows.get(record.best_iteration) if record.best_iteration is not None else None
    if best is None or best.operator != Operator.ENSEMBLE or not best.members:
        return None
    made = record.refit
    refit = made is not None and made.status == "ok"
    firsts = _first_fits(made) if made is not None else set()
    if any(i not in rows or not rows[i].script for i in best.members):
        return None
    return [Fit(rows[i], w, refit and i not in firsts) for i, w in best.members.items()]


def _first_fits(made: Refit) -> set[int]:
    """The members the submission took as first fits. Runs before first_fits was kept said so only in
    `agreement` ("node 1 (0.98) refit; node 2 (0.02) first fit")."""
    if made.first_fits is not None:
        return set(made.first_fits)
    return {int(t) for t in re.findall(r"node (\d+) \([^)]*\) first fit", made.agreement or "")}


def blend_note(fits: list[Fit]) -> str:
    return f"the solution is a blend, run as the run's submission was: {', '.join(f.said() for f in fits)}"


def predict_blend(
    copy: Task,
    held: Held,
    run_dir: Path,
    fits: list[Fit],
    folder: Path,
    policy: SandboxPolicy | None,
) -> Path:
    """Each member run on `copy` (the task with the new rows as its test file), then their blend written
    into a workspace under `folder`, as the task's predictions file; returns that workspace."""
    members = [_member(copy, held, run_dir, fit, folder, policy) for fit in fits]
    view = held.for_refit()  # the test rows alone, as a refit writes them
    workspace = folder / "blend" / "workspace"
    weights = {fit.node.iteration: fit.weight for fit in fits}
    try:
        ensemble.refit(copy, view, ensemble.row_ids(copy, view), members, weights, workspace)
    except ArtefactError as exc:
        raise CbrError(f"The blend of the members' predictions cannot be made: {exc}.") from exc
    return workspace


def _member(
    copy: Task, held: Held, run_dir: Path, fit: Fit, folder: Path, policy: SandboxPolicy | None
) -> ensemble.Member:
    t, script = fit.node.iteration, run_dir / str(fit.node.script)
    if not script.is_file():
        raise CbrError(
            f"{run_dir} lacks {fit.node.script}, node {t}'s script, a member of its blend."
        )
    # a refit stops its boosters where the first fit's stopped, as the run's refit did
    told = read_fit_rounds(row_workspace(run_dir, fit.node.script)) if fit.refit else None
    how = "learning from every labelled row" if fit.refit else "as its first fit"
    with doing(f"running node {t}'s script ({fit.weight:g} of the blend) in the sandbox, {how}"):
        result = run_script(
            copy,
            script,
            run_dir=folder / f"node-{t:02d}",
            policy=policy,
            refit=fit.refit,
            first_fit=told,
        )
    if not result.ok:
        raise CbrError(
            f"Node {t}'s script, a member of the blend, failed ({result.status}): {result.error}"
        )
    code = script.read_text(encoding="utf-8")
    member = ensemble.fitted(copy, held, t, code, Path(result.workspace), fit.refit)
    if member is None:
        raise CbrError(f"Node {t}'s predictions, a member of the blend, cannot be read back.")
    return member
