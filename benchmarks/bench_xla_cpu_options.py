"""Do XLA:CPU's library fusions (YNNPACK, XNNPACK, oneDNN) speed up the 32-wide MLPs?

    python benchmarks/bench_xla_cpu_options.py [--lopts MLPLOpt] [--trials 5]

XLA:CPU can hand matrix products (and reductions, elementwise ops) to a kernel library
instead of its own GEMM; which ones is chosen per compilation by debug options
(``jax.jit(f).lower(...).compile(compiler_options)``). This script compiles the same
programs under each option set of :data:`OPTIONS` and times them in one process,
interleaved with ``optax.adam``: the per-element MLP of ``MLPLOpt`` alone (``5 -> 32 ->
32 -> 2`` over the 932,362 elements of ``bench_lopt_cost.py``'s model, as one unblocked
chain of products and in :mod:`~learnopt.learned_optimizers.blocks.per_element`'s blocked form),
then each learned optimizer's whole update. For each option set it prints ms, the ratio
to ``optax.adam`` and the largest difference of the update from the default compilation
(relative to the largest update). An option the installed jaxlib does not know is
reported and skipped.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import jax
import jax.numpy as jnp
import optax

sys.path.insert(0, os.path.dirname(__file__))

from bench_lopt_cost import _mlp_params, _time  # noqa: E402

from learnopt.learned_optimizers import base as lopt_base  # noqa: E402
from learnopt.learned_optimizers.blocks import per_element  # noqa: E402

_FUSION = "xla_cpu_experimental_{}_fusion_type"
#: Option sets compared (the first is XLA's default).
OPTIONS: dict[str, dict[str, str | bool | int]] = {
    "default": {},
    "ynn dot": {_FUSION.format("ynn"): "LIBRARY_FUSION_TYPE_DOT"},
    "ynn individual dot": {_FUSION.format("ynn"): "LIBRARY_FUSION_TYPE_INDIVIDUAL_DOT"},
    "xnn dot": {_FUSION.format("xnn"): "LIBRARY_FUSION_TYPE_DOT"},
    "xnn graph greedy": {
        "xla_cpu_experimental_xnn_graph_fusion_mode": "XNN_GRAPH_FUSION_MODE_GREEDY"
    },
    "onednn dot": {_FUSION.format("onednn"): "LIBRARY_FUSION_TYPE_DOT"},
    "vector width 512": {"xla_cpu_prefer_vector_width": 512},
}


def mlplopt_mlp_inputs():
    """MLPLOpt's initial MLP (time-feature rows dropped: they fold into the first bias)
    and random ``[N, 5]`` inputs over the benchmark model's ``N`` elements."""
    from learnopt.learned_optimizers.mlp_lopt import MLPLOpt

    lopt = MLPLOpt()
    theta = lopt.init(jax.random.PRNGKey(0))
    layers = [
        (theta[f"mlp/~/linear_{i}"]["w"], theta[f"mlp/~/linear_{i}"]["b"])
        for i in range(lopt.hidden_layers + 1)
    ]
    layers[0] = (layers[0][0][:5], layers[0][1])
    n = sum(p.size for p in jax.tree_util.tree_leaves(_mlp_params(jax.random.PRNGKey(0))))
    return layers, jax.random.normal(jax.random.PRNGKey(1), (n, 5)), n


def _mlp_programs():
    """MLPLOpt's initial MLP as an unblocked chain and in the blocked form, with inputs."""
    layers, x, n = mlplopt_mlp_inputs()

    def chain(x, layers):
        for i, (w, b) in enumerate(layers):
            x = x @ w + b
            x = jax.nn.relu(x) if i < len(layers) - 1 else x
        return x

    def blocked(x, layers):
        return jnp.stack(per_element._blocked(layers, x, (n,), jax.nn.relu), axis=-1)

    return {
        "MLP alone, one chain": (chain, (x, layers)),
        "MLP alone, blocked": (blocked, (x, layers)),
    }


def _update_programs(names):
    params = _mlp_params(jax.random.PRNGKey(0))
    grads = jax.tree_util.tree_map(
        lambda p: 1e-2 * jax.random.normal(jax.random.PRNGKey(1), p.shape, p.dtype), params
    )
    out = {}
    for name in names:
        lopt = lopt_base.get_learned_optimizer(name)
        opt = lopt.opt_fn(lopt.init(jax.random.PRNGKey(2)))
        state = opt.init(params, num_steps=10_000)

        def update(state, opt=opt):
            return opt.update(state, grads, loss=jnp.float32(2.3)).params

        out[f"{name} update"] = (update, (state,))
    return out, params, grads


def main() -> None:
    """Prints one Markdown table: program x option set."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lopts", nargs="*", default=["MLPLOpt"])
    parser.add_argument("--trials", type=int, default=5)
    parser.add_argument("--min-seconds", type=float, default=0.3)
    parser.add_argument("--options", nargs="*", default=list(OPTIONS), choices=list(OPTIONS))
    args = parser.parse_args()

    updates, params, grads = _update_programs(args.lopts)
    programs = {**_mlp_programs(), **updates}
    tx = optax.adam(1e-3)

    @jax.jit
    def adam_step(params, state):
        u, state = tx.update(grads, state, params)
        return optax.apply_updates(params, u), state

    adam_carry = (params, tx.init(params))
    jax.block_until_ready(adam_step(*adam_carry))
    print(f"{jax.devices()[0].device_kind}; jax {jax.__version__}", flush=True)
    print("| program | options | ms | ratio to optax.adam | max rel. diff from default |")
    print("| --- | --- | ---: | ---: | ---: |")
    for pname, (fn, fargs) in programs.items():
        default_out = None
        for oname in args.options:
            try:
                lowered = jax.jit(fn).lower(*fargs)
                compiled = lowered.compile(OPTIONS[oname] or None)
            except Exception as e:  # an option this jaxlib does not know
                print(f"| {pname} | {oname} | not available: {str(e).splitlines()[0][:80]} | | |")
                continue
            out = jax.block_until_ready(compiled(*fargs))
            times, adam_times = [], []
            for _ in range(args.trials):
                times.append(time_calls(compiled, fargs, args.min_seconds))
                adam_times.append(_time(adam_step, adam_carry, 10, args.min_seconds))
            ms, adam_ms = statistics.median(times), statistics.median(adam_times)
            diff = "-"
            if default_out is None:
                default_out = out
            else:
                base = fargs[0].params if pname.endswith("update") else None
                diff = f"{_max_rel_diff(out, default_out, base):.1e}"
            print(f"| {pname} | {oname} | {ms * 1e3:.1f} | {ms / adam_ms:.1f} | {diff} |",
                  flush=True)  # fmt: skip


def time_calls(fn, args, min_seconds: float) -> float:
    """Seconds per call of ``fn(*args)`` (same inputs every call), over ``min_seconds``."""
    n, start = 0, time.perf_counter()
    while True:
        jax.block_until_ready(fn(*args))
        n += 1
        if time.perf_counter() - start >= min_seconds:
            return (time.perf_counter() - start) / n


def _max_rel_diff(a, b, base=None) -> float:
    """Largest |a - b| over the largest |a - base| (the update), tree-wide."""
    la, lb = jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b)
    lz = jax.tree_util.tree_leaves(base) if base is not None else [0.0] * len(la)
    num = max(float(jnp.max(jnp.abs(x - y))) for x, y in zip(la, lb, strict=True))
    den = max(float(jnp.max(jnp.abs(x - z))) for x, z in zip(la, lz, strict=True))
    return num / max(den, 1e-30)


if __name__ == "__main__":
    main()
