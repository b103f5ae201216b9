"""Does an average of Celo-Adam's iterates beat its iterates? (a diagnostic on meta-valid)

Trains each task named for 1000 steps with a Celo-Adam theta (a file or a
``learnopt.pretrained`` name), seeds 0-1, while keeping exponential moving averages of
the parameters (decays 0.9, 0.98, 0.995; started at the initial parameters). Prints, for
the iterate and for each average, the final training loss (the geometric mean over the
seeds of the mean over the last 100 steps, each average's loss measured on the same
batches) and the mean outer-valid loss (5 batches) at the end.

Usage: python iterate_average.py THETA TASK[,TASK...]
"""

import sys

import jax
import jax.numpy as jnp
import numpy as np
from _diagnostics import STEPS as T
from _diagnostics import load_theta, start, valid_loss_fn

DECAYS = (0.9, 0.98, 0.995)


def run(opt, task_name, seed):
    task, state, train, valid_batches = start(task_name, opt, seed)
    valid_loss = valid_loss_fn(task, valid_batches)
    averages = [opt.get_params_state(state)[0] for _ in DECAYS]

    @jax.jit
    def step(state, averages, batch, k):
        p, ms = opt.get_params_state(state)
        grad_fn = jax.value_and_grad(task.loss_with_state, has_aux=True)
        (loss, ms2), g = grad_fn(p, ms, k, batch)
        average_losses = jnp.stack([task.loss_with_state(a, ms, k, batch)[0] for a in averages])
        new = opt.update(state, g, loss, model_state=ms2)
        averages = [
            jax.tree_util.tree_map(lambda a, q, d=d: d * a + (1 - d) * q, a, new.params)
            for d, a in zip(DECAYS, averages, strict=True)
        ]
        return new, averages, loss, average_losses

    losses, average_losses = [], []
    for t in range(T):
        key = jax.random.PRNGKey(1000 * seed + t)
        state, averages, loss, a = step(state, averages, next(train), key)
        losses.append(float(loss))
        average_losses.append(np.asarray(a))
    p, ms = opt.get_params_state(state)
    row = [np.mean(losses[-100:]), float(valid_loss(p, ms))]
    average_losses = np.array(average_losses)
    for i in range(len(DECAYS)):
        row += [np.mean(average_losses[-100:, i]), float(valid_loss(averages[i], ms))]
    return row


def main():
    trained = load_theta(sys.argv[1])
    opt = trained.lopt.opt_fn(trained.theta)
    for task_name in sys.argv[2].split(","):
        r = np.array([run(opt, task_name, seed) for seed in (0, 1)])
        train = np.exp(np.mean(np.log(r[:, 0])))
        out = f"{task_name:40s} iterate {train:.3g} / {np.mean(r[:, 1]):.4f}"
        for i, d in enumerate(DECAYS):
            train = np.exp(np.mean(np.log(r[:, 2 + 2 * i])))
            out += f" | ema{d} {train:.3g} / {np.mean(r[:, 3 + 2 * i]):.4f}"
        print(out, flush=True)


if __name__ == "__main__":
    main()
