"""What this folder's diagnostic scripts share: loading a theta, starting a run, the
outer-valid loss. Each script imports it from its own folder (run them by path)."""

import os

import jax
import jax.numpy as jnp
import numpy as np

from learnopt import pretrained
from learnopt.learned_optimizers import theta_files
from learnopt.tasks import base as tasks_base

#: Every run's length.
STEPS = 1000


def load_theta(spec):
    """A theta file, or a ``learnopt.pretrained`` entry's name: its ``TrainedLOpt``."""
    return theta_files.load(spec) if os.path.exists(spec) else pretrained.load(spec)


def start(task_name, opt, seed):
    """``(task, state, train iterator, 5 outer-valid batches)`` for one seed's run."""
    task = tasks_base.get_task(task_name)
    params, model_state = task.init_with_state(jax.random.PRNGKey(seed))
    train, valid = task.datasets.train, task.datasets.outer_valid
    valid_batches = [next(valid) for _ in range(5)]
    return task, opt.init(params, model_state, num_steps=STEPS), train, valid_batches


def valid_loss_fn(task, valid_batches):
    """A jitted ``(params, model_state) -> mean loss over the valid batches``."""

    @jax.jit
    def valid_loss(params, model_state):
        key = jax.random.PRNGKey(1)
        losses = [task.loss_with_state(params, model_state, key, b)[0] for b in valid_batches]
        return jnp.mean(jnp.stack(losses))

    return valid_loss


def run_scaled(opt, task_name, seed, factors):
    """One seed's run with every step scaled after the update; its final losses.

    ``factors(state)`` gives a tree like the parameters: each tensor's change ``p' - p``
    is multiplied by its factor (the optimizer's moments and scheduler state are its own).
    Returns ``(final train loss: mean of the last 100 steps, outer-valid loss)``.
    """
    task, state, train, valid_batches = start(task_name, opt, seed)
    valid_loss = valid_loss_fn(task, valid_batches)

    @jax.jit
    def step(state, batch, k):
        p, ms = opt.get_params_state(state)
        grad_fn = jax.value_and_grad(task.loss_with_state, has_aux=True)
        (loss, ms), g = grad_fn(p, ms, k, batch)
        new = opt.update(state, g, loss, model_state=ms)
        scaled = jax.tree_util.tree_map(
            lambda a, b, f: a + f * (b - a), state.params, new.params, factors(state)
        )
        return new.replace(params=scaled), loss

    losses = []
    for t in range(STEPS):
        state, loss = step(state, next(train), jax.random.PRNGKey(1000 * seed + t))
        losses.append(float(loss))
    return np.mean(losses[-100:]), float(valid_loss(*opt.get_params_state(state)))
