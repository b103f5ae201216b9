"""The notes' meta-training loop as written (eager outer Adam) vs one jitted step.

The notes' loop calls ``theta_opt.update(theta_opt_state, meta_grads, ml)`` from Python
every meta-step, between jitted meta-gradient calls. Side A runs that loop verbatim
(ImageMLP_Digits8_Relu32 instead of the notes' Fashion-MNIST task, as it is embedded;
the only addition is a trace counter on ``meta_loss_fn``). Side B does the same maths
per meta-step as one jitted program (key split, meta-gradient, outer Adam update).
Both fetch their batch with the same host iterator and keep the same Python lists
inside the timed loop.

    python benchmarks/bench_eager.py                # 300 timed meta-steps per side
    python benchmarks/bench_eager.py --steps 1000

Two more sides isolate the optimizer's share: the notes' loop with
``jax.jit(theta_opt.update)`` written by hand, and with the update run op by op
(``eager_jit = False``, what the loop cost before eager calls were compiled). Prints
ms/meta-step for every side, the ratios (target for as written / one jitted step:
<= 1.3), the eager update on its own (cached program vs op by op) and how often the
meta-gradient compiled. Data is prepared in a temporary LEARNOPT_DATA_DIR.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time

import jax
import jax.numpy as jnp

from learnopt.learned_optimizers import base as lopt_base
from learnopt.optimizers import _eager
from learnopt.optimizers import base as opt_base
from learnopt.tasks.fixed import image_mlp
from learnopt.testing import TraceCounter


def notes_side(task, lopt, counter: TraceCounter, update: str = "eager"):
    """The notes' meta_loss_fn and loop body, verbatim but for the trace counter.

    ``update`` selects how ``theta_opt.update`` runs: ``"eager"`` (as written: learnopt's
    cached program), ``"plain"`` (op by op, ``eager_jit = False``: what the notes' code
    cost before) or ``"jit"`` (``jax.jit(theta_opt.update)`` by hand).
    """

    @jax.jit
    @counter.wrap
    def meta_loss_fn(theta, key, batch, meta_loss):
        opt = lopt.opt_fn(theta)
        key, key1 = jax.random.split(key)
        params = task.init(key1)
        opt_state = opt.init(params)
        for i in range(4):  # noqa: B007
            params = opt.get_params(opt_state)
            key, key1 = jax.random.split(key)
            l, grads = jax.value_and_grad(task.loss)(opt_state.params, key1, batch)  # noqa: E741
            meta_loss += l
            opt_state = opt.update(opt_state, grads, l)
        params, state = opt.get_params_state(opt_state)
        key1, key = jax.random.split(key)
        final_loss = task.loss(params, key1, batch)  # noqa: F841
        return meta_loss

    theta_opt = opt_base.Adam(1e-2)
    if update == "plain":
        theta_opt.eager_jit = False
    update_fn = jax.jit(theta_opt.update) if update == "jit" else theta_opt.update
    key = jax.random.PRNGKey(0)
    key, key1 = jax.random.split(key)
    theta = lopt.init(key1)
    theta_opt_state = theta_opt.init(theta)
    meta_losses, learning_rates = [], []
    meta_value_and_grad = jax.jit(jax.value_and_grad(meta_loss_fn))
    carry = {"key": key, "state": theta_opt_state}

    def step():
        key, theta_opt_state = carry["key"], carry["state"]
        batch = next(task.datasets.train)
        key, key1 = jax.random.split(key)
        theta = theta_opt.get_params(theta_opt_state)
        meta_loss = jnp.asarray(0, dtype=jnp.int32)
        ml, meta_grads = meta_value_and_grad(theta_opt_state.params, key1, batch, meta_loss)
        theta_opt_state = update_fn(theta_opt_state, meta_grads, ml)
        meta_losses.append(ml)
        learning_rates.append(theta["log_lr"])
        carry["key"], carry["state"] = key, theta_opt_state

    return step, carry, meta_losses


def jitted_side(task, lopt):
    """The same maths, one jitted program per meta-step."""

    def meta_loss_fn(theta, key, batch, meta_loss):
        opt = lopt.opt_fn(theta)
        key, key1 = jax.random.split(key)
        opt_state = opt.init(task.init(key1))
        for _ in range(4):
            key, key1 = jax.random.split(key)
            l, grads = jax.value_and_grad(task.loss)(opt_state.params, key1, batch)  # noqa: E741
            meta_loss += l
            opt_state = opt.update(opt_state, grads, l)
        return meta_loss

    theta_opt = opt_base.Adam(1e-2)

    @jax.jit
    def meta_step(theta_opt_state, key, batch):
        key, key1 = jax.random.split(key)
        meta_loss = jnp.asarray(0, dtype=jnp.int32)
        ml, g = jax.value_and_grad(meta_loss_fn)(theta_opt_state.params, key1, batch, meta_loss)
        return theta_opt.update(theta_opt_state, g, ml), key, ml

    key = jax.random.PRNGKey(0)
    key, key1 = jax.random.split(key)
    carry = {"key": key, "state": theta_opt.init(lopt.init(key1))}
    meta_losses, learning_rates = [], []

    def step():
        batch = next(task.datasets.train)
        theta = theta_opt.get_params(carry["state"])
        carry["state"], carry["key"], ml = meta_step(carry["state"], carry["key"], batch)
        meta_losses.append(ml)
        learning_rates.append(theta["log_lr"])

    return step, carry, meta_losses


def time_steps(step, carry, n: int) -> float:
    """Milliseconds per call of ``step`` over ``n`` calls (after the state is ready)."""
    jax.block_until_ready(carry["state"])
    t0 = time.perf_counter()
    for _ in range(n):
        step()
    jax.block_until_ready(carry["state"])
    return (time.perf_counter() - t0) / n * 1e3


def time_update_alone(n: int) -> tuple[float, float]:
    """ms per eager ``Adam(1e-2).update`` on LearnableAdam's theta: cached vs plain path."""
    theta = lopt_base.LearnableAdam().init(jax.random.PRNGKey(0))
    grads = jax.tree_util.tree_map(lambda x: x * 0.1, theta)
    loss = jnp.float32(1.0)
    out = []
    for eager_jit in (True, False):
        opt = opt_base.Adam(1e-2)
        opt.eager_jit = eager_jit
        state = opt.init(theta)
        for _ in range(_eager.UPDATE_WARMUP + 2):  # past the op-by-op warm-up calls
            state = opt.update(state, grads, loss)
        jax.block_until_ready(state)
        t0 = time.perf_counter()
        for _ in range(n):
            state = opt.update(state, grads, loss)
        jax.block_until_ready(state)
        out.append((time.perf_counter() - t0) / n * 1e3)
    return out[0], out[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=300, help="timed meta-steps per round")
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds per side")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as data_dir:
        os.environ["LEARNOPT_DATA_DIR"] = data_dir
        task = image_mlp.ImageMLP_Digits8_Relu32()
        lopt = lopt_base.LearnableAdam()
        counter = TraceCounter()
        sides = {
            "notes' loop as written (eager update)": notes_side(task, lopt, counter)[:2],
            "one jitted meta-step": jitted_side(task, lopt)[:2],
            "notes' loop, update jitted by hand": notes_side(task, lopt, TraceCounter(), "jit")[:2],
            "notes' loop, update op by op (before)": notes_side(
                task, lopt, TraceCounter(), "plain"
            )[:2],
        }
        for step, _ in sides.values():  # compile and warm up every side
            for _ in range(_eager.UPDATE_WARMUP + 4):
                step()
        times: dict[str, list[float]] = {name: [] for name in sides}
        for _ in range(args.rounds):  # alternate, so load changes hit every side
            for name, (step, carry) in sides.items():
                times[name].append(time_steps(step, carry, args.steps))
        ms = {name: statistics.median(t) for name, t in times.items()}
        cached, plain = time_update_alone(200)

    names = list(ms)
    for name in names:
        print(f"{name:40s}: {ms[name]:7.3f} ms/meta-step")
    print(f"ratio as written / one jitted step      : {ms[names[0]] / ms[names[1]]:7.2f}x "
          "(target <= 1.3)")  # fmt: skip
    print(f"ratio as written / update jitted by hand: {ms[names[0]] / ms[names[2]]:7.2f}x")
    print(f"ratio op by op (before) / one jitted    : {ms[names[3]] / ms[names[1]]:7.2f}x")
    print(f"eager Adam.update alone                 : {cached:7.3f} ms cached, {plain:.3f} ms "
          "op by op")  # fmt: skip
    print(f"meta_loss_fn traces (as written)        : {counter.count} (want 1)")


if __name__ == "__main__":
    main()
