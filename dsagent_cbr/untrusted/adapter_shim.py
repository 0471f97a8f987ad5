# Runs untrusted, inside the sandbox: appended by the adapter (adapter/adapt.py) to every adapted script.
# --- cbr structural adapter: fits the transplanted case model to this task's data and outputs ---
# The case's own train_model/predict were renamed _case_train_model/_case_predict. These wrappers give
# the case its inputs in the form its code was written for (a Series, DataFrame, list or array, as the
# case's own script built them), encode labels and categorical features, turn a target the case was
# not written for into one it was (one model per target column; quantile bins when a classification
# case meets a regression target; one-vs-rest when a binary case meets several classes), and turn what
# the case predicts into what this task is graded on.
import numpy as _np
import pandas as _pd

_CBR_TASK = {"modality": "tabular", "output": "value", "classes": None, "case": "regression", "case_multi": False,
             "x_kind": "frame", "y_kind": "series", "target": None, "named": [],
             "raw": False, "log_target": False}
_CBR_BINS = 10  # quantile bins when a multi-class case learns a regression target


class _CbrModel:
    def __init__(self, jobs, labels, categories, y_shape, width):
        self.jobs, self.labels, self.categories = jobs, labels, categories
        self.y_shape, self.width = y_shape, width  # the starter's target shape; its number of label columns


def _cbr_index(value):
    return value.index if isinstance(value, _pd.Series | _pd.DataFrame) else None


def _cbr_as(value, kind, index=None, names=None):
    """`value` as the kind of input the case's code was written for: series, frame, list or array."""
    if kind == "array":
        return value.to_numpy() if isinstance(value, _pd.Series | _pd.DataFrame) else _np.asarray(value)
    if kind == "list":
        if isinstance(value, _pd.DataFrame) and value.shape[1] == 1:
            value = value.iloc[:, 0]
        return value.tolist() if hasattr(value, "tolist") else list(value)
    if isinstance(value, _pd.DataFrame):
        return value.iloc[:, 0] if kind == "series" and value.shape[1] == 1 else value
    if isinstance(value, _pd.Series):
        return value.to_frame() if kind == "frame" else value
    array = _np.asarray(value)
    if index is not None and len(index) != len(array):
        index = None
    if array.ndim == 2 and (kind == "frame" or array.shape[1] > 1):
        names = names if names is not None and len(names) == array.shape[1] else [f"y{j}" for j in range(array.shape[1])]
        return _pd.DataFrame(array, index=index, columns=names)
    array = array.reshape(len(array), -1)[:, 0] if array.ndim == 2 else array
    name = names[0] if names else None
    return _pd.DataFrame({name or "y0": array}, index=index) if kind == "frame" else _pd.Series(array, index=index, name=name)


def _cbr_learn_categories(X):
    """The text columns to give as integer codes: those the case's code does not name (it handles the
    ones it names itself, in the form it was written for); none when it encodes every column itself."""
    if not isinstance(X, _pd.DataFrame) or _CBR_TASK["modality"] != "tabular" or _CBR_TASK.get("raw"):
        return {}
    kinds, named = ("object", "category", "bool", "string", "str"), set(_CBR_TASK.get("named") or ())
    return {c: sorted(X[c].dropna().astype("string").unique()) for c in X.columns
            if str(X[c].dtype) in kinds and str(c) not in named}


def _cbr_features(X, categories):
    """Text columns as integer codes of the training categories, then X in the case's form."""
    if isinstance(X, _pd.DataFrame) and categories:
        X = X.copy()
        for col, cats in categories.items():  # a category unseen in training is missing, not a warning
            values = X[col].astype("string")
            X[col] = _pd.Categorical(values.where(values.isin(cats)), categories=cats).codes.astype("int32")
    return _cbr_as(X, _CBR_TASK["x_kind"])


def _cbr_matrix(y):
    """Targets as a (rows, columns) array, whatever the starter passed."""
    values = y.to_numpy() if isinstance(y, _pd.Series | _pd.DataFrame) else _np.asarray(y)
    return values.reshape(len(values), -1)


