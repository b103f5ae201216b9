"""A learned optimizer's update at a git revision vs the working tree, in one process.

    python benchmarks/bench_lopt_ab.py --rev main [--lopts AdafacMLPLOpt MLPNomLOpt]
        [--trials 5] [--steps 20] [--min-seconds 0.5]

On a shared machine the load moves every timing, so two benchmark runs minutes apart
cannot tell a 10% change from the load's drift. Here the revision's ``learnopt`` package
is extracted (``git archive``) into a temporary folder under another name
(``learnopt_<rev>``, its imports rewritten), and both versions' jitted updates run in
the same process, with the same parameters, gradients and theta (the benchmark model of
``bench_lopt_cost.py``: 932,362 parameters, default constructor, initial theta), their
trials interleaved (alternating which side runs first) with those of ``optax.adam``:
the load falls on all three alike. Two identical versions read 0.87-1.20 trial by trial
on the loaded 2-core machine (median 1.05 over 8 trials): take many trials.
Printed per learned optimizer: the median ms per update of each side, each side's ratio
to ``optax.adam`` in the same trials, new / old (of the medians, of each trial, and of
the fastest trials: the least loaded), the process's CPU time per update (all threads:
the work done, which the load moves less than the wall time), and the largest
difference between the two sides' first steps, relative to each leaf's largest step: a
change that keeps the maths differs by float32 rounding of the new params (their
spacing over the step: about 1e-5 here).
"""

from __future__ import annotations

import argparse
import importlib
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

import jax
import jax.numpy as jnp
import numpy as np
import optax

sys.path.insert(0, os.path.dirname(__file__))

from bench_lopt_cost import _mlp_params  # noqa: E402

import learnopt  # noqa: E402
from learnopt.learned_optimizers import base as lopt_base  # noqa: E402

_IMPORT = re.compile(r"\blearnopt(?=[.\s]|$)")


