"""The library's image-MLP tasks: layout, init and losses against an independent numpy model.

Every numerical check builds the library's definition in numpy (float64) from the
task's params and compares: Haiku's ``hk.nets.MLP`` (dropout before the activation),
``hk.Linear`` + ``hk.LayerNorm`` / ``hk.BatchNorm`` (batch statistics, zero-debiased
moving averages with decay 0.9, eps 1e-5), softmax cross-entropy on one-hot labels and
the MSE variant, and both normalizers. Numerics use tiny tasks (a few units); the
registered tasks are checked for their configuration, their parameter trees (by
``eval_shape``) and, for the embedded digits8, real training.
"""

from __future__ import annotations

import math
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from learnopt.tasks import base as tasks_base
from learnopt.tasks.datasets import base as datasets_base
from learnopt.tasks.fixed import image_mlp

REPO_ROOT = Path(__file__).resolve().parents[1]
RELU, TANH = jax.nn.relu, jnp.tanh

# name -> (dataset, image shape, hidden, act, batch, dropout, loss, norm): the library's
# definitions (plus learnopt's digits8 / FashionMnist_Relu32 / Cifar10_8 tasks).
CE, MSE = "softmax_cross_entropy", "mse"
C10 = (32, 32, 3)
H3 = (128, 128, 128)
REGISTERED = {
    "ImageMLP_Digits8_Relu32": ("digits8", (8, 8, 1), (32,), RELU, 128, 0.0, CE, None),
    "ImageMLP_FashionMnist_Relu128x128": (
        "fashion_mnist", (28, 28, 1), (128, 128), RELU, 128, 0.0, CE, None),
    "ImageMLP_FashionMnist8_Relu32": ("fashion_mnist", (8, 8, 1), (32,), RELU, 128, 0.0, CE, None),
    "ImageMLP_FashionMnist_Relu32": ("fashion_mnist", (28, 28, 1), (32,), RELU, 128, 0.0, CE, None),
    "ImageMLP_Mnist_128x128x128_Relu": ("mnist", (28, 28, 1), H3, RELU, 128, 0.0, CE, None),
    "ImageMLP_Cifar10_8_Relu32": ("cifar10", (8, 8, 3), (32,), RELU, 128, 0.0, CE, None),
    "ImageMLP_Cifar10BW8_Relu32": ("cifar10", (8, 8, 1), (32,), RELU, 128, 0.0, CE, None),
    "ImageMLP_Cifar10_128x128x128_Relu": ("cifar10", C10, H3, RELU, 128, 0.0, CE, None),
    "ImageMLP_Imagenet16_Relu256x256x256": (
        "imagenet16", (16, 16, 3), (256, 256, 256), RELU, 128, 0.0, CE, None),
    "ImageMLP_Cifar10_128x128x128_Tanh_bs64": ("cifar10", C10, H3, TANH, 64, 0.0, CE, None),
    "ImageMLP_Cifar10_128x128x128_Tanh_bs128": ("cifar10", C10, H3, TANH, 128, 0.0, CE, None),
    "ImageMLP_Cifar10_128x128x128_Tanh_bs256": ("cifar10", C10, H3, TANH, 256, 0.0, CE, None),
    "ImageMLP_Cifar10_128x128x128_Relu_MSE": ("cifar10", C10, H3, RELU, 128, 0.0, MSE, None),
    "ImageMLP_Cifar10_128x128_Dropout02_Relu_MSE": (
        "cifar10", C10, (128, 128), RELU, 128, 0.2, MSE, None),
    "ImageMLP_Cifar10_128x128_Dropout05_Relu_MSE": (
        "cifar10", C10, (128, 128), RELU, 128, 0.5, MSE, None),
    "ImageMLP_Cifar10_128x128_Dropout08_Relu_MSE": (
        "cifar10", C10, (128, 128), RELU, 128, 0.8, MSE, None),
    "ImageMLP_Cifar10_128x128x128_LayerNorm_Relu": (
        "cifar10", C10, H3, RELU, 128, 0.0, CE, "layer_norm"),
    "ImageMLP_Cifar10_128x128x128_LayerNorm_Tanh": (
        "cifar10", C10, H3, TANH, 128, 0.0, CE, "layer_norm"),
    "ImageMLP_Cifar10_128x128x128_BatchNorm_Relu": (
        "cifar10", C10, H3, RELU, 128, 0.0, CE, "batch_norm"),
    "ImageMLP_Cifar10_128x128x128_BatchNorm_Tanh": (
        "cifar10", C10, H3, TANH, 128, 0.0, CE, "batch_norm"),
}  # fmt: skip


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


