"""The step size a learned optimizer takes along fixed training-loss curves.

A learned schedule (Celo-Adam's, or Celo-Adam with learnopt's regime head) reads the
training loss; what it learned is easiest to see by feeding it the same loss curves and
the same gradients for several thetas and printing the steps it takes. Each theta runs
one scalar parameter for ``T`` steps with a constant gradient of 1 (Adam's normalized
direction is then 1, so the parameter moves by the step size itself) while the loss
follows one of three curves of different regimes:

- ``memorizing``: ``2.3 exp(-t / 90) + 3e-5`` (a net driving its training loss to ~0);
- ``language-model``: ``2.3 + 3.2 exp(-t / 60)`` (far from fitting at the end);
- ``conv``: ``0.1 + 2.2 exp(-t / 150)`` (in between).

With ``--tasks``, also along real training-loss curves: the minibatch losses the first
theta records training each named task (seed 0, ``T`` steps). The steps are those of
that loss sequence, not of a run each theta would have made itself (its own losses
would differ); they show how the schedule reads a real task's losses, noise included.

::

    python benchmarks/schedule_probe.py --theta start=CeloAdam \\
        --theta trained=runs/celoadam-regime/theta.msgpack --out runs/schedule-probe

Writes ``schedule_probe.csv`` (theta, curve, step, step size), ``schedule_probe.md``
(the step size at a few steps, and its ratio to the first theta's) and
``schedule_probe.png``. A theta with a regime head is also run with that head at zero
(labelled ``LABEL (regime head off)``), to separate what each head learned.
"""

from __future__ import annotations

import argparse
import csv
import os
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from learnopt.evaluation import engine, sweeps
from learnopt.tasks import base as tasks_base

sys.path.insert(0, os.path.dirname(__file__))
from _thetas import add_theta_argument, labelled_thetas  # noqa: E402

#: The loss curves, as functions of the step ``t`` (see the module docstring).
CURVES = {
    "memorizing": lambda t: 2.3 * np.exp(-t / 90.0) + 3e-5,
    "language-model": lambda t: 2.3 + 3.2 * np.exp(-t / 60.0),
    "conv": lambda t: 0.1 + 2.2 * np.exp(-t / 150.0),
}
#: The steps the markdown table shows.
SHOWN = (50, 200, 500, 800, 990)


def step_sizes(lopt, theta, losses: np.ndarray) -> np.ndarray:
    """How far one scalar parameter moves at each step under a constant gradient of 1."""
    opt = lopt.opt_fn(theta)
    state = opt.init({"w": jnp.zeros(())}, num_steps=len(losses))

    def body(s, loss):
        nxt = opt.update(s, {"w": jnp.ones(())}, loss=loss)
        return nxt, s.params["w"] - nxt.params["w"]

    _, moves = jax.lax.scan(body, state, jnp.asarray(losses, jnp.float32))
    return np.asarray(moves)


def recorded_curve(lopt, theta, task: str, steps: int) -> np.ndarray:
    """The minibatch training losses ``lopt`` with ``theta`` records on ``task`` (seed 0)."""
    settings = engine.TrainingSettings(num_steps=steps, num_seeds=1)
    sweep = sweeps.learned_sweep(lopt, theta, name="probe")
    result = engine.TaskEvaluator(tasks_base.get_task(task), [sweep], settings=settings).run()
    return np.asarray(result.curves["probe"].train_loss[0, 0], np.float64)


def _without_regime_head(theta):
    rnn = dict(theta["rnn_params"])
    rnn["regime_step_size"] = jax.tree_util.tree_map(jnp.zeros_like, rnn["regime_step_size"])
    return {**theta, "rnn_params": rnn}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_theta_argument(parser)
    parser.add_argument("--steps", type=int, default=1000, help="the run length T")
    parser.add_argument("--out", default="runs/schedule-probe")
    parser.add_argument(
        "--tasks",
        default="",
        help="comma-separated tasks whose training-loss curve (the first theta's) is probed too",
    )
    args = parser.parse_args(argv)
    if args.steps <= max(SHOWN):
        parser.error(f"--steps must be > {max(SHOWN)}")
    runs = []
    for label, lopt, theta in labelled_thetas(parser, args.theta):
        runs.append((label, lopt, theta))
        if getattr(lopt, "regime_head", False):
            runs.append((f"{label} (regime head off)", lopt, _without_regime_head(theta)))
    t = np.arange(args.steps, dtype=np.float64)
    curves = {name: fn(t) for name, fn in CURVES.items()}
    for task in (x for x in args.tasks.split(",") if x):
        print(f"schedule_probe: recording {runs[0][0]}'s training losses on {task}")
        try:
            curves[task] = recorded_curve(runs[0][1], runs[0][2], task, args.steps)
        except KeyError as e:
            parser.error(f"--tasks: {e.args[0]}")
    sizes = {}
    for i, (label, lopt, theta) in enumerate(runs):
        for curve, losses in curves.items():
            print(f"schedule_probe: {label} on the {curve} curve ({i + 1} of {len(runs)})")
            sizes[label, curve] = step_sizes(lopt, theta, losses)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "schedule_probe.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["theta", "curve", "step", "step_size"])
        for (label, curve), s in sizes.items():
            w.writerows([label, curve, k, f"{v:.6g}"] for k, v in enumerate(s))
    first = runs[0][0]
    lines = [
        "Step size at step "
        + ", ".join(map(str, SHOWN))
        + f" (ratio to {first}'s), constant gradient, T = {args.steps}:",
        "",
        "| curve | theta | " + " | ".join(f"step {k}" for k in SHOWN) + " |",
        "| --- | --- | " + " | ".join("---:" for _ in SHOWN) + " |",
    ]
    for curve in curves:
        for label, _, _ in runs:
            s, ref = sizes[label, curve], sizes[first, curve]
            cells = [f"{s[k]:.3g} ({s[k] / ref[k]:.2f})" for k in SHOWN]
            lines.append(f"| {curve} | {label} | " + " | ".join(cells) + " |")
    (out / "schedule_probe.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(curves), figsize=(5 * len(curves), 3.6), sharey=True)
    for ax, curve in zip(axes, curves, strict=True):
        for label, _, _ in runs:
            ax.plot(sizes[label, curve], label=label)
        ax.set_title(f"{curve} loss curve", fontsize=9)
        ax.set_xlabel("step")
        ax.set_yscale("log")
    axes[0].set_ylabel("step size (constant gradient)")
    axes[-1].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out / "schedule_probe.png", dpi=110)
    print(f"schedule_probe: wrote {out}/schedule_probe.csv, .md and .png")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
