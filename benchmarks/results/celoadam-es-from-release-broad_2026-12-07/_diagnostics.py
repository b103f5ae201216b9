"""What this folder's diagnostic scripts share: loading a theta, starting a run, the
outer-valid loss. Each script imports it from its own folder (run them by path)."""

import os

import jax
import jax.numpy as jnp

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