def _no_data():
    raise AssertionError("the tiny tasks must never touch their datasets")


IMAGE = (2, 3, 2)  # tiny images: 12 inputs
CLASSES = 4


def _tiny(kind: str, **kw):
    common = dict(num_classes=CLASSES, image_shape=IMAGE)
    if kind == "mlp":
        return image_mlp.ImageMLPTask(_no_data, [5, 3], kw.pop("act_fn", RELU), **common, **kw)
    return image_mlp.ImageMLPNormTask(
        _no_data, [5, 3], kind, kw.pop("act_fn", RELU), **common, **kw
    )


def _batch(seed: int, n: int = 6):
    rng = np.random.default_rng(seed)
    return {
        "image": rng.uniform(0, 1, (n, *IMAGE)).astype(np.float32),
        "label": rng.integers(0, CLASSES, n).astype(np.int32),
    }


def _randomize(params, seed):
    """Random values everywhere (also biases, scales, offsets), so every term matters."""
    leaves, tree = jax.tree.flatten(params)
    rng = np.random.default_rng(seed)
    new = [jnp.asarray(rng.normal(0, 0.7, x.shape), x.dtype) for x in leaves]
    return jax.tree.unflatten(tree, new)


# ------------------------------------------------------------------- numpy reference


def _np(x):
    return np.asarray(x, np.float64)


def _np_act(act):
    return {RELU: lambda x: np.maximum(x, 0), TANH: np.tanh}[act]


def _np_loss(logits, label, loss_type):
    one_hot = np.eye(CLASSES)[label]
    if loss_type == MSE:
        return np.mean((logits - one_hot) ** 2)
    m = logits.max(-1, keepdims=True)
    log_softmax = logits - m - np.log(np.exp(logits - m).sum(-1, keepdims=True))
    return np.mean(-(one_hot * log_softmax).sum(-1))


def _np_mlp(params, image, act, masks=None, keep=1.0):
    """hk.nets.MLP: linear, [dropout], act for every layer but the last."""
    x = _np(image).reshape(len(image), -1)
    n = len(params)
    for i in range(n):
        layer = params[f"mlp/~/linear_{i}"]
        x = x @ _np(layer["w"]) + _np(layer["b"])
        if i < n - 1:
            if masks is not None:
                x = x * masks[i] / keep
            x = _np_act(act)(x)
    return x


def _np_norm_mlp(params, state, image, act, norm_type, eps=1e-5, decay=0.9):
    """hk.Linear + hk.LayerNorm / hk.BatchNorm(is_training=True) in sequence."""
    x = _np(image).reshape(len(image), -1)
    names = ["linear"] + [f"linear_{i}" for i in range(1, 10)]
    norms = [norm_type] + [f"{norm_type}_{i}" for i in range(1, 10)]
    num_linear = sum(1 for k in params if k.startswith("linear"))
    new_state = {}
    for i in range(num_linear):
        x = x @ _np(params[names[i]]["w"]) + _np(params[names[i]]["b"])
        if i == num_linear - 1:
            break
        p = params[norms[i]]
        if norm_type == "layer_norm":
            mean, var = x.mean(-1, keepdims=True), x.var(-1, keepdims=True)
            x = _np(p["scale"]) * (x - mean) / np.sqrt(var + eps) + _np(p["offset"])
        else:
            mean = x.mean(0, keepdims=True)
            var = (x**2).mean(0, keepdims=True) - mean**2
            x = (x - mean) * _np(p["scale"]) / np.sqrt(var + eps) + _np(p["offset"])
            for ema, value in (("mean_ema", mean), ("var_ema", var)):
                old = state[f"{norms[i]}/~/{ema}"]
                t = int(old["counter"]) + 1
                hidden = _np(old["hidden"]) * decay + value * (1 - decay)
                new_state[f"{norms[i]}/~/{ema}"] = {
                    "counter": t,
                    "hidden": hidden,
                    "average": hidden / (1 - decay**t),
                }
        x = _np_act(act)(x)
    return x, new_state


# ------------------------------------------------------------------------ layout / init


