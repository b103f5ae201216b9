"""Tests for learnopt.tasks.fixed.image_mlp."""

from __future__ import annotations

import math
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from learnopt.tasks import base as tasks_base
from learnopt.tasks.datasets import base as datasets_base
from learnopt.tasks.fixed import image_mlp

REPO_ROOT = Path(__file__).resolve().parents[1]
REGISTERED = (
    "ImageMLP_Digits8_Relu32",
    "ImageMLP_FashionMnist8_Relu32",
    "ImageMLP_FashionMnist_Relu32",
    "ImageMLP_Mnist_128x128x128_Relu",
    "ImageMLP_Cifar10_8_Relu32",
)


@pytest.fixture(scope="module", autouse=True)
def data_env(tmp_path_factory):
    """Points the data dir at a tmp dir (never the home dir) and the manual dir at an
    empty one, so only the embedded digits8 is available."""
    root = tmp_path_factory.mktemp("image_mlp_data")
    (root / "manual").mkdir()
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(datasets_base.ENV_DATA_DIR, str(root / "data"))
        mp.setenv(datasets_base.ENV_MANUAL_DIR, str(root / "manual"))
        yield root


@pytest.fixture(scope="module")
def digits_task():
    task = image_mlp.ImageMLP_Digits8_Relu32()
    task.datasets.load()
    return task


def test_init_shapes_and_values():
    task = image_mlp.ImageMLP_Digits8_Relu32()
    params = task.init(jax.random.key(0))
    shapes = jax.tree.map(jnp.shape, params)
    assert shapes == {
        "linear_0": {"w": (64, 32), "b": (32,)},
        "linear_1": {"w": (32, 10), "b": (10,)},
    }
    assert all(x.dtype == jnp.float32 for x in jax.tree.leaves(params))
    w = np.asarray(params["linear_0"]["w"])
    assert np.all(np.abs(w) <= 2 / math.sqrt(64) + 1e-6)  # truncated at 2 std
    assert 0.6 / 8 < w.std() < 1.0 / 8
    np.testing.assert_array_equal(params["linear_0"]["b"], 0)
    other = task.init(jax.random.key(1))
    assert not np.array_equal(other["linear_0"]["w"], w)

    big = image_mlp.ImageMLP_Mnist_128x128x128_Relu()  # needs no data for init
    shapes = jax.tree.map(jnp.shape, jax.eval_shape(big.init, jax.random.key(0)))
    assert shapes == {
        "linear_0": {"w": (784, 128), "b": (128,)},
        "linear_1": {"w": (128, 128), "b": (128,)},
        "linear_2": {"w": (128, 128), "b": (128,)},
        "linear_3": {"w": (128, 10), "b": (10,)},
    }
    cifar = jax.eval_shape(image_mlp.ImageMLP_Cifar10_8_Relu32().init, jax.random.key(0))
    assert cifar["linear_0"]["w"].shape == (192, 32)


def test_registered_names_and_lazy_construction():
    for name in REGISTERED:
        start = time.perf_counter()
        task = getattr(image_mlp, name)()
        assert time.perf_counter() - start < 0.5
        assert task.name == name and repr(task) == f"{name}()"
        assert isinstance(task, image_mlp.ImageMLPTask)
        assert task._datasets is None  # nothing touched yet
        assert tasks_base.TASKS.constructor(name) is getattr(image_mlp, name)


def test_get_task(monkeypatch):
    try:
        from learnopt.tasks import quadratics  # noqa: F401
    except ImportError:  # written by someone else; only image_mlp's registrations matter here
        monkeypatch.setattr(tasks_base, "_import_builtin_tasks", lambda: None)
    task = tasks_base.get_task("ImageMLP_Digits8_Relu32")
    assert isinstance(task, image_mlp.ImageMLP_Digits8_Relu32)
    assert set(REGISTERED) <= set(tasks_base.registered_tasks())


def test_missing_dataset_error_on_datasets_access(data_env):
    task = image_mlp.ImageMLP_FashionMnist8_Relu32()
    start = time.perf_counter()
    with pytest.raises(datasets_base.DatasetNotFoundError) as info:
        _ = task.datasets
    assert time.perf_counter() - start < 5
    msg = str(info.value)
    assert "fashion_mnist" in msg and str(data_env / "data") in msg
    assert "train-images-idx3-ubyte.gz" in msg


def test_datasets_match_task(digits_task):
    ds = digits_task.datasets
    assert ds is digits_task.datasets  # created once
    assert ds.extra_info["num_classes"] == 10
    assert ds.abstract_batch["image"].shape == (128, 8, 8, 1)
    params = digits_task.init(jax.random.key(0))
    out = jax.eval_shape(digits_task.loss, params, jax.random.key(0), ds.abstract_batch)
    assert out.shape == () and out.dtype == jnp.float32


