"""The tutorial notebooks run in their quick mode, and are stored with a full run's outputs.

Quick mode: each notebook runs in a fresh ``python3`` kernel of this interpreter (ipykernel
from the same environment), in a tmp working dir, with ``LEARNOPT_DATA_DIR`` pointing at a
tmp data dir and ``LEARNOPT_FAST=1``, which shrinks its step counts. The notebooks check
their own results with ``assert`` s (e.g. that truncated estimators move theta away from the
optimum of the influence-balancing problem while PES converges); a failing assert is a
failing cell. XLA's backend optimizations are off for the kernel: in the quick mode the
notebooks are compile-bound, and that halves the compile time without changing any result
they check.

Stored notebooks: the committed files hold the outputs of a full (not quick) run, so readers
see real results on the repository page. Every code cell ran once, top to bottom, without an
error or anything on stderr, the plots are inline PNGs, and the outputs hold nothing that
only makes sense on the machine that ran them (absolute paths, progress-bar redraws).
"""

from __future__ import annotations

import os
import re
import sys
import time
from pathlib import Path

import ipykernel  # noqa: F401  (the test extra installs it; a missing kernel must fail)
import nbclient
import nbformat
import pytest

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"
# Inline plots each notebook shows in the quick mode and in the stored full run.
IMAGES = {
    "Part1_Introduction.ipynb": (5, 5),
    "Part2_CustomTasks.ipynb": (4, 4),
    "Part3_TruncatedSteps.ipynb": (3, 3),
    "Part4_GradientEstimators.ipynb": (3, 5),
    "Part5_MetaTraining.ipynb": (2, 2),
    "Part6_CustomLearnedOptimizers.ipynb": (2, 2),
    "no_dependency_learned_optimizer.ipynb": (5, 5),
}
# Notebooks written without learnopt (they read no learnopt dataset).
NO_LEARNOPT = {"no_dependency_learned_optimizer.ipynb"}
CHECK_CELL = "import sys\nprint(sys.executable)"
# Things in an output that only make sense on the machine that ran the notebook.
MACHINE_SPECIFIC = re.compile(r"(/tmp/|/home/|/root/|/work/|/Users/|site-packages|\r)")
MAX_TEXT_CHARS = 20_000  # text outputs per notebook (progress bars and dumps blow past this)
MAX_FILE_BYTES = 2_500_000


def _code_cells(nb):
    return [c for c in nb.cells if c.cell_type == "code"]


def _outputs(nb):
    return [o for c in _code_cells(nb) for o in c.get("outputs", [])]


def _images(nb):
    return [o for o in _outputs(nb) if "image/png" in o.get("data", {})]


def _texts(nb):
    for o in _outputs(nb):
        if o.output_type == "stream":
            yield o.text
        elif o.output_type in ("execute_result", "display_data"):
            yield o.get("data", {}).get("text/plain", "")
        elif o.output_type == "error":
            yield "\n".join(o.traceback)


def test_every_notebook_is_tested():
    assert {p.name for p in NOTEBOOKS.glob("*.ipynb")} == set(IMAGES)


@pytest.fixture(scope="session")
def nb_data_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("nb_data")


@pytest.mark.parametrize("name", sorted(IMAGES))
def test_notebook_runs_in_quick_mode(name, tmp_path, nb_data_dir, monkeypatch):
    monkeypatch.setenv("LEARNOPT_FAST", "1")
    monkeypatch.setenv("LEARNOPT_DATA_DIR", str(nb_data_dir))
    nb = nbformat.read(NOTEBOOKS / name, as_version=4)
    for cell in _code_cells(nb):
        cell.outputs, cell.execution_count = [], None
    nb.cells.append(nbformat.v4.new_code_cell(CHECK_CELL))
    before = sorted(p.name for p in NOTEBOOKS.iterdir())
    client = nbclient.NotebookClient(
        nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}
    )
    start = time.perf_counter()
    client.execute()  # raises CellExecutionError on the first failing cell
    seconds = time.perf_counter() - start

    assert not [o for o in _outputs(nb) if o.output_type == "error"]
    assert len(_images(nb)) >= IMAGES[name][0]
    first = nb.cells[1] if nb.cells[0].cell_type == "markdown" else nb.cells[0]
    assert "FAST = True" in "".join(o.get("text", "") for o in first.outputs)
    # The kernel ran this interpreter (the environment's ipykernel), not some other Python.
    kernel_python = nb.cells[-1].outputs[0]["text"].strip()
    assert os.path.realpath(kernel_python) == os.path.realpath(sys.executable)
    # Data went to the tmp data dir, and nothing was written next to the notebooks.
    if name not in NO_LEARNOPT:
        assert (nb_data_dir / "learnopt_digits8").is_dir()
    assert sorted(p.name for p in NOTEBOOKS.iterdir()) == before
    print(f"{name}: {seconds:.1f} s")


@pytest.mark.parametrize("name", sorted(IMAGES))
def test_notebook_is_stored_with_the_outputs_of_a_full_run(name):
    path = NOTEBOOKS / name
    assert path.stat().st_size < MAX_FILE_BYTES
    nb = nbformat.read(path, as_version=4)
    nbformat.validate(nb)
    assert nb.metadata["kernelspec"]["name"] == "python3"
    cells = _code_cells(nb)
    # Every code cell ran once, in order, in one session.
    assert [c.execution_count for c in cells] == list(range(1, len(cells) + 1))
    outputs = _outputs(nb)
    assert not [o for o in outputs if o.output_type == "error"]
    assert not [o.text for o in outputs if o.output_type == "stream" and o.name == "stderr"]
    first = "".join(o.get("text", "") for o in cells[0].outputs)
    assert "FAST = False" in first, f"{name} was stored from a quick run: {first!r}"
    assert len(_images(nb)) >= IMAGES[name][1]
    texts = list(_texts(nb))
    assert sum(len(t) for t in texts) < MAX_TEXT_CHARS
    found = sorted({m.group(0) for t in texts for m in MACHINE_SPECIFIC.finditer(t)})
    assert not found, f"{name}: machine-specific output {found}"
    code = "\n".join(c.source for c in cells)
    assert "learned_optimization" not in code  # the learnopt import prefix only
    assert "LEARNOPT_FAST" in code
