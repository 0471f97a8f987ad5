"""MLflow tracking of cbr's runs (`--mlflow [URI]`): a parent run for each cbr run, live while it runs, with
a child run for each of its rows (a node of the search, an iteration of develop, a candidate of deploy).

Contract, for the commands that use it:

`live_tracking(run_dir, uri, task) -> tuple[MlflowObserver, ...]` is the observers to attach to a run
(agent/seams.py's Observer): none when `uri` is None (no --mlflow), else one whose parent run opens now,
RUNNING, with config.json's values as parameters, and one line on stderr saying where. At each save of the
record it logs what is new (tracker.py):
- each row finished since, as a child run (tag `mlflow.parentRunId`; `cbr.iteration` keys it): parameters
  operator, parent, case, the script's model family, its key parameters (`model.alpha`), wrappers and
  feature steps (agent/script_summary.py); metrics `selection_<metric>`, `valid_<metric>`, `test_<metric>`
  (a graded row's, the test score only when the task has test answers) and `wall_time_s`; status FINISHED
  for a graded row, FAILED for a broken one (its status and error as tags);
- on the parent: the same scores at step = iteration, `failed` (1 for a row the report does not rank),
  and the totals as they change (`best_selection_<metric>`, `best_valid_...`, `best_test_...`,
  `best_iteration`, `failed_iterations`, `cost_usd`, `tokens`) at step = the last finished iteration;
- on the last save: `refit_test_<metric>` (a refit submitted), artifacts report.md, report.html, tree.png,
  metrics.png, importance.png, the submission (or the task's predictions file), best_solution.py,
  summary.json, config.json and rows.json (those present), tags `cbr.stopped` and `cbr.outcome`, and the
  parent's end: FINISHED (ok, or the budget spent), KILLED (interrupted) or FAILED (no graded solution, or
  a failure of ours; also, at exit, a run that never had its last save).
MLflow failing (a server down mid-run, a store that refuses) never stops the run: one line on stderr, and
the observer logs no more. Only mlflow not installed is an error (CbrError, before the run starts).

`log_run_to_mlflow(run_dir, uri=None) -> str` logs a run folder after the fact (its summary.json, required)
and returns the parent run's id; it changes nothing in the folder. Its errors (a server that does not
answer, a store that refuses) are CbrError, one sentence.

Again: a resumed run, or a folder logged again, continues the same parent run (found by the folder's key):
rows logged already are not logged twice, parameters keep their first value, artifacts are replaced.

Where: `resolve_tracking_uri(uri)`: the URI given, else $MLFLOW_TRACKING_URI, else the SQLite store
`./mlflow.db` in the current folder, its artifacts beside it in `mlartifacts/`, so `mlflow ui` (or
`mlflow server`) started in that folder shows everything. Any tracking URI MLflow takes works:
http(s)://host:port, sqlite:///path, postgresql://..., databricks. MLflow 3.7+ refuses its plain-folder
store (`./mlruns`, `file:` URIs) unless MLFLOW_ALLOW_FILE_STORE is true, hence SQLite by default.
Experiment `cbr/<task>`; the parent run is named after the run folder, a child `NN operator: family`.

mlflow is imported only when used (it is the optional extra `track`); the INFO lines of the libraries
under it (SQLAlchemy, alembic, a new store's tables) are kept out of cbr's output."""

from dsagent_cbr.tracking.live import MlflowObserver, live_tracking, log_run_to_mlflow
from dsagent_cbr.tracking.store import resolve_tracking_uri

__all__ = ["MlflowObserver", "live_tracking", "log_run_to_mlflow", "resolve_tracking_uri"]
