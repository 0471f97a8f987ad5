"""Process isolation, and nothing else: a command run under bubblewrap in a workspace of its own, within
its limits (time, memory, processes, disk, output), dying with cbr. This folder knows no task, no
answers and no grading: what a script may see and how it is judged is the harness's (harness/)."""

from dsagent_cbr.sandbox.bubblewrap import SandboxPolicy, SandboxUnavailable, require_sandbox
from dsagent_cbr.sandbox.run import ProcessOutcome, run_sandboxed

__all__ = [
    "ProcessOutcome",
    "SandboxPolicy",
    "SandboxUnavailable",
    "require_sandbox",
    "run_sandboxed",
]