def test_mlp_layout_and_init_follow_haiku():
    task = _tiny("mlp")
    params = jax.jit(task.init)(jax.random.key(0))
    assert jax.tree.map(jnp.shape, params) == {
        "mlp/~/linear_0": {"w": (12, 5), "b": (5,)},
        "mlp/~/linear_1": {"w": (5, 3), "b": (3,)},
        "mlp/~/linear_2": {"w": (3, 4), "b": (4,)},
    }
    assert all(x.dtype == jnp.float32 for x in jax.tree.leaves(params))
    for layer in params.values():
        np.testing.assert_array_equal(layer["b"], 0)
    assert not np.array_equal(jax.jit(task.init)(jax.random.key(1))["mlp/~/linear_0"]["w"],
                              params["mlp/~/linear_0"]["w"])  # fmt: skip

    # hk.Linear's default: truncated normal (at 2 std), std 1/sqrt(fan_in). A large
    # layer shows the distribution: bounded by 2/sqrt(fan_in), std 0.88/sqrt(fan_in).
    big = image_mlp.ImageMLPTask(_no_data, [256], num_classes=3, image_shape=(16, 16, 1))
    w = np.asarray(jax.jit(big.init)(jax.random.key(2))["mlp/~/linear_0"]["w"])
    assert np.abs(w).max() <= 2 / 16 + 1e-6
    truncated_std = 0.8796  # std of a standard normal truncated at +-2
    assert abs(w.std() * 16 / truncated_std - 1) < 0.01
    assert abs(w.mean()) < 1e-3


@pytest.mark.parametrize("norm_type", ["layer_norm", "batch_norm"])
def test_norm_layout_and_init_follow_haiku(norm_type):
    task = _tiny(norm_type)
    params, state = jax.jit(task.init_with_state)(jax.random.key(0))
    w_shape = (5,) if norm_type == "layer_norm" else (1, 5)
    w_shape_1 = (3,) if norm_type == "layer_norm" else (1, 3)
    assert jax.tree.map(jnp.shape, params) == {
        "linear": {"w": (12, 5), "b": (5,)},
        "linear_1": {"w": (5, 3), "b": (3,)},
        "linear_2": {"w": (3, 4), "b": (4,)},
        norm_type: {"scale": w_shape, "offset": w_shape},
        f"{norm_type}_1": {"scale": w_shape_1, "offset": w_shape_1},
    }
    np.testing.assert_array_equal(params[norm_type]["scale"], 1)
    np.testing.assert_array_equal(params[norm_type]["offset"], 0)
    if norm_type == "layer_norm":
        assert state is None
        return
    ema = {"counter": (), "hidden": (1, 5), "average": (1, 5)}
    ema_1 = {"counter": (), "hidden": (1, 3), "average": (1, 3)}
    assert jax.tree.map(jnp.shape, state) == {
        "batch_norm/~/mean_ema": ema,
        "batch_norm/~/var_ema": ema,
        "batch_norm_1/~/mean_ema": ema_1,
        "batch_norm_1/~/var_ema": ema_1,
    }
    assert state["batch_norm/~/mean_ema"]["counter"].dtype == jnp.int32
    assert all(float(jnp.abs(x).max()) == 0 for x in jax.tree.leaves(state))
    assert task.init(jax.random.key(0)).keys() == params.keys()


# --------------------------------------------------------------- losses vs numpy model


@pytest.mark.parametrize(
    "act, loss_type", [(RELU, CE), (TANH, CE), (RELU, MSE)], ids=["relu", "tanh", "mse"]
)
def test_mlp_loss_matches_numpy(act, loss_type):
    task = _tiny("mlp", act_fn=act, loss_type=loss_type)
    params = _randomize(task.init(jax.random.key(0)), 1)
    batch = _batch(2)
    got = jax.jit(task.loss)(params, jax.random.key(3), batch)
    want = _np_loss(_np_mlp(params, batch["image"], act), batch["label"], loss_type)
    np.testing.assert_allclose(float(got), want, rtol=2e-6, atol=1e-6)
    assert got.dtype == jnp.float32 and got.shape == ()


