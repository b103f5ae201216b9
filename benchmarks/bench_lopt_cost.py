"""Per-step cost of each learned optimizer vs ``optax.adam``, as a roofline.

    python benchmarks/bench_lopt_cost.py [--steps 20] [--trials 5] [--lopts MLPLOpt HyperV2]
        [--csv FILE] [--sizes 784 512 512 512 10] [--forms auto reference elementwise blocked]

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

``--sizes`` sets the MLP's widths (``--sizes 4096 4096 4096 4096 4096 4096 4096``: 100.7M
parameters in 12 tensors, the GPU check's model); ``--forms`` adds the per-element
forms to time besides ``auto`` and ``reference`` (their ms/step go in ``form ms``).
Off the CPU the peaks are measured at sizes that exceed a GPU's caches: an 8192^3
matmul, 2^28 floats (1 GiB) for bytes/s and 2^26 for the elementwise loop.
"""

from __future__ import annotations

import argparse
import csv
import json
import statistics
import subprocess
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np
import optax

from learnopt.learned_optimizers import base as lopt_base

SIZES = (784, 512, 512, 512, 10)
DEFAULT_LOPTS = (
    "LearnableAdam",
    "ScheduledAdam",
    "NNAdam",
    "AdafacMLPLOpt",
    "MLPNomLOpt",
    "Celo2",
    "HyperV2",
    "Celo",
    "CeloAdam",
    "MLPLOpt",
    "RNNMLPLOpt",
)


def _mlp_params(key: jax.Array, sizes=SIZES) -> dict[str, jax.Array]:
    params = {}
    for i, (a, b) in enumerate(zip(sizes[:-1], sizes[1:], strict=True)):
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


def _on_cpu() -> bool:
    return jax.default_backend() == "cpu"


