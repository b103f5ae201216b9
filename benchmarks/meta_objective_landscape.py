"""The meta-objective of a recipe, measured over whole runs at a grid of hand-set thetas.

What can meta-training on a set of task families learn? At best the theta that minimizes
its meta-objective there. For ``ScheduledAdam`` the thetas that matter most are the base
rate and the schedule; this script computes the recipe's meta-objective exactly (whole
1000-step runs from step 0, no truncation noise, no ES noise) at ``ScheduledAdam``'s
initial theta for a grid of ``initial_lr`` and both schedule priors, on each family and
for each meta-loss split, with the same task samples, initializations and batches for
every grid point (common random numbers). Its minimum is where a meta-training run on
those families is pulled to, so comparing it with the rates that win on ``heldout``
tells whether a recipe's families and objective point the right way before an hour of
meta-training is spent on them::

    python benchmarks/meta_objective_landscape.py --out docs/figures/landscape

Prints a table per family and split (mean weighted meta-loss over the runs, lower is
better; the minimum marked), writes ``landscape.csv`` and ``landscape.png``.
"""

from __future__ import annotations

import argparse
import csv
import sys
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from learnopt.learned_optimizers import scheduled_adam
from learnopt.outer_trainers import lopt_truncated_step as lts
from learnopt.outer_trainers import truncation_schedule as tsched
from learnopt.tasks import base as tasks_base
from learnopt.tasks import suites  # noqa: F401  (registers the buckets)

DEFAULT_FAMILIES = ("MetaTrain_MLP_Digits8_32", "MetaTrain_MLP_Mnist5k8_32x32")
DEFAULT_LRS = (1e-3, 3.16e-3, 1e-2, 3.16e-2, 1e-1, 3.16e-1)


def landscape(
    family_name: str | tasks_base.TaskFamily,
    split: str,
    prior: str,
    lrs: list[float],
    num_tasks: int,
    total_length: int,
    trunc_length: int,
    power: float,
    seed: int,
) -> list[float]:
    """The recipe's mean weighted meta-loss over whole runs, one value per rate.

    Args:
      family_name: a registered task family, or a family object.
      split: the meta-loss split (``train``, ``outer_valid``, ...).
      prior: ``ScheduledAdam``'s ``schedule_prior``.
      lrs: the base rates (``initial_lr``) to measure.
      num_tasks: runs (task samples) per rate.
      total_length: the run length ``T``.
      trunc_length: steps per jitted unroll (does not change the value).
      power: the ``late`` weighting's exponent.
      seed: the key of the task samples, initializations and inner randomness.

    Returns:
      The mean over runs and steps of weight x log loss, per rate.
    """
    family = (
        tasks_base.TASK_FAMILIES.get(family_name) if isinstance(family_name, str) else family_name
    )
    lopt = scheduled_adam.ScheduledAdam(schedule_prior=prior)
    step = lts.VectorizedLOptTruncatedStep(
        family,
        lopt,
        tsched.ConstantTruncationSchedule(total_length),
        num_tasks=num_tasks,
        meta_loss_split=split,
        meta_loss_weighting="late",
        meta_loss_power=power,
        meta_loss_transform="log",
    )
    chunks = total_length // trunc_length
    batches = [step.get_batch(trunc_length) for _ in range(chunks)]  # shared by every rate
    unroll = jax.jit(step.unroll, static_argnums=4)
    init = jax.jit(lambda theta, key: step.init_step_state(theta, None, key))
    theta0 = lopt.init(jax.random.PRNGKey(0))
    out = []
    for lr in lrs:
        theta = dict(theta0, log_lr=jnp.asarray(np.log(lr), jnp.float32))
        key = jax.random.PRNGKey(seed)
        state = init(theta, key)
        total = 0.0
        for i, data in enumerate(batches):
            state, o = unroll(theta, state, jax.random.fold_in(key, i), data, trunc_length)
            total += float(jnp.sum(o.loss * o.weight))
        out.append(total / (total_length * num_tasks))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--families", default=",".join(DEFAULT_FAMILIES))
    parser.add_argument("--splits", default="outer_valid,train")
    parser.add_argument("--priors", default="constant,warmup_cosine")
    parser.add_argument("--lrs", default=",".join(map(str, DEFAULT_LRS)))
    parser.add_argument("--num-tasks", type=int, default=8)
    parser.add_argument("--total-length", type=int, default=1000)
    parser.add_argument("--trunc-length", type=int, default=50)
    parser.add_argument("--power", type=float, default=2.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default="runs/landscape")
    args = parser.parse_args(argv)
    lrs = [float(x) for x in args.lrs.split(",")]
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    for family in args.families.split(","):
        for split in args.splits.split(","):
            for prior in args.priors.split(","):
                start = time.perf_counter()
                values = landscape(
                    family, split, prior, lrs, args.num_tasks, args.total_length,
                    args.trunc_length, args.power, args.seed,
                )  # fmt: skip
                best = int(np.argmin(values))
                cells = " | ".join(
                    f"**{v:.3f}**" if i == best else f"{v:.3f}" for i, v in enumerate(values)
                )
                print(
                    f"| {family} | {split} | {prior} | {cells} |"
                    f"  ({time.perf_counter() - start:.0f} s)",
                    flush=True,
                )
                rows += [
                    dict(family=family, split=split, prior=prior, lr=lr, meta_loss=v)
                    for lr, v in zip(lrs, values, strict=True)
                ]
    with open(out / "landscape.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    _plot(rows, out / "landscape.png")
    print(f"wrote {out / 'landscape.csv'} and {out / 'landscape.png'}")
    return 0


def _plot(rows: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    families = sorted({r["family"] for r in rows})
    fig, axes = plt.subplots(1, len(families), figsize=(5.5 * len(families), 4), squeeze=False)
    for ax, family in zip(axes[0], families, strict=True):
        for split in sorted({r["split"] for r in rows}):
            for prior in sorted({r["prior"] for r in rows}):
                sel = [
                    r for r in rows
                    if r["family"] == family and r["split"] == split and r["prior"] == prior
                ]  # fmt: skip
                if sel:
                    ax.plot(
                        [r["lr"] for r in sel], [r["meta_loss"] for r in sel],
                        marker="o", label=f"{split}, {prior}",
                    )  # fmt: skip
        ax.set_xscale("log")
        ax.set_xlabel("ScheduledAdam base rate (initial_lr)")
        ax.set_ylabel("meta-objective (late-weighted log loss; lower is better)")
        ax.set_title(family, fontsize=9)
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


if __name__ == "__main__":
    sys.exit(main())
