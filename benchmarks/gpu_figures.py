"""Per-estimator device figures: compile time, ms per outer step, device memory.

    python benchmarks/gpu_figures.py --out benchmarks/results/gpu_check_2026-12-01
        [--steps 50] [--only pes ...] [--population 8 256 4096]
    python benchmarks/gpu_figures.py --out OUT --recipe NAME --only pes full_es
        --population 8 128 2048 32768 [--total-length 100]

Task ``ImageMLP_Digits8_Relu32`` with ``LearnableAdam``, unroll 4 (the setting of
``bench_estimators.py``); with ``--recipe``, the recipe's learner
(:func:`learnopt.run.build.build_learner` with its families, learned optimizer,
lengths and meta-objective; ``full_es`` unrolls ``--total-length`` inner steps, default
the recipe's), and each estimator's population is grown through ``--population`` in
order until a size fails (it does not fit, or times out) or no longer raises the
throughput (inner runs x outer steps per second) by 1.25x: the device is busy. The
rows then hold the largest population that fits and its throughput.

Each configuration (an estimator and a population size) runs in a fresh subprocess,
so that ``jax.devices()[0].memory_stats()['peak_bytes_in_use']`` (the device
allocator's high-water mark since the process started; GPUs and TPUs report it, CPUs
do not) belongs to that configuration alone. In each subprocess:

* **compile s**: ``lower`` + ``compile`` of the whole outer step, ahead of time;
* **ms/step**: mean over ``--steps`` calls of that compiled step after two warm-up
  calls, batches fetched from the host iterator inside the timed loop (as in training);
* **XLA bytes**: the compiled step's own figure (``memory_analysis()``: arguments +
  outputs - aliased + temporaries), available on every backend;
* **peak bytes**: the allocator's high-water mark (blank where the backend has none).

Writes ``OUT.csv`` and prints the rows; ``benchmarks/gpu_check.sh`` folds them into its
report. Runs on any backend (on CPU it just has no peak figure).
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import subprocess
import sys
import time

TASK = "ImageMLP_Digits8_Relu32"
ESTIMATORS = ("full_grad", "tbptt", "full_es", "tes", "pes", "nres")
FIELDS = (
    "recipe",
    "estimator",
    "num_tasks",
    "backend",
    "device",
    "compile_s",
    "ms_per_step",
    "xla_bytes",
    "peak_bytes",
    "steps_per_s",
    "runs_per_s",
)
#: Growing the population further must raise the throughput by this factor.
GROWTH = 1.25


def recipe_learner(recipe: str, estimator: str, num_tasks: int, total_length: int | None):
    """The learner of ``recipe``'s settings with ``estimator`` and ``num_tasks``."""
    from learnopt import recipes
    from learnopt.run import build, config

    settings = dict(recipes.get_recipe(recipe).settings)
    settings.pop("steps", None)
    lopt = build.build_lopt(settings.pop("lopt"), settings.pop("lopt_config", None))
    families = build.expand_families(settings.pop("families"))
    settings.update(trainer=estimator, num_tasks=num_tasks)
    if estimator in config.FULL_TRAINERS:
        settings.pop("trunc_length", None)
        if total_length is not None:
            settings["total_length"] = total_length
    return build.build_learner(task=families, lopt=lopt, **settings)


def measure(
    estimator: str,
    num_tasks: int,
    steps: int,
    recipe: str | None = None,
    total_length: int | None = None,
) -> dict:
    """Figures of one configuration, measured in this process (see the module docstring)."""
    import jax

    from learnopt.learned_optimizers import base as lopt_base
    from learnopt.optimizers import base as opt_base
    from learnopt.outer_trainers import gradient_learner
    from learnopt.run import build, config
    from learnopt.tasks import base as tasks_base

    if recipe:
        learner = recipe_learner(recipe, estimator, num_tasks, total_length)
    else:
        task = tasks_base.get_task(TASK)
        lopt = lopt_base.LearnableAdam()
        if estimator in config.FULL_TRAINERS:
            lengths = {"total_length": 4}
        else:
            lengths = {"trunc_length": 4, "total_length": 200}
        est = build.make_estimator(estimator, task, lopt, num_tasks=num_tasks, **lengths)
        learner = gradient_learner.SingleMachineGradientLearner(lopt, [est], opt_base.Adam(1e-2))
    key = jax.random.PRNGKey(0)
    state = learner.init(key)
    datas = learner.get_datas()
    t0 = time.perf_counter()
    step = jax.jit(learner._update).lower(state, key, datas).compile()
    compile_s = time.perf_counter() - t0
    mem = step.memory_analysis()
    xla_bytes = None
    if mem is not None:
        xla_bytes = (
            mem.argument_size_in_bytes
            + mem.output_size_in_bytes
            - mem.alias_size_in_bytes
            + mem.temp_size_in_bytes
        )
    keys = list(jax.random.split(key, steps + 2))
    for k in keys[:2]:  # warm-up: first transfers, allocator growth
        state, loss, _ = step(state, k, learner.get_datas())
    jax.block_until_ready(loss)
    t0 = time.perf_counter()
    for k in keys[2:]:
        state, loss, _ = step(state, k, learner.get_datas())
    jax.block_until_ready(state)
    ms = (time.perf_counter() - t0) / steps * 1e3
    device = jax.devices()[0]
    stats = device.memory_stats() or {}
    return {
        "recipe": recipe or "",
        "estimator": estimator,
        "num_tasks": num_tasks,
        "backend": jax.default_backend(),
        "device": getattr(device, "device_kind", str(device)),
        "compile_s": round(compile_s, 3),
        "ms_per_step": round(ms, 4),
        "xla_bytes": xla_bytes,
        "peak_bytes": stats.get("peak_bytes_in_use"),
        "steps_per_s": round(1e3 / ms, 3),
        "runs_per_s": round(num_tasks * 1e3 / ms, 1),
    }