def machine_peaks() -> tuple[float, float]:
    """Measured (FLOP/s, bytes/s): a large float32 matmul and a large read-modify-write."""
    n = 2048 if _on_cpu() else 8192
    a = jax.random.normal(jax.random.PRNGKey(0), (n, n), jnp.float32)
    flops = 2 * n**3 / _best_seconds(jax.jit(lambda x: x @ x), a)
    # Inside one program, so the buffers are reused (no first-touch page faults); off the
    # CPU, 1 GiB: far larger than a GPU's L2 cache.
    x, passes = jnp.ones((1 << (23 if _on_cpu() else 28),), jnp.float32), 20
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

    x = jax.random.normal(jax.random.PRNGKey(1), (1 << (22 if _on_cpu() else 26),), jnp.float32)
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
    parser.add_argument("--sizes", type=int, nargs="+", default=list(SIZES), help="MLP widths")
    parser.add_argument(
        "--forms",
        nargs="*",
        default=[],
        choices=("elementwise", "blocked", "fused"),
        help="per-element forms timed besides auto and reference",
    )
    parser.add_argument(
        "--isolate",
        type=float,
        default=None,
        metavar="SECONDS",
        help="time each learned optimizer in its own process, stopped after SECONDS (a "
        "slow compile or step then costs one row, and the log says in which phase)",
    )
    parser.add_argument("--peaks", type=float, nargs=3, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--peaks-only", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--emit-rows", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if len(args.sizes) < 2:
        parser.error("--sizes needs at least two widths (input and output)")
    if args.isolate is not None:
        _isolated(args)
        return
    if args.peaks_only:
        peaks = (*machine_peaks(), loop_peak())
        print("PEAKS " + " ".join(repr(p) for p in peaks), flush=True)
        return

    key = jax.random.PRNGKey(0)
    params = _mlp_params(key, args.sizes)
    grads = jax.tree_util.tree_map(
        lambda p: 1e-2 * jax.random.normal(jax.random.PRNGKey(1), p.shape, p.dtype), params
    )
    loss = jnp.float32(2.3)
    n = sum(int(np.size(p)) for p in jax.tree_util.tree_leaves(params))
    print(f"MLP {'-'.join(map(str, args.sizes))}: {n:,} parameters; "
          f"{jax.devices()[0].device_kind}", flush=True)  # fmt: skip
    if args.peaks:
        peak_flops, peak_bytes, peak_loop = args.peaks
    else:
        peak_flops, peak_bytes = machine_peaks()
        peak_loop = loop_peak()
    print(f"measured peaks: {peak_flops / 1e9:.1f} GFLOP/s (matmul), "
          f"{peak_bytes / 1e9:.1f} GB/s (read + write), "
          f"{peak_loop / 1e9:.1f} GFLOP/s (XLA elementwise loop)", flush=True)  # fmt: skip

    tx = optax.adam(1e-3)

    # The gradients are arguments of every timed program, never closed over: a closed-over
    # array is a compile-time constant that XLA embeds in the program (400 MB at 100M
    # parameters: compiles of minutes, most of all on a GPU).
    @jax.jit
    def adam_jit(params, state, grads):
        updates, state = tx.update(grads, state, params)
        return optax.apply_updates(params, updates), state

    def adam_step(params, state):
        return adam_jit(params, state, grads)

    adam_carry = (params, tx.init(params))
    jax.block_until_ready(adam_step(*adam_carry))

    def measure(opt, state, with_adam=True):
        def lopt_step(state, grads, opt=opt):
            return (opt.update(state, grads, loss=loss),)

        start = time.perf_counter()
        compiled = jax.jit(lopt_step).lower(state, grads).compile()
        compile_s = time.perf_counter() - start

        def step(state):
            return compiled(state, grads)

        print(f"    compiled in {compile_s:.1f} s; first call ...", flush=True)
        start = time.perf_counter()
        jax.block_until_ready(step(state))
        print(f"    first call {time.perf_counter() - start:.2f} s; timing ...", flush=True)
        lopt_times, adam_times = [], []
        for _ in range(args.trials):
            lopt_times.append(_time(step, (state,), args.steps, args.min_seconds))
            if with_adam:  # interleaved, in the same conditions
                adam_times.append(_time(adam_step, adam_carry, args.steps, args.min_seconds))
        adam = statistics.median(adam_times) if adam_times else None
        return statistics.median(lopt_times), adam, compile_s, compiled

    def one(name):
        lopt = lopt_base.get_learned_optimizer(name)
        theta = lopt.init(jax.random.PRNGKey(2))
        opt = lopt.opt_fn(theta)
        state = opt.init(params, num_steps=10_000)
        floats = _state_floats(state, params)
        forms = ("auto", *args.forms, "reference") if hasattr(lopt, "mlp_form") else ("-",)
        timed = {}
        for form in forms:
            if form != "-":
                lopt.mlp_form = form
            print(f"  {name} [{form}]: compiling ...", flush=True)
            try:
                timed[form] = measure(opt, state, with_adam=form in ("auto", "reference", "-"))
            except Exception as err:  # a form that does not apply (fused off the CPU)
                if form in ("auto", "reference", "-"):
                    raise
                print(f"  {name} [{form}]: not run ({type(err).__name__}: {str(err)[:200]})")
                continue
            adam_ms = "" if timed[form][1] is None else f" vs adam {timed[form][1] * 1e3:.2f} ms"
            print(f"  {name} [{form}]: {timed[form][0] * 1e3:.2f} ms{adam_ms}", flush=True)
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
            "form ms": " ".join(
                f"{f}={timed[f][0] * 1e3:.2f}" for f in forms if f in timed and f != "-"
            ),
        }
        return row

    rows = []
    for name in args.lopts or DEFAULT_LOPTS:
        try:
            rows.append(one(name))
        except Exception as err:  # e.g. out of device memory: the other rows still count
            print(f"  {name}: failed ({type(err).__name__}: {str(err)[:300]})", flush=True)

    adam_flops = _flops(adam_jit.lower(*adam_carry, grads).compile()) / n
    adam_ms = statistics.median(
        _time(adam_step, adam_carry, args.steps, args.min_seconds) for _ in range(args.trials)
    )
    adam_limit = max(adam_flops * n / peak_flops, 4.0 * 7 * n / peak_bytes)
    adam_line = (
        f"optax.adam: {adam_ms * 1e3:.2f} ms, {adam_flops:.0f} FLOPs/param, 28 bytes/param, "
        f"limit {adam_limit * 1e3:.2f} ms ({adam_ms / adam_limit:.1f}x limit)"
    )
    if args.emit_rows:
        for r in rows:
            print("ROW" + json.dumps(r), flush=True)
        print("ADAM" + adam_line, flush=True)
        return
    _print_table(rows, adam_line, args.csv)


