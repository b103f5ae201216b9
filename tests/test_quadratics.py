"""Quadratic tasks: the library's definitions (same maths, same key use) and learnopt's own.

"Same key use" means that a key gives the same init and the same sampled task as the
library: e.g. ``FixedDimQuadraticFamily(dim).sample(key)`` is
``jax.random.normal(key, (dim,))``. Losses are checked against numpy.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from learnopt.optimizers import base as opt_base
from learnopt.tasks import base as tasks_base
from learnopt.tasks import quadratics

KEY = jax.random.key(0)


def _np(x):
    return np.asarray(x, np.float64)


def test_quadratic_task_is_a_sum_of_squares_without_data():
    task = quadratics.QuadraticTask(dim=4)
    p = task.init(KEY)
    np.testing.assert_array_equal(p, jax.random.normal(KEY, (4,)))
    np.testing.assert_allclose(task.loss(p, None, None), np.sum(_np(p) ** 2), rtol=1e-6)
    assert task.datasets is None
    assert quadratics.QuadraticTask().init(KEY).shape == (10,)  # library default dim
    bf16 = quadratics.QuadraticTask(dim=4, param_dtype=jnp.bfloat16)
    p16 = bf16.init(KEY)
    assert p16.dtype == jnp.bfloat16 and bf16.loss(p16, None, None).dtype == jnp.float32


def test_batch_quadratic_task_ignores_its_noise_batches():
    task = quadratics.BatchQuadraticTask()
    p = task.init(KEY)
    np.testing.assert_array_equal(p, jax.random.normal(KEY, (10,)))
    ds = task.datasets
    assert ds.abstract_batch == jax.ShapeDtypeStruct((4, 2), jnp.float32)
    a, b = next(ds.train), next(ds.train)
    assert a.shape == (4, 2) and a.dtype == np.float32 and not np.array_equal(a, b)
    assert ds.train.take(3, 5).shape == (3, 5, 4, 2)
    assert abs(np.mean(ds.test.take(500))) < 0.05 and abs(np.std(ds.test.take(500)) - 1) < 0.05
    np.testing.assert_allclose(task.loss(p, None, a), np.sum(_np(p) ** 2), rtol=1e-6)
    assert float(task.loss(p, None, a)) == float(task.loss(p, None, b))
    # Splits draw different streams; a seed makes them reproducible.
    assert not np.array_equal(next(ds.inner_valid), next(ds.outer_valid))
    again = quadratics.BatchQuadraticTask().datasets
    np.testing.assert_array_equal(next(again.train), a)


def test_log_quadratic_task():
    task = quadratics.LogQuadraticTask()
    p = task.init(KEY)
    np.testing.assert_array_equal(p, jax.random.normal(KEY, (10,)))
    np.testing.assert_allclose(task.loss(p, None, None), np.log(np.sum(_np(p) ** 2)), rtol=1e-6)
    g = jax.grad(task.loss)(p, None, None)
    np.testing.assert_allclose(g, 2 * _np(p) / np.sum(_np(p) ** 2), rtol=1e-5)


def test_sum_quadratic_task_depends_on_a_plus_b_only():
    task = quadratics.SumQuadraticTask()
    p = task.init(KEY)
    key_a, key_b = jax.random.split(KEY)
    np.testing.assert_array_equal(p["a"], jax.random.normal(key_a, (10,)))
    np.testing.assert_array_equal(p["b"], jax.random.normal(key_b, (10,)))
    want = np.sum((_np(p["a"]) + _np(p["b"])) ** 2)
    np.testing.assert_allclose(task.loss(p, None, None), want, rtol=1e-6)
    g = jax.grad(task.loss)(p, None, None)
    np.testing.assert_array_equal(g["a"], g["b"])


def test_noisy_mean_quadratic_task_is_unbiased():
    task = quadratics.NoisyMeanQuadraticTask(dim=3, noise_stddev=0.5)
    p = task.init(KEY)
    k = jax.random.key(5)
    want = np.sum((_np(p) - 0.5 * _np(jax.random.normal(k, (3,)))) ** 2)
    np.testing.assert_allclose(task.loss(p, k, None), want, rtol=1e-6)
    keys = jax.random.split(k, 4000)
    losses = jax.vmap(task.loss, in_axes=(None, 0, None))(p, keys, None)
    expected = np.sum(_np(p) ** 2) + 3 * 0.25  # E[loss] = |p|^2 + dim * s^2
    assert abs(float(jnp.mean(losses)) - expected) < 0.05 * expected
    grads = jax.vmap(jax.grad(task.loss), in_axes=(None, 0, None))(p, keys, None)
    np.testing.assert_allclose(jnp.mean(grads, 0), 2 * _np(p), atol=0.05)
    exact = quadratics.NoisyMeanQuadraticTask(dim=3, noise_stddev=0.0)
    np.testing.assert_allclose(exact.loss(p, k, None), np.sum(_np(p) ** 2), rtol=1e-6)
    with pytest.raises(ValueError, match="noise_stddev"):
        quadratics.NoisyMeanQuadraticTask(noise_stddev=-1.0)


def test_fixed_dim_family_samples_a_target():
    fam = quadratics.FixedDimQuadraticFamily(5)
    cfg = fam.sample(KEY)
    np.testing.assert_array_equal(cfg, jax.random.normal(KEY, (5,)))
    task = fam.task_fn(cfg)
    p = task.init(jax.random.key(1))
    np.testing.assert_array_equal(p, jax.random.normal(jax.random.key(1), (5,)))
    np.testing.assert_allclose(task.loss(p, None, None), np.sum((_np(cfg) - _np(p)) ** 2), 1e-6)
    assert float(task.loss(cfg, None, None)) == 0.0
    cfgs = jax.jit(jax.vmap(fam.sample))(jax.random.split(KEY, 8))
    assert cfgs.shape == (8, 5)
    assert fam.datasets is None and fam.name == "FixedDimQuadraticFamily"
    assert quadratics.FixedDimQuadraticFamily().sample(KEY).shape == (10,)


def test_fixed_dim_family_data_adds_its_batch_and_reports_aux():
    fam = quadratics.FixedDimQuadraticFamilyData(4)
    cfg = fam.sample(KEY)
    np.testing.assert_array_equal(cfg, jax.random.normal(KEY, (4,)))
    task = fam.task_fn(cfg)
    assert task.datasets is fam.datasets
    assert fam.datasets.abstract_batch == jax.ShapeDtypeStruct((), jnp.float32)
    batch = next(fam.datasets.train)
    assert batch.shape == () and batch.dtype == np.float32
    assert fam.datasets.train.take(6, 2).shape == (6, 2)
    p = task.init(jax.random.key(1))
    want = np.sum((_np(cfg) - _np(p)) ** 2) + float(batch)
    np.testing.assert_allclose(task.loss(p, None, batch), want, rtol=1e-6)
    loss, state, aux = task.loss_with_state_and_aux(p, None, None, batch)
    np.testing.assert_allclose(loss, want, rtol=1e-6)
    assert state is None
    np.testing.assert_allclose(aux["l2"], np.mean(_np(p) ** 2), rtol=1e-6)
    np.testing.assert_allclose(aux["l1"], np.mean(np.abs(_np(p))), rtol=1e-6)
    np.testing.assert_allclose(task.normalizer(jnp.asarray([-3.0, 5.0, 2e3])), [0, 5, 1000])


def test_noisy_quadratic_family_noise_is_in_the_gradient_only():
    fam = quadratics.NoisyQuadraticFamily(dim=6, cov=0.3)
    center, scale = fam.sample(KEY)
    key_c, key_s = jax.random.split(KEY)
    np.testing.assert_array_equal(center, jax.random.normal(key_c, (6,)))
    np.testing.assert_array_equal(scale, 25.0 * jax.random.uniform(key_s, (6,)))
    scales = jax.vmap(fam.sample)(jax.random.split(KEY, 256))[1]
    assert float(scales.min()) >= 0 and float(scales.max()) < 25 and float(scales.max()) > 20
    task = fam.task_fn((center, scale))
    p = task.init(jax.random.key(1))
    k = jax.random.key(2)
    exact = np.sum((_np(scale) * (_np(center) - _np(p))) ** 2)
    np.testing.assert_allclose(task.loss(p, k, None), exact, rtol=1e-5)
    np.testing.assert_allclose(task.loss(p, jax.random.key(3), None), exact, rtol=1e-5)
    noise = jax.grad(task.loss)(p, k, None) - (-2 * _np(scale) ** 2 * (_np(center) - _np(p)))
    np.testing.assert_allclose(noise, 0.3 * _np(jax.random.normal(k, (6,))), atol=1e-3)


def test_curvature_family_samples_curvatures_in_range():
    fam = quadratics.CurvatureQuadraticFamily(dim=5, min_curvature=0.5, max_curvature=2.0)
    cfgs = jax.jit(jax.vmap(fam.sample))(jax.random.split(KEY, 64))
    assert cfgs.shape == (64, 5)
    assert np.all(cfgs >= 0.5 - 1e-6) and np.all(cfgs <= 2.0 + 1e-6)
    task = fam.task_fn(cfgs[0])
    p = jnp.ones(5)
    np.testing.assert_allclose(task.loss(p, None, None), 0.5 * np.sum(cfgs[0]), rtol=1e-6)
    with pytest.raises(ValueError, match="min_curvature"):
        quadratics.CurvatureQuadraticFamily(min_curvature=2.0, max_curvature=1.0)


def test_single_task_family_returns_the_task():
    task = quadratics.QuadraticTask()
    fam = tasks_base.single_task_to_family(task)
    assert fam.task_fn(fam.sample(KEY)) is task
    assert fam.name == "QuadraticTask"


def test_least_squares_sgd_recovers_the_regression_weights():
    task = tasks_base.get_task("LeastSquaresRegressionTask")
    batch = next(task.datasets.train)
    assert batch["x"].shape == (32, 10) and batch["y"].shape == (32,)
    assert task.datasets.train.take(3, 2)["x"].shape == (3, 2, 32, 10)
    opt = opt_base.SGD(0.05)
    state = opt.init(task.init(KEY))

    @jax.jit
    def step(state, batch):
        loss, g = jax.value_and_grad(task.loss)(opt.get_params(state), None, batch)
        return opt.update(state, g, loss), loss

    losses = []
    for _ in range(200):
        state, loss = step(state, next(task.datasets.train))
        losses.append(float(loss))
    assert losses[-1] < 0.05 * losses[0]
    np.testing.assert_allclose(opt.get_params(state), task.datasets.train.w_true, atol=0.05)
    with pytest.raises(ValueError, match=r"x \[B, 10\]"):
        task.loss(jnp.ones(10), None, {"x": jnp.ones((4, 5)), "y": jnp.ones(4)})


def test_registries_hold_the_library_names_and_learnopts_own():
    tasks = {
        "QuadraticTask", "BatchQuadraticTask", "LogQuadraticTask", "SumQuadraticTask",
        "NoisyMeanQuadraticTask", "LeastSquaresRegressionTask",
    }  # fmt: skip
    families = {
        "FixedDimQuadraticFamily", "FixedDimQuadraticFamilyData", "NoisyQuadraticFamily",
        "CurvatureQuadraticFamily",
    }  # fmt: skip
    assert tasks <= set(tasks_base.TASKS.names())
    assert families <= set(tasks_base.TASK_FAMILIES.names())
    for name in tasks:
        assert tasks_base.TASKS.constructor(name) is getattr(quadratics, name)
    for name in families:
        assert tasks_base.TASK_FAMILIES.constructor(name) is getattr(quadratics, name)
    with pytest.raises(KeyError, match="ImageMLP_Digits8_Relu32"):
        tasks_base.get_task("ImageMLP_Digits8_Relu33")