def test_dropout_masks_follow_the_documented_key_scheme():
    """Haiku's MLP drops units before the activation and scales the kept ones by 1/keep;
    layer ``i`` draws its mask from ``split(key, num_hidden)[i]``."""
    rate = 0.5
    task = _tiny("mlp", act_fn=TANH, dropout_rate=rate, loss_type=MSE)
    params = _randomize(task.init(jax.random.key(0)), 1)
    batch = _batch(2, n=64)
    key = jax.random.key(7)
    keys = jax.random.split(key, 2)
    masks = [np.asarray(jax.random.bernoulli(keys[i], 1 - rate, (64, h))) for i, h in
             enumerate((5, 3))]  # fmt: skip
    assert 0.35 < np.mean(np.concatenate([m.ravel() for m in masks])) < 0.65
    want = _np_loss(_np_mlp(params, batch["image"], TANH, masks, 1 - rate), batch["label"], MSE)
    got = jax.jit(task.loss)(params, key, batch)
    np.testing.assert_allclose(float(got), want, rtol=2e-6, atol=1e-6)
    # A new key is a new mask; without dropout the key is not used at all.
    assert float(task.loss(params, jax.random.key(8), batch)) != float(got)
    plain = _tiny("mlp", act_fn=TANH, loss_type=MSE)
    no_drop = _np_loss(_np_mlp(params, batch["image"], TANH), batch["label"], MSE)
    np.testing.assert_allclose(float(plain.loss(params, None, batch)), no_drop, rtol=2e-6)


def test_dropout_arguments_are_checked():
    with pytest.raises(ValueError, match="dropout_rate"):
        _tiny("mlp", dropout_rate=1.0)
    with pytest.raises(ValueError, match="loss_type"):
        _tiny("mlp", loss_type="hinge")
    with pytest.raises(ValueError, match="norm_type"):
        _tiny("group_norm")
    task = _tiny("mlp", dropout_rate=0.3)
    with pytest.raises(ValueError, match="key"):
        task.loss(task.init(jax.random.key(0)), None, _batch(0))


@pytest.mark.parametrize("act", [RELU, TANH], ids=["relu", "tanh"])
def test_layer_norm_loss_matches_numpy(act):
    task = _tiny("layer_norm", act_fn=act)
    params, state = task.init_with_state(jax.random.key(0))
    params = _randomize(params, 1)
    batch = _batch(2)
    loss, new_state = jax.jit(task.loss_with_state)(params, state, jax.random.key(3), batch)
    logits, _ = _np_norm_mlp(params, None, batch["image"], act, "layer_norm")
    np.testing.assert_allclose(float(loss), _np_loss(logits, batch["label"], CE), rtol=2e-6)
    assert new_state is None


def test_batch_norm_loss_and_moving_averages_match_numpy():
    task = _tiny("batch_norm", act_fn=TANH)
    params, state = task.init_with_state(jax.random.key(0))
    params = _randomize(params, 1)
    step = jax.jit(task.loss_with_state)
    np_state = jax.tree.map(_np, state)
    for i in range(3):  # three steps: the counter and the zero-debiasing matter
        batch = _batch(10 + i)
        loss, state = step(params, state, jax.random.key(i), batch)
        logits, np_state = _np_norm_mlp(params, np_state, batch["image"], TANH, "batch_norm")
        np.testing.assert_allclose(float(loss), _np_loss(logits, batch["label"], CE), rtol=2e-6)
        for name, ema in np_state.items():
            assert int(state[name]["counter"]) == ema["counter"] == i + 1
            for field in ("hidden", "average"):
                np.testing.assert_allclose(state[name][field], ema[field], rtol=1e-5, atol=1e-6)
    # The loss never reads the moving averages (training-mode statistics, as in the
    # library), and ``loss`` without a state gives the same value.
    np.testing.assert_allclose(float(task.loss(params, None, batch)), float(loss), rtol=1e-6)
    assert jax.tree.map(lambda x: x.dtype, state) == jax.tree.map(
        lambda x: x.dtype, task.init_with_state(jax.random.key(0))[1]
    )


def test_normalizers():
    ce = _tiny("mlp")
    top = 1.5 * math.log(CLASSES)
    values = jnp.asarray([-1.0, 0.5, 100.0, jnp.nan, jnp.inf, -jnp.inf])
    np.testing.assert_allclose(ce.normalizer(values), [0, 0.5, top, top, top, 0], rtol=1e-6)
    mse = _tiny("mlp", loss_type=MSE)
    np.testing.assert_allclose(mse.normalizer(values), [-10, 5, 10, 10, 10, 10], rtol=1e-6)
    assert float(_tiny("batch_norm").normalizer(jnp.asarray(1e9))) == pytest.approx(top)


