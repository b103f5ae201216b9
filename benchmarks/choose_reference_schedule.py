"""Choose the peak rate of the untuned reference schedule, never looking at ``heldout``.

``learnopt evaluate`` compares a candidate with one *untuned* hand-designed schedule:
Adam with 5% linear warmup and cosine decay to zero (``AdamWarmupCosine``) at one peak
rate for every task (``learnopt.evaluation.config.REFERENCE_SCHEDULE_LR``). This script
is how that rate is chosen: it trains the schedule at every rate of a grid on the
meta-training tasks (a fixed task per meta-train bucket) and the ``meta-valid`` suite,
scores each rate by the geometric mean over tasks of its final train loss relative to
the best rate on that task (1.0 = best everywhere), and prints the winner. A rate that
diverges on a task scores ``inf`` there.

    python benchmarks/choose_reference_schedule.py                 # 1000 steps, 2 seeds
    python benchmarks/choose_reference_schedule.py --steps 200 --seeds 1 --out /tmp/ref

Writes ``reference_schedule.csv`` (task, rate, final train, relative) and
``reference_schedule.png`` (the geometric mean against the rate) into ``--out``.
"""

from __future__ import annotations

import argparse
import csv
import math
import sys
import time
from pathlib import Path

import jax

from learnopt import plots
from learnopt.evaluation import engine, metrics, results, sweeps
from learnopt.tasks import base as tasks_base
from learnopt.tasks import suites

#: Half-decades 1e-3 ... 10^-0.5 (a first run on 1e-3 ... 1e-1 chose its edge, 0.1).
GRID = sweeps.log_grid(1e-3, 10**-0.5, 6)


def _meta_train_tasks() -> list[tuple[str, tasks_base.Task]]:
    """One member of each meta-train bucket (ReLU-like draw of a fixed key) and the fixed task."""
    out = [(name, tasks_base.get_task(name)) for name in suites.META_TRAIN_TASKS]
    for fam in suites.meta_train_families():
        task = fam.task_fn(fam.sample(jax.random.PRNGKey(0)))
        out.append((f"{fam.name}[key 0]", task))
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, default=1000)
    p.add_argument("--seeds", type=int, default=2)
    p.add_argument("--out", default="runs/reference-schedule")
    args = p.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)

    tasks = _meta_train_tasks() + [(n, tasks_base.get_task(n)) for n in suites.META_VALID]
    assert not {n for n, _ in tasks} & set(suites.HELDOUT)
    sweep = sweeps.lr_sweep("AdamWarmupCosine", GRID)
    window = metrics.windows(args.steps)[1]
    rows, relative = [], {lr: [] for lr in GRID}
    start = time.perf_counter()
    for i, (name, task) in enumerate(tasks):
        t0 = time.perf_counter()
        ev = engine.TaskEvaluator(task, [sweep], num_steps=args.steps, num_seeds=args.seeds)
        curves = ev.run().curves[sweep.name]
        finals = [results.PointStats.of(curves, j, window).final_train for j in range(len(GRID))]
        finite = [f for f in finals if math.isfinite(f)]
        best = min(finite) if finite else math.nan
        for lr, f in zip(GRID, finals, strict=True):
            rel = f / best if math.isfinite(f) and best > 0 else math.inf
            relative[lr].append(rel)
            rows.append({"task": name, "learning_rate": lr, "final_train": f, "relative": rel})
        print(
            f"[{i + 1}/{len(tasks)}] {name}: best rate "
            f"{GRID[finals.index(best)] if finite else 'none'} ({time.perf_counter() - t0:.0f} s)",
            flush=True,
        )
    scores = {lr: metrics.geomean(v) if all(map(math.isfinite, v)) else math.inf
              for lr, v in relative.items()}  # fmt: skip
    chosen = min(scores, key=scores.__getitem__)
    with open(out / "reference_schedule.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, ["task", "learning_rate", "final_train", "relative"])
        writer.writeheader()
        writer.writerows(rows)
    plots.line_plot(
        out / "reference_schedule.png",
        list(GRID),
        {"geo-mean final train / best rate's": [scores[lr] for lr in GRID]},
        xlabel="peak learning rate (log10)",
        ylabel="geo-mean relative final train loss",
        title=f"AdamWarmupCosine, {len(tasks)} meta-train + meta-valid tasks, {args.steps} steps",
    )
    print("\n| peak rate | geo-mean final train / best rate's |\n| ---: | ---: |")
    for lr in GRID:
        print(f"| {lr:.3g} | {scores[lr]:.3f} |")
    print(
        f"\nchosen: {chosen:.3g} ({args.steps} steps, {args.seeds} seeds, "
        f"{time.perf_counter() - start:.0f} s); wrote {out}",
        flush=True,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