def _cbr_names(y, width):
    if isinstance(y, _pd.DataFrame):
        return [str(c) for c in y.columns]
    target = _CBR_TASK["target"]
    return list(target) if target and len(target) == width else [f"y{j}" for j in range(width)]


def _cbr_order(label):
    """Numbers in numeric order, then anything else as text (so 0/1 and no/yes end on the positive class)."""
    number = isinstance(label, int | float | _np.number)
    return (not number, label if number else str(label))


def _cbr_labels(*ys):
    found = _pd.unique(_np.concatenate([_np.asarray(y, dtype=object).ravel() for y in ys]))
    classes = _CBR_TASK["classes"]
    if classes and {str(v) for v in found} <= set(classes):
        return sorted(found, key=lambda v: classes.index(str(v)))
    return sorted(found, key=_cbr_order)


def _cbr_codes(y, labels):
    codes = {label: i for i, label in enumerate(labels)}
    return _np.array([codes[v] for v in _np.asarray(y, dtype=object).ravel()]).reshape(_np.shape(y))


def _cbr_bins(y_train, y_valid, n_bins):
    """Quantile bins of a regression target: codes for both splits and each bin's mean."""
    y_train, y_valid = _np.asarray(y_train, dtype=float), _np.asarray(y_valid, dtype=float)
    edges = _np.unique(_np.quantile(y_train, _np.linspace(0, 1, n_bins + 1)[1:-1]))
    used, codes = _np.unique(_np.searchsorted(edges, y_train, side="right"), return_inverse=True)
    valid = _np.clip(_np.searchsorted(used, _np.searchsorted(edges, y_valid, side="right")), 0, len(used) - 1)
    centers = _np.array([y_train[codes == k].mean() for k in range(len(used))])
    return codes, valid, centers


def _cbr_fit(X_train, X_valid, y_train, y_valid, names, decode, **info):
    index_t, index_v = _cbr_index(X_train), _cbr_index(X_valid)
    kind = _CBR_TASK["y_kind"]
    yt, yv = _cbr_as(y_train, kind, index_t, names), _cbr_as(y_valid, kind, index_v, names)
    return {"inner": _case_train_model(X_train, yt, X_valid, yv), "decode": decode, **info}


def _cbr_scores(inner, X, n_classes, proba_first=True):
    """Class scores (rows, classes) from whatever the case predicts: its probabilities (predict ->
    predict_proba) first when asked, then its own predict, which is not run when the probabilities are
    already a score per class (a second prediction of a five-class booster took as long as the first);
    None when it gives one probability for more than two classes (a binary case on a multi-class task)."""
    variants = [_case_predict_proba, _case_predict] if proba_first and _case_predict_proba else [_case_predict]
    for i, variant in enumerate(variants):
        try:
            out = _np.asarray(variant(inner, X))
        except Exception:  # the probability variant may not apply to this case's model; its own predict must
            if i == len(variants) - 1:
                raise
            continue
        if out.ndim == 2 and out.shape[1] == n_classes and out.dtype.kind == "f":
            return out
    out = out.reshape(len(out), -1)[:, -1] if out.ndim > 1 else out
    if out.dtype.kind in "biuf":
        values = out.astype(float)
        integral = _np.all(_np.isclose(values, _np.round(values)))
        if not integral and _np.nanmin(values) >= 0 and _np.nanmax(values) <= 1 and n_classes > 2:
            return None
        if not integral and n_classes == 2:
            p = _np.clip(values, 0, 1)
            return _np.stack([1 - p, p], axis=1)
        out = _np.clip(_np.rint(values), 0, n_classes - 1).astype(int)
    idx = _np.asarray(out).astype(int)
    return _np.eye(n_classes)[idx] * 0.9 + 0.1 / n_classes


_CBR_ORDER_ROWS = 3000  # training rows the column order is read from
_CBR_ORDER_MARGIN = 1.1  # a reordering must match the classes this much better than the columns as given


