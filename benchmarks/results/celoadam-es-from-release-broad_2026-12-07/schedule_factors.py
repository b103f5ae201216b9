"""Does reshaping Celo-Adam's schedule move meta-valid's losses? (a diagnostic on meta-valid)

Trains each meta-valid task named for 1000 steps with a Celo-Adam theta whose every step
is multiplied by a fixed factor of the fraction of training ``tau`` (the parameters'
change scaled after the update; the optimizer's moments and scheduler state are its own):

- ``none``: 1 (the theta as it is);
- ``cos``: ``(1 + cos(pi tau)) / 2`` (a cosine decay on top of the learned schedule);
- ``late``: 1 until ``tau = 0.35`` (the released schedule's peak), then a half cosine to 0;
- ``boost10``: ``1 + 9 max(0, 1 - tau / 0.2)`` (a shorter warmup: 10x at the start);
- ``boost4``: ``1 + 3 max(0, 1 - tau / 0.25)``.

Prints, per task and factor, the geometric mean over seeds 0-1 of the final training loss
(mean of the last 100 steps) and the mean of the outer-valid loss (5 batches), with the
valid loss per seed.

Usage: python schedule_factors.py THETA TASK[,TASK...] FACTOR[,FACTOR...]
"""

import sys

import jax
import jax.numpy as jnp
import numpy as np
from _diagnostics import STEPS as T
from _diagnostics import load_theta, run_scaled


def factor(kind, tau):
    if kind == "none":
        return 1.0
    if kind == "cos":
        return 0.5 * (1 + jnp.cos(jnp.pi * tau))
    if kind == "late":
        late = 0.5 * (1 + jnp.cos(jnp.pi * (tau - 0.35) / 0.65))
        return jnp.where(tau < 0.35, 1.0, late)
    if kind == "boost10":
        return 1 + 9 * jnp.maximum(0.0, 1 - tau / 0.2)
    if kind == "boost4":
        return 1 + 3 * jnp.maximum(0.0, 1 - tau / 0.25)
    raise ValueError(f"unknown factor {kind!r}")


def run(opt, task_name, kind, seed):
    def factors(state):
        f = factor(kind, state.iteration / T)
        return jax.tree_util.tree_map(lambda _: f, state.params)

    return run_scaled(opt, task_name, seed, factors)


def main():
    trained = load_theta(sys.argv[1])
    opt = trained.lopt.opt_fn(trained.theta)
    for task_name in sys.argv[2].split(","):
        for kind in sys.argv[3].split(","):
            r = np.array([run(opt, task_name, kind, seed) for seed in (0, 1)])
            train = np.exp(np.mean(np.log(r[:, 0])))
            print(
                f"{task_name:45s} {kind:5s} train {train:.4g} valid {np.mean(r[:, 1]):.4g}"
                f"  per seed {r[:, 1].round(4)}",
                flush=True,
            )


if __name__ == "__main__":
    main()
