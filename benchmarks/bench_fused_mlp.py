"""What a fused kernel would do for MLPLOpt's 32-wide MLP on XLA:CPU: a measured prototype.

    python benchmarks/bench_fused_mlp.py [--trials 5] [--march haswell]

``MLPLOpt``'s per-element MLP (``5 -> 32 -> 32 -> 2``, its time features folded into the
first bias) over the 932,362 elements of ``bench_lopt_cost.py``'s model, timed in one
process with interleaved trials against ``optax.adam``'s update and a 2048^3 matmul:

* ``blocked``: :mod:`~learnopt.learned_optimizers.blocks.per_element`'s blocked form (what
  ``MLPLOpt`` runs: ``[16384, 5] @ [5, 32]`` etc. on XLA:CPU's GEMM kernels);
* ``fused kernel``: ``form="fused"``, :mod:`learnopt.learned_optimizers.blocks.fused_kernel`'s
  XLA FFI custom call (tiles of 64 elements whose 32 hidden units stay in registers and
  L1, compiled on first use with the system's C++ compiler, ``-march=native``, run on
  XLA's intra-op threads).

Prints ms, GFLOP/s, the share of the matmul peak and the ratio to ``optax.adam``, and
the largest difference between the two forms' outputs (relative to the largest output).
``--march TARGET`` builds the kernel for another x86 target instead of ``native`` (into
a temporary cache), e.g. ``haswell`` (AVX2) or ``x86-64-v2`` (SSE4.2): how it runs on
CPUs without AVX-512.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile

import jax
import jax.numpy as jnp
import optax

sys.path.insert(0, os.path.dirname(__file__))

from bench_lopt_cost import _mlp_params, _time  # noqa: E402
from bench_xla_cpu_options import mlplopt_mlp_inputs, time_calls  # noqa: E402

from learnopt.learned_optimizers.blocks import fused_kernel, per_element  # noqa: E402

#: Multiply-adds per element of the 5 -> 32 -> 32 -> 2 MLP.
MACS = 5 * 32 + 32 * 32 + 32 * 2


def main() -> None:
    """Builds the kernel, times the forms, prints one Markdown table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=5)
    parser.add_argument("--min-seconds", type=float, default=0.3)
    parser.add_argument("--march", default=None, help="compile for this target, not native")
    args = parser.parse_args()

    if args.march:
        os.environ["LEARNOPT_KERNEL_CACHE"] = tempfile.mkdtemp(prefix="learnopt_kernel_")
        fused_kernel._FLAGS = tuple(
            f"-march={args.march}" if f.startswith("-march") else f
            for f in fused_kernel._FLAGS
            if not f.startswith("-mprefer-vector-width")
        )
        print(f"kernel compiled with -march={args.march}")
    if not fused_kernel.available():
        raise SystemExit(f"bench_fused_mlp: no kernel ({fused_kernel.unavailable_reason()})")

    layers, x, n = mlplopt_mlp_inputs()
    flat = [a for layer in layers for a in layer]

    @jax.jit
    def blocked(x, *flat):
        ls = list(zip(flat[::2], flat[1::2], strict=True))
        return jnp.stack(per_element._blocked(ls, x, (n,), jax.nn.relu))

    @jax.jit
    def fused(x, *flat):
        ls = list(zip(flat[::2], flat[1::2], strict=True))
        return jnp.stack(per_element._fused(ls, [x], (n,)))

    params = _mlp_params(jax.random.PRNGKey(0))
    grads = jax.tree_util.tree_map(lambda p: 1e-2 * jnp.ones_like(p), params)
    tx = optax.adam(1e-3)

    @jax.jit
    def adam_step(params, state):
        u, state = tx.update(grads, state, params)
        return optax.apply_updates(params, u), state

    adam_carry = (params, tx.init(params))
    a = jnp.ones((2048, 2048), jnp.float32)
    matmul = jax.jit(lambda a: a @ a)
    programs = {"blocked (XLA:CPU GEMM)": blocked, "fused kernel (FFI)": fused}
    outs = {name: jax.block_until_ready(f(x, *flat)) for name, f in programs.items()}
    jax.block_until_ready(adam_step(*adam_carry))
    jax.block_until_ready(matmul(a))
    times = {name: [] for name in programs}
    adam_times, matmul_times = [], []
    for _ in range(args.trials):
        for name, f in programs.items():
            times[name].append(time_calls(f, (x, *flat), args.min_seconds))
        adam_times.append(_time(adam_step, adam_carry, 10, args.min_seconds))
        matmul_times.append(time_calls(matmul, (a,), args.min_seconds))
    adam_s = statistics.median(adam_times)
    peak = 2 * 2048**3 / statistics.median(matmul_times)
    ref = outs["blocked (XLA:CPU GEMM)"]
    diff = float(jnp.max(jnp.abs(outs["fused kernel (FFI)"] - ref)) / jnp.max(jnp.abs(ref)))
    print(f"{n:,} elements, {2 * MACS} FLOPs each; matmul peak {peak / 1e9:.1f} GFLOP/s; "
          f"optax.adam {adam_s * 1e3:.2f} ms; fused vs blocked: max rel. diff "
          f"{diff:.1e}")  # fmt: skip
    print("| program | ms | GFLOP/s | share of matmul peak | ratio to optax.adam |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for name in programs:
        s = statistics.median(times[name])
        rate = 2 * MACS * n / s
        print(f"| {name} | {s * 1e3:.1f} | {rate / 1e9:.1f} | {rate / peak:.0%} | "
              f"{s / adam_s:.1f} |")  # fmt: skip


if __name__ == "__main__":
    main()