def _cbr_column_order(inner, X, codes, k):
    """The class order is the harness's (codes 0..k-1), but a case may order its probability columns its
    own way (its labels sorted as text: 0, 1, 10, 11, 2, ...). Each column is matched to the class whose
    training rows it scores highest (an assignment over all columns); the columns are reordered only when
    that matching is clearly better than taking them as given. Returns the column of each class, or None."""
    from scipy.optimize import linear_sum_assignment

    rows = min(len(codes), _CBR_ORDER_ROWS)
    scores = _cbr_scores(inner, X.iloc[:rows] if hasattr(X, "iloc") else X[:rows], k)
    codes = _np.asarray(codes)[:rows]
    fit = _np.zeros((k, k))
    for c in _np.unique(codes):
        fit[c] = scores[codes == c].mean(axis=0)
    classes, columns = linear_sum_assignment(-fit)
    if fit[classes, columns].sum() <= _CBR_ORDER_MARGIN * _np.trace(fit):
        return None
    order = _np.empty(k, dtype=int)
    order[classes] = columns
    return order


def _cbr_plan(Xt, Xv, y_train, y_valid):
    """The case models to fit, each with how its predictions are read back."""
    Yt, Yv = _cbr_matrix(y_train), _cbr_matrix(y_valid)
    width, names = Yt.shape[1], _cbr_names(y_train, Yt.shape[1])
    case = _CBR_TASK["case"]
    if _CBR_TASK["output"] == "value":
        Yt, Yv = Yt.astype(float), Yv.astype(float)
        if case in ("regression", "forecasting"):
            # a metric on the log of the target (RMSLE): the case learns log1p of it, predictions come back
            # through expm1, never below zero
            log = bool(_CBR_TASK.get("log_target"))
            shape = _np.log1p if log else (lambda y: y)
            if width > 1 and not _CBR_TASK["case_multi"]:
                return None, [_cbr_fit(Xt, Xv, shape(Yt[:, j]), shape(Yv[:, j]), [n], "value", log=log)
                              for j, n in enumerate(names)]
            return None, [_cbr_fit(Xt, Xv, shape(y_train), shape(y_valid), names, "value", log=log)]
        jobs = []
        for j, name in enumerate(names):
            n_bins = 2 if case == "binary" else _CBR_BINS
            codes, valid, centers = _cbr_bins(Yt[:, j], Yv[:, j], n_bins)
            if case == "multilabel":  # one "above this bin" label per bin edge
                above = [f"{name}_above_{k}" for k in range(len(centers) - 1)]
                cum_t = (codes[:, None] > _np.arange(len(centers) - 1)).astype(int)
                cum_v = (valid[:, None] > _np.arange(len(centers) - 1)).astype(int)
                jobs.append(_cbr_fit(Xt, Xv, cum_t, cum_v, above, "cumulative", centers=centers))
            else:
                jobs.append(_cbr_fit(Xt, Xv, codes, valid, [name], "bins", centers=centers))
        return None, jobs
    labels = _cbr_labels(Yt, Yv)
    Ct, Cv, k = _cbr_codes(Yt, labels), _cbr_codes(Yv, labels), len(labels)
    if width > 1:  # several labels, one probability each
        if _CBR_TASK["case_multi"]:
            return labels, [_cbr_fit(Xt, Xv, Ct, Cv, names, "columns")]
        return labels, [_cbr_fit(Xt, Xv, Ct[:, j], Cv[:, j], [n], "positive", n=k) for j, n in enumerate(names)]
    if case == "multilabel":  # one indicator column per class
        onehot = [str(label) for label in labels]
        return labels, [_cbr_fit(Xt, Xv, _np.eye(k, dtype=int)[Ct[:, 0]], _np.eye(k, dtype=int)[Cv[:, 0]], onehot,
                                 "columns")]
    job = _cbr_fit(Xt, Xv, Ct[:, 0], Cv[:, 0], names, "scores", n=k)
    scored = k > 2 and _cbr_scores(job["inner"], Xv, k) is not None  # one prediction, read both ways below
    if scored:
        job["order"] = _cbr_column_order(job["inner"], Xt, Ct[:, 0], k)
    if case == "binary" and k > 2 and not scored:
        job = {"decode": "one-vs-rest", "parts": [
            _cbr_fit(Xt, Xv, (Ct[:, 0] == c).astype(int), (Cv[:, 0] == c).astype(int), names, "positive", n=2)
            for c in range(k)]}
    return labels, [job]


