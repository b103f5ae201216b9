"""Per-step cost of each learned optimizer architecture relative to ``optax.adam``.

    python benchmarks/bench_lopt_cost.py [--steps 20] [--trials 5] [--lopts MLPLOpt HyperV2]

The model is an MLP 784-512-512-512-10 (932,362 parameters in 8 tensors). For every
registered learned optimizer (default constructor arguments, initial theta) it times the
jitted ``opt.update(state, grads, loss=loss)`` alone (fixed gradients and loss, no
forward/backward pass), and in the same process the jitted optax step
``tx.update(grads, state, params)`` + ``optax.apply_updates`` of ``optax.adam(1e-3)``.
Trials interleave the two; each trial repeats ``--steps`` calls on its own output
(blocking after them) until ``--min-seconds`` have passed. Prints the median ms per
step of both, their ratio, the optimizer state's floats per parameter (accumulators
only) and the compile time.
"""

from __future__ import annotations

import argparse
import statistics
import time

import jax
import jax.numpy as jnp
import numpy as np
import optax

from learnopt.learned_optimizers import base as lopt_base

SIZES = (784, 512, 512, 512, 10)


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20, help="calls between blocks")
    parser.add_argument("--trials", type=int, default=5)
    parser.add_argument("--min-seconds", type=float, default=0.5, help="per trial and side")
    parser.add_argument("--lopts", nargs="*", default=None, help="default: all registered")
    args = parser.parse_args()

    key = jax.random.PRNGKey(0)
    params = _mlp_params(key)
    grads = jax.tree_util.tree_map(
        lambda p: 1e-2 * jax.random.normal(jax.random.PRNGKey(1), p.shape, p.dtype), params
    )
    loss = jnp.float32(2.3)
    n = sum(int(np.size(p)) for p in jax.tree_util.tree_leaves(params))
    print(f"MLP {'-'.join(map(str, SIZES))}: {n:,} parameters; {jax.devices()[0].device_kind}")

    tx = optax.adam(1e-3)

    @jax.jit
    def adam_step(params, state):
        updates, state = tx.update(grads, state, params)
        return optax.apply_updates(params, updates), state

    adam_carry = (params, tx.init(params))
    jax.block_until_ready(adam_step(*adam_carry))

    names = args.lopts or lopt_base.registered_learned_optimizers()
    rows = []
    for name in names:
        lopt = lopt_base.get_learned_optimizer(name)
        theta = lopt.init(jax.random.PRNGKey(2))
        opt = lopt.opt_fn(theta)
        state = opt.init(params, num_steps=10_000)

        def lopt_step(state, opt=opt):
            return (opt.update(state, grads, loss=loss),)

        step = jax.jit(lopt_step)
        start = time.perf_counter()
        step = step.lower(state).compile()
        compile_s = time.perf_counter() - start
        jax.block_until_ready(step(state))
        lopt_times, adam_times = [], []
        for _ in range(args.trials):
            lopt_times.append(_time(step, (state,), args.steps, args.min_seconds))
            adam_times.append(_time(adam_step, adam_carry, args.steps, args.min_seconds))
        lo, ad = statistics.median(lopt_times), statistics.median(adam_times)
        rows.append((name, lo * 1e3, ad * 1e3, lo / ad, _state_floats(state, params), compile_s))
        print(f"  {name}: {lo * 1e3:.2f} ms vs adam {ad * 1e3:.2f} ms", flush=True)

    print()
    print("| learned optimizer | ms/step | optax.adam ms/step | ratio | state floats/param "
          "| compile s |")  # fmt: skip
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for name, lo, ad, ratio, floats, comp in rows:
        print(f"| `{name}` | {lo:.2f} | {ad:.2f} | {ratio:.1f} | {floats:.1f} | {comp:.1f} |")


if __name__ == "__main__":
    main()