def _configs(only: list[str] | None, population: list[int]) -> list[tuple[str, int]]:
    configs = []
    for name in only or ESTIMATORS:
        if name not in ESTIMATORS:
            raise SystemExit(f"--only: unknown estimator {name!r}; choose from {ESTIMATORS}")
        configs.append((name, 1 if name == "full_grad" else 8))
    # Larger populations: PES (the trainer used at scale) with many tasks on one device.
    configs += [("pes", n) for n in population if n != 8]
    return configs


def _run_child(args, est: str, n: int) -> dict | None:
    """One configuration in a fresh process; None if it failed or timed out."""
    cmd = [sys.executable, __file__, "--out", args.out, "--child", est, str(n), str(args.steps)]
    if args.recipe:
        cmd += ["--recipe", args.recipe]
    if args.total_length is not None:
        cmd += ["--total-length", str(args.total_length)]
    print(f"[gpu_figures] {est} with {n} tasks ...", flush=True)
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout)
    except subprocess.TimeoutExpired:
        print(f"[gpu_figures] {est} {n}: timed out after {args.timeout:.0f} s", flush=True)
        return None
    line = next((x for x in proc.stdout.splitlines() if x.startswith("ROW")), None)
    if proc.returncode != 0 or line is None:
        print(f"[gpu_figures] {est} {n}: failed\n{proc.stderr[-2000:]}", flush=True)
        return None
    row = json.loads(line[3:])
    peak = "n/a" if row["peak_bytes"] is None else f"{row['peak_bytes'] / 2**20:.1f} MiB"
    xla = "n/a" if row["xla_bytes"] is None else f"{row['xla_bytes'] / 2**20:.1f} MiB"
    print(
        f"[gpu_figures] {est:9s} tasks {n:5d}: compile {row['compile_s']:.2f} s, "
        f"{row['ms_per_step']:.3f} ms/step ({row['steps_per_s']:.1f} steps/s, "
        f"{row['runs_per_s']:.0f} runs x steps/s), XLA {xla}, peak {peak}",
        flush=True,
    )
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True, help="output path without extension (writes .csv)")
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--only", nargs="*", default=None, help=f"estimators (default: {ESTIMATORS})")
    ap.add_argument(
        "--population",
        type=int,
        nargs="*",
        default=[256, 4096],
        help="further PES population sizes to measure (default: 256 4096); with --recipe, "
        "the sizes each estimator grows through",
    )
    ap.add_argument("--recipe", default=None, help="measure this recipe's learner (see above)")
    ap.add_argument("--total-length", type=int, default=None, help="full_es horizon (--recipe)")
    ap.add_argument("--timeout", type=float, default=240, help="seconds per configuration")
    ap.add_argument("--child", nargs=3, metavar=("EST", "TASKS", "STEPS"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        est, n, steps = args.child
        row = measure(est, int(n), int(steps), args.recipe, args.total_length)
        print("ROW" + json.dumps(row), flush=True)
        return
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    rows: list[dict] = []

    def keep(row: dict) -> None:
        # Written after every row: a run stopped by its caller's time limit keeps its rows.
        rows.append(row)
        with open(args.out + ".csv", "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=FIELDS)
            w.writeheader()
            w.writerows(rows)

    if args.recipe:
        for est in args.only or ("pes",):
            if est not in ESTIMATORS:
                raise SystemExit(f"--only: unknown estimator {est!r}; choose from {ESTIMATORS}")
            previous = None
            for n in args.population:
                row = _run_child(args, est, n)
                if row is None:
                    print(f"[gpu_figures] {est}: {n} tasks did not run; stopping", flush=True)
                    break
                keep(row)
                if previous and row["runs_per_s"] < GROWTH * previous["runs_per_s"]:
                    print(f"[gpu_figures] {est}: the device is busy at {n} tasks", flush=True)
                    break
                previous = row
    else:
        for est, n in _configs(args.only, args.population):
            row = _run_child(args, est, n)
            if row is not None:
                keep(row)
    if not rows:
        raise SystemExit("gpu_figures: no configuration could be measured")


if __name__ == "__main__":
    main()
