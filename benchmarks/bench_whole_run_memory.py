"""Memory of one whole-run ES estimate (FullES) against the bytes of the run's batches.

    python benchmarks/bench_whole_run_memory.py [--family MetaTrain_MLP_Mnist5k20_64x64]
        [--lengths 100,1000] [--num-tasks 2] [--lopt CeloAdam]

A full-run estimator (``full_es``, ``full_grad``) takes the batches of a whole inner run
at once (``[total_length, num_tasks, ...]``, for every split the meta-loss reads). For
each length the estimate that ``learnopt meta-train --trainer full_es`` builds is
compiled ahead of time and XLA's accounting of the program is read
(``Compiled.memory_analysis()``): its temporaries are compared with the bytes of the
run's batches, the baseline, in the same process. Before learnopt tiled the antithetic
copies' batches step by step inside the scan, the program held the whole run's batches
twice more as temporaries (ratio 2.0; a 1000-step estimate on the 20x20-pixel MLP bucket
at 4 runs held 2.5 GB that way); now its temporaries are a step's worth. Prints a table
and writes ``benchmarks/results/whole_run_memory.csv``.
"""

from __future__ import annotations

import argparse
import csv
import sys
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"


def measure(family: str, length: int, num_tasks: int, lopt_name: str) -> dict:
    """Compiles one FullES estimate and reads its memory figures.

    Args:
      family: a registered task or task family.
      length: the inner run's length (``--total-length``).
      num_tasks: inner runs per estimate (antithetic pairs).
      lopt_name: a registered learned optimizer.

    Returns:
      A row: the batches' bytes, XLA's argument and temporary bytes, and their ratio.
    """
    import jax

    from learnopt.outer_trainers import memory_check
    from learnopt.run import build

    lopt = build.build_lopt(lopt_name, {})
    est = build.make_estimator(
        "full_es",
        build.build_task(family),
        lopt,
        total_length=length,
        num_tasks=num_tasks,
        meta_loss_split="train+outer_valid",
    )
    theta = lopt.init(jax.random.PRNGKey(0))
    state = est.init_worker_state(theta, jax.random.PRNGKey(1))
    datas = est.get_datas()
    estimate = jax.jit(lambda th, k, s, d: est.compute_gradient_estimate(th, k, s, d))
    compiled = estimate.lower(theta, jax.random.PRNGKey(2), state, datas).compile()
    memory = compiled.memory_analysis()
    batches = memory_check.nbytes(datas)
    return {
        "family": family,
        "lopt": lopt_name,
        "total_length": length,
        "num_tasks": num_tasks,
        "batches_mb": round(batches / 1e6, 2),
        "argument_mb": round(memory.argument_size_in_bytes / 1e6, 2),
        "temporary_mb": round(memory.temp_size_in_bytes / 1e6, 2),
        "temporary_over_batches": round(memory.temp_size_in_bytes / batches, 3),
    }


def main(argv: list[str] | None = None) -> int:
    """Runs the measurement; see the module docstring.

    Args:
      argv: command-line arguments (default: ``sys.argv[1:]``).

    Returns:
      The exit status.
    """
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--family", default="MetaTrain_MLP_Mnist5k20_64x64")
    p.add_argument("--lengths", default="100,1000", help="comma-separated --total-length values")
    p.add_argument("--num-tasks", type=int, default=2)
    p.add_argument("--lopt", default="CeloAdam")
    p.add_argument("--out", default=str(RESULTS / "whole_run_memory.csv"))
    args = p.parse_args(argv)
    try:
        lengths = [int(x) for x in args.lengths.split(",")]
    except ValueError:
        p.error(f"--lengths must be comma-separated integers, got {args.lengths!r}")
    rows = []
    for i, length in enumerate(lengths, 1):
        print(f"[{i}/{len(lengths)}] compiling a {length}-step FullES estimate...", flush=True)
        rows.append(measure(args.family, length, args.num_tasks, args.lopt))
    print(
        "| total_length | batches (MB) | arguments (MB) | temporaries (MB) "
        "| temporaries / batches |"
    )
    print("| ---: | ---: | ---: | ---: | ---: |")
    for r in rows:
        print(
            f"| {r['total_length']} | {r['batches_mb']} | {r['argument_mb']} | "
            f"{r['temporary_mb']} | {r['temporary_over_batches']} |"
        )
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
