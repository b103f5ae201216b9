"""Quadratic tasks: losses, families and the batched regression task."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from learnopt.optimizers import base as opt_base
from learnopt.tasks import base as tasks_base
from learnopt.tasks import quadratics


def test_quadratic_task_loss_is_sum_of_squares():
    task = quadratics.QuadraticTask(dim=4)
    p = task.init(jax.random.PRNGKey(0))
    assert p.shape == (4,)
    np.testing.assert_allclose(task.loss(p, None, None), np.sum(np.square(p)), rtol=1e-6)


def test_quadratic_task_rejects_wrong_shape():
    with pytest.raises(ValueError, match=r"shape \(4,\)"):
        quadratics.QuadraticTask(dim=4).loss(jnp.ones(3), None, None)


def test_family_samples_curvatures_in_range_and_is_traceable():
    fam = quadratics.FixedDimQuadraticFamily(dim=5, min_curvature=0.5, max_curvature=2.0)
    cfgs = jax.jit(jax.vmap(fam.sample))(jax.random.split(jax.random.PRNGKey(0), 64))
    assert cfgs.shape == (64, 5)
    assert np.all(cfgs >= 0.5 - 1e-6) and np.all(cfgs <= 2.0 + 1e-6)
    task = fam.task_fn(cfgs[0])
    p = jnp.ones(5)
    np.testing.assert_allclose(task.loss(p, None, None), 0.5 * np.sum(cfgs[0]), rtol=1e-6)


def test_single_task_family_returns_the_task():
    task = quadratics.QuadraticTask()
    fam = tasks_base.single_task_to_family(task)
    assert fam.task_fn(fam.sample(jax.random.PRNGKey(0))) is task
    assert fam.name == "QuadraticTask"


def test_batch_quadratic_sgd_recovers_regression_weights():
    task = tasks_base.get_task("BatchQuadraticTask")
    batch = next(task.datasets.train)
    assert batch["x"].shape == (32, 10) and batch["y"].shape == (32,)
    stacked = task.datasets.train.take(3, 2)
    assert stacked["x"].shape == (3, 2, 32, 10)
    opt = opt_base.SGD(0.05)
    state = opt.init(task.init(jax.random.PRNGKey(0)))

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


def test_batch_quadratic_wrong_batch_shape_is_a_clear_error():
    task = quadratics.BatchQuadraticTask(dim=3)
    with pytest.raises(ValueError, match=r"x \[B, 3\]"):
        task.loss(jnp.ones(3), None, {"x": jnp.ones((4, 5)), "y": jnp.ones(4)})


def test_unknown_task_name_lists_close_matches():
    with pytest.raises(KeyError, match="ImageMLP_Digits8_Relu32"):
        tasks_base.get_task("ImageMLP_Digits8_Relu33")
