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


def _flax_losses(code: str, steps: int) -> tuple[float, float]:
    """The NNX and Linen models' losses after running the README's Flax block for
    ``steps`` steps."""
    namespace: dict = {}
    exec(compile(code.replace("range(100)", f"range({steps})"), str(README), "exec"), namespace)
    x, y = np.asarray(namespace["x"]), np.asarray(namespace["y"])
    model, state = namespace["model"], namespace["state"]
    nnx_loss = float(np.mean((np.asarray(model(x)) - y) ** 2))
    linen_loss = float(np.mean((np.asarray(state.apply_fn(state.params, x)) - y) ** 2))
    return nnx_loss, linen_loss


def test_readme_flax_snippet_trains_in_nnx_and_linen():
    """The Flax block is complete: it trains an NNX and a Linen model with Celo, which
    reads the loss (value= in NNX, loss= in learnopt's TrainState)."""
    code = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)[2]
    assert "optimizer.update(model, grads, value=loss)" in code
    assert "state.apply_gradients(grads=grads, loss=loss)" in code
    start = _flax_losses(code, 0)
    trained = _flax_losses(code, 30)
    for before, after in zip(start, trained, strict=True):
        assert after < 0.1 * before, (start, trained)


QUICKSTART = README.parent / "docs" / "quickstart.md"


def test_quickstart_examples_run_as_written(tmp_path, monkeypatch):
    monkeypatch.setenv("LEARNOPT_DATA_DIR", str(tmp_path / "tfds"))
    blocks = re.findall(r"```python\n(.*?)```", QUICKSTART.read_text(), flags=re.S)
    assert len(blocks) == 2, "expected two python blocks (pretrained in optax, meta-training)"
    trained: dict = {}
    exec(compile(blocks[0], str(QUICKSTART), "exec"), trained)
    first = float(np.mean(np.square(trained["y"])))  # the loss at the start (w2 = 0)
    assert float(trained["loss_fn"](trained["params"])) < 1e-2 < first
    meta: dict = {}
    exec(compile(blocks[1].replace("steps=200", "steps=30"), str(QUICKSTART), "exec"), meta)
    assert meta["result"].ok and meta["result"].step == 30
