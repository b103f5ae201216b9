"""The notes' walkthrough, typed as the notes have it (prefix learned_optimization -> learnopt,
FashionMnist8 -> Digits8), runs, compiles once and lowers the meta-loss; and the same
meta-training through learnopt's public FullGrad + SingleMachineGradientLearner path."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from learnopt.learned_optimizers import base as lopt_base
from learnopt.optimizers import base as opt_base
from learnopt.outer_trainers import (
    full_grad,
    gradient_learner,
    lopt_truncated_step,
    truncation_schedule,
)
from learnopt.tasks import base as tasks_base
from learnopt.tasks.fixed import image_mlp
from learnopt.testing import count_compiles

NUM_META_STEPS = 300


@pytest.fixture(autouse=True)
def _data_dir(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("LEARNOPT_DATA_DIR", str(tmp_path_factory.getbasetemp() / "tfds"))


def test_notes_adam_training_loop_lowers_loss_and_compiles_once():
    task = image_mlp.ImageMLP_Digits8_Relu32()
    key = jax.random.PRNGKey(0)
    params = task.init(key)

    opt = opt_base.Adam(1e-2)
    opt_state = opt.init(params)

    @jax.jit
    def update(opt_state, key, batch):
        key, key1 = jax.random.split(key)
        params, model_state = opt.get_params_state(opt_state)
        loss, grads = jax.value_and_grad(task.loss)(params, key1, batch)
        opt_state = opt.update(opt_state, grads, loss)
        return opt_state, key, loss

    losses = []
    with count_compiles() as names:
        for _ in range(50):
            batch = next(task.datasets.train)
            opt_state, key, loss = update(opt_state, key, batch)
            losses.append(float(loss))
    assert names.count("update") == 1
    assert np.mean(losses[-10:]) < 0.6 * np.mean(losses[:5])


def test_notes_meta_training_code_runs_and_lowers_meta_loss():
    # The notes' code, with only the prefix and the dataset changed.
    task = image_mlp.ImageMLP_Digits8_Relu32()
    key = jax.random.PRNGKey(0)

    lopt = lopt_base.LearnableAdam()

    @jax.jit
    def meta_loss_fn(theta, key, batch, meta_loss):
        opt = lopt.opt_fn(theta)
        key, key1 = jax.random.split(key)
        params = task.init(key1)
        opt_state = opt.init(params)
        for i in range(4):  # noqa: B007 (as in the notes)
            params = opt.get_params(opt_state)
            key, key1 = jax.random.split(key)
            l, grads = jax.value_and_grad(task.loss)(opt_state.params, key1, batch)  # noqa: E741
            meta_loss += l
            opt_state = opt.update(opt_state, grads, l)
        params, state = opt.get_params_state(opt_state)
        key1, key = jax.random.split(key)
        final_loss = task.loss(params, key1, batch)  # noqa: F841 (as in the notes)
        return meta_loss

    theta_opt = opt_base.Adam(1e-2)

    key, key1 = jax.random.split(key)
    theta = lopt.init(key1)
    theta_opt_state = theta_opt.init(theta)

    meta_losses = []
    learning_rates = []
    meta_value_and_grad = jax.jit(jax.value_and_grad(meta_loss_fn))
    theta_update = jax.jit(theta_opt.update)

    with count_compiles() as names:
        for _ in range(NUM_META_STEPS):
            batch = next(task.datasets.train)
            key, key1 = jax.random.split(key)
            theta = theta_opt.get_params(theta_opt_state)
            meta_loss = jnp.asarray(0, dtype=jnp.int32)
            ml, meta_grads = meta_value_and_grad(theta_opt_state.params, key1, batch, meta_loss)
            theta_opt_state = theta_update(theta_opt_state, meta_grads, ml)
            meta_losses.append(ml)
            learning_rates.append(theta["log_lr"])

    meta_losses = np.asarray(meta_losses)
    assert np.all(np.isfinite(meta_losses))
    assert names.count("meta_loss_fn") == 1, names
    assert names.count("update") == 1, names
    assert meta_losses[-20:].mean() < 0.9 * meta_losses[:20].mean()
    assert np.exp(learning_rates[-1]) > np.exp(learning_rates[0])  # it learns a larger lr


@pytest.mark.parametrize("param_dtype", [jnp.float32, jnp.bfloat16])
def test_public_walkthrough_path_lowers_meta_loss_and_compiles_once(param_dtype):
    task = image_mlp.ImageMLPTask(
        lambda: tasks_base.get_task("ImageMLP_Digits8_Relu32").datasets,
        hidden_sizes=(32,),
        num_classes=10,
        image_shape=(8, 8, 1),
        param_dtype=param_dtype,
    )
    lopt = lopt_base.LearnableAdam()
    ts = lopt_truncated_step.VectorizedLOptTruncatedStep(
        task, lopt, truncation_schedule.ConstantTruncationSchedule(4), num_tasks=1
    )
    learner = gradient_learner.SingleMachineGradientLearner(
        lopt, [full_grad.FullGrad(ts)], opt_base.Adam(1e-2)
    )
    key = jax.random.PRNGKey(0)
    state = learner.init(key)
    assert all(x.dtype == jnp.float32 for x in jax.tree.leaves(learner.get_theta(state)))
    losses = []
    with count_compiles() as names:
        for _ in range(NUM_META_STEPS):
            key, k = jax.random.split(key)
            state, loss, metrics = learner.update(state, k)
            losses.append(loss)
    losses = np.asarray(losses)
    assert names.count("_update") == 1, names
    assert np.all(np.isfinite(losses))
    assert losses[-20:].mean() < 0.9 * losses[:20].mean()
    assert float(metrics["learning_rate"]) > 1e-3
    assert int(metrics["num_nonfinite"]) == 0
