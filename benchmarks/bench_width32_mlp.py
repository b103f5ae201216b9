"""The floor under MLPLOpt's update on XLA:CPU: its per-element MLP alone vs ``optax.adam``.

    python benchmarks/bench_width32_mlp.py [--trials 7] [--forms blocked reference]

``MLPLOpt`` (hidden 32, two hidden layers) runs one MLP per parameter: 5 per-element
inputs (gradient, parameter, three momenta; its 14 time features are the same for every
element and fold into the first bias), ``5 -> 32 -> 32 -> 2``, i.e. 1,248
multiply-adds = 2,496 FLOPs per parameter, most of them in the 32x32 hidden layer.
This script times that MLP alone (normalized inputs, no momentum update, no step) over
the tensors of the benchmark model of ``bench_lopt_cost.py`` (932,362 parameters), in
each of :mod:`learnopt.learned_optimizers.blocks.per_element`'s forms, and, in the same process
with interleaved trials, ``optax.adam``'s update and a 2048^3 float32 matmul (the
machine's matmul peak). It prints ms, GFLOP/s and the ratio to ``optax.adam``: the MLP
alone is a lower bound on MLPLOpt's ratio in that form (everything else in the update
adds to it).
"""

from __future__ import annotations

import argparse
import statistics
import time

import jax
import jax.numpy as jnp
import numpy as np
import optax

from learnopt.learned_optimizers.blocks import per_element
from learnopt.learned_optimizers.mlp_lopt import MLPLOpt

SIZES = (784, 512, 512, 512, 10)
#: Multiply-adds per element of the 5 -> 32 -> 32 -> 2 MLP (the folded time features
#: cost one bias per tensor).
MACS = 5 * 32 + 32 * 32 + 32 * 2


def _shapes() -> list[tuple[int, ...]]:
    out = []
    for a, b in zip(SIZES[:-1], SIZES[1:], strict=True):
        out += [(a, b), (b,)]
    return out


def _timed(fn, args, trials_out: list[float], min_time: float = 0.3) -> None:
    jax.block_until_ready(fn(*args))
    n, start = 0, time.perf_counter()
    while True:
        jax.block_until_ready(fn(*args))
        n += 1
        elapsed = time.perf_counter() - start
        if elapsed >= min_time:
            trials_out.append(elapsed / n * 1e3)
            return


def main() -> None:
    """Times the forms, prints one Markdown table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--trials", type=int, default=7)
    parser.add_argument("--forms", nargs="+", default=["blocked", "reference", "auto"])
    args = parser.parse_args()

    lopt = MLPLOpt()
    theta = lopt.init(jax.random.PRNGKey(0))
    layers = [
        (theta[f"mlp/~/linear_{i}"]["w"], theta[f"mlp/~/linear_{i}"]["b"])
        for i in range(lopt.hidden_layers + 1)
    ]
    n_tensor_inputs = int(layers[0][0].shape[0]) - 5
    keys = iter(jax.random.split(jax.random.PRNGKey(1), 64))
    shapes = _shapes()
    data = [
        (
            jax.random.normal(next(keys), (*s, 1)),
            jax.random.normal(next(keys), (*s, 1)),
            jax.random.normal(next(keys), (*s, 3)),
        )
        for s in shapes
    ]
    tensor_inputs = jnp.linspace(-1.0, 1.0, n_tensor_inputs)
    count = sum(int(np.prod(s)) for s in shapes)

    def mlp_of(form):
        def run(data):
            outs = []
            for s, groups in zip(shapes, data, strict=True):
                d, m = per_element.mlp(
                    layers,
                    list(groups),
                    s,
                    tensor_inputs=tensor_inputs,
                    norm_axes=tuple(range(len(s))),
                    form=form,
                )
                outs.append(jnp.sum(d) + jnp.sum(m))
            return sum(outs)

        return jax.jit(run)

    params = {f"t{i}": jnp.zeros(s) for i, s in enumerate(shapes)}
    grads = {f"t{i}": jnp.ones(s) * 1e-3 for i, s in enumerate(shapes)}
    adam = optax.adam(1e-3)

    @jax.jit
    def adam_step(params, state):
        updates, state = adam.update(grads, state, params)
        return optax.apply_updates(params, updates), state

    big = jax.random.normal(next(keys), (2048, 2048))
    matmul = jax.jit(lambda a: a @ a)

    programs = {"optax.adam": (adam_step, (params, adam.init(params)))}
    programs["matmul 2048^3"] = (matmul, (big,))
    for form in args.forms:
        programs[f"MLP, form {form!r}"] = (mlp_of(form), (data,))
    times: dict[str, list[float]] = {name: [] for name in programs}
    for trial in range(args.trials):
        for name, (fn, fn_args) in programs.items():
            _timed(fn, fn_args, times[name])
        print(f"trial {trial + 1}/{args.trials} done", flush=True)

    med = {name: statistics.median(t) for name, t in times.items()}
    peak = 2 * 2048**3 / (med["matmul 2048^3"] * 1e-3) / 1e9
    print(f"\n{count:,} parameters; {2 * MACS} FLOPs per parameter in the MLP")
    print(f"matmul peak {peak:.1f} GFLOP/s; optax.adam {med['optax.adam']:.2f} ms\n")
    print("| program | ms | GFLOP/s | share of matmul peak | ratio to optax.adam |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for name in programs:
        if name.startswith("MLP"):
            gflops = 2 * MACS * count / (med[name] * 1e-3) / 1e9
            ratio = med[name] / med["optax.adam"]
            print(
                f"| {name} | {med[name]:.1f} | {gflops:.1f} | {gflops / peak:.0%} | {ratio:.1f} |"
            )
    limit = 2 * MACS * count / (peak * 1e9) * 1e3
    print(
        f"\nat the matmul peak the MLP would take {limit:.1f} ms = "
        f"{limit / med['optax.adam']:.1f}x optax.adam"
    )


if __name__ == "__main__":
    main()
