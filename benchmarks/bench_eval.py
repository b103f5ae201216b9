"""Cost of a learning-rate sweep in ``learnopt.evaluation`` vs one run of the same length.

    python benchmarks/bench_eval.py [--task ImageMLP_Digits8_Relu32] [--steps 1000]
        [--lrs 7] [--seeds 3] [--trials 3] [--data-dir DIR]

Both sides are :class:`learnopt.evaluation.TaskEvaluator` runs in the same process: the sweep
(``--lrs`` learning rates x ``--seeds`` seeds of Adam, one vmapped program) and one run
(Adam at one learning rate, one seed). "with compile" times a fresh evaluator's first
run (tracing, XLA compilation, data, training); "without compile" is the median of
``--trials`` further runs of the same evaluators, interleaved. Prints both ratios
(target: sweep <= 3x one run) and how the sweep compares with running its
``lrs x seeds`` runs one after another. Without ``--data-dir`` the data is prepared in
a temporary directory.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time

from learnopt import evaluation
from learnopt.tasks import base as tasks_base
from learnopt.tasks.datasets import base as datasets_base


def _timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", default="ImageMLP_Digits8_Relu32")
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--lrs", type=int, default=7, help="learning rates, 1e-4..1e-1")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--eval-every", type=int, default=50)
    parser.add_argument("--trials", type=int, default=3)
    parser.add_argument("--vectorize", default="auto", choices=("auto", "vmap", "map"))
    parser.add_argument("--data-dir", default=None)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        import os

        os.environ[datasets_base.ENV_DATA_DIR] = args.data_dir or tmp
        grid = evaluation.log_grid(1e-4, 1e-1, args.lrs)
        common = dict(num_steps=args.steps, eval_every=args.eval_every, vectorize=args.vectorize)

        def evaluator(lrs, seeds):
            task = tasks_base.get_task(args.task)
            sweep = evaluation.lr_sweep("Adam", lrs)
            return evaluation.TaskEvaluator(task, [sweep], num_seeds=seeds, **common)

        # Load (and prepare) the data once, outside every timing.
        warm = tasks_base.get_task(args.task)
        if warm.datasets is not None:
            next(warm.datasets.train)

        one, sweep = evaluator((1e-3,), 1), evaluator(grid, args.seeds)
        first_one = _timed(one.run)
        first_sweep = _timed(sweep.run)
        t_one, t_sweep = [], []
        for _ in range(args.trials):
            t_one.append(_timed(one.run))
            t_sweep.append(_timed(sweep.run))
        one_s, sweep_s = statistics.median(t_one), statistics.median(t_sweep)
        runs = args.lrs * args.seeds

        print(
            f"task {args.task}, {args.steps} steps, Adam; sweep = {args.lrs} learning rates x "
            f"{args.seeds} seeds = {runs} runs in one program "
            f"({'one after another' if sweep._sequential else 'batched'})"
        )
        print(
            f"with compile:    one run {first_one:.2f} s, sweep {first_sweep:.2f} s, "
            f"ratio {first_sweep / first_one:.2f}x"
        )
        print(
            f"without compile: one run {one_s:.3f} s, sweep {sweep_s:.3f} s, "
            f"ratio {sweep_s / one_s:.2f}x (median of {args.trials})"
        )
        print(
            f"the sweep costs {sweep_s / (runs * one_s):.2f} of {runs} separate runs "
            f"({sweep_s / runs * 1e3 / args.steps:.3f} ms per run-step vs "
            f"{one_s * 1e3 / args.steps:.3f} ms for one run)"
        )


if __name__ == "__main__":
    main()