@pytest.mark.parametrize("dtype", ["bfloat16", "float16", "float64"])
@pytest.mark.parametrize("kind", ["mlp_dropout", "layer_norm", "batch_norm"])
def test_low_and_high_precision_params(kind, dtype):
    with jax.enable_x64(dtype == "float64"):
        dtype = jnp.dtype(dtype)
        if kind == "mlp_dropout":
            task = _tiny("mlp", dropout_rate=0.2, param_dtype=dtype)
        else:
            task = _tiny(kind, param_dtype=dtype)
        params, state = jax.jit(task.init_with_state)(jax.random.key(0))
        assert all(x.dtype == dtype for x in jax.tree.leaves(params))
        grad_fn = jax.jit(jax.value_and_grad(task.loss_with_state, has_aux=True))
        (loss, new_state), grads = grad_fn(params, state, jax.random.key(1), _batch(0))
        assert loss.dtype == jnp.promote_types(dtype, jnp.float32)
        assert np.isfinite(float(loss)) and abs(float(loss) - math.log(CLASSES)) < 1.0
        assert all(g.dtype == dtype for g in jax.tree.leaves(grads))
        assert all(np.all(np.isfinite(np.asarray(g, np.float64))) for g in jax.tree.leaves(grads))
        if state is not None:  # statistics keep their (at least f32) dtypes
            same = jax.tree.map(lambda a, b: a.dtype == b.dtype, state, new_state)
            assert all(jax.tree.leaves(same))
        # The numpy model's value on the same params, up to the precision of the dtype.
        batch = _batch(0)
        if kind == "mlp_dropout":
            keys = jax.random.split(jax.random.key(1), 2)
            masks = [np.asarray(jax.random.bernoulli(k, 0.8, (6, h))) for k, h in
                     zip(keys, (5, 3), strict=True)]  # fmt: skip
            logits = _np_mlp(params, batch["image"], RELU, masks, 0.8)
        else:
            logits, _ = _np_norm_mlp(params, state, batch["image"], RELU, kind)
        ref = _np_loss(logits, batch["label"], CE)
        tol = {"bfloat16": 3e-2, "float16": 3e-3}.get(dtype.name, 1e-6)
        np.testing.assert_allclose(float(loss), ref, rtol=tol)


# ------------------------------------------------------------------ registered tasks


@pytest.mark.parametrize("name", sorted(REGISTERED))
def test_registered_task_configuration(name, data_env):
    dataset, image_shape, hidden, act, batch_size, dropout, loss_type, norm = REGISTERED[name]
    task = tasks_base.get_task(name)  # needs no data, and touches no file
    assert isinstance(task, getattr(image_mlp, name)) and task.name == name
    assert isinstance(task, image_mlp.ImageMLPNormTask) == (norm is not None)
    assert task.datasets.extra_info["name"] == dataset
    assert task.datasets.abstract_batch == {
        "image": jax.ShapeDtypeStruct((batch_size, *image_shape), jnp.float32),
        "label": jax.ShapeDtypeStruct((batch_size,), jnp.int32),
    }
    num_classes = 1000 if dataset == "imagenet16" else 10
    assert task.hidden_sizes == hidden and task.act_fn is act
    assert task.num_classes == num_classes
    assert (task.dropout_rate, task.loss_type) == (dropout, loss_type)
    assert getattr(task, "norm_type", None) == norm
    params, _ = jax.eval_shape(task.init_with_state, jax.random.key(0))
    sizes = (math.prod(image_shape), *hidden, num_classes)
    names = (
        [f"mlp/~/linear_{i}" for i in range(len(sizes) - 1)]
        if norm is None
        else ["linear"] + [f"linear_{i}" for i in range(1, len(sizes) - 1)]
    )
    for lname, fan_in, fan_out in zip(names, sizes[:-1], sizes[1:], strict=True):
        assert params[lname]["w"].shape == (fan_in, fan_out)
    assert not (data_env / "data").exists()


def test_all_image_mlp_tasks_are_registered():
    registered = {
        n
        for n in tasks_base.TASKS.names()
        if getattr(tasks_base.TASKS.constructor(n), "__module__", None) == image_mlp.__name__
    }
    assert registered == set(REGISTERED)
    for name in REGISTERED:
        assert tasks_base.TASKS.constructor(name) is getattr(image_mlp, name)


