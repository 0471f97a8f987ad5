"""Runs untrusted, inside the sandbox (as `python -c <this file's text>`): train.py as __main__, with its
train_model wrapped so that the model it returns leaves its feature importances beside the
predictions, and so that a refit (CBR_REFIT: train_model called again on every row, validation rows
included) builds the rounds the first fit's early stopping kept, and stops there, instead of running to
its cap on rows it learned (a refit of hotel-rates' LightGBM ran 3000 rounds, to keep 1113). While the
refit's train_model runs, CBR_FIT=refit says so (a first fit on a sample of rows then learns them all). A first
fit writes the rounds its boosters kept (cbr_fit_rounds.json); given them back in the refit
(CBR_FIRST_FIT), the refit's own validation fit, which only prints a score nobody reads, builds one round
per booster instead of the first fit's again (at 1M rows a refit redid the first fit's 1,587 rounds, then
was cut at its deadline 298 rounds into the refit), and the refit stops where the first fit stopped. The
wrapper is placed by an AST edit that keeps every line number of train.py, so tracebacks read as if
train.py ran alone; if anything here fails, train.py runs untouched.
LightGBM and XGBoost training, however the script calls it, stops at CBR_DEADLINE (the time the harness
gives the script to have trained by, leaving it room to predict) and keeps the rounds it built, so that a
script cut short still writes predictions to grade. It stops sooner when predicting the CBR_PREDICT_ROWS
rows the script will predict, with the trees built so far, would not end before CBR_END, when the script is
killed: a booster of many classes and rounds can take longer to predict than to train.
This file imports nothing from dsagent_cbr: the package is not inside the sandbox."""

import ast
import contextlib
import functools
import json
import os
import sys
import time
import types

