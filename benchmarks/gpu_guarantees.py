"""learnopt's compile-once and dtype guarantees, checked on whatever backend JAX uses.

    python benchmarks/gpu_guarantees.py --out benchmarks/results/gpu_check_DATE_guarantees
        [--cases f32 bf16 bf16/f32] [--only Adam lopt:MLPLOpt ...] [--workers 8]
        [--recipe NAME]

Run by ``benchmarks/gpu_check.sh`` on the GPU (and, shortened, in its CPU rehearsal).
Three kinds of rows, each a pass or a failure:

* **conformance**: every built-in optimizer and every registered learned optimizer (at
  its initial theta) through :func:`learnopt.testing.conformance.check_conformance` in
  each dtype case (float32, bfloat16, and bfloat16 params with float32 gradients): the
  jitted step traced once over 10 calls, a jitted ``lax.scan`` of steps traced once
  over two calls, the params' dtype kept, everything finite.
* **meta-step**: the outer step of a recipe's learner (:func:`learnopt.run.build.build_learner`
  with the recipe's settings, 8 tasks, float32) and of the notes' walkthrough learner
  (``LearnableAdam`` on the 8x8 digits MLP in float32 and with its params in bfloat16)
  jitted and called 3 times: traced once, theta finite.
* **fused-kernel**: the compiled update of ``MLPLOpt``/``RNNMLPLOpt`` (hidden 32, the
  kernel's shape) on a tensor large enough for the kernel: whether the CPU-only fused
  kernel's custom call is in the program. On a GPU it must not be (a pass means absent);
  on the CPU the row records what the kernel's availability implies.

The conformance rows run in ``--workers`` spawned processes (compiles dominate and use
one core each); each worker is told not to preallocate the GPU's memory. Writes
``OUT.csv`` and prints one line per row; exit status 1 if any row failed.
"""

from __future__ import annotations

import argparse
import csv
import multiprocessing
import os
import sys
import time
from collections.abc import Sequence

FIELDS = ("kind", "name", "case", "backend", "ok", "detail", "seconds")
DEFAULT_CASES = ("f32", "bf16", "bf16/f32")
DEFAULT_RECIPE = "scheduledadam-cosine-hparams-wide-shared"


def conformance_names() -> list[str]:
    """Built-in optimizers and registered learned optimizers (the optax zoo is left out:
    it is optax's code, checked on CPU by ``tests/test_conformance.py``)."""
    from learnopt.testing import conformance

    return [n for n in conformance.conformance_optimizers() if not n.startswith("optax:")]


def _row(kind: str, name: str, case: str, check) -> dict:
    """One row: ``check()`` returns ``(ok, detail)``; an exception is a failed row, timed."""
    import jax

    start = time.perf_counter()
    try:
        ok, detail = check()
    except Exception as err:  # a failure is a row, not the end of the check
        ok, detail = False, f"raised {type(err).__name__}: {str(err)[:300]}"
    return {
        "kind": kind,
        "name": name,
        "case": case,
        "backend": jax.default_backend(),
        "ok": ok,
        "detail": detail,
        "seconds": round(time.perf_counter() - start, 2),
    }


def _conformance(name: str, case: str) -> tuple[bool, str]:
    from learnopt.testing import conformance

    result = conformance.check_conformance(conformance.conformance_optimizers()[name], case)
    return result.ok, (
        f"traces {result.step_traces}/{result.scan_traces}, dtype kept "
        f"{result.params_dtype_ok}, finite {result.finite}"
    )


def _meta_step(build) -> tuple[bool, str]:
    """Traces of a learner's jitted outer step over 3 calls (want 1) and a finite theta."""
    import jax
    import numpy as np

    from learnopt.testing import TraceCounter

    learner = build()
    counter = TraceCounter()
    step = jax.jit(counter.wrap(learner._update))
    key = jax.random.PRNGKey(0)
    state = learner.init(key)
    for _ in range(3):
        key, k = jax.random.split(key)
        state, loss, _ = step(state, k, learner.get_datas())
    finite = all(
        np.isfinite(np.asarray(x, np.float64)).all()
        for x in jax.tree_util.tree_leaves(learner.get_theta(state))
        if np.issubdtype(np.asarray(x).dtype, np.inexact)
    ) and np.isfinite(float(loss))
    detail = f"traces {counter.count} over 3 calls, finite {finite}, meta-loss {float(loss):.4g}"
    return counter.count == 1 and finite, detail


META_STEPS = ("recipe", "walkthrough-f32", "walkthrough-bf16")


