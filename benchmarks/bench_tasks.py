"""Parameter count and time per jitted training step of every registered task.

A step is ``value_and_grad`` of ``loss_with_state`` plus an Adam update, jitted, with
the task's full batch (synthesized from ``datasets.abstract_batch``, so tasks whose data
is not on disk are measured too). Each task is compiled, warmed up, then timed over
``--steps`` calls; the median per-step time is reported, with the time of a reference
step (a 64-32-10 MLP on 8x8 digits) measured in the same process to show the machine's
speed. Run:

    python benchmarks/bench_tasks.py                  # every task
    python benchmarks/bench_tasks.py --suite heldout  # one suite
    python benchmarks/bench_tasks.py --match Conv_ --markdown
"""

from __future__ import annotations

import argparse
import statistics
import time

import jax
import jax.numpy as jnp
import numpy as np

from learnopt.optimizers import base as opt_base
from learnopt.tasks import base as tasks_base


def synthesize(abstract, seed: int = 0):
    rng = np.random.default_rng(seed)

    def make(s):
        if jnp.issubdtype(s.dtype, jnp.integer):
            return rng.integers(1, 10, s.shape).astype(s.dtype)
        return rng.uniform(0, 1, s.shape).astype(s.dtype)

    return jax.tree.map(make, abstract)


def measure(task: tasks_base.Task, steps: int) -> tuple[int, float, float]:
    """``(number of parameters, compile seconds, median ms per step)``."""
    key = jax.random.key(0)
    params, state = task.init_with_state(key)
    num_params = sum(int(np.prod(x.shape)) for x in jax.tree.leaves(params))
    batch = synthesize(task.datasets.abstract_batch) if task.datasets is not None else None
    opt = opt_base.Adam(1e-3)
    opt_state = opt.init(params, model_state=state)

    @jax.jit
    def step(opt_state, key, batch):
        params, model_state = opt.get_params_state(opt_state)
        (loss, model_state), grads = jax.value_and_grad(task.loss_with_state, has_aux=True)(
            params, model_state, key, batch
        )
        return opt.update(opt_state, grads, loss=loss, model_state=model_state), loss

    start = time.perf_counter()
    compiled = step.lower(opt_state, key, batch).compile()
    compile_s = time.perf_counter() - start
    keys = jax.random.split(key, steps + 2)
    for k in keys[:2]:
        opt_state, loss = compiled(opt_state, k, batch)
    jax.block_until_ready(loss)
    times = []
    for k in keys[2:]:
        start = time.perf_counter()
        opt_state, loss = compiled(opt_state, k, batch)
        jax.block_until_ready(loss)
        times.append(time.perf_counter() - start)
    return num_params, compile_s, 1000 * statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--suite", help="only the tasks of this suite (learnopt.tasks.suites)")
    parser.add_argument("--match", default="", help="only task names containing this")
    parser.add_argument("--steps", type=int, default=20, help="timed steps per task")
    parser.add_argument("--markdown", action="store_true", help="print a markdown table")
    args = parser.parse_args()

    if args.suite:
        from learnopt.tasks import suites

        names = list(suites.get_suite(args.suite))
    else:
        names = [n for n in tasks_base.TASKS.names() if args.match in n]
    ref_params, _, ref_ms = measure(tasks_base.get_task("ImageMLP_Digits8_Relu32"), args.steps)
    print(f"reference ImageMLP_Digits8_Relu32: {ref_ms:.2f} ms/step ({jax.default_backend()})")
    if args.markdown:
        print("| task | parameters | ms / step | x reference | compile s |")
        print("| --- | ---: | ---: | ---: | ---: |")
    total = 0.0
    for name in names:
        num_params, compile_s, ms = measure(tasks_base.get_task(name), args.steps)
        total += ms
        if args.markdown:
            print(f"| `{name}` | {num_params:,} | {ms:.2f} | {ms / ref_ms:.1f} | {compile_s:.1f} |")
        else:
            print(
                f"{name:58s} {num_params:>10,d} params {ms:9.2f} ms/step  compile {compile_s:.1f}s"
            )
    print(f"sum over {len(names)} tasks: {total:.1f} ms per step of each")


if __name__ == "__main__":
    main()
