"""The cells of a session as a Jupyter notebook (nbformat v4) that runs again top to bottom.

A cell that raised is kept, with its error, and tagged `raises-exception`: nbclient (and Jupyter's own
"run all") go on past it, as the session did. A cell stopped at its time limit, or one the kernel died
in, is left out: run again it would hang or kill the kernel, and the cells after it ran without it.
The notebook reads its data by the names the session used, so it runs with the data beside it."""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output

from dsagent_cbr.analysis.cells import CellResult

RAISES = "raises-exception"  # the tag nbclient honours: an error here is expected


def replayable(cell: CellResult) -> bool:
    return not cell.timed_out and not cell.kernel_died


def _outputs(cell: CellResult, count: int, plain: bool) -> list[Any]:
    """The cell's outputs; `plain` keeps of a display only its text/plain."""
    outputs = []
    for out in cell.outputs:
        fields = {k: v for k, v in out.items() if k != "output_type"}
        if out["output_type"] == "execute_result":
            fields["execution_count"] = count
        if plain and "data" in fields:
            fields["data"] = {"text/plain": str(fields["data"].get("text/plain", ""))}
        outputs.append(new_output(out["output_type"], **fields))
    return outputs


def build_notebook(cells: Sequence[CellResult], title: str | None = None) -> nbformat.NotebookNode:
    """A notebook of the replayable cells, numbered as they will run, with the outputs they gave.
    Outputs come from the kernel, untrusted: should they not make a valid notebook, only the text of
    each display is kept."""
    try:
        return _notebook(cells, title, plain=False)
    except nbformat.ValidationError:
        return _notebook(cells, title, plain=True)


def _notebook(cells: Sequence[CellResult], title: str | None, plain: bool) -> nbformat.NotebookNode:
    nb_cells = [new_markdown_cell(f"# {title}")] if title else []
    count = 0
    for cell in cells:
        if not replayable(cell):
            continue
        count += 1
        outputs = _outputs(cell, count, plain)
        nb_cell = new_code_cell(cell.code, execution_count=count, outputs=outputs)
        if not cell.ok:
            nb_cell.metadata["tags"] = [RAISES]
        nb_cells.append(nb_cell)
    notebook = new_notebook(cells=nb_cells)
    notebook.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    notebook.metadata["language_info"] = {"name": "python"}
    nbformat.validate(notebook)
    return notebook


def write_notebook(cells: Sequence[CellResult], path: Path, title: str | None = None) -> Path:
    """Write the notebook at `path` at once: a reader never sees half of it (temp file, replace)."""
    text = nbformat.writes(build_notebook(cells, title), version=4)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, temp = tempfile.mkstemp(prefix=f".{path.name}-", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(temp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise
    return path
