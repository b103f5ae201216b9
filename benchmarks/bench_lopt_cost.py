"""Per-step cost of each learned optimizer vs ``optax.adam``, as a roofline.

    python benchmarks/bench_lopt_cost.py [--steps 20] [--trials 5] [--lopts MLPLOpt HyperV2]
        [--csv FILE]

The model is an MLP 784-512-512-512-10 (932,362 parameters in 8 tensors). For each
learned optimizer (default constructor arguments, initial theta) it times the jitted
``opt.update(state, grads, loss=loss)`` alone (fixed gradients and loss, no
forward/backward pass) and, in the same process with interleaved trials, the jitted
``optax.adam(1e-3)`` update + ``optax.apply_updates``. Architectures with a per-element
MLP (``mlp_form``) are timed twice: in the form ``"auto"`` picks (what users run) and in
the ``"reference"`` form (the concatenate-and-matmul the fast forms are tested against).

The roofline: the machine's peaks are measured in the same run (a 2048^3 float32 matmul
for FLOP/s; 20 passes of ``x <- x * a + b`` over 2^23 floats in one program for bytes/s,
read plus write). Each
update's FLOPs per parameter come from XLA's cost analysis of its reference form (the
same maths with no loops, which XLA counts exactly); its bytes per parameter are the
traffic no implementation avoids: params and optimizer state read and written, the
gradient read (4 bytes a float). ``limit`` is ``max(FLOPs / peak FLOP/s, bytes / peak
bytes/s)`` for the whole model, ``x limit`` the measured time over it, and ``bound`` which
of the two is larger. A third peak, the FLOP rate XLA:CPU's own fused elementwise loops
reach on MLP-like arithmetic (:func:`loop_peak`), gives ``loop limit`` (FLOPs / that
rate): the bound on the ``"elementwise"`` form of the narrow MLPs, which XLA compiles into
such loops. Prints one Markdown table (and ``--csv``).
"""

from __future__ import annotations

import argparse
import csv
import statistics
import time

import jax
import jax.numpy as jnp
import numpy as np
import optax

from learnopt.learned_optimizers import base as lopt_base

SIZES = (784, 512, 512, 512, 10)
DEFAULT_LOPTS = (
    "LearnableAdam",
    "NNAdam",
    "AdafacMLPLOpt",
    "MLPNomLOpt",
    "Celo2",
    "HyperV2",
    "MLPLOpt",
    "RNNMLPLOpt",
)


def _mlp_params(key: jax.Array) -> dict[str, jax.Array]:
    params = {}
    for i, (a, b) in enumerate(zip(SIZES[:-1], SIZES[1:], strict=True)):
        key, k = jax.random.split(key)
        params[f"w{i}"] = jax.random.normal(k, (a, b), jnp.float32) / np.sqrt(a)
        params[f"b{i}"] = jnp.zeros((b,), jnp.float32)
    return params


def _time(step, carry, steps: int, min_seconds: float) -> float:
    """Seconds per call of ``carry = step(*carry)`` (``steps`` calls, repeated ``min_seconds``)."""
    calls, start = 0, time.perf_counter()
    while True:
        for _ in range(steps):
            carry = step(*carry)
        jax.block_until_ready(carry)
        calls += steps
        elapsed = time.perf_counter() - start
        if elapsed >= min_seconds:
            return elapsed / calls


def _best_seconds(fn, *args, repeats: int = 5) -> float:
    jax.block_until_ready(fn(*args))
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        jax.block_until_ready(fn(*args))
        best = min(best, time.perf_counter() - start)
    return best


def machine_peaks() -> tuple[float, float]:
    """Measured (FLOP/s, bytes/s): a large float32 matmul and a large read-modify-write."""
    n = 2048
    a = jax.random.normal(jax.random.PRNGKey(0), (n, n), jnp.float32)
    flops = 2 * n**3 / _best_seconds(jax.jit(lambda x: x @ x), a)
    # Inside one program, so the buffers are reused (no first-touch page faults).
    x, passes = jnp.ones((1 << 23,), jnp.float32), 20
    sweep = jax.jit(lambda v: jax.lax.fori_loop(0, passes, lambda _, u: u * 1.0001 + 0.5, v))
    bandwidth = passes * 2 * x.nbytes / _best_seconds(sweep, x)
    return flops, bandwidth


