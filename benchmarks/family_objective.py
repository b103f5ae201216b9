"""A recipe's own objective on its own task families, measured exactly for several thetas.

Meta-training with truncated ES estimates the gradient of a smoothed, truncated
objective from a few noisy samples. Whether a run actually improved what it was asked to
improve, on the families it trained on, is a different question from whether that
carried to other tasks. This script answers the first one exactly: for each theta it
trains the same task samples (same initializations, batches and inner randomness for
every theta: common random numbers) for whole runs from step 0, with no truncation and
no perturbation, and reports per family and split

- the recipe's meta-objective: the mean over runs and steps of the ``late`` weight
  ``(p+1)((t+1/2)/T)^p`` times the log loss (lower is better);
- the mean log loss over the last tenth of the runs (what the evaluation's final losses
  read), and for every theta after the first, on how many of the runs it is below the
  first theta's::

    python benchmarks/family_objective.py --theta start=CeloAdam \\
        --theta trained=runs/celoadam-head-multi/theta_best.msgpack \\
        --families MetaTrain_MLP_Mnist5k20_64x64,MetaTrain_Conv_Digits8_8x16 \\
        --out runs/family-objective

Writes ``family_objective.csv`` (one row per family, split, theta and run),
``family_objective.md`` and ``family_objective.png`` (each run's final log loss against
the first theta's, per family and split).
"""

from __future__ import annotations

import argparse
import csv
import os
import sys
import time
from pathlib import Path

import jax
import numpy as np

from learnopt.outer_trainers import lopt_truncated_step as lts
from learnopt.outer_trainers import meta_objective
from learnopt.outer_trainers import truncation_schedule as tsched
from learnopt.tasks import base as tasks_base
from learnopt.tasks import suites  # noqa: F401  (registers the buckets)

sys.path.insert(0, os.path.dirname(__file__))
from _thetas import add_theta_argument, labelled_thetas  # noqa: E402


def make_step(
    family: tasks_base.TaskFamily, lopt, split: str, num_tasks: int, total_length: int
) -> lts.VectorizedLOptTruncatedStep:
    """The population of ``num_tasks`` whole runs of ``lopt`` on ``family``.

    Args:
      family: the task family.
      lopt: the learned optimizer.
      split: the split each step's loss is measured on (the updated params' loss on a
        batch of it, as ``--meta-loss-split``).
      num_tasks: runs (task samples).
      total_length: steps per run.

    Returns:
      The truncated step (its truncations never end a run early).
    """
    return lts.VectorizedLOptTruncatedStep(
        family,
        lopt,
        tsched.ConstantTruncationSchedule(total_length),
        num_tasks=num_tasks,
        meta_loss_split=split,
        meta_loss_transform="log",
    )


def run_losses(
    step: lts.VectorizedLOptTruncatedStep,
    theta,
    batches: list,
    trunc_length: int,
    seed: int,
) -> np.ndarray:
    """Each step's log loss over whole runs of ``step``'s learned optimizer at ``theta``.

    Args:
      step: from :func:`make_step`.
      theta: the learned optimizer's meta-parameters.
      batches: one ``step.get_batch(trunc_length)`` per truncation of the run (shared by
        every theta, so that all see the same data).
      trunc_length: steps per jitted unroll (does not change the values).
      seed: the key of the task samples, initializations and inner randomness.

    Returns:
      The log losses (``log(max(loss, 1e-8))`` of the raw loss), shape
      ``(len(batches) * trunc_length, num_tasks)``.
    """
    unroll = jax.jit(step.unroll, static_argnums=4)
    key = jax.random.PRNGKey(seed)
    state = jax.jit(lambda th, k: step.init_step_state(th, None, k))(theta, key)
    losses = []
    for i, data in enumerate(batches):
        state, out = unroll(theta, state, jax.random.fold_in(key, i), data, trunc_length)
        losses.append(np.asarray(out.loss))
    return np.concatenate(losses, axis=0)