SCRIPT = sys.argv[1] if len(sys.argv) > 1 else "train.py"  # a blend's member is named (untrusted/blend.py)
IMPORTANCE = "cbr_feature_importance.json"
STOPPING = "cbr_refit_rounds.json"
FIT_ROUNDS = "cbr_fit_rounds.json"
TOP = 50
DEADLINE = float(os.environ.get("CBR_DEADLINE") or 0) or None  # seconds since the epoch
END = float(os.environ.get("CBR_END") or 0) or None
PREDICT_ROWS = int(os.environ.get("CBR_PREDICT_ROWS") or 0)
# a prediction of this many rows is timed to tell what predicting PREDICT_ROWS takes: a twentieth of them,
# from 1,000 to 10,000. Timed at every doubling of the rounds, the probes cost about twice the last, a
# tenth of the script's own predictions at most. Fewer rows count what any prediction costs once as if
# every row cost it: LightGBM took 3 ms to predict one row of a frame of categories, as long as 1,000 rows
# with 8 trees, and 1,000-row probes stopped LightGBM's defaults on 1.4 million rows after 14 of 100 rounds
PROBE_ROWS = min(PREDICT_ROWS, max(1000, PREDICT_ROWS // 20), 10_000) or 1000
# predicting is counted this many times over (the validation rows and the test file's, labels and
# probabilities), with END_MARGIN seconds kept for reading and writing the files
PREDICT_SAFETY, END_MARGIN = 2.0, 3.0
REFIT = bool(os.environ.get("CBR_REFIT"))
# the rounds each booster trained in the current call of train_model kept, in the order they were trained
# (None: it did not stop early); in the refit, PLANNED holds the first fit's, for the boosters trained in
# the same order to stop at (every one at a round in the refit's stand-in validation fit)
TRAINED, PLANNED = [], []
# per booster of the current call, in order: the rounds one that watched no validation rows built (None for
# one that did). It cannot have stopped early: its count is the script's, or the deadline's, so the refit
# runs it to the script's count and is held to the first fit's (PLANNED_BUILT) only where its deadline cuts
# it short of them (SHORT: [the first fit's rounds, the refit's]). LightGBM's defaults on 1.4 million rows,
# cut at 52 rounds in a one-minute run, had their refit stop at 52 as well (AUROC 0.66202, 100 rounds 0.66212)
BUILT, PLANNED_BUILT, SHORT = [], [], []
# the refit's boosters that its deadline cut with no count of the first fit's to hold them to
UNCOUNTED = []
# the refit of a booster that watched no rows stops at this many times its first fit's rounds, if the
# script's count is more: a script that asked for millions of rounds would otherwise train until the
# refit's deadline, however short its first fit (the floor's 52 rounds become its 100)
RUN_ON = 2
CUT = []  # the rounds at which the deadline stopped the booster training now
REFITTING = []  # not empty while the refit's own fit trains (not its validation fit)
STAND_IN = object()


def _first_fit():
    """The rounds the first fit's boosters kept, as cbr read them back from its FIT_ROUNDS: "calls" in the
    order they were trained, "models" in the order _early_stopped finds them, "unwatched" in the order
    trained (BUILT); None when not given."""
    with contextlib.suppress(Exception):
        given = json.loads(os.environ["CBR_FIRST_FIT"])
        unwatched = list(given.get("unwatched") or [])
        return {"calls": list(given["calls"]), "models": list(given["models"]), "unwatched": unwatched}
    return None


FIRST_FIT = _first_fit() if REFIT else None


def _names(X, n):
    columns = getattr(X, "columns", None)
    if columns is not None and len(columns) == n:
        return [str(c) for c in columns]
    return [f"feature {i}" for i in range(n)]


def _walkable(obj):
    """Worth looking inside: containers and plain objects, not strings, numbers, arrays or frames."""
    if isinstance(obj, str | bytes | int | float | bool | type(None) | type):
        return False
    return isinstance(obj, dict | list | tuple) or (hasattr(obj, "__dict__") and not hasattr(obj, "shape"))


def _parts(model):
    """The objects inside a model, breadth first: the model, a pipeline's last step, and whatever a
    dict, list or wrapper object holds (at most 200 of them)."""
    seen, queue = set(), [model]
    while queue and len(seen) < 200:
        obj = queue.pop(0)
        if id(obj) in seen:
            continue
        seen.add(id(obj))
        yield obj
        if hasattr(obj, "steps"):
            queue.append(obj.steps[-1][1])
        if isinstance(obj, dict):
            queue.extend(v for v in obj.values() if _walkable(v))
        elif isinstance(obj, list | tuple):
            queue.extend(v for v in obj if _walkable(v))
        elif hasattr(obj, "__dict__"):
            queue.extend(v for v in vars(obj).values() if _walkable(v))


def _importances(model):
    """(values, estimator) of the first part of the model that exposes importances."""
    for obj in _parts(model):
        values = getattr(obj, "feature_importances_", None)
        if values is None and getattr(obj, "coef_", None) is not None:
            import numpy as np

            coef = np.abs(np.asarray(obj.coef_, dtype=float))
            values = coef.mean(axis=0) if coef.ndim > 1 else coef
        if values is not None:
            return values, obj
    return None, None


def _library(obj):
    return type(obj).__module__.split(".")[0]


def _rounds(obj):
    """The boosting rounds an early-stopped LightGBM, XGBoost or CatBoost model kept; None otherwise."""
    library = _library(obj)
    with contextlib.suppress(Exception):
        if library == "lightgbm" and hasattr(obj, "booster_"):
            return obj.booster_.best_iteration or None  # 0: no early stopping
        if library == "lightgbm" and hasattr(obj, "current_iteration"):
            return obj.best_iteration or None
        if library == "xgboost":
            return obj.best_iteration + 1  # an AttributeError without early stopping
        if library == "catboost" and obj.get_best_iteration() is not None:
            return obj.get_best_iteration() + 1
    return None


def _built(obj):
    """The boosting rounds a LightGBM, XGBoost or CatBoost model built; None for another model."""
    library = _library(obj)
    with contextlib.suppress(Exception):
        if library == "lightgbm":
            return (obj.booster_ if hasattr(obj, "booster_") else obj).current_iteration()
        if library == "xgboost":
            return (obj.get_booster() if hasattr(obj, "get_booster") else obj).num_boosted_rounds()
        if library == "catboost":
            return obj.tree_count_
    return None


def _keep_rounds(obj, rounds):
    """Make `obj` predict with its first `rounds` rounds only: boosting builds its rounds in order, so
    this is the model a fit of exactly `rounds` rounds without early stopping would have made."""
    library = _library(obj)
    if library == "lightgbm" and hasattr(obj, "booster_"):
        obj.booster_.best_iteration, obj._best_iteration = rounds, rounds
    elif library == "lightgbm":
        obj.best_iteration = rounds
    elif library == "xgboost":
        booster = obj.get_booster() if hasattr(obj, "get_booster") else obj
        booster.set_attr(best_iteration=str(rounds - 1))
    elif library == "catboost":
        obj.shrink(ntree_end=rounds)


def _early_stopped(model):
    """The early-stopped models inside `model`, in walk order; a scikit-learn wrapper stands for the
    booster it holds."""
    found = [obj for obj in _parts(model) if _rounds(obj)]
    held = {id(getattr(obj, "_Booster", None)) for obj in found}
    return [obj for obj in found if id(obj) not in held]


def _reuse_stopping(first, refit):
    """The refit's early-stopped models, paired in order with the first fit's (`first`: the rounds each
    kept), keep the first fit's stopping points; written down so the run record can say so."""
    kept = []
    for rounds, obj in zip(first, _early_stopped(refit), strict=False):
        built = _built(obj) or _rounds(obj)
        # the booster may have built more (trained out of train_model's order, or a library not stopped),
        # and its own early stopping, watching learned rows, may have picked fewer
        if built >= rounds != _rounds(obj):
            _keep_rounds(obj, rounds)
        kept.append([rounds, built])
    # written whenever a booster trained and none was cut without a count: an empty list says that none
    # was cut short; without the file cbr refuses a refit that reached its deadline
    if (kept or SHORT or TRAINED) and not UNCOUNTED:
        with open(STOPPING, "w", encoding="utf-8") as fh:
            json.dump(kept + SHORT, fh)


def _vocabulary(model, n):
    """The n features' names when the model's text vectorizers made them: their words and n-grams (character
    ones quoted), vectorizer after vectorizer in the order the model holds them, as scripts stack their
    outputs (the first ones that add up to n: a model per target holds a set each); None when none do."""
    names = []
    for obj in _parts(model):
        if hasattr(obj, "vocabulary_") and hasattr(obj, "get_feature_names_out"):
            chars = str(getattr(obj, "analyzer", "")).startswith("char")
            names += [f"chars {w!r}" if chars else str(w) for w in obj.get_feature_names_out()]
            if len(names) >= n:
                break
    return names if len(names) == n else None


def _record(model, X):
    values, estimator = _importances(model)
    if values is None:
        return
    values = [float(v) for v in list(values)]
    names = getattr(estimator, "feature_names_in_", None)
    if names is None or len(names) != len(values):
        names = _vocabulary(model, len(values)) or _names(X, len(values))
    names = [str(c) for c in names]
    ranked = sorted(zip(names, values, strict=True), key=lambda kv: -abs(kv[1]))[:TOP]
    with open(IMPORTANCE, "w", encoding="utf-8") as fh:
        json.dump(dict(ranked), fh)


def _wrap(train_model):
    fits = []

    @functools.wraps(train_model)
    def wrapped(*args, **kwargs):
        refit = bool(fits) and REFIT  # the refit; early stopping there would watch learned rows
        _plan(refit, stand_in=REFIT and not fits and FIRST_FIT is not None)
        if refit:
            os.environ["CBR_FIT"] = "refit"
        try:
            model = train_model(*args, **kwargs)
        finally:
            os.environ.pop("CBR_FIT", None)
        with contextlib.suppress(Exception):  # nothing written: the record does not claim the reuse
            if refit:
                _reuse_stopping(_first_models(fits[0]), model)
            elif not (fits or REFIT):
                _write_fit_rounds(model)
        fits.append(model)
        with contextlib.suppress(Exception):  # importances are a courtesy; the script's work must not suffer
            _record(model, args[0] if args else kwargs.get("X_train"))
        return model

    return wrapped


def _plan(refit, stand_in):
    """Where this call of train_model's boosters stop: in the refit at the first fit's rounds, in its
    stand-in validation fit at one round each, otherwise where the script says."""
    if refit:
        PLANNED[:] = FIRST_FIT["calls"] if FIRST_FIT else TRAINED
        PLANNED_BUILT[:] = FIRST_FIT["unwatched"] if FIRST_FIT else BUILT
        REFITTING[:] = [True]
    else:
        PLANNED[:] = [STAND_IN] if stand_in else []
        PLANNED_BUILT.clear()
        REFITTING.clear()
    TRAINED.clear()
    BUILT.clear()


def _first_models(model):
    """The rounds each early-stopped model of the first fit kept: as given, or the refit's own
    validation fit's (`model`)."""
    if FIRST_FIT:
        return FIRST_FIT["models"]
    return [_rounds(obj) for obj in _early_stopped(model)]


def _write_fit_rounds(model):
    """The rounds for the refit; written when a booster trained, even one that stopped nowhere (the
    floor's), so that the refit's validation fit need not build its rounds again."""
    calls, models = TRAINED, [_rounds(obj) for obj in _early_stopped(model)]
    if calls or models:
        with open(FIT_ROUNDS, "w", encoding="utf-8") as fh:
            json.dump({"calls": calls, "models": models, "unwatched": BUILT}, fh)


def _past_deadline(library, rounds, prediction, booster):
    """Whether `booster`, `rounds` into its training, stops: at the deadline, or sooner when predicting
    with it would not end in time (`prediction`: what predicting takes with it)."""
    takes, now = prediction.takes(rounds, booster), time.time()
    if now < DEADLINE and (takes is None or now + takes < END):
        return False
    why = "its deadline" if now >= DEADLINE else "the time it needs to predict"
    print(f"cbr: {library} stopped at {why} after {rounds} rounds, keeping them", file=sys.stderr)
    CUT.append(rounds)
    return True


class _Prediction:
    """What the script's predictions will take with the booster being trained: `predict` (the booster it
    is given predicts up to PROBE_ROWS of its training rows, and says how many) is timed whenever the
    rounds have doubled, as a prediction's time grows with the trees, and scaled to the PREDICT_ROWS rows."""

    def __init__(self, predict):
        self.predict = predict
        self.rounds, self.rows, self.seconds = 0, 0, 0.0

    def takes(self, rounds, booster):
        """Seconds for the predictions and the files with `rounds` rounds; None when it cannot be told."""
        if not (END and PREDICT_ROWS and self.predict):
            return None
        if rounds >= 2 * self.rounds:
            try:
                started = time.perf_counter()
                self.rows = self.predict(booster)
                self.rounds, self.seconds = rounds, time.perf_counter() - started
            except Exception:  # rows the probe cannot feed the booster: the deadline alone stops it
                self.predict = None
                return None
        per_row_round = self.seconds / max(self.rows, 1) / self.rounds
        return PREDICT_SAFETY * per_row_round * PREDICT_ROWS * rounds + END_MARGIN


def _head(data):
    """The first PROBE_ROWS rows of a training set's raw data (a frame, an array, a sparse matrix)."""
    if data is None or isinstance(data, (str, os.PathLike)):
        return None
    return data.iloc[:PROBE_ROWS] if hasattr(data, "iloc") else data[:PROBE_ROWS]


def _with_callbacks(train, deadline, stop_at):
    """`train` with the deadline's callback, in the refit a callback that stops at the rounds its
    counterpart in the first fit kept, and the rounds it kept written down in TRAINED."""

    @functools.wraps(train)
    def wrapped(*args, **kwargs):
        watched = bool(_validation(args, kwargs))
        planned = _planned_rounds()
        # in the refit, the first fit's rounds: its stopping point, or what one that watched no rows built
        first = planned if watched else _at(PLANNED_BUILT, len(BUILT))
        # both libraries take (params, training set, ...): the set's rows time the predictions
        learnt = args[1] if len(args) > 1 else kwargs.get("train_set", kwargs.get("dtrain"))
        ours = [deadline(learnt)] if DEADLINE else []
        stop = planned or (RUN_ON * first if first else None)
        ours += [stop_at(stop)] if stop else []
        kwargs["callbacks"] = [*(kwargs.get("callbacks") or []), *ours]
        CUT.clear()
        booster = train(*args, **kwargs)
        with contextlib.suppress(Exception):
            _count(booster, watched, first)
        return booster

    return wrapped


def _validation(args, kwargs):
    """The validation sets a training call was given (LightGBM's valid_sets, XGBoost's evals)."""
    return args[3] if len(args) > 3 else kwargs.get("valid_sets", kwargs.get("evals"))


def _count(booster, watched, first):
    """Write down the rounds `booster` kept (TRAINED) and, when it watched no validation rows, built
    (BUILT); in the refit, whether the deadline cut it short of its first fit's rounds (`first`)."""
    built = None if watched else _built(booster)
    if built and _library(booster) == "lightgbm":
        booster.best_iteration = 0  # LightGBM took the deadline's stop for an early one: all its trees predict
    if REFITTING:
        # a watched booster's pair (its first fit's stopping point) is _reuse_stopping's
        if CUT and not first:
            UNCOUNTED.append(CUT[-1])
        elif built and built < first:
            SHORT.append([first, built])
    TRAINED.append(_rounds(booster))
    BUILT.append(built)


def _at(values, k):
    return values[k] if k < len(values) else None


def _planned_rounds():
    """The rounds the booster about to train stops at; None: where the script says."""
    if PLANNED[:1] == [STAND_IN]:
        return 1
    return _at(PLANNED, len(TRAINED))


def _guard_lightgbm():
    import lightgbm
    import lightgbm.engine
    import lightgbm.sklearn

    def deadline(learnt):
        # the raw rows, before lightgbm bins them and lets them go
        head = _head(getattr(learnt, "data", None))
        prediction = _Prediction(None if head is None else lambda booster: len(booster.predict(head)))

        def stop(env):
            if _past_deadline("LightGBM", env.iteration + 1, prediction, env.model):
                raise lightgbm.callback.EarlyStopException(env.iteration, env.evaluation_result_list or [])

        stop.order = 40  # after early stopping's own check (30)
        return stop

    def stop_at(rounds):
        def stop(env):
            if env.iteration + 1 >= rounds:
                raise lightgbm.callback.EarlyStopException(env.iteration, env.evaluation_result_list or [])

        stop.order = 40
        return stop

    guarded = _with_callbacks(lightgbm.engine.train, deadline, stop_at)
    lightgbm.train = lightgbm.engine.train = lightgbm.sklearn.train = guarded


def _guard_xgboost():
    import xgboost
    import xgboost.sklearn
    import xgboost.training

    class Deadline(xgboost.callback.TrainingCallback):
        def __init__(self, learnt):
            super().__init__()
            self.prediction = _Prediction(lambda booster: _probe(booster, learnt))

        def after_iteration(self, model, epoch, evals_log):
            return _past_deadline("XGBoost", epoch + 1, self.prediction, model)

    def _probe(booster, learnt):
        # new rows each time: xgboost keeps the predictions of a matrix it has seen, and adds trees
        rows = _xgboost_rows(learnt)
        if isinstance(rows, xgboost.DMatrix):
            return len(booster.predict(rows))
        return len(booster.inplace_predict(rows))

    class StopAt(xgboost.callback.TrainingCallback):
        def __init__(self, rounds):
            super().__init__()
            self.rounds = rounds

        def after_iteration(self, model, epoch, evals_log):
            return epoch + 1 >= self.rounds

    guarded = _with_callbacks(xgboost.training.train, Deadline, StopAt)
    xgboost.train = xgboost.training.train = xgboost.sklearn.train = guarded


def _xgboost_rows(learnt):
    """Rows like the training set's: its first ones, or where xgboost keeps only its bins (a
    QuantileDMatrix, as its scikit-learn models make), values drawn from each feature's bin edges, which
    are its quantiles."""
    import numpy

    with contextlib.suppress(Exception):
        return learnt.slice(list(range(min(PROBE_ROWS, learnt.num_row()))))
    bounds, edges = learnt.get_quantile_cut()
    draw, features = numpy.random.default_rng(0).choice, zip(bounds[:-1], bounds[1:], strict=True)
    return numpy.column_stack(
        [draw(edges[a:b], PROBE_ROWS) if b > a else numpy.zeros(PROBE_ROWS) for a, b in features]
    )


def _guard_boosters(source):
    """Only the libraries the script names are imported here (an import costs a second)."""
    if DEADLINE is None and not REFIT:
        return
    for name, guard in (("lightgbm", _guard_lightgbm), ("xgboost", _guard_xgboost)):
        if name in source:
            with contextlib.suppress(Exception):  # a library that is not there, or another version: untouched
                guard()


def _compile(source):
    tree = ast.parse(source, SCRIPT)
    for i, node in enumerate(tree.body):
        if isinstance(node, ast.FunctionDef) and node.name == "train_model":
            call = ast.parse("train_model = __cbr_wrap__(train_model)").body[0]
            for part in ast.walk(call):
                part.lineno = part.end_lineno = node.end_lineno
                part.col_offset, part.end_col_offset = 0, 1
            tree.body.insert(i + 1, call)
            break
    return compile(tree, SCRIPT, "exec")


def main():
    with open(SCRIPT, encoding="utf-8") as fh:
        source = fh.read()
    try:
        code = _compile(source)
    except Exception:
        code = compile(source, SCRIPT, "exec")
    _guard_boosters(source)
    module = types.ModuleType("__main__")
    module.__dict__.update({"__file__": SCRIPT, "__builtins__": __builtins__, "__cbr_wrap__": _wrap})
    sys.modules["__main__"] = module
    sys.argv = [SCRIPT]
    exec(code, module.__dict__)


main()