#: Layers of the width-4 elementwise MLP :func:`loop_peak` times.
LOOP_LAYERS = 16


def loop_peak() -> float:
    """Measured FLOP/s of XLA:CPU's own fused elementwise loops on MLP-like arithmetic.

    The ``"elementwise"`` form of the narrow per-element MLPs is compiled by XLA into one
    fused loop over the elements; this times such a loop with nothing to read but one
    input: :data:`LOOP_LAYERS` ReLU layers of width 4 (16 multiply-adds each) per element
    of 2^22 floats, written the way the form writes them (one array per unit).
    """
    w = np.random.default_rng(0).normal(size=(LOOP_LAYERS, 4, 4)).astype(np.float32) * 0.5

    def layers(x):
        h = [x * (0.5 + 0.1 * j) + 0.1 * j for j in range(4)]
        for k in range(LOOP_LAYERS):
            h = [
                jnp.maximum(sum(h[i] * float(w[k, i, j]) for i in range(4)) + 0.01, 0.0)
                for j in range(4)
            ]
        return h[0] + h[1] + h[2] + h[3]

    x = jax.random.normal(jax.random.PRNGKey(1), (1 << 22,), jnp.float32)
    return 2 * 16 * LOOP_LAYERS * x.size / _best_seconds(jax.jit(layers), x)


def _state_floats(state, params) -> float:
    """Float values in the state besides params and model state, per parameter."""
    n_params = sum(int(np.size(p)) for p in jax.tree_util.tree_leaves(params))
    skip = {id(x) for x in jax.tree_util.tree_leaves((state.params, state.model_state))}
    total = sum(
        int(np.size(x))
        for x in jax.tree_util.tree_leaves(state)
        if id(x) not in skip and jnp.issubdtype(x.dtype, jnp.floating)
    )
    return total / n_params


