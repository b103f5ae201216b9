"""The tutorial notebooks execute without errors (fast mode: a few meta-steps).

Each notebook runs in a fresh ``python3`` kernel of the current interpreter (ipykernel from
this environment), in a tmp working dir, with ``LEARNOPT_DATA_DIR`` pointing at a tmp data
dir and ``LEARNOPT_NB_STEPS`` set so that meta-training runs only a few steps. XLA's backend
optimizations are turned off for the kernel: the notebooks are compile-bound in fast mode and
that halves the compile time without changing any result they check.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"
FAST_STEPS = {"Part1_Introduction.ipynb": 5, "Part2_OuterTrainers.ipynb": 3}
# Plots each notebook must produce (inline PNGs).
MIN_IMAGES = {"Part1_Introduction.ipynb": 4, "Part2_OuterTrainers.ipynb": 4}
CHECK_CELL = "import sys\nprint(sys.executable)"


@pytest.fixture(scope="session")
def nb_data_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("nb_data")


def _execute(path: Path, steps: int, workdir: Path, data_dir: Path, monkeypatch):
    monkeypatch.setenv("LEARNOPT_NB_STEPS", str(steps))
    monkeypatch.setenv("LEARNOPT_DATA_DIR", str(data_dir))
    flags = os.environ.get("XLA_FLAGS", "")
    monkeypatch.setenv("XLA_FLAGS", f"{flags} --xla_backend_optimization_level=0".strip())
    nb = nbformat.read(path, as_version=4)
    nb.cells.append(nbformat.v4.new_code_cell(CHECK_CELL))
    client = nbclient.NotebookClient(
        nb,
        timeout=600,
        kernel_name="python3",
        resources={"metadata": {"path": str(workdir)}},
    )
    start = time.perf_counter()
    client.execute()
    return nb, time.perf_counter() - start


@pytest.mark.parametrize("name", sorted(FAST_STEPS))
def test_notebook_runs(name, tmp_path, nb_data_dir, monkeypatch):
    nb, seconds = _execute(NOTEBOOKS / name, FAST_STEPS[name], tmp_path, nb_data_dir, monkeypatch)
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])]
    errors = [o for o in outputs if o.output_type == "error"]
    assert not errors, errors
    images = [o for o in outputs if "image/png" in o.get("data", {})]
    assert len(images) >= MIN_IMAGES[name]
    # The kernel ran this interpreter (the venv's ipykernel), not some other Python.
    kernel_python = nb.cells[-1].outputs[0]["text"].strip()
    assert os.path.realpath(kernel_python) == os.path.realpath(sys.executable)
    # Data went to the tmp data dir, and nothing was written next to the notebook.
    assert (nb_data_dir / "learnopt_digits8").is_dir()
    print(f"{name}: {seconds:.1f} s")


@pytest.mark.parametrize("name", sorted(FAST_STEPS))
def test_notebook_is_stored_without_outputs(name):
    nb = nbformat.read(NOTEBOOKS / name, as_version=4)
    nbformat.validate(nb)
    assert nb.metadata["kernelspec"]["name"] == "python3"
    for cell in nb.cells:
        if cell.cell_type == "code":
            assert cell.outputs == [], f"{name}: stored with outputs"
            assert cell.execution_count is None
    code = "\n".join(c.source for c in nb.cells if c.cell_type == "code")
    assert "LEARNOPT_NB_STEPS" in code
    assert "learned_optimization" not in code  # only the learnopt prefix
