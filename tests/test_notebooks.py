"""Every notebook in notebooks/ runs top to bottom in a kernel of this venv, so none can rot.

One test per notebook, found by glob (a new notebook is picked up without
touching this file). The kernel is the ``python3`` spec that ipykernel
installs under this venv's ``share/jupyter/kernels``, looked up there only
(a user's or the system's ``python3`` spec could name another interpreter);
jupyter_client starts a spec whose argv is ``python`` as ``sys.executable``,
so the kernel imports lakelog exactly as the tests do. A notebook runs with
its own directory as the working directory and builds (and deletes) its own
store in a temporary directory.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import nbformat
import pytest
from jupyter_client.kernelspec import KernelSpecManager
from jupyter_client.manager import KernelManager
from nbclient import NotebookClient
from nbformat import v4

NOTEBOOKS_DIR = Path(__file__).resolve().parent.parent / "notebooks"
NOTEBOOKS = sorted(NOTEBOOKS_DIR.glob("*.ipynb"))
KERNEL_NAME = "python3"
KERNELS_DIR = Path(sys.prefix) / "share" / "jupyter" / "kernels"

# Per notebook: its own work is well under a minute; Spark's start and a loaded
# CI machine take the rest.
NOTEBOOK_TIMEOUT_S = 600
CELL_TIMEOUT_S = 300


def venv_kernel_manager() -> KernelManager:
    """A manager for this venv's ``python3`` kernel (NoSuchKernel if ipykernel is not installed here)."""
    specs = KernelSpecManager(kernel_dirs=[str(KERNELS_DIR)])
    specs.get_kernel_spec(KERNEL_NAME)
    return KernelManager(kernel_name=KERNEL_NAME, kernel_spec_manager=specs)


def execute(nb: nbformat.NotebookNode, cwd: Path, timeout: int = CELL_TIMEOUT_S) -> nbformat.NotebookNode:
    """Run every cell of ``nb`` in a fresh venv kernel started in ``cwd``; raises CellExecutionError on an error."""
    client = NotebookClient(
        nb,
        km=venv_kernel_manager(),
        timeout=timeout,
        allow_errors=False,
        resources={"metadata": {"path": str(cwd)}},
    )
    return client.execute()


def test_notebooks_exist_and_are_committed_without_outputs() -> None:
    assert NOTEBOOKS, f"no notebooks in {NOTEBOOKS_DIR}"
    for path in NOTEBOOKS:
        nb = nbformat.read(path, as_version=4)
        nbformat.validate(nb)
        for cell in nb.cells:
            if cell.cell_type == "code":
                assert not cell.outputs and cell.execution_count is None, f"{path.name}: clear its outputs"


@pytest.mark.slow
def test_the_kernel_is_this_venvs_interpreter_in_the_notebooks_directory(tmp_path: Path) -> None:
    nb = v4.new_notebook(cells=[v4.new_code_cell("import os, sys, lakelog\nprint(sys.executable)\nprint(os.getcwd())")])
    out = execute(nb, tmp_path, timeout=120).cells[0].outputs
    assert out[0].text.split() == [sys.executable, str(tmp_path)]


@pytest.mark.slow
@pytest.mark.timeout(NOTEBOOK_TIMEOUT_S)
@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook_runs_top_to_bottom(path: Path) -> None:
    started = time.monotonic()
    execute(nbformat.read(path, as_version=4), path.parent)
    print(f"{path.name}: executed in {time.monotonic() - started:.1f} s")
