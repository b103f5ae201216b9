"""Compile counts of raw optax vs learnopt, for the optax zoo in every float dtype.

For every entry of :mod:`learnopt.optimizers.optax_zoo` and every dtype case of
:data:`learnopt.testing.conformance.DTYPE_CASES`, in one process:

* raw optax: the standard loop (``tx.init(params)``; a jitted step doing
  ``value_and_grad``, ``tx.update(grads, state, params[, value, grad, value_fn])`` and
  ``optax.apply_updates``) called 10 times; we count the traces of the step (one trace
  = one compilation), or record that it raised, or that its loss turned NaN;
* learnopt: :func:`learnopt.testing.conformance.check_conformance` on
  ``OptaxOptimizer(tx)`` (the same tiny problem; a jitted step called 10 times and a
  jitted ``lax.scan`` of steps called twice).

Built-in and learned optimizers are added as learnopt-only rows. Writes a markdown
table (the one in ``docs/dtypes.md``) and a CSV::

    python benchmarks/raw_optax_compiles.py --out benchmarks/results/raw_optax_compiles

Takes a few minutes on 2 CPU cores (everything is compiled twice: raw and learnopt).
"""

from __future__ import annotations

import argparse
import csv
import math
import os
import sys
import time
import warnings

import jax
import numpy as np
import optax
import tqdm

from learnopt.optimizers import base as opt_base
from learnopt.optimizers import optax_zoo
from learnopt.testing import TraceCounter, conformance

NUM_CALLS = 10


def raw_optax_case(name: str, case: str) -> tuple[str, str]:
    """Runs the standard optax loop; returns (compiles or "raises", a short note)."""
    with conformance.dtype_case(case) as (params_dtype, grads_dtype):
        tx = optax_zoo.get_optax(name)
        params, loss_fn = conformance.tiny_problem(params_dtype)
        extra_args = isinstance(tx, optax.GradientTransformationExtraArgs)
        counter = TraceCounter()

        @jax.jit
        @counter.wrap
        def step(params, state):
            loss, grads = jax.value_and_grad(loss_fn)(params)
            grads = jax.tree_util.tree_map(lambda g: g.astype(grads_dtype), grads)
            extra = dict(value=loss, grad=grads, value_fn=loss_fn) if extra_args else {}
            updates, state = tx.update(grads, state, params, **extra)
            return optax.apply_updates(params, updates), state, loss

        try:
            state = tx.init(params)
            losses = []
            for _ in range(NUM_CALLS):
                params, state, loss = step(params, state)
                losses.append(float(loss))
        except Exception as err:  # noqa: BLE001 - recording the failure is the point
            first = str(err).strip().splitlines()[0] if str(err).strip() else ""
            return "raises", f"{type(err).__name__}: {first[:120]}"
        notes = []
        if not all(math.isfinite(v) for v in losses):
            notes.append("NaN loss")
        out_dtypes = {str(x.dtype) for x in jax.tree_util.tree_leaves(params)}
        if out_dtypes != {str(np.dtype(params_dtype))}:
            notes.append(f"params became {'/'.join(sorted(out_dtypes))}")
        return str(counter.count), "; ".join(notes)


def learnopt_case(make_opt, case: str) -> tuple[str, str]:
    try:
        result = conformance.check_conformance(make_opt, case, num_calls=NUM_CALLS)
    except Exception as err:  # noqa: BLE001
        return "raises", f"{type(err).__name__}: {str(err).splitlines()[0][:120]}"
    notes = []
    if result.scan_traces != 1:
        notes.append(f"scan compiles {result.scan_traces}")
    if not result.finite:
        notes.append("not finite")
    if not result.params_dtype_ok:
        notes.append("params changed dtype")
    return str(result.step_traces), "; ".join(notes)


def seed_case(case: str, learnopt: bool, num_steps: int = 10) -> tuple[int | str, list[float]]:
    """The seed's L-BFGS script (16x2 linear regression), raw optax or learnopt."""
    with conformance.dtype_case(case) as (params_dtype, grads_dtype):
        x = jax.random.normal(jax.random.PRNGKey(42), (16, 2), dtype=params_dtype)
        y = (x * 0.5).sum(axis=-1)

        def loss_fn(params):
            return optax.l2_loss((params @ x.T).T, y).mean()

        counter = TraceCounter()
        params0 = jax.numpy.zeros((2,), params_dtype)
        if learnopt:
            opt = opt_base.OptaxOptimizer(optax.lbfgs())

            def step(state):
                loss, grad = jax.value_and_grad(loss_fn)(opt.get_params(state))
                return opt.update(state, grad.astype(grads_dtype), loss, value_fn=loss_fn), loss

            carry = opt.init(params0)
        else:
            tx = optax.lbfgs()

            def step(carry):
                params, state = carry
                loss, grad = jax.value_and_grad(loss_fn)(params)
                grad = grad.astype(grads_dtype)
                updates, state = tx.update(
                    grad, state, params, value=loss, grad=grad, value_fn=loss_fn
                )
                return (optax.apply_updates(params, updates), state), loss

            carry = (params0, tx.init(params0))
        jstep = jax.jit(counter.wrap(step))
        losses = []
        try:
            for _ in range(num_steps):
                carry, loss = jstep(carry)
                losses.append(float(loss))
        except Exception:  # noqa: BLE001
            return "raises", losses
        return counter.count, losses


