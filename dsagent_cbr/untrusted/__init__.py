"""Code that runs inside the sandbox, as untrusted code, each file saying so in its header: the bootstrap
every script starts under, the start signal, DS-Agent's stand-in submit and grader, the adapter's shim,
the search's general drafts and blend, the bench's FLAML and AutoGluon anchors, and the helpers of cbr
analyze's first cell (describe_data.py). cbr reads these as text
(importlib.resources) and gives them to a sandboxed process, whole, appended to a script or adapted into
one. Only blend.py's `blend` and the shim's file name are imported on the host as well, so that what a
user re-runs computes what the host graded. Nothing here imports dsagent_cbr: it is not in the sandbox."""
