"""Does a smaller step on one role's tensors move meta-valid's losses? (a diagnostic)

Trains each meta-valid task named for 1000 steps with a Celo-Adam theta whose step on the
tensors of the named roles (as ``width_aware.tensor_roles`` reads them from the shapes:
``input``, ``hidden``, ``output``, ``vector``; ``all`` for every tensor) is multiplied by
a fixed factor (the parameters' change scaled after the update; the optimizer's moments
and scheduler state are its own). A spec is ``ROLE[+ROLE...]:FACTOR`` or ``none``.

Prints, per task and spec, the geometric mean over seeds 0-1 of the final training loss
(mean of the last 100 steps) and the mean of the outer-valid loss (5 batches), with the
valid loss per seed.

Usage: python role_factors.py THETA TASK[,TASK...] SPEC[,SPEC...]
"""

import sys

import jax
import numpy as np
from _diagnostics import load_theta, run_scaled

from learnopt.learned_optimizers import width_aware


def factors(spec, params):
    """A tree of per-tensor factors for ``spec`` (``none``, ``ROLE[+ROLE]:F``)."""
    if spec == "none":
        return jax.tree_util.tree_map(lambda p: 1.0, params)
    roles, f = spec.split(":")
    roles = set(roles.split("+"))
    kinds = width_aware.tensor_roles(params)
    return jax.tree_util.tree_map(
        lambda k: float(f) if ("all" in roles or k in roles) else 1.0, kinds
    )


def run(opt, task_name, spec, seed):
    return run_scaled(opt, task_name, seed, lambda state: factors(spec, state.params))


def main():
    trained = load_theta(sys.argv[1])
    opt = trained.lopt.opt_fn(trained.theta)
    for task_name in sys.argv[2].split(","):
        for spec in sys.argv[3].split(","):
            r = np.array([run(opt, task_name, spec, seed) for seed in (0, 1)])
            train = np.exp(np.mean(np.log(r[:, 0])))
            print(
                f"{task_name:45s} {spec:14s} train {train:.4g} valid {np.mean(r[:, 1]):.4g}"
                f"  per seed {r[:, 1].round(4)}",
                flush=True,
            )


if __name__ == "__main__":
    main()
