"""The README's API tour runs as written (with fewer meta-steps)."""

import re
from pathlib import Path

import numpy as np

README = Path(__file__).resolve().parents[1] / "README.md"


def test_readme_tour_runs_and_meta_trains(tmp_path, monkeypatch):
    monkeypatch.setenv("LEARNOPT_DATA_DIR", str(tmp_path / "tfds"))
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)
    assert len(blocks) == 3, "expected three python blocks (the tour, the pretrained theta, Flax)"
    code = blocks[0].replace("range(2000)", "range(60)")
    namespace: dict = {}
    exec(compile(code, str(README), "exec"), namespace)
    learner, state = namespace["learner"], namespace["state"]
    assert np.isfinite(float(namespace["meta_loss"]))
    assert int(state.outer_iteration) == 60
    # The last learner built in the tour (PES) initializes too.
    pes_state = learner.init(namespace["key"])
    assert int(pes_state.outer_iteration) == 0


def test_readme_pretrained_snippet_builds_an_optax_transformation():
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)
    namespace: dict = {}
    exec(compile(blocks[1], str(README), "exec"), namespace)
    tx = namespace["tx"]
    params = {"w": np.ones(3, np.float32)}
    updates, _ = tx.update({"w": np.ones(3, np.float32)}, tx.init(params), params, value=1.0)
    assert np.isfinite(np.asarray(updates["w"])).all()


def test_readme_flax_snippet_is_python_and_its_import_exists():
    """The Flax loops block is a fragment (model and loss_fn are the reader's); the
    examples it names run in tests/test_flax_loops.py."""
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)
    code = blocks[2]
    compile(code, str(README), "exec")
    assert "apply_gradients(grads=grads, loss=loss)" in code
    assert "optimizer.update(model, grads, value=loss)" in code
    namespace: dict = {}
    exec(code.splitlines()[0], namespace)  # the import line
    assert namespace["TrainState"].apply_gradients
