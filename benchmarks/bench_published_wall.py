"""Wall time of 1000 training steps with each pretrained entry, beside optax.adam's.

    python benchmarks/bench_published_wall.py [--entries Celo CeloAdam Celo2]
        [--tasks ImageMLP_Mnist5k_28_Relu128 Conv_Mnist5k_16_8x16_Tanh] [--trials 3]
        [--csv FILE]

What a user pays per step: forward, backward and the update, jitted, on a heldout task.
Each optimizer (``optax.adam(1e-3)`` and every ``learnopt.pretrained`` entry given, as
``as_optax(num_steps=1000)`` with the loss passed as ``value``) trains the task for
``--steps`` steps as one ``lax.scan`` over a chunk of ``--chunk`` batches fetched once
(the host's data pipeline is left out: it costs the same for every optimizer), repeated
until ``--steps``. The first chunk compiles and is not timed; ``--trials`` timings per
optimizer are interleaved in one process and the fastest is kept (load on a shared
machine only ever adds time). Prints a Markdown table: ms per 1000 steps and the ratio
to Adam's, per task; ``--csv`` also writes it.
"""

from __future__ import annotations

import argparse
import csv
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np
import optax

from learnopt import pretrained
from learnopt.tasks import base as tasks_base

DEFAULT_TASKS = (
    "ImageMLP_Mnist5k_28_Relu128",
    "Conv_Mnist5k_16_8x16_Tanh",
    "RNNLM_pystdlibbytes_Patch16_GRU32_Embed16_bs32",
)


def _trainer(task, tx):
    """A jitted ``(params, state, batches, key) -> (params, state, mean loss)`` chunk."""

    def step(carry, batch):
        params, state, key = carry
        key, sub = jax.random.split(key)
        loss, grads = jax.value_and_grad(task.loss)(params, sub, batch)
        updates, state = tx.update(grads, state, params, value=loss)
        return (optax.apply_updates(params, updates), state, key), loss

    @jax.jit
    def run(params, state, batches, key):
        (params, state, _), losses = jax.lax.scan(step, (params, state, key), batches)
        return params, state, jnp.mean(losses)

    return run


def time_task(task_name, optimizers, steps, chunk, trials):
    """``{optimizer: best seconds for ``steps`` steps}`` on one task."""
    task = tasks_base.get_task(task_name)
    batches = [next(task.datasets.train) for _ in range(chunk)]
    stacked = jax.tree_util.tree_map(lambda *xs: jnp.stack(xs), *batches)
    params0 = task.init(jax.random.PRNGKey(0))
    runs = {}
    for name, tx in optimizers.items():
        run = _trainer(task, tx)
        state = tx.init(params0)
        out = run(params0, state, stacked, jax.random.PRNGKey(1))  # compiles
        jax.block_until_ready(out)
        if not np.isfinite(float(out[2])):
            print(f"  {task_name} / {name}: non-finite loss in the warm-up chunk", file=sys.stderr)
        runs[name] = (run, state)
    best = {name: float("inf") for name in optimizers}
    reps = max(1, steps // chunk)
    for _ in range(trials):
        for name, (run, state) in runs.items():
            params, st = params0, state
            start = time.perf_counter()
            for r in range(reps):
                params, st, loss = run(params, st, stacked, jax.random.PRNGKey(r))
            jax.block_until_ready(loss)
            best[name] = min(best[name], time.perf_counter() - start)
    return best


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entries", nargs="+", default=None, help="default: every entry")
    parser.add_argument("--tasks", nargs="+", default=list(DEFAULT_TASKS))
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--chunk", type=int, default=50, help="steps per jitted scan")
    parser.add_argument("--trials", type=int, default=3)
    parser.add_argument("--csv", default=None)
    args = parser.parse_args(argv)
    entries = args.entries or pretrained.names()
    optimizers = {"optax.adam(1e-3)": optax.adam(1e-3)}
    for name in entries:
        optimizers[name] = pretrained.load(name).as_optax(num_steps=args.steps)
    rows = []
    for task_name in args.tasks:
        print(f"{task_name}: timing {len(optimizers)} optimizers ...", file=sys.stderr)
        best = time_task(task_name, optimizers, args.steps, args.chunk, args.trials)
        adam = best["optax.adam(1e-3)"]
        for name, seconds in best.items():
            per_1000 = seconds * 1000.0 / (max(1, args.steps // args.chunk) * args.chunk)
            rows.append((task_name, name, per_1000 * 1000.0, seconds / adam))
    print("| task | optimizer | ms per 1000 steps | x Adam |\n| --- | --- | ---: | ---: |")
    for task_name, name, ms, ratio in rows:
        print(f"| {task_name} | {name} | {ms:.0f} | {ratio:.2f}x |")
    if args.csv:
        with open(args.csv, "w", newline="") as f:
            writer = csv.writer(f)
            writer.writerow(["task", "optimizer", "ms_per_1000_steps", "ratio_to_adam"])
            writer.writerows((t, n, f"{ms:.1f}", f"{r:.3f}") for t, n, ms, r in rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
