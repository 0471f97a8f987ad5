"""What a run did, in one typed record: `summary.json` of every develop, search and deploy run.

The report, MLflow tracking, `cbr predict` and `cbr bench` read this one schema; none of them parses
words. A row is one iteration (or one deploy candidate); the run's choice is made on the selection score
(cbr's own grade of rows the script never saw labelled), the script's printed validation is kept beside
it as a diagnostic, and the test score is only carried along to be reported."""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, ValidationError, computed_field

from dsagent_cbr.bounded import Absent, Unreadable, read_json
from dsagent_cbr.errors import CbrError, Outcome
from dsagent_cbr.files import write_text_atomic

SUMMARY = "summary.json"
Kind = Literal["develop", "search", "deploy"]


class Operator(StrEnum):
    """How a search node was made: search/policy.py chooses, search/operators.py and model_moves.py make."""

    DRAFT = "draft"  # one of cbr's general solutions, adapted to the task
    TRANSPLANT = "transplant"  # a past solution from the bank, adapted
    TUNE = "tune"  # a family root's script with new values for its model literals
    ENSEMBLE = "ensemble"  # a blend of graded nodes' predictions
    ADAPT = "adapt"  # the model's one-call adaptation of the nearest past solution, as cbr deploy's
    PLAN = "plan"  # the model's draft: a new solution from a retrieved case
    IMPROVE = "improve"  # the model's change to a graded node's script
    DEBUG = "debug"  # the model's fix of a broken node


MODEL_OPERATORS = (Operator.ADAPT, Operator.PLAN, Operator.IMPROVE, Operator.DEBUG)


def asks_model(operator: str) -> bool:
    """The node's script was written by the model (a row loaded from summary.json holds plain strings)."""
    return operator in MODEL_OPERATORS


class Status(StrEnum):
    """How a row ended: graded (ok), a script's own failure as the harness found it, or no script to run."""

    NOT_RUN = "not run"  # still running, or cut off by a stop
    OK = "ok"
    ERROR = "error"
    TIMEOUT = "timeout"
    MEMORY_LIMIT = "memory_limit"
    DISK_LIMIT = "disk_limit"
    OUTPUT_LIMIT = "output_limit"
    PROCESS_LIMIT = "process_limit"
    GRADING_ERROR = "grading_error"
    NO_PLAN = "no plan"  # the model's reply held no usable plan
    NO_SCRIPT = "no script"  # nor a script
    NOT_ADAPTABLE = "not adaptable"  # the structural adapter had no rule for the pair
    NOT_BLENDED = "not blended"
    OUT_OF_TIME = "out of time"  # the budget ended during one of the node's model calls
    # deploy: graded, but not better than the starter's guess
    WORSE_THAN_STARTER = "worse than the starter"


class Row(BaseModel):
    """One script run the loop chose to record: an iteration of develop or the search, or a deploy candidate."""

    # a loaded row holds plain strings
    model_config = ConfigDict(extra="ignore", use_enum_values=True)

    iteration: int
    candidate: str | None = None  # deploy: who wrote the script ("llm", "adapter")
    case: str = ""  # the case it was built from
    step: str = ""  # the plan's decision, or what was adapted
    status: Status = Status.NOT_RUN
    error: str | None = None
    debug_attempts: int = 0
    valid: float | None = None  # what the script printed of itself: its own diagnostic
    selection: float | None = None  # graded by cbr on the rows it held back
    # what the row is judged by: the selection score, or (no selection rows) valid
    score: float | None = None
    test: float | None = None  # reported only: never shown to the model, never used to choose
    wall_time: float | None = None
    retained: bool = False
    script: str | None = None  # the row's final script, relative to the run folder
    operator: Operator | Literal[""] = ""  # the search's nodes only
    parent: int | None = None  # the search: the node it was grown from (tune: its family's root)
    tuned: dict[str, float] | None = None  # tune: the model literals it set
    members: dict[int, float] | None = None  # ensemble: its members' iterations and weights
    started: float | None = None  # the search: seconds into the run when the node began
    # and when it ended (its model calls and its script: the node's own time)
    ended: float | None = None
    log: str = ""  # what the logger wrote of it (develop)


