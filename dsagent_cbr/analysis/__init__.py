"""A stateful Python kernel in the sandbox, for data analysis written cell by cell, and the notebook
its cells make. session.py runs one kernel process in the sandbox; kernel.py runs cells in it, with a
time limit each; cells.py reads what a cell gives back; notebook.py writes the session down."""

from dsagent_cbr.analysis.cells import CellResult
from dsagent_cbr.analysis.kernel import KernelDied, SandboxedKernel
from dsagent_cbr.analysis.notebook import build_notebook, write_notebook
from dsagent_cbr.analysis.session import KernelStartError

__all__ = [
    "CellResult",
    "KernelDied",
    "KernelStartError",
    "SandboxedKernel",
    "build_notebook",
    "write_notebook",
]