def summarize(logs: np.ndarray, power: float) -> dict[str, np.ndarray]:
    """Per-run objective values from :func:`run_losses`'s log losses.

    Args:
      logs: shape ``(T, runs)``.
      power: the ``late`` weighting's exponent ``p``.

    Returns:
      ``meta_objective`` (the late-weighted mean log loss) and ``final_log_loss`` (the
      mean log loss over the last tenth of the steps), each of shape ``(runs,)``.
    """
    steps = logs.shape[0]
    weight = np.asarray(meta_objective.step_weight("late", np.arange(steps), steps, power=power))
    last = max(1, steps // 10)
    return {
        "meta_objective": (weight[:, None] * logs).mean(axis=0),
        "final_log_loss": logs[-last:].mean(axis=0),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_theta_argument(parser)
    parser.add_argument("--families", required=True, help="registered task families, A,B")
    parser.add_argument("--splits", default="train,outer_valid")
    parser.add_argument("--num-tasks", type=int, default=8)
    parser.add_argument("--total-length", type=int, default=1000)
    parser.add_argument("--trunc-length", type=int, default=50)
    parser.add_argument("--power", type=float, default=2.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default="runs/family-objective")
    args = parser.parse_args(argv)
    if args.total_length % args.trunc_length:
        parser.error("--total-length must be a multiple of --trunc-length")
    thetas = labelled_thetas(parser, args.theta)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    rows, lines = [], []
    header = "| family | split | theta | meta-objective | final log loss | runs below the first |"
    lines += [header, "| --- | --- | --- | ---: | ---: | ---: |"]
    for name in args.families.split(","):
        for split in args.splits.split(","):
            family = tasks_base.TASK_FAMILIES.get(name)
            data_step = make_step(family, thetas[0][1], split, args.num_tasks, args.total_length)
            batches = [
                data_step.get_batch(args.trunc_length)
                for _ in range(args.total_length // args.trunc_length)
            ]
            first = None
            for label, lopt, theta in thetas:
                start = time.perf_counter()
                step = make_step(family, lopt, split, args.num_tasks, args.total_length)
                losses = run_losses(step, theta, batches, args.trunc_length, args.seed)
                s = summarize(losses, args.power)
                below = "" if first is None else (
                    f"{int(np.sum(s['final_log_loss'] < first['final_log_loss']))}"
                    f"/{args.num_tasks}"
                )  # fmt: skip
                first = first or s
                line = (
                    f"| {name} | {split} | {label} | {s['meta_objective'].mean():.4f} | "
                    f"{s['final_log_loss'].mean():.4f} | {below} |"
                )
                lines.append(line)
                print(f"{line}  ({time.perf_counter() - start:.0f} s)", flush=True)
                rows += [
                    dict(family=name, split=split, theta=label, run=i,
                         meta_objective=float(m), final_log_loss=float(f))
                    for i, (m, f) in enumerate(
                        zip(s["meta_objective"], s["final_log_loss"], strict=True)
                    )
                ]  # fmt: skip
    with open(out / "family_objective.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    command = "python benchmarks/family_objective.py " + " ".join(
        argv if argv is not None else sys.argv[1:]
    )
    (out / "family_objective.md").write_text(
        f"# Each theta's objective on the families, whole runs\n\n`{command}`\n\n"
        + "\n".join(lines)
        + "\n"
    )
    _plot(rows, out / "family_objective.png")
    print(f"wrote family_objective.csv, .md and .png in {out}")
    return 0


def _plot(rows: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = list(dict.fromkeys((r["family"], r["split"]) for r in rows))
    labels = list(dict.fromkeys(r["theta"] for r in rows))
    fig, axes = plt.subplots(1, len(panels), figsize=(3.6 * len(panels), 3.4), squeeze=False)
    for ax, (family, split) in zip(axes[0], panels, strict=True):
        value = {
            label: np.array([
                r["final_log_loss"] for r in rows
                if r["family"] == family and r["split"] == split and r["theta"] == label
            ])
            for label in labels
        }  # fmt: skip
        for i, label in enumerate(labels[1:]):
            diff = value[label] - value[labels[0]]
            ax.scatter(np.full(diff.shape, i) + np.linspace(-0.2, 0.2, diff.size), diff, s=12)
        ax.axhline(0.0, color="k", lw=0.8)
        ax.set_xticks(range(len(labels) - 1), labels[1:], fontsize=8)
        ax.set_title(f"{family}\n{split}", fontsize=7)
    axes[0][0].set_ylabel(f"final log loss - {labels[0]}'s (per run; < 0: lower)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


if __name__ == "__main__":
    sys.exit(main())