class Refit(BaseModel):
    # ok, skipped, refused (its test predictions too far from the first fit's: agent/refit.py), or the
    # run's failure
    status: str
    why: str | None = None
    error: str | None = None
    test_after_refit: float | None = None
    # how its test predictions agreed with the first fit's, in words: what judged it
    agreement: str | None = None
    # a blend's: the share of its weight whose members were refit (the others submitted as first fits)
    share: float | None = None
    # a blend's: the members submitted as their first fits (their refits missing or not used)
    first_fits: list[int] | None = None
    # per early-stopped model: [first fit's rounds, the refit's own]
    rounds: list[list[int]] | None = None


class Estimate(BaseModel):
    """How far the selection score can be trusted (agent/estimate.py)."""

    level: float = 0.9  # harness/uncertainty.py's LEVEL
    low: float | None = None  # the selected script's selection score: its bootstrap interval
    high: float | None = None
    runner_up: int | None = None  # the next best graded script's iteration
    apart: bool | None = None  # whether the two differ on the selection rows (paired bootstrap)


class DeployFacts(BaseModel):
    """Algorithm 2's own measures: one pass (the model's first script graded) apart from final success."""

    strategy: str
    one_pass: bool | None = None  # None: no script was asked of a model, or it was never reached
    solved_by: Literal["llm", "adapter", "none"] = "none"
    retrieved: list[dict[str, str | float | None]] = []
    llm_error: str | None = None
    adapter_notes: list[str] = []
    adapter_error: str | None = None


class RunRecord(BaseModel):
    model_config = ConfigDict(extra="ignore")

    kind: Kind
    task: str
    model: str
    metric: str
    direction: Literal["minimize", "maximize"]
    seed: int = 0
    run_dir: str
    outcome: Outcome = Outcome.AGENT_FAILURE
    exit_code: int = 1  # what `cbr` exits with for this outcome (errors.py)
    stopped: str = "completed"  # why the run ended, in words, for people
    # the selected script's interval, and whether the next best differs
    estimate: Estimate | None = None
    # seconds from the command's start to the record (earlier legs of a resume too)
    took: float | None = None
    # the run's last save: a record saved along the way reads as if the run ended there, with this False
    final: bool = False
    # selection | validation (a task without selection rows) | first graded run
    selected_by: str = "selection"
    selection_rows: int = 0
    planned_iterations: int | None = None
    rows: list[Row] = []
    best_iteration: int | None = None
    best_valid: float | None = None
    best_selection: float | None = None
    best_score: float | None = None
    best_test: float | None = None
    test_answers: bool = True
    baselines: dict[str, float | None] = {}
    best_solution: str | None = None
    submission: str | None = None
    # whose predictions the submission is: the selected node's, or the starter's when no node graded
    submission_from: str = "selected"
    feature_importance: str | None = None
    refit: Refit | None = None
    sandbox: dict[str, object] = {}
    tokens: int = 0
    cost_usd: float = 0.0
    model_errors: list[dict[str, object]] = []
    # the cases the run added to the bank: iteration, solution, insight
    retained: list[dict[str, object]] = []
    deploy: DeployFacts | None = None

    @computed_field  # type: ignore[prop-decorator]
    @property
    def iterations(self) -> int:
        return len(self.rows)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def solved(self) -> bool:
        """A graded solution was kept."""
        return self.best_iteration is not None

    def save(self, run_dir: Path) -> None:
        write_text_atomic(Path(run_dir) / SUMMARY, self.model_dump_json(indent=2))


# a printed validation better than the selection score by more than this share is flagged
GAP = 0.25


def overclaims(row: Row, direction: str) -> bool:
    """Did the script report itself much better than it graded on rows it never saw labelled (an
    overfit validation, a leak into it, or a lie)?"""
    if row.valid is None or row.selection is None:
        return False
    better = row.valid > row.selection if direction == "maximize" else row.valid < row.selection
    return better and abs(row.valid - row.selection) > GAP * max(abs(row.selection), 1e-12)


def load_record(run_dir: Path) -> RunRecord:
    """The record of a run folder; one sentence when there is none or it is not one (a link, over
    MAX_RECORD_BYTES, nested too deep: bounded.py)."""
    path = Path(run_dir) / SUMMARY
    try:
        return RunRecord.model_validate(read_json(path))
    except Absent:
        raise CbrError(f"{run_dir} is not a finished run folder (no {SUMMARY}).") from None
    except Unreadable as exc:
        raise CbrError(f"{exc}.") from None
    except ValidationError as exc:
        first = str(exc).splitlines()[0]
        raise CbrError(f"{path} is not a run record cbr can read ({first}).") from None
