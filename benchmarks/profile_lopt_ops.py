"""Where a learned optimizer's update spends its time, op by op (XLA:CPU thunks).

    python benchmarks/profile_lopt_ops.py HyperV2 [--steps 10] [--top 25]

The update of ``benchmarks/bench_lopt_cost.py`` (same 932k-parameter MLP, default
constructor, initial theta, fixed gradients) is compiled once and run ``--steps`` times
under ``jax.profiler.trace``; the Perfetto trace it writes holds one event per executed
XLA operation (fusion, reduction, copy). Printed: each operation's median duration over
the steps, the sum by kind of operation (the name without its number), and the largest
ones. Read with the compiled program (``--hlo FILE`` writes it) to see what an operation
computes. The durations are of operations as the thunk executor ran them: two that ran
concurrently on the two cores both count in full, so the sum can exceed the wall time.
"""

from __future__ import annotations

import argparse
import collections
import glob
import gzip
import json
import os
import statistics
import sys
import tempfile

import jax
import jax.numpy as jnp

sys.path.insert(0, os.path.dirname(__file__))

from bench_lopt_cost import _mlp_params  # noqa: E402

from learnopt.learned_optimizers import base as lopt_base  # noqa: E402

_NOT_OPS = ("ThunkExecutor", "$", "Pjit", "Common", "Execute")


def op_durations(trace_dir: str, steps: int) -> dict[str, float]:
    """Median milliseconds of every XLA operation that ran once per step in the trace."""
    path = sorted(glob.glob(f"{trace_dir}/**/*.trace.json.gz", recursive=True))[-1]
    trace = json.load(gzip.open(path))
    events = trace["traceEvents"] if isinstance(trace, dict) else trace
    durations = collections.defaultdict(list)
    for e in events:
        if e.get("ph") == "X" and not e["name"].startswith(_NOT_OPS):
            durations[e["name"]].append(e.get("dur", 0) / 1e3)
    return {k: statistics.median(v) for k, v in durations.items() if len(v) >= steps}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("lopt", help="a registered learned optimizer, e.g. HyperV2")
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--hlo", default=None, help="also write the compiled program here")
    args = parser.parse_args()

    params = _mlp_params(jax.random.PRNGKey(0))
    grads = jax.tree_util.tree_map(
        lambda p: 1e-2 * jax.random.normal(jax.random.PRNGKey(1), p.shape, p.dtype), params
    )
    lopt = lopt_base.get_learned_optimizer(args.lopt)
    opt = lopt.opt_fn(lopt.init(jax.random.PRNGKey(2)))
    state = opt.init(params, num_steps=10_000)
    step = jax.jit(lambda s: opt.update(s, grads, loss=jnp.float32(2.3))).lower(state).compile()
    if args.hlo:
        with open(args.hlo, "w") as f:
            f.write(step.as_text())
    for _ in range(3):
        jax.block_until_ready(step(state))
    with tempfile.TemporaryDirectory() as trace_dir:
        with jax.profiler.trace(trace_dir, create_perfetto_trace=True):
            for _ in range(args.steps):
                jax.block_until_ready(step(state))
        ops = op_durations(trace_dir, args.steps)
    by_kind = collections.Counter()
    for name, ms in ops.items():
        by_kind[name.rstrip("0123456789.")] += ms
    print(f"{args.lopt}: {len(ops)} operations, {sum(ops.values()):.1f} ms summed per step")
    print("by kind: " + ", ".join(f"{k} {v:.1f}" for k, v in by_kind.most_common(10)))
    for name, ms in sorted(ops.items(), key=lambda kv: -kv[1])[: args.top]:
        print(f"{ms:8.2f} ms  {name}")


if __name__ == "__main__":
    main()
