"""Where learnopt's hypergradient step adaptation takes each tensor's step multiplier.

Trains one task with ``CeloAdam(step_adaptation=beta)`` from the released theta (seed 0)
and prints, every fifth of the run, the training loss and every tensor's log multiplier
``a`` (bounded to [-2, 2]), then the tensors' names and shapes::

    python benchmarks/results/adapt_shapes_2026-12-07/step_adaptation_probe.py \
        Conv_Digits8_16x32x32 0.03 1000
"""

import sys

import jax
import numpy as np

from learnopt import pretrained
from learnopt.learned_optimizers.celo_adam import CeloAdam
from learnopt.tasks import base as tasks_base


def main(name: str, beta: float, steps: int) -> None:
    task = tasks_base.get_task(name)
    opt = CeloAdam(step_adaptation=beta).opt_fn(pretrained.load("CeloAdam").theta)
    params, model_state = task.init_with_state(jax.random.PRNGKey(0))
    state = opt.init(params, model_state=model_state, num_steps=steps)

    @jax.jit
    def step(state, batch, key):
        grad_fn = jax.value_and_grad(task.loss_with_state, has_aux=True)
        (loss, model_state), g = grad_fn(opt.get_params(state), state.model_state, key, batch)
        return opt.update(state, g, loss=loss, model_state=model_state), loss

    key = jax.random.PRNGKey(1)
    for t in range(steps):
        key, sub = jax.random.split(key)
        state, loss = step(state, next(task.datasets.train), sub)
        if (t + 1) % (steps // 5) == 0:
            logs = " ".join(f"{a:+.2f}" for a in np.asarray(state.log_step_adaptation))
            print(f"step {t + 1} loss {float(loss):.4g} log multipliers {logs}", flush=True)
    for path, leaf in jax.tree_util.tree_flatten_with_path(params)[0]:
        print(jax.tree_util.keystr(path), leaf.shape)


if __name__ == "__main__":
    main(sys.argv[1], float(sys.argv[2]), int(sys.argv[3]))
