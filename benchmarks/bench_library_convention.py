"""Step time of the library's calling convention vs learnopt's fused learner.

The same meta-training (TruncatedPES on ``ImageMLP_Digits8_Relu32``, ``LearnableAdam``,
8 antithetic pairs, 10 inner steps per estimate, outer Adam) run two ways:

* learnopt's ``SingleMachineGradientLearner.update``: one jitted program per outer step;
* the library's loop: ``GradientLearner.get_state_for_worker`` ->
  ``gradient_worker_compute`` (one jitted program for the estimates) ->
  ``GradientLearner.update`` (a second one), as the library's tutorials write it.

Both fetch their batches on the host inside the timed loop. Prints milliseconds per outer
step (median of interleaved trials) and the ratio library / fused.

    python benchmarks/bench_library_convention.py [--steps 200] [--trials 3]
"""

from __future__ import annotations

import argparse
import time

import jax
import numpy as np

from learnopt.learned_optimizers import base as lopt_base
from learnopt.optimizers import base as opt_base
from learnopt.outer_trainers import gradient_learner, lopt_truncated_step, truncated_pes
from learnopt.outer_trainers import truncation_schedule as tsched
from learnopt.tasks import base as tasks_base


def make_estimators(lopt):
    step = lopt_truncated_step.VectorizedLOptTruncatedStep(
        tasks_base.get_task("ImageMLP_Digits8_Relu32"),
        lopt,
        tsched.ConstantTruncationSchedule(200),
        num_tasks=8,
        random_initial_iteration_offset=200,
    )
    return [truncated_pes.TruncatedPES(step, trunc_length=10, std=0.01)]


def time_fused(steps: int, keys) -> float:
    lopt = lopt_base.LearnableAdam()
    learner = gradient_learner.SingleMachineGradientLearner(
        lopt, make_estimators(lopt), opt_base.Adam(1e-3)
    )
    state = learner.init(jax.random.PRNGKey(0))
    state = jax.block_until_ready(learner.update(state, keys[0])[0])  # compile
    t0 = time.perf_counter()
    for k in keys[1 : steps + 1]:
        state, _, _ = learner.update(state, k)
    jax.block_until_ready(state)
    return (time.perf_counter() - t0) / steps * 1e3


def time_library(steps: int, keys) -> float:
    lopt = lopt_base.LearnableAdam()
    estimators = make_estimators(lopt)
    central = gradient_learner.GradientLearner(lopt, opt_base.Adam(1e-3))
    key1, key = jax.random.split(jax.random.PRNGKey(0))
    central_state = central.init(key1)
    weights = central.get_state_for_worker(central_state)
    states = [e.init_worker_state(weights, k) for e, k in zip(estimators, [key], strict=True)]

    def one(central_state, states, k):
        key1, key2 = jax.random.split(k)
        weights = central.get_state_for_worker(central_state)
        out = gradient_learner.gradient_worker_compute(weights, estimators, states, key1)
        central_state, _ = central.update(central_state, [out.to_put], key=key2)
        return central_state, out.unroll_states

    central_state, states = jax.block_until_ready(one(central_state, states, keys[0]))
    t0 = time.perf_counter()
    for k in keys[1 : steps + 1]:
        central_state, states = one(central_state, states, k)
    jax.block_until_ready(central_state)
    return (time.perf_counter() - t0) / steps * 1e3


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--trials", type=int, default=3)
    args = ap.parse_args()
    keys = jax.random.split(jax.random.PRNGKey(1), args.steps + 1)
    fused, library = [], []
    for _ in range(args.trials):  # interleaved
        fused.append(time_fused(args.steps, keys))
        library.append(time_library(args.steps, keys))
    f, lib = float(np.median(fused)), float(np.median(library))
    print(f"backend={jax.default_backend()}; TruncatedPES, 8 pairs, 10 steps per estimate")
    print(f"fused learner      {f:8.2f} ms/step")
    print(f"library-style loop {lib:8.2f} ms/step   ratio {lib / f:.2f}")


if __name__ == "__main__":
    main()
