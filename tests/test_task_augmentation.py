"""Task and task-family augmentations (learnopt.tasks.task_augmentation)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from learnopt.tasks import base as tasks_base
from learnopt.tasks import task_augmentation as ta
from learnopt.tasks.datasets import base as datasets_base

KEY = jax.random.key(0)


def _datasets(batch=32):
    x = np.arange(100 * 3, dtype=np.float32).reshape(100, 3) / 300
    splits = {s: (x.reshape(100, 3, 1, 1), np.zeros(100, np.int32)) for s in ("train", "test")}
    return datasets_base.datasets_from_arrays(splits, batch, num_classes=2)


class SumTask(tasks_base.Task):
    """``loss = sum(a) + sum(b) + 0 * mean(image)``; params ``(ones(2), ones(2))``."""

    def __init__(self):
        self.datasets = _datasets()

    def init(self, key):
        return (jnp.ones([2]), jnp.ones([2]))

    def loss(self, params, key, data):
        return jnp.sum(params[0]) + jnp.sum(params[1]) + 0.0 * jnp.mean(data["image"])


class SumFamily(tasks_base.TaskFamily):
    def __init__(self):
        self.datasets = _datasets()

    def sample(self, key):
        return {"cfg": jnp.int32(123)}

    def task_fn(self, cfg):
        return SumTask()


BATCH = {"image": np.ones((4, 3, 1, 1), np.float32), "label": np.zeros(4, np.int32)}


def test_reparam_weights_global_per_tensor_and_per_parameter():
    base = SumTask()
    for scale, expected in [
        (2.0, ([0.5, 0.5], [0.5, 0.5])),
        ((2.0, 0.5), ([0.5, 0.5], [2.0, 2.0])),
        ((jnp.asarray([2.0, 0.5]), 0.5), ([0.5, 2.0], [2.0, 2.0])),
    ]:
        task = ta.ReparamWeights(base, scale)
        params = task.init(KEY)
        np.testing.assert_allclose(params[0], expected[0])
        np.testing.assert_allclose(params[1], expected[1])
        assert float(task.loss(params, KEY, BATCH)) == pytest.approx(4.0)  # same function
    # Gradients are scaled by the scale: d/dw sum(w * s) = s.
    grads = jax.grad(ta.ReparamWeights(base, (3.0, 0.5)).loss)(params, KEY, BATCH)
    np.testing.assert_allclose(grads[0], [3.0, 3.0])
    with pytest.raises(ValueError, match="structure"):
        ta.ReparamWeights(base, (1.0, 2.0, 3.0)).init(KEY)


@pytest.mark.parametrize("level", ["global", "tensor", "parameter"])
def test_reparam_weights_family_levels(level):
    family = ta.ReparamWeightsFamily(SumFamily(), level, (0.001, 10.0))
    cfgs = jax.vmap(family.sample)(jax.random.split(KEY, 2))  # traceable, vmappable
    task0 = family.task_fn(jax.tree.map(lambda x: x[0], cfgs))
    task1 = family.task_fn(jax.tree.map(lambda x: x[1], cfgs))
    first, second = task0.init(KEY)
    (a, b), (c, d) = first.tolist(), second.tolist()
    if level == "global":
        assert a == b == c == d
    elif level == "tensor":
        assert a == b and c == d and a != c
    else:
        assert a != b and c != d
        # The scales belong to the sample, not to the init key.
        np.testing.assert_array_equal(task0.init(jax.random.key(5))[0], first)
    assert not np.allclose(task1.init(KEY)[0], first)
    assert float(task0.loss(task0.init(KEY), KEY, BATCH)) == pytest.approx(4.0, rel=1e-5)
    with pytest.raises(ValueError, match="level"):
        ta.ReparamWeightsFamily(SumFamily(), "layer")


def test_reduced_batchsize_task_and_family():
    task = ta.ReducedBatchsizeTask(SumTask(), 0.25)
    assert next(task.datasets.train)["image"].shape == (8, 3, 1, 1)
    assert task.datasets.abstract_batch["image"].shape == (8, 3, 1, 1)
    assert task.datasets.train.take(2, 3)["label"].shape == (2, 3, 8)
    fam = ta.ReducedBatchsizeFamily(SumFamily(), 0.5)
    assert next(fam.datasets.train)["image"].shape == (16, 3, 1, 1)
    assert fam.datasets.extra_info["batch_size"] == 16
    assert ta.ReducedBatchsizeTask(SumTask(), 0.001).datasets.abstract_batch["label"].shape == (1,)
    with pytest.raises(ValueError, match="fraction"):
        ta.ReducedBatchsizeTask(SumTask(), 1.5)


def test_convert_float_dtype_task_and_family():
    task = ta.ConvertFloatDType(SumTask(), jnp.bfloat16)
    params = task.init(KEY)
    assert {p.dtype for p in jax.tree.leaves(params)} == {jnp.dtype(jnp.bfloat16)}
    assert jax.grad(task.loss)(params, KEY, BATCH)[0].dtype == jnp.bfloat16
    fam = ta.ConvertFloatDTypeTaskFamily(SumFamily(), jnp.bfloat16)
    member = fam.task_fn(fam.sample(KEY))
    assert jax.tree.leaves(member.init(KEY))[0].dtype == jnp.bfloat16


def test_modify_task_gradient_keeps_the_loss_and_replaces_the_gradient(fast_jit):
    task = ta.ModifyTaskGradient(SumTask(), lambda g, k: jax.tree.map(lambda x: x * 0 + 9, g))
    params = task.init(KEY)
    assert float(task.loss(params, KEY, BATCH)) == 4.0
    loss, grads = fast_jit(jax.value_and_grad(task.loss))(params, KEY, BATCH)
    assert float(loss) == 4.0 and float(grads[0][0]) == 9.0


def test_normalize_and_subsample_directions():
    params = SumTask().init(KEY)
    grads = jax.grad(ta.NormalizeTaskGradient(SumTask()).loss)(params, KEY, BATCH)
    np.testing.assert_allclose(sum(float(jnp.sum(g**2)) for g in grads), 1.0, rtol=1e-6)
    # With many directions the projection averages to (directions / dim) * gradient.
    sub = ta.SubsampleDirectionsTaskGradient(SumTask(), directions=4000)
    g = jax.grad(sub.loss)(params, KEY, BATCH)
    np.testing.assert_allclose(np.concatenate(g) / 1000.0, np.ones(4), rtol=0.1)
    fam = ta.NormalizeTaskGradientTaskFamily(SumFamily())
    member = fam.task_fn(fam.sample(KEY))
    assert len(jax.grad(member.loss)(params, KEY, BATCH)) == 2


def test_gradient_noise_has_the_requested_std_and_fresh_noise_per_key(fast_jit):
    task = ta.AddGradientNoise(SumTask(), 0.5)
    params = (jnp.ones([20000]), jnp.ones([2]))
    grad = fast_jit(jax.grad(task.loss))
    g1 = grad(params, jax.random.key(1), BATCH)[0]
    g2 = grad(params, jax.random.key(2), BATCH)[0]
    assert float(jnp.std(g1)) == pytest.approx(0.5, rel=0.05)
    assert float(jnp.mean(g1)) == pytest.approx(1.0, abs=0.02)
    assert not np.allclose(g1, g2)
    np.testing.assert_array_equal(g1, grad(params, jax.random.key(1), BATCH)[0])
    fam = ta.AddGradientNoiseTaskFamily(SumFamily(), (0.01, 1.0))
    stds = jax.vmap(fam.sample)(jax.random.split(KEY, 16)).values["std"]
    assert 0.01 <= float(stds.min()) and float(stds.max()) <= 1.0 and len(set(stds.tolist())) > 1


def test_scale_loss_scales_gradients_and_the_normalizer_undoes_it():
    task = ta.ScaleLoss(SumTask(), 10.0)
    params = task.init(KEY)
    assert float(task.loss(params, KEY, BATCH)) == pytest.approx(40.0)
    assert float(jax.grad(task.loss)(params, KEY, BATCH)[0][0]) == pytest.approx(10.0)
    assert float(task.normalizer(jnp.float32(40.0))) == pytest.approx(4.0)
    fam = ta.ScaleLossTaskFamily(SumFamily(), (0.1, 10.0))
    cfgs = jax.vmap(fam.sample)(jax.random.split(KEY, 3))
    losses = jax.vmap(lambda c: fam.task_fn(c).loss(params, KEY, BATCH))(cfgs)
    np.testing.assert_allclose(losses, 4.0 * cfgs.values["scale"], rtol=1e-6)
    with pytest.raises(ValueError, match="log-uniform"):
        ta.ScaleLossTaskFamily(SumFamily(), (0.0, 1.0))


def test_augmented_real_family_trains_in_one_jitted_step(fast_jit):
    fam = ta.ScaleLossTaskFamily(
        ta.ReparamWeightsFamily(
            tasks_base.TASK_FAMILIES.get("ParametricImageMLP_Digits8_32x32"), "tensor", (0.1, 10)
        )
    )
    rng = np.random.default_rng(0)
    batch = {
        "image": rng.uniform(0, 1, (16, 8, 8, 1)).astype(np.float32),
        "label": rng.integers(0, 10, 16).astype(np.int32),
    }

    @fast_jit
    def losses(key):
        cfgs = jax.vmap(fam.sample)(jax.random.split(key, 2))

        def one(cfg):
            task = fam.task_fn(cfg)
            params = task.init(key)
            loss, grads = jax.value_and_grad(task.loss)(params, key, batch)
            return task.normalizer(loss), grads

        return jax.vmap(one)(cfgs)

    norm_loss, grads = losses(KEY)
    assert norm_loss.shape == (2,) and np.all(np.isfinite(norm_loss))
    assert all(np.all(np.isfinite(g)) for g in jax.tree.leaves(grads))
