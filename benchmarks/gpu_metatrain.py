"""A short meta-training of a recipe with a population sized from measured throughput.

    python benchmarks/gpu_metatrain.py --out benchmarks/results/gpu_check_DATE_metatrain
        [--recipe NAME] [--throughput OUT_throughput.csv] [--seconds 90]
        [--num-tasks N] [--steps S] [--eval-steps T] [--eval-tasks A,B] [--work DIR]

Run by ``benchmarks/gpu_check.sh`` after ``gpu_figures.py --recipe`` measured the
recipe's PES outer steps per second at growing populations. The population is the
largest measured one whose outer steps run at least half as fast as the smallest's
(many more inner runs per step for little time: a population the 2-core CPU cannot
afford), and the step count fills ``--seconds`` at its measured rate (80%, for the
host's share of a real run). Then::

    learnopt meta-train --recipe NAME --num-tasks N --steps S --eval-every S
        --checkpoint-every 0 --no-plots --out WORK/run

runs (its progress bar shows), with the recipe's meta-validation at the start and at
step S (``meta-valid`` suite, 1 seed, the recipe's inner steps). Writes ``OUT.csv``
(one row: the recipe, population, steps asked and done (the last step ``metrics.csv``
logged: every 50, and the last), wall seconds, outer steps per second, the
meta-valid score at the start and at the end, and the CPU's figures for the same
recipe from ``docs/meta-training-results.md`` beside them), ``OUT_eval.csv`` (the run's
``eval.csv``) and ``OUT_theta.msgpack`` (the final theta). Exit status: the run's.
"""

from __future__ import annotations

import argparse
import csv
import math
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

DEFAULT_RECIPE = "scheduledadam-cosine-hparams-wide-shared"
#: The shipped recipe's CPU run (docs/meta-training-results.md, "Runs with the fair evaluation"):
#: PES with 8 inner runs, 3,000 outer steps in 43 minutes on 2 cores; meta-valid score
#: (1 seed, 1000 steps) 10.2 at the start and 0.611 at step 3000.
CPU_FIGURES = {
    DEFAULT_RECIPE: dict(
        cpu_num_tasks=8, cpu_steps=3000, cpu_minutes=43, cpu_score_start=10.2, cpu_score=0.611
    )
}
FIELDS = (
    "recipe",
    "num_tasks",
    "steps",
    "steps_done",
    "seconds",
    "steps_per_s",
    "score_start",
    "score_end",
    "cpu_num_tasks",
    "cpu_steps",
    "cpu_minutes",
    "cpu_score_start",
    "cpu_score",
)


def choose(throughput_csv: str | None, seconds: float) -> tuple[int, int]:
    """``(num_tasks, steps)`` from ``gpu_figures.py --recipe``'s PES rows (see above).

    Args:
      throughput_csv: that CSV, or None.
      seconds: the meta-training time to fill.

    Returns:
      The population and the step count; ``(256, 1000)`` without usable rows.
    """
    rows = []
    if throughput_csv and os.path.exists(throughput_csv):
        with open(throughput_csv, newline="") as f:
            rows = [r for r in csv.DictReader(f) if r.get("estimator") == "pes"]
    if not rows:
        return 256, 1000
    rows.sort(key=lambda r: int(r["num_tasks"]))
    fastest = float(rows[0]["steps_per_s"])
    best = max(
        (r for r in rows if float(r["steps_per_s"]) >= 0.5 * fastest),
        key=lambda r: int(r["num_tasks"]),
    )
    return int(best["num_tasks"]), max(1, int(0.8 * seconds * float(best["steps_per_s"])))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True, help="output path without extension")
    ap.add_argument("--recipe", default=DEFAULT_RECIPE)
    ap.add_argument("--throughput", default=None, help="gpu_figures.py --recipe's CSV")
    ap.add_argument("--seconds", type=float, default=90.0, help="meta-training time to fill")
    ap.add_argument("--num-tasks", type=int, default=None, help="instead of the measured choice")
    ap.add_argument("--steps", type=int, default=None, help="instead of the measured choice")
    ap.add_argument("--eval-steps", type=int, default=None, help="meta-valid inner steps")
    ap.add_argument("--eval-tasks", default=None, help="A,B: instead of the meta-valid suite")
    ap.add_argument("--work", default=None, help="the run's folder (default: OUT_run)")
    ap.add_argument(
        "--max-seconds",
        type=float,
        default=None,
        help="stop the run (SIGTERM: it finishes its step and checkpoints) after this long; "
        "the row then has the start score alone",
    )
    args = ap.parse_args(argv)

    num_tasks, steps = choose(args.throughput, args.seconds)
    num_tasks = args.num_tasks or num_tasks
    steps = args.steps or steps
    work = Path(args.work or f"{args.out}_run")
    if work.exists():
        shutil.rmtree(work)
    cmd = [
        sys.executable, "-m", "learnopt", "meta-train", "--recipe", args.recipe,
        "--num-tasks", str(num_tasks), "--steps", str(steps), "--eval-every", str(steps),
        "--checkpoint-every", "0", "--no-plots", "--out", str(work),
    ]  # fmt: skip
    if args.eval_steps:
        cmd += ["--eval-steps", str(args.eval_steps)]
    if args.eval_tasks:
        cmd += ["--eval-tasks", args.eval_tasks]
    print(f"[metatrain] {num_tasks} tasks, {steps} steps: {' '.join(cmd[1:])}", flush=True)
    start = time.perf_counter()
    proc = subprocess.Popen(cmd)
    try:
        rc = proc.wait(timeout=args.max_seconds)
    except subprocess.TimeoutExpired:
        print(f"[metatrain] stopping the run after {args.max_seconds:.0f} s (SIGTERM)", flush=True)
        proc.send_signal(signal.SIGTERM)
        try:
            rc = proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            rc = proc.wait()
    seconds = time.perf_counter() - start
    print(f"[metatrain] exit status {rc} after {seconds:.1f} s", flush=True)

    from learnopt.evaluation import periodic

    scores = {}
    eval_csv = work / "eval.csv"
    if eval_csv.exists():
        by_step: dict[int, list] = {}
        for row in periodic.read_eval_csv(eval_csv):
            by_step.setdefault(int(row["step"]), []).append(row)
        scores = {s: periodic.eval_score(rows) for s, rows in by_step.items()}
        shutil.copy(eval_csv, f"{args.out}_eval.csv")
    if (work / "theta.msgpack").exists():
        shutil.copy(work / "theta.msgpack", f"{args.out}_theta.msgpack")
    steps_per_s, done = math.nan, 0
    metrics = work / "metrics.csv"
    if metrics.exists():
        with open(metrics, newline="") as f:
            logged = [int(r["step"]) for r in csv.DictReader(f)]
        done = max(logged) if logged else 0  # metrics.csv counts steps from 1
        steps_per_s = done / seconds if done else math.nan
    row = {
        "recipe": args.recipe,
        "num_tasks": num_tasks,
        "steps": steps,
        "steps_done": done,
        "seconds": round(seconds, 1),
        "steps_per_s": round(steps_per_s, 2),
        "score_start": round(scores[min(scores)], 4) if scores else "",
        "score_end": round(scores[max(scores)], 4) if len(scores) > 1 else "",
        **CPU_FIGURES.get(args.recipe, {}),
    }
    os.makedirs(os.path.dirname(os.path.abspath(args.out)) or ".", exist_ok=True)
    with open(f"{args.out}.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=FIELDS)
        writer.writeheader()
        writer.writerow(row)
    print(f"[metatrain] {row}", flush=True)
    return rc


if __name__ == "__main__":
    sys.exit(main())