def import_revision(rev: str, folder: str):
    """``learnopt`` as it is at git revision ``rev``, imported as ``learnopt_<rev>``.

    Args:
      rev: a git revision of the repository this file is in.
      folder: where to extract it (the caller removes it).

    Returns:
      The revision's ``learnopt.learned_optimizers.base`` module (its registry).
    """
    root = os.path.dirname(os.path.dirname(os.path.abspath(learnopt.__file__)))
    name = "learnopt_" + re.sub(r"\W", "_", rev)
    archive = subprocess.run(
        ["git", "-C", root, "archive", rev, "learnopt"], check=True, capture_output=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", folder], input=archive, check=True)
    os.rename(os.path.join(folder, "learnopt"), os.path.join(folder, name))
    for dirpath, _, files in os.walk(os.path.join(folder, name)):
        for f in files:
            if f.endswith(".py"):
                path = os.path.join(dirpath, f)
                with open(path) as fh:
                    text = fh.read()
                lines = [
                    _IMPORT.sub(name, line) if re.match(r"\s*(from|import)\s", line) else line
                    for line in text.splitlines(keepends=True)
                ]
                with open(path, "w") as fh:
                    fh.write("".join(lines))
    sys.path.insert(0, folder)
    return importlib.import_module(f"{name}.learned_optimizers.base")


def _time(step, carry, steps: int, min_seconds: float) -> tuple[float, float]:
    """(wall, CPU) seconds per call of ``carry = step(*carry)``, ``steps`` calls at a time,
    for at least ``min_seconds``. The CPU time is the whole process's (every XLA thread):
    it counts the work done, less moved than the wall time by other jobs on the machine."""
    calls, start, cpu_start = 0, time.perf_counter(), time.process_time()
    while True:
        for _ in range(steps):
            carry = step(*carry)
        jax.block_until_ready(carry)
        calls += steps
        elapsed = time.perf_counter() - start
        if elapsed >= min_seconds:
            return elapsed / calls, (time.process_time() - cpu_start) / calls


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rev", default="main", help="the git revision to compare against")
    parser.add_argument("--lopts", nargs="*", default=["AdafacMLPLOpt", "MLPNomLOpt"])
    parser.add_argument("--trials", type=int, default=5)
    parser.add_argument("--steps", type=int, default=20, help="calls between blocks")
    parser.add_argument("--min-seconds", type=float, default=0.5, help="per trial and side")
    args = parser.parse_args()

    params = _mlp_params(jax.random.PRNGKey(0))
    grads = jax.tree_util.tree_map(
        lambda p: 1e-2 * jax.random.normal(jax.random.PRNGKey(1), p.shape, p.dtype), params
    )
    loss = jnp.float32(2.3)
    tx = optax.adam(1e-3)

    @jax.jit
    def adam_step(params, state):
        updates, state = tx.update(grads, state, params)
        return optax.apply_updates(params, updates), state

    adam_carry = (params, tx.init(params))
    jax.block_until_ready(adam_step(*adam_carry))

    with tempfile.TemporaryDirectory() as folder:
        old_base = import_revision(args.rev, folder)
        print(f"old: {args.rev} ({old_base.__name__.split('.')[0]}); new: {learnopt.__file__}")
        print(f"load average at start: {os.getloadavg()}", flush=True)
        for name in args.lopts:
            sides = {}
            for side, base in (("old", old_base), ("new", lopt_base)):
                lopt = base.get_learned_optimizer(name)
                theta = lopt.init(jax.random.PRNGKey(2))
                opt = lopt.opt_fn(theta)
                state = opt.init(params, num_steps=10_000)
                step = jax.jit(lambda s, opt=opt: (opt.update(s, grads, loss=loss),))
                step = step.lower(state).compile()
                sides[side] = step, state, step(state)[0].params
            times = {"old": [], "new": [], "adam": []}
            cpu = {"old": [], "new": [], "adam": []}
            for trial in range(args.trials):
                # Alternating which side runs first: neither is always the first in a trial.
                for side in ("old", "new") if trial % 2 == 0 else ("new", "old"):
                    step, state, _ = sides[side]
                    for key, fn, carry in ((side, step, (state,)), ("adam", adam_step, adam_carry)):
                        wall, used = _time(fn, carry, args.steps, args.min_seconds)
                        times[key].append(wall)
                        cpu[key].append(used)
            med = {k: statistics.median(v) for k, v in times.items()}
            med_cpu = {k: statistics.median(v) for k, v in cpu.items()}
            old_p = jax.tree_util.tree_leaves(sides["old"][2])
            new_p = jax.tree_util.tree_leaves(sides["new"][2])
            start = jax.tree_util.tree_leaves(params)
            # Each leaf's step difference relative to its largest step (float64 here).
            rel = max(
                float(np.max(np.abs(a - b)) / np.max(np.abs(a - p)))
                for a, b, p in (
                    (
                        np.asarray(a, np.float64),
                        np.asarray(b, np.float64),
                        np.asarray(p, np.float64),
                    )
                    for a, b, p in zip(old_p, new_p, start, strict=True)
                )
            )
            print(
                f"{name}: old {med['old'] * 1e3:.2f} ms ({med['old'] / med['adam']:.1f}x adam), "
                f"new {med['new'] * 1e3:.2f} ms ({med['new'] / med['adam']:.1f}x adam), "
                f"new/old {med['new'] / med['old']:.3f} (per-trial ratios "
                + ", ".join(f"{n / o:.2f}" for n, o in zip(times["new"], times["old"], strict=True))
                + f"); min old {min(times['old']) * 1e3:.2f} ms, new "
                f"{min(times['new']) * 1e3:.2f} ms, new/old "
                f"{min(times['new']) / min(times['old']):.3f}"
                f"; adam {med['adam'] * 1e3:.2f} ms; CPU ms per update (median): old "
                f"{med_cpu['old'] * 1e3:.2f}, new {med_cpu['new'] * 1e3:.2f}, adam "
                f"{med_cpu['adam'] * 1e3:.2f}, new/old {med_cpu['new'] / med_cpu['old']:.3f}"
                f"; steps differ by up to {rel:.1e} of the leaf's largest step",
                flush=True,
            )
        print(f"load average at end: {os.getloadavg()}")


if __name__ == "__main__":
    main()