def _flops(compiled) -> float:
    analysis = compiled.cost_analysis()
    if isinstance(analysis, list | tuple):  # older JAX: one dict per device program
        analysis = analysis[0]
    return float(analysis.get("flops", 0.0))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20, help="calls between blocks")
    parser.add_argument("--trials", type=int, default=5)
    parser.add_argument("--min-seconds", type=float, default=0.5, help="per trial and side")
    parser.add_argument("--lopts", nargs="*", default=None, help=f"default: {DEFAULT_LOPTS}")
    parser.add_argument("--csv", default=None, help="also write the table here")
    args = parser.parse_args()

    key = jax.random.PRNGKey(0)
    params = _mlp_params(key)
    grads = jax.tree_util.tree_map(
        lambda p: 1e-2 * jax.random.normal(jax.random.PRNGKey(1), p.shape, p.dtype), params
    )
    loss = jnp.float32(2.3)
    n = sum(int(np.size(p)) for p in jax.tree_util.tree_leaves(params))
    print(f"MLP {'-'.join(map(str, SIZES))}: {n:,} parameters; {jax.devices()[0].device_kind}")
    peak_flops, peak_bytes = machine_peaks()
    peak_loop = loop_peak()
    print(f"measured peaks: {peak_flops / 1e9:.1f} GFLOP/s (matmul), "
          f"{peak_bytes / 1e9:.1f} GB/s (read + write), "
          f"{peak_loop / 1e9:.1f} GFLOP/s (XLA elementwise loop)", flush=True)  # fmt: skip

    tx = optax.adam(1e-3)

    @jax.jit
    def adam_step(params, state):
        updates, state = tx.update(grads, state, params)
        return optax.apply_updates(params, updates), state

    adam_carry = (params, tx.init(params))
    jax.block_until_ready(adam_step(*adam_carry))

    def measure(opt, state):
        def lopt_step(state, opt=opt):
            return (opt.update(state, grads, loss=loss),)

        start = time.perf_counter()
        step = jax.jit(lopt_step).lower(state).compile()
        compile_s = time.perf_counter() - start
        jax.block_until_ready(step(state))
        lopt_times, adam_times = [], []
        for _ in range(args.trials):
            lopt_times.append(_time(step, (state,), args.steps, args.min_seconds))
            adam_times.append(_time(adam_step, adam_carry, args.steps, args.min_seconds))
        return statistics.median(lopt_times), statistics.median(adam_times), compile_s, step

    rows = []
    for name in args.lopts or DEFAULT_LOPTS:
        lopt = lopt_base.get_learned_optimizer(name)
        theta = lopt.init(jax.random.PRNGKey(2))
        opt = lopt.opt_fn(theta)
        state = opt.init(params, num_steps=10_000)
        floats = _state_floats(state, params)
        forms = ("auto", "reference") if hasattr(lopt, "mlp_form") else ("-",)
        timed = {}
        for form in forms:
            if form != "-":
                lopt.mlp_form = form
            timed[form] = measure(opt, state)
            print(f"  {name} [{form}]: {timed[form][0] * 1e3:.2f} ms "
                  f"vs adam {timed[form][1] * 1e3:.2f} ms", flush=True)  # fmt: skip
        # FLOPs from the loop-free form; bytes: params (r+w), grads (r), state (r+w).
        flops = _flops(timed[forms[-1]][3]) / n
        nbytes = 4.0 * (3 + 2 * floats)
        limit = max(flops * n / peak_flops, nbytes * n / peak_bytes)
        bound = "compute" if flops * n / peak_flops > nbytes * n / peak_bytes else "memory"
        lo, ad, comp, _ = timed[forms[0]]
        row = {
            "learned optimizer": name,
            "ms/step": lo * 1e3,
            "adam ms/step": ad * 1e3,
            "ratio": lo / ad,
            "FLOPs/param": flops,
            "bytes/param": nbytes,
            "limit ms": limit * 1e3,
            "x limit": lo / limit,
            "bound": bound,
            "loop limit ms": flops * n / peak_loop * 1e3,
            "x loop limit": lo / (flops * n / peak_loop),
            "reference ms/step": timed["reference"][0] * 1e3 if "reference" in timed else None,
            "reference ratio": timed["reference"][0] / timed["reference"][1]
            if "reference" in timed
            else None,
            "speed-up": timed["reference"][0] / lo if "reference" in timed else None,
            "compile s": comp,
        }
        rows.append(row)

    adam_flops = _flops(adam_step.lower(*adam_carry).compile()) / n
    adam_ms = statistics.median(
        _time(adam_step, adam_carry, args.steps, args.min_seconds) for _ in range(args.trials)
    )
    adam_limit = max(adam_flops * n / peak_flops, 4.0 * 7 * n / peak_bytes)
    print(f"\noptax.adam: {adam_ms * 1e3:.2f} ms, {adam_flops:.0f} FLOPs/param, 28 bytes/param, "
          f"limit {adam_limit * 1e3:.2f} ms ({adam_ms / adam_limit:.1f}x limit)\n")  # fmt: skip

    def fmt(v, spec):
        return "-" if v is None else format(v, spec)

    print("| learned optimizer | ms/step | ratio to adam | FLOPs/param | bytes/param "
          "| limit ms | x limit | bound | loop limit ms | x loop limit | reference ms/step "
          "| reference ratio | speed-up | compile s |")  # fmt: skip
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | --- | ---: | ---: | ---: | ---: "
          "| ---: | ---: |")  # fmt: skip
    for r in rows:
        print(
            f"| `{r['learned optimizer']}` | {r['ms/step']:.1f} | {r['ratio']:.1f} "
            f"| {r['FLOPs/param']:.0f} | {r['bytes/param']:.0f} | {r['limit ms']:.2f} "
            f"| {r['x limit']:.1f} | {r['bound']} | {r['loop limit ms']:.2f} "
            f"| {r['x loop limit']:.1f} | {fmt(r['reference ms/step'], '.1f')} "
            f"| {fmt(r['reference ratio'], '.1f')} | {fmt(r['speed-up'], '.1f')} "
            f"| {r['compile s']:.1f} |"
        )
    if args.csv:
        with open(args.csv, "w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)


if __name__ == "__main__":
    main()