def train_model(X_train, y_train, X_valid, y_valid):
    categories = _cbr_learn_categories(X_train)
    Xt, Xv = _cbr_features(X_train, categories), _cbr_features(X_valid, categories)
    labels, jobs = _cbr_plan(Xt, Xv, y_train, y_valid)
    return _CbrModel(jobs, labels, categories, _np.shape(y_train)[1:], _cbr_matrix(y_train).shape[1])


def _cbr_read(job, X, n_rows, proba_first=None):
    """One job's predictions: values (rows,) / (rows, k), or class scores (rows, classes)."""
    decode = job["decode"]
    proba_first = _CBR_TASK["output"] != "label" if proba_first is None else proba_first
    if decode == "one-vs-rest":
        return _np.stack([_cbr_read(part, X, n_rows) for part in job["parts"]], axis=1)
    if decode == "scores":
        scores = _cbr_scores(job["inner"], X, job["n"], proba_first)
        return scores if job.get("order") is None else scores[:, job["order"]]
    if decode == "positive":
        return _cbr_scores(job["inner"], X, job["n"])[:, -1]
    if decode == "bins":
        scores = _cbr_scores(job["inner"], X, len(job["centers"]))
        return scores / scores.sum(axis=1, keepdims=True) @ job["centers"]
    out = _np.asarray(_case_predict(job["inner"], X), dtype=float).reshape(n_rows, -1)
    if decode == "cumulative":
        steps = _np.diff(job["centers"])
        return job["centers"][0] + _np.clip(out, 0, 1) @ steps
    if decode == "columns":
        return out
    if job.get("log"):
        out = _np.clip(_np.expm1(out), 0, None)
    return out if out.shape[1] > 1 else out[:, 0]


def predict(model, X):
    X = _cbr_features(X, model.categories)
    n_rows = len(X)
    parts = [_cbr_read(job, X, n_rows) for job in model.jobs]
    out = _np.stack(parts, axis=1) if len(parts) > 1 else parts[0]
    kind = _CBR_TASK["output"]
    if kind == "value":
        return out.reshape((n_rows, *model.y_shape))
    if model.width > 1:  # one probability per label
        return out
    if kind == "proba":
        return out[:, -1]
    if kind == "proba-classes":
        out = _np.clip(out, 0, None) + 1e-12
        return out / out.sum(axis=1, keepdims=True)
    _cbr_keep_scores(model, X, n_rows, out)
    return _np.asarray(model.labels, dtype=object)[out.argmax(axis=1)].astype(type(model.labels[0]))


CBR_CLASS_SCORES = "cbr_class_scores.csv"


def _cbr_keep_scores(model, X, n_rows, scores):
    """Beside the labels, the class probabilities behind them (a column per class), for the search's
    blend on the host, which averages them rather than counting votes. Each call overwrites the file:
    what stays is the last call's, the test rows the submission holds (the host checks that they agree).
    `scores` are those the labels were read from: the case's predict_proba is asked again only where it
    could differ from them (one model's class scores, when the case has predict_proba)."""
    import contextlib
    import os

    job = model.jobs[0]
    try:
        if job["decode"] == "scores" and _case_predict_proba is not None:
            scores = _cbr_read(job, X, n_rows, proba_first=True)
        _pd.DataFrame(scores, columns=[str(label) for label in model.labels]).to_csv(CBR_CLASS_SCORES, index=False)
    except Exception:  # the labels are what the task grades; without scores a blend counts votes
        with contextlib.suppress(OSError):
            os.remove(CBR_CLASS_SCORES)


def _case_train_model(X_train, y_train, X_valid, y_valid):  # replaced by the case's code
    raise NotImplementedError


def _case_predict(model, X):  # replaced by the case's code
    raise NotImplementedError


_case_predict_proba = None  # replaced by the case's predict with predict() calls turned into predict_proba()
