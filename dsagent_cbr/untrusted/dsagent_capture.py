# Runs untrusted, inside the sandbox: appended by cbr (harness/workspace.py) to the imports, helpers and
# constants of a DS-Agent folder's submission.py, in place of its submit function. The test score is
# computed outside the workspace, by the folder's own submission.py; this only keeps y_pred for it.


def submit_predictions_for_test_set(*args, **kwargs):
    """cbr: the test score is computed outside this workspace; this keeps y_pred for the grader."""
    import numpy as _np

    y_pred = kwargs.get("y_pred", args[-1] if args else None)
    values = _np.asarray(y_pred)
    if values.dtype == object:
        values = values.astype(str)
    _np.save("predictions.npy", values, allow_pickle=False)
    print("Test predictions saved for grading outside the sandbox.")