def _isolated(args) -> None:
    """``--isolate``: the peaks in one process, then each learned optimizer in its own."""
    base = [sys.executable, __file__, "--sizes", *map(str, args.sizes),
            "--trials", str(args.trials), "--steps", str(args.steps),
            "--min-seconds", str(args.min_seconds)]  # fmt: skip
    if args.forms:
        base += ["--forms", *args.forms]

    def child(extra: list[str]) -> list[str]:
        try:
            proc = subprocess.run(
                base + extra, capture_output=True, text=True, timeout=args.isolate
            )
            out, status = proc.stdout, f"status {proc.returncode}"
            if proc.returncode:
                out += proc.stderr[-1500:]
        except subprocess.TimeoutExpired as err:
            out = err.stdout.decode() if isinstance(err.stdout, bytes) else (err.stdout or "")
            status = f"stopped after {args.isolate:.0f} s"
        lines = out.splitlines()
        for line in lines:
            if not line.startswith(("ROW", "ADAM", "PEAKS")):
                print(line, flush=True)
        print(f"  ({' '.join(extra[:2])}: {status})", flush=True)
        return lines

    peaks = [x for x in child(["--peaks-only"]) if x.startswith("PEAKS")]
    if not peaks:
        raise SystemExit("bench_lopt_cost: the peaks could not be measured")
    rows, adam_line = [], None
    for name in args.lopts or DEFAULT_LOPTS:
        lines = child(["--lopts", name, "--emit-rows", "--peaks", *peaks[0].split()[1:]])
        rows += [json.loads(x[3:]) for x in lines if x.startswith("ROW")]
        adam_line = next((x[4:] for x in lines if x.startswith("ADAM")), adam_line)
        _write_csv(rows, args.csv)  # after each row: a run stopped from outside keeps them
    _print_table(rows, adam_line or "optax.adam: not measured", args.csv)


def _write_csv(rows: list[dict], csv_path: str | None) -> None:
    if csv_path and rows:
        with open(csv_path, "w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)


def _print_table(rows: list[dict], adam_line: str, csv_path: str | None) -> None:
    print(f"\n{adam_line}\n")

    def fmt(v, spec):
        return "-" if v is None else format(v, spec)

    print("| learned optimizer | ms/step | ratio to adam | FLOPs/param | bytes/param "
          "| limit ms | x limit | bound | loop limit ms | x loop limit | reference ms/step "
          "| reference ratio | speed-up | compile s | form ms |")  # fmt: skip
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | --- | ---: | ---: | ---: | ---: "
          "| ---: | ---: | --- |")  # fmt: skip
    for r in rows:
        print(
            f"| `{r['learned optimizer']}` | {r['ms/step']:.2f} | {r['ratio']:.1f} "
            f"| {r['FLOPs/param']:.0f} | {r['bytes/param']:.0f} | {r['limit ms']:.2f} "
            f"| {r['x limit']:.1f} | {r['bound']} | {r['loop limit ms']:.2f} "
            f"| {r['x loop limit']:.1f} | {fmt(r['reference ms/step'], '.2f')} "
            f"| {fmt(r['reference ratio'], '.1f')} | {fmt(r['speed-up'], '.1f')} "
            f"| {r['compile s']:.1f} | {r['form ms'] or '-'} |"
        )
    _write_csv(rows, csv_path)


if __name__ == "__main__":
    main()