def test_loss_and_grads_at_init(digits_task):
    params = digits_task.init(jax.random.key(0))
    batch = next(digits_task.datasets.train)
    loss, grads = jax.jit(jax.value_and_grad(digits_task.loss))(params, jax.random.key(1), batch)
    assert loss.dtype == jnp.float32 and loss.shape == ()
    assert np.isfinite(loss) and abs(float(loss) - math.log(10)) < 0.5
    assert all(np.all(np.isfinite(g)) for g in jax.tree.leaves(grads))
    assert jax.tree.structure(grads) == jax.tree.structure(params)
    assert any(float(jnp.abs(g).max()) > 0 for g in jax.tree.leaves(grads))


def test_population_vmap(digits_task):
    keys = jax.random.split(jax.random.key(0), 4)
    params = jax.jit(jax.vmap(digits_task.init))(keys)
    batch = next(digits_task.datasets.train)
    losses = jax.jit(jax.vmap(digits_task.loss, in_axes=(0, None, None)))(params, keys[0], batch)
    assert losses.shape == (4,) and np.all(np.isfinite(losses))


def test_wrong_image_shape_raises_at_trace_time(digits_task):
    params = digits_task.init(jax.random.key(0))
    batch = {"image": np.zeros((128, 28, 28, 1), np.float32), "label": np.zeros(128, np.int32)}
    with pytest.raises(ValueError) as info:
        jax.jit(digits_task.loss)(params, jax.random.key(0), batch)
    msg = str(info.value)
    assert "8, 8, 1" in msg and "(128, 28, 28, 1)" in msg and "ImageMLP_Digits8_Relu32" in msg
    bad_labels = {"image": np.zeros((128, 8, 8, 1), np.float32), "label": np.zeros(64, np.int32)}
    with pytest.raises(ValueError, match="label"):
        digits_task.loss(params, jax.random.key(0), bad_labels)


def test_sgd_lowers_the_loss(digits_task):
    task = digits_task
    params = task.init(jax.random.key(0))
    eval_batches = task.datasets.test.take(3)

    @jax.jit
    def eval_loss(p):
        return jnp.mean(
            jax.vmap(task.loss, in_axes=(None, None, 0))(p, jax.random.key(0), eval_batches)
        )

    @jax.jit
    def train(p, batches):
        def step(p, batch):
            g = jax.grad(task.loss)(p, jax.random.key(0), batch)
            return jax.tree.map(lambda x, y: x - 0.5 * y, p, g), None

        return jax.lax.scan(step, p, batches)[0]

    before = float(eval_loss(params))
    params = train(params, task.datasets.train.take(100))
    after = float(eval_loss(params))
    assert after < 0.6 * before, (before, after)


def test_normalizer_clips():
    task = image_mlp.ImageMLP_Digits8_Relu32()
    top = 1.5 * math.log(10)
    np.testing.assert_allclose(task.normalizer(jnp.asarray(100.0)), top, rtol=1e-6)
    assert float(task.normalizer(jnp.asarray(-1.0))) == 0.0
    assert float(task.normalizer(jnp.asarray(1.25))) == 1.25


def test_custom_task_and_param_dtype(digits_task):
    ds = digits_task.datasets
    task = image_mlp.ImageMLPTask(ds, [16, 8], jax.nn.tanh, param_dtype=jnp.bfloat16)
    assert task.num_classes == 10 and task.image_shape == (8, 8, 1)
    assert task.layer_sizes == (64, 16, 8, 10)
    assert task.name == "ImageMLPTask"
    params = jax.jit(task.init)(jax.random.key(0))
    assert all(x.dtype == jnp.bfloat16 for x in jax.tree.leaves(params))
    batch = next(ds.train)
    loss, grads = jax.jit(jax.value_and_grad(task.loss))(params, jax.random.key(0), batch)
    assert loss.dtype == jnp.float32 and np.isfinite(loss)
    assert all(g.dtype == jnp.bfloat16 for g in jax.tree.leaves(grads))
    named = image_mlp.ImageMLPTask(lambda: ds, [4], num_classes=10, image_shape=(8, 8, 1), name="x")
    assert named.name == "x" and named._datasets is None
    with pytest.raises(ValueError, match="float"):
        image_mlp.ImageMLPTask(ds, [4], param_dtype=jnp.int32)


def test_imports_do_not_pull_in_tensorflow(tmp_path):
    code = textwrap.dedent(
        """
        import sys, time
        start = time.perf_counter()
        import learnopt
        import learnopt.tasks.fixed.image_mlp as image_mlp
        from learnopt.tasks.datasets import base
        elapsed = time.perf_counter() - start
        assert "tensorflow" not in sys.modules
        assert "tensorflow_datasets" not in sys.modules, "tfds must be imported lazily"
        task = image_mlp.ImageMLP_Digits8_Relu32()
        next(task.datasets.train)  # prepares + loads through TFDS
        assert "tensorflow_datasets" in sys.modules
        bad = sorted(m for m in sys.modules if m == "tensorflow" or m.startswith("tensorflow."))
        assert not bad, bad
        print("ok", round(elapsed, 2))
        """
    )
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO_ROOT), env.get("PYTHONPATH", "")])
    env[datasets_base.ENV_DATA_DIR] = str(tmp_path / "data")
    env["JAX_PLATFORMS"] = "cpu"
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.splitlines()[-1].startswith("ok"), proc.stdout[-2000:]