def test_missing_dataset_fails_at_the_first_batch(data_env):
    task = image_mlp.ImageMLP_Cifar10BW8_Relu32()
    ds = task.datasets  # lazy: building and touching the datasets needs no data
    assert ds.abstract_batch["image"].shape == (128, 8, 8, 1)
    params = jax.jit(task.init)(jax.random.key(0))
    batch = jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype), ds.abstract_batch)
    assert np.isfinite(float(jax.jit(task.loss)(params, jax.random.key(0), batch)))
    for fail in (ds.check_available, lambda: next(ds.train), lambda: ds.test.take(2)):
        with pytest.raises(datasets_base.DatasetNotFoundError) as info:
            fail()
        msg = str(info.value)
        assert "'cifar10' is not available" in msg and str(data_env / "data") in msg
        assert "cifar-10-python.tar.gz" in msg
    assert not (data_env / "data").exists()


# ------------------------------------------------------------- real (embedded) data


@pytest.fixture(scope="module")
def digits_task():
    task = image_mlp.ImageMLP_Digits8_Relu32()
    task.datasets.load()
    return task


def test_digits8_training_lowers_the_test_loss(digits_task):
    task = digits_task
    params = task.init(jax.random.key(0))
    eval_batches = task.datasets.test.take(3)

    @jax.jit
    def eval_loss(p):
        return jnp.mean(jax.vmap(task.loss, in_axes=(None, None, 0))(p, None, eval_batches))

    @jax.jit
    def train(p, batches):
        def step(p, batch):
            g = jax.grad(task.loss)(p, None, batch)
            return jax.tree.map(lambda x, y: x - 0.5 * y, p, g), None

        return jax.lax.scan(step, p, batches)[0]

    before = float(eval_loss(params))
    assert abs(before - math.log(10)) < 0.5
    after = float(eval_loss(train(params, task.datasets.train.take(100))))
    assert after < 0.6 * before, (before, after)


def test_wrong_batch_shapes_are_clear_errors(digits_task):
    params = digits_task.init(jax.random.key(0))
    batch = {"image": np.zeros((128, 28, 28, 1), np.float32), "label": np.zeros(128, np.int32)}
    with pytest.raises(ValueError) as info:
        jax.jit(digits_task.loss)(params, jax.random.key(0), batch)
    msg = str(info.value)
    assert "8, 8, 1" in msg and "(128, 28, 28, 1)" in msg and "ImageMLP_Digits8_Relu32" in msg
    bad_labels = {"image": np.zeros((128, 8, 8, 1), np.float32), "label": np.zeros(64, np.int32)}
    with pytest.raises(ValueError, match="label"):
        digits_task.loss(params, jax.random.key(0), bad_labels)
    with pytest.raises(ValueError, match="float"):
        image_mlp.ImageMLPTask(digits_task.datasets, [4], param_dtype=jnp.int32)
    with pytest.raises(TypeError, match="datasets"):
        image_mlp.ImageMLPTask(None, [4])


def test_custom_task_reads_its_shapes_from_the_datasets(digits_task):
    task = image_mlp.ImageMLPTask(digits_task.datasets, [16, 8], TANH, name="custom")
    assert (task.num_classes, task.image_shape, task.layer_sizes) == (10, (8, 8, 1),
                                                                       (64, 16, 8, 10))  # fmt: skip
    assert task.name == "custom" and repr(task) == "custom()"
    params = jax.jit(task.init)(jax.random.key(0))
    loss = jax.jit(task.loss)(params, None, next(digits_task.datasets.train))
    assert np.isfinite(float(loss))


def test_imports_do_not_pull_in_tensorflow(tmp_path):
    code = textwrap.dedent(
        """
        import sys
        import learnopt
        import learnopt.tasks.fixed.image_mlp as image_mlp
        from learnopt.tasks.datasets import base
        assert "tensorflow" not in sys.modules
        assert "tensorflow_datasets" not in sys.modules, "tfds must be imported lazily"
        task = image_mlp.ImageMLP_Cifar10_128x128x128_BatchNorm_Relu()
        assert task.datasets.abstract_batch["image"].shape == (128, 32, 32, 3)
        assert "tensorflow_datasets" not in sys.modules, "building a task must not load tfds"
        task = image_mlp.ImageMLP_Digits8_Relu32()
        next(task.datasets.train)  # prepares + loads through TFDS
        assert "tensorflow_datasets" in sys.modules
        bad = sorted(m for m in sys.modules if m == "tensorflow" or m.startswith("tensorflow."))
        assert not bad, bad
        print("ok")
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
    assert proc.stdout.splitlines()[-1] == "ok", proc.stdout[-2000:]
