"""What skipping non-finite steps costs: ``Optimizer.update`` with ``skip_nonfinite`` on
(the default) against the same optimizer with it off, in one process, interleaved trials.

    python benchmarks/bench_nonfinite_skip.py [--trials 5] [--steps 20]
        [--opts Adam LearnableAdam ScheduledAdam MLPLOpt]

The model is the MLP 784-512-512-512-10 of ``bench_lopt_cost.py`` (932,362 parameters
in 8 tensors). Each side times the jitted ``params, state <- update(state, grads, loss)``
run ``--steps`` times in a ``lax.fori_loop`` on fixed gradients; a trial times each
side once, in alternating order, and the table gives the median over trials of each
side's milliseconds per update and of the per-trial ratio (on / off). Prints one
Markdown table.
"""

from __future__ import annotations

import argparse
import statistics
import time

import jax
import jax.numpy as jnp

from learnopt.learned_optimizers import base as lopt_base
from learnopt.optimizers import base as opt_base

SIZES = (784, 512, 512, 512, 10)


def _params(key: jax.Array) -> dict[str, jax.Array]:
    params = {}
    for i, (a, b) in enumerate(zip(SIZES[:-1], SIZES[1:], strict=True)):
        key, sub = jax.random.split(key)
        params[f"w{i}"] = jax.random.normal(sub, (a, b)) / a**0.5
        params[f"b{i}"] = jnp.zeros((b,))
    return params


def _make(name: str, skip: bool) -> opt_base.Optimizer:
    if name in opt_base.registered_optimizers():
        opt = opt_base.get_optimizer(name)
    else:
        lopt = lopt_base.get_learned_optimizer(name)
        opt = lopt.opt_fn(lopt.init(jax.random.PRNGKey(0)))
    opt.skip_nonfinite = skip
    return opt


def _runner(opt: opt_base.Optimizer, params, grads, steps: int):
    state = opt.init(params, num_steps=10 * steps)

    @jax.jit
    def run(state):
        return jax.lax.fori_loop(0, steps, lambda _, s: opt.update(s, grads, 1.0), state)

    jax.block_until_ready(run(state))
    return run, state


def _ms(run, state, steps: int) -> float:
    start = time.perf_counter()
    jax.block_until_ready(run(state))
    return 1e3 * (time.perf_counter() - start) / steps


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=5)
    parser.add_argument("--steps", type=int, default=20, help="updates per timed call")
    parser.add_argument(
        "--opts", nargs="+", default=["Adam", "LearnableAdam", "ScheduledAdam", "MLPLOpt"]
    )
    args = parser.parse_args()
    params = _params(jax.random.PRNGKey(0))
    grads = jax.tree_util.tree_map(lambda p: 1e-3 * jnp.ones_like(p), params)
    print("| optimizer | skip on ms | skip off ms | ratio on/off |")
    print("|---|---:|---:|---:|")
    for name in args.opts:
        on = _runner(_make(name, True), params, grads, args.steps)
        off = _runner(_make(name, False), params, grads, args.steps)
        times_on, times_off, ratios = [], [], []
        for trial in range(args.trials):
            sides = (on, off) if trial % 2 == 0 else (off, on)
            t = {id(s): _ms(*s, args.steps) for s in sides}
            times_on.append(t[id(on)])
            times_off.append(t[id(off)])
            ratios.append(t[id(on)] / t[id(off)])
        print(
            f"| {name} | {statistics.median(times_on):.3f} | "
            f"{statistics.median(times_off):.3f} | {statistics.median(ratios):.3f} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
