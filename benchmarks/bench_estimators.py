"""Time per outer step: learnopt vs a hand-written single-jit JAX version of the same maths.

Task: ImageMLP_Digits8_Relu32 (8x8 digits, MLP 64-32-10, batch 128), LearnableAdam,
unroll 4, outer Adam(1e-2). ``full_grad`` with 1 task is the notes' walkthrough.
ES-type estimators use 8 antithetic pairs. Both sides fetch their batches with the same
host iterator inside the timed loop. Also measures compile time for unroll 100 vs 10.

    python benchmarks/bench_estimators.py            # all estimators
    python benchmarks/bench_estimators.py --only full_grad --steps 500

Prints one row per estimator (ms/step for both, ratio = learnopt / hand-written) and
writes ``benchmarks/results/estimators.csv``.
"""

from __future__ import annotations

import argparse
import csv
import functools
import os
import sys
import time

import jax
import numpy as np
import tqdm

sys.path.insert(0, os.path.dirname(__file__))

import _handwritten as hw  # noqa: E402

from learnopt.learned_optimizers import base as lopt_base  # noqa: E402
from learnopt.optimizers import base as opt_base  # noqa: E402
from learnopt.outer_trainers import gradient_learner  # noqa: E402
from learnopt.run import build, config  # noqa: E402
from learnopt.tasks import base as tasks_base  # noqa: E402

STD = 0.01
LENGTH = 200  # inner run length for the truncated estimators


def make_learner(kind: str, task, unroll: int, num_tasks: int):
    lopt = lopt_base.LearnableAdam()
    # ``unroll``: the whole run for the full-run estimators, the truncation for the others.
    if kind in config.FULL_TRAINERS:
        lengths = {"total_length": unroll}
    else:
        lengths = {"trunc_length": unroll, "total_length": LENGTH}
    est = build.make_estimator(kind, task, lopt, num_tasks=num_tasks, std=STD, **lengths)
    # The hand-written side staggers starts in [0, 50): use the same offsets here.
    est.truncated_step.random_initial_iteration_offset = 0 if kind in config.FULL_TRAINERS else 50
    return gradient_learner.SingleMachineGradientLearner(lopt, [est], opt_base.Adam(1e-2))


def make_handwritten(kind: str, key):
    length = np.int32(LENGTH)
    if kind == "full_grad":
        step = jax.jit(hw.full_grad_step)
        return (hw.outer_init(),), lambda s, k, d: step(*s, k, d)[:1]
    if kind == "full_es":
        step = jax.jit(functools.partial(hw.full_es_step, std=STD))
        return (hw.outer_init(),), lambda s, k, d: step(*s, k, d)[:1]
    fn = {"tbptt": hw.tbptt_step, "tes": hw.tes_step, "pes": hw.pes_step, "nres": hw.nres_step}[
        kind
    ]
    kwargs = {"length": length} if kind == "tbptt" else {"length": length, "std": STD}
    step = jax.jit(functools.partial(fn, **kwargs))
    return None, step


def time_learnopt(learner, steps: int, key) -> float:
    state = learner.init(key)
    state, loss, _ = learner.update(state, key)  # compile
    jax.block_until_ready(loss)
    keys = list(jax.random.split(key, steps))  # slice outside the timed loop
    t0 = time.perf_counter()
    for k in keys:
        state, loss, _ = learner.update(state, k)
    jax.block_until_ready(state)
    return (time.perf_counter() - t0) / steps * 1e3


def time_handwritten(kind, ts, steps: int, num_tasks: int, unroll: int, key) -> float:
    init, step = make_handwritten(kind, key)

    def fetch():
        return ts.get_batch(unroll)["train"]

    if init is not None:  # full-run estimators: state is just the outer state
        state = init
        out = step(state, key, fetch())
        run = lambda s, k: step(s, k, fetch())
    else:
        outer = hw.outer_init()
        est = hw.init_truncated(key, num_tasks, kind, STD)
        state = (outer, est)
        out = step(outer, est, key, fetch())
        run = lambda s, k: step(s[0], s[1], k, fetch())[:2]
    jax.block_until_ready(out)
    keys = list(jax.random.split(key, steps))  # slice outside the timed loop
    t0 = time.perf_counter()
    for k in keys:
        state = run(state, k)
    jax.block_until_ready(state)
    return (time.perf_counter() - t0) / steps * 1e3


def compile_seconds(kind: str, task, unroll: int, num_tasks: int) -> float:
    learner = make_learner(kind, task, unroll, num_tasks)
    key = jax.random.PRNGKey(0)
    state = learner.init(key)
    datas = learner.get_datas()
    t0 = time.perf_counter()
    jax.jit(learner._update).lower(state, key, datas).compile()
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--only", nargs="*", default=None)
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--trials", type=int, default=3)
    ap.add_argument("--no-compile-bench", action="store_true")
    args = ap.parse_args()
    task = tasks_base.get_task("ImageMLP_Digits8_Relu32")
    kinds = args.only or ["full_grad", "tbptt", "full_es", "tes", "pes", "nres"]
    rows = []
    print(f"backend={jax.default_backend()} devices={jax.devices()}")
    print(f"{'estimator':10s} {'tasks':>5s} {'learnopt ms':>12s} {'hand ms':>9s} {'ratio':>6s}")
    for kind in kinds:
        num_tasks = 1 if kind == "full_grad" else 8
        learner = make_learner(kind, task, 4, num_tasks)
        ts = learner.gradient_estimators[0].truncated_step
        key = jax.random.PRNGKey(0)
        lo, hand = [], []
        for _ in tqdm.trange(args.trials, desc=kind, leave=False):  # interleaved trials
            lo.append(time_learnopt(learner, args.steps, key))
            hand.append(time_handwritten(kind, ts, args.steps, num_tasks, 4, key))
        lo_ms, hand_ms = float(np.median(lo)), float(np.median(hand))
        row = {
            "estimator": kind,
            "num_tasks": num_tasks,
            "learnopt_ms": round(lo_ms, 4),
            "handwritten_ms": round(hand_ms, 4),
            "ratio": round(lo_ms / hand_ms, 3),
        }
        print(f"{kind:10s} {num_tasks:5d} {lo_ms:12.3f} {hand_ms:9.3f} {row['ratio']:6.2f}")
        rows.append(row)
    if not args.no_compile_bench:
        for kind in ("tbptt", "pes"):
            c10 = compile_seconds(kind, task, 10, 8)
            c100 = compile_seconds(kind, task, 100, 8)
            print(
                f"compile {kind}: unroll 10 {c10:.2f}s, unroll 100 {c100:.2f}s, "
                f"ratio {c100 / c10:.2f}"
            )
            rows.append(
                {
                    "estimator": f"compile_{kind}_u100_vs_u10",
                    "num_tasks": 8,
                    "learnopt_ms": round(c100 * 1e3, 1),
                    "handwritten_ms": round(c10 * 1e3, 1),
                    "ratio": round(c100 / c10, 3),
                }
            )
    out = os.path.join(os.path.dirname(__file__), "results")
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "estimators.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)


if __name__ == "__main__":
    main()