def seed_table(num_steps: int) -> str:
    lines = [
        f"| L-BFGS seed, {num_steps} steps | compiles raw → learnopt | final loss raw → learnopt |",
        "|---|---|---|",
    ]
    for case in conformance.DTYPE_CASES:
        raw_count, raw_losses = seed_case(case, learnopt=False, num_steps=num_steps)
        our_count, our_losses = seed_case(case, learnopt=True, num_steps=num_steps)
        last = [f"{v[-1]:.3g}" if v else "-" for v in (raw_losses, our_losses)]
        lines.append(f"| {case} | {raw_count} → {our_count} | {last[0]} → {last[1]} |")
    return "\n".join(lines)


def _cell(raw: tuple[str, str] | None, ours: tuple[str, str]) -> str:
    def fmt(value: tuple[str, str]) -> str:
        count, note = value
        if count == "raises":
            return "raises"
        return count + (" NaN" if "NaN" in note else "") + ("*" if "params became" in note else "")

    return fmt(ours) if raw is None else f"{fmt(raw)} → {fmt(ours)}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="benchmarks/results/raw_optax_compiles")
    parser.add_argument("--only", nargs="*", help="zoo names to run (default: all)")
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore")  # optax's own FutureWarnings for mixed dtypes

    cases = list(conformance.DTYPE_CASES)
    optimizers = conformance.conformance_optimizers()
    rows = []  # (name, {case: (raw, ours)})
    start = time.time()
    bar = tqdm.tqdm(optimizers.items(), desc="optimizers", unit="opt")
    for name, make_opt in bar:
        zoo_name = name.removeprefix("optax:") if name.startswith("optax:") else None
        if args.only and (zoo_name or name) not in args.only:
            continue
        cells = {}
        for case in cases:
            raw = raw_optax_case(zoo_name, case) if zoo_name else None
            cells[case] = (raw, learnopt_case(make_opt, case))
        rows.append((name, cells))
        bar.write(f"{name} { ({c: _cell(*v) for c, v in cells.items()}) }")
    elapsed = time.time() - start

    raw_rows = [cells for name, cells in rows if name.startswith("optax:")]
    twice = sum(any(c[0][0] not in ("1", "raises") for c in cells.values()) for cells in raw_rows)
    raises = sum(any(c[0][0] == "raises" for c in cells.values()) for cells in raw_rows)
    nan = sum(any("NaN" in c[0][1] for c in cells.values()) for cells in raw_rows)
    ours_bad = [
        (name, case)
        for name, cells in rows
        for case, (_, ours) in cells.items()
        if ours[0] != "1" or ours[1]
    ]

    os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
    with open(args.out + ".csv", "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(
            ["optimizer", "dtype", "raw_optax", "raw_note", "learnopt", "learnopt_note"]
        )
        for name, cells in rows:
            for case, (raw, ours) in cells.items():
                writer.writerow([name, case, *(raw or ("", "")), *ours])

    lines = [
        "| optimizer | " + " | ".join(cases) + " |",
        "|---|" + "---|" * len(cases),
    ]
    for name, cells in rows:
        lines.append(f"| `{name}` | " + " | ".join(_cell(*cells[c]) for c in cases) + " |")
    summary = (
        f"Compiles of a jitted step over {NUM_CALLS} calls, raw optax → learnopt "
        f"(jax {jax.__version__}, optax {optax.__version__}, {jax.default_backend()}). "
        f"Raw optax: {twice} of {len(raw_rows)} zoo entries compile more than once in some "
        f"dtype, {raises} raise in some dtype, {nan} end with a NaN loss. learnopt: "
        f"{len(ours_bad)} of {len(rows) * len(cases)} cases differ from 1 compile "
        f"(and 1 for the lax.scan of steps, finite, params dtype kept). "
        f"Measured in {elapsed:.0f} s."
    )
    seed = seed_table(num_steps=NUM_CALLS)
    with open(args.out + ".md", "w") as f:
        f.write(summary + "\n\n" + "\n".join(lines) + "\n\n" + seed + "\n")
    print(seed)
    print(summary)
    for item in ours_bad:
        print("learnopt case not at 1 compile:", item)
    return 1 if ours_bad else 0


if __name__ == "__main__":
    sys.exit(main())