def meta_step_row(which: str, recipe: str) -> dict:
    """One of :data:`META_STEPS`: the recipe's learner, or the walkthrough learner
    (float32, bfloat16 params)."""
    from gpu_figures import recipe_learner  # beside this script

    from learnopt.learned_optimizers import base as lopt_base
    from learnopt.run import build
    from learnopt.tasks import base as tasks_base
    from learnopt.tasks import task_augmentation

    def walkthrough(dtype):
        def make():
            task = tasks_base.get_task("ImageMLP_Digits8_Relu32")
            if dtype != "f32":
                task = task_augmentation.ConvertFloatDType(task, dtype="bfloat16")
            return build.build_learner(
                task=task, lopt=lopt_base.LearnableAdam(), trainer="pes", num_tasks=8,
                trunc_length=4, total_length=20,
            )  # fmt: skip

        return make

    if which == "recipe":
        return _row(
            "meta-step",
            f"recipe {recipe} (pes)",
            "f32",
            lambda: _meta_step(lambda: recipe_learner(recipe, "pes", 8, None)),
        )
    dtype = which.split("-")[1]
    name = "LearnableAdam on ImageMLP_Digits8_Relu32 (pes)"
    return _row("meta-step", name, dtype, lambda: _meta_step(walkthrough(dtype)))


FUSED_CHECKS = {"MLPLOpt": {"hidden_size": 32}, "RNNMLPLOpt": {}}


def _fused_kernel(name: str) -> tuple[bool, str]:
    """Whether the fused kernel's custom call is in ``name``'s compiled update."""
    import jax
    import jax.numpy as jnp

    from learnopt.learned_optimizers import base as lopt_base
    from learnopt.learned_optimizers.blocks import fused_kernel

    lopt = lopt_base.get_learned_optimizer(name, **FUSED_CHECKS[name])
    opt = lopt.opt_fn(lopt.init(jax.random.PRNGKey(0)))
    params = {"w": jnp.zeros((512, 512), jnp.float32)}
    state = opt.init(params, num_steps=100)
    grads = {"w": jnp.full((512, 512), 1e-3, jnp.float32)}
    hlo = (
        jax.jit(lambda s, g: opt.update(s, g, loss=jnp.float32(1.0))).lower(state, grads).as_text()
    )
    used = fused_kernel.TARGET in hlo or fused_kernel.STEP_TARGET in hlo
    backend = jax.default_backend()
    if backend == "cpu":  # on the CPU the kernel is chosen exactly when it is available
        available = fused_kernel.available()
        why = "" if available else f" ({fused_kernel.unavailable_reason()})"
        return used == available, f"kernel in the program: {used}; available: {available}{why}"
    ok = not used and not fused_kernel.supports([32, 32], 1, jnp.float32)
    return ok, f"kernel in the program: {used} (must be False on {backend})"


def run_item(item: tuple[str, str, str, str]) -> dict:
    """One row: ``(kind, name, case, recipe)`` with kind conformance, meta-step or fused."""
    kind, name, case, recipe = item
    if kind == "meta-step":
        return meta_step_row(name, recipe)
    if kind == "fused-kernel":
        return _row(kind, name, case, lambda: _fused_kernel(name))
    return _row(kind, name, case, lambda: _conformance(name, case))


def _print(row: dict) -> None:
    mark = "ok  " if row["ok"] else "FAIL"
    print(
        f"[guarantees] {mark} {row['kind']:12s} {row['name']:48s} {row['case']:9s} "
        f"{row['detail']} ({row['seconds']} s)",
        flush=True,
    )


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True, help="output path without extension (writes .csv)")
    ap.add_argument("--cases", nargs="*", default=list(DEFAULT_CASES))
    ap.add_argument("--only", nargs="*", default=None, help="conformance names (default: all)")
    ap.add_argument("--workers", type=int, default=8, help="processes for the conformance rows")
    ap.add_argument("--recipe", default=DEFAULT_RECIPE, help="recipe of the meta-step row")
    ap.add_argument(
        "--meta-steps",
        nargs="*",
        default=list(META_STEPS),
        choices=META_STEPS,
        help="which meta-step rows (default: all)",
    )
    args = ap.parse_args(argv)

    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")  # workers share the GPU
    names = conformance_names()
    if args.only:
        unknown = sorted(set(args.only) - set(names))
        if unknown:
            raise SystemExit(f"--only: unknown {unknown}; choose from {names}")
        names = args.only
    # The slow rows (whole outer steps) first, so that they overlap the rest.
    items = [("meta-step", m, "", args.recipe) for m in args.meta_steps]
    items += [("fused-kernel", n, "f32", "") for n in FUSED_CHECKS]
    items += [("conformance", n, c, "") for n in names for c in args.cases]
    print(f"[guarantees] {len(items)} checks in {args.workers} processes", flush=True)
    rows: list[dict] = []
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(max(1, args.workers)) as pool:
        for i, row in enumerate(pool.imap_unordered(run_item, items), 1):
            rows.append(row)
            if row["kind"] != "conformance" or not row["ok"]:
                _print(row)
            if i % 20 == 0 or i == len(items):
                print(f"[guarantees] {i}/{len(items)} checks done", flush=True)

    os.makedirs(os.path.dirname(os.path.abspath(args.out)) or ".", exist_ok=True)
    with open(args.out + ".csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=FIELDS)
        writer.writeheader()
        writer.writerows(rows)
    failed = [r for r in rows if not r["ok"]]
    print(
        f"[guarantees] {len(rows) - len(failed)} of {len(rows)} passed on "
        f"{rows[0]['backend'] if rows else '?'}",
        flush=True,
    )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
