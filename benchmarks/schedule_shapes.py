"""How the shape of a step schedule moves final train and valid loss on over-fitting tasks.

Heldout's wide MLPs memorize their 5,000 images within 1000 steps, and there the
schedule's shape trades final training loss against final validation loss. This script
trains each task with, on the same seeds (same initializations and batches):

- warmup-cosine Adam (``AdamWarmupCosine``) at one peak rate with 5%, 15% and 30% warmup;
- warmup-cosine Adam (5% warmup) and constant Adam at lower rates (``FRONTIER``): the
  points a tuned baseline can pick between fitting harder and over-fitting less;
- the released Celo-Adam, and Celo-Adam with a hand-set schedule head
  (``CeloAdam(schedule_head=True)``; the head adds ``b + w * tanh(10 (tau - s))`` to
  the log step, one input ``s``): ``early`` (``s = 0.2, w = -1, b = 1``: up to e^2 larger
  steps before tau = 0.2, a shorter warmup), ``late`` (``s = 0.6, w = -1, b = -1``: steps
  down to e^-2 after tau = 0.6) and ``early+late``;
- Celo-Adam with a hand-set regime head (``CeloAdam(regime_head=True)``, bias ``b``
  only: steps times ``exp(b r)``, ``r`` the loss progress in ``[-1, 0]``, so smaller
  steps once the training loss has fallen by orders of magnitude);
- with ``--weight-decays``, Celo-Adam with decoupled weight decay
  (``CeloAdam(weight_decay=lambda)``) and with the decay scaled by the loss progress
  (``weight_decay_by_progress=True``: ``lambda * (-r)``);
- ``grid``: warmup-cosine Adam (5% warmup) at the evaluation grid's rates around the
  tuned ones (``GRID``), so a tuned warmup-cosine baseline can be read off per task;
  with ``--grid-rms-decay b2`` its second-moment decay is ``b2`` instead of 0.999;
- with ``--scales``, Celo-Adam with every step times ``c`` (the schedule head's bias set
  to ``log c``), alone and with each of ``--weight-decays`` by progress;
- ``kernels`` (with ``--scales``): Celo-Adam with only the steps of rank >= 4 tensors
  (conv kernels) times ``c`` (``CeloAdam(kernel_step_mult=c)``), alone and with each of
  ``--weight-decays`` by progress;
- with ``--adaptations``, Celo-Adam with learnopt's hypergradient step adaptation at each
  rate ``beta`` (``CeloAdam(step_adaptation=beta)``), alone and with each of
  ``--weight-decays`` by progress;
- ``free``: learning-rate-free Adams on warmup-cosine's shape (peak 1, 5% warmup), which
  estimate each task's step scale from its own run instead of a per-task search:
  Prodigy (Mishchenko & Defazio 2023, arXiv:2306.06101) and D-Adaptation's AdamW
  (Defazio & Mishchenko 2023, arXiv:2301.07733), both from ``optax.contrib``;
- with ``--smoothings``, Celo-Adam whose scheduler reads a running mean of the training
  loss at each decay ``k`` (``CeloAdam(loss_smoothing=k)``), alone and with each of
  ``--weight-decays`` by progress;
- with ``--rms-decays``, Celo-Adam with Adam's second-moment decay ``b2`` at each value
  (``CeloAdam(initial_rms_decays=(b2,))``; the release's is 0.999), alone, with each
  of ``--smoothings`` and with each of ``--weight-decays`` by progress;
- with ``--celoadam NAME=JSON`` (repeatable), ``custom``: Celo-Adam built with the JSON
  object's constructor arguments (``'{"initial_rms_decays": [0.99], "weight_decay":
  0.03}'``) on the released theta, named ``NAME``.

``--groups`` picks which of these run (default: all but ``grid``, ``kernels``, ``free``
and the groups that need ``--weight-decays``, ``--scales``, ``--adaptations``,
``--smoothings`` or ``--rms-decays``, which run when those are given).

These are measurements of what the heads can express, not tuned optimizers::

    python benchmarks/schedule_shapes.py --seeds 8 --out benchmarks/results/schedule_shapes

Writes ``schedule_shapes.csv`` (one row per task, variant and seed),
``schedule_shapes.md`` (seed means with standard errors) and ``schedule_shapes.png``;
each finished task is kept in ``tasks/<task>.json``, so a stopped run resumes task by
task when rerun with the same ``--out`` and settings.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import sys
import time
from pathlib import Path
from typing import Any

import jax.numpy as jnp
import numpy as np
import optax
import optax.contrib
from tqdm.auto import tqdm

from learnopt import pretrained
from learnopt.evaluation import engine, sweeps
from learnopt.learned_optimizers.celo_adam import CeloAdam, with_regime_head, with_schedule_head
from learnopt.optimizers import nadamw
from learnopt.optimizers.adam import Adam
from learnopt.optimizers.optax_adapter import OptaxOptimizer
from learnopt.tasks import base as tasks_base

DEFAULT_TASKS = ("ImageMLP_Mnist5k_28_Relu128", "ImageMLP_Mnist5k_14_Tanh64x64")
WARMUPS = (0.05, 0.15, 0.3)
#: (optimizer, rate) beside warmup-cosine at ``--lr``: lower rates fit less hard.
FRONTIER = (("Adam", 0.01), ("Adam", 0.00316), ("WC", 0.01), ("WC", 0.0178))
#: Warmup-cosine rates of the ``grid`` group: the evaluation grid's points at which
#: warmup-cosine Adam is tuned on heldout's and meta-valid's tasks.
GRID = (0.00316, 0.01, 0.0316, 0.1)
#: Biases of the hand-set regime head.
REGIME_BIASES = (1.0, 2.0, 4.0)
#: name -> ((index of s in the 9 fraction-of-training inputs, weight), ..., bias)
HEADS = {
    "CeloAdam early": (((2, -1.0),), 1.0),
    "CeloAdam late": (((4, -1.0),), -1.0),
    "CeloAdam early+late": (((2, -1.0), (4, -1.0)), 0.0),
}


def head_theta(released: dict, weights: tuple[tuple[int, float], ...], bias: float) -> dict:
    """The released Celo-Adam theta with a schedule head set by hand.

    Args:
      released: the released Celo-Adam theta.
      weights: (input index, weight) pairs; the other weights are zero.
      bias: the head's bias.

    Returns:
      A ``CeloAdam(schedule_head=True)`` theta.
    """
    theta = with_schedule_head(released)
    w = np.zeros((9, 1), np.float32)
    for index, value in weights:
        w[index, 0] = value
    theta["rnn_params"]["schedule_step_size"] = {
        "w": jnp.asarray(w),
        "b": jnp.full((1,), bias, jnp.float32),
    }
    return theta


#: The variant groups of ``--groups``.
GROUPS = (
    "warmups",
    "frontier",
    "celo",
    "heads",
    "regime",
    "weight_decay",
    "grid",
    "scale",
    "adapt",
    "kernels",
    "free",
    "smooth",
    "rms",
    "custom",
)
#: The groups run when ``--groups`` is not given (``weight_decay``, ``scale`` and
#: ``adapt`` are added when their values are given).
DEFAULT_GROUPS = GROUPS[:5]


def variants(
    lr: float,
    groups: tuple[str, ...] = DEFAULT_GROUPS,
    weight_decays: tuple[float, ...] = (),
    scales: tuple[float, ...] = (),
    adaptations: tuple[float, ...] = (),
    steps: int = 1000,
    smoothings: tuple[float, ...] = (),
    rms_decays: tuple[float, ...] = (),
    grid_rms_decay: float = 0.999,
    custom: dict[str, dict[str, Any]] | None = None,
) -> list[sweeps.Sweep]:
    """The schedules of the module docstring, as evaluation sweeps.

    Args:
      lr: warmup-cosine's peak rate.
      groups: which variants (``GROUPS``).
      weight_decays: the decays of the ``weight_decay`` group (and, by progress, of
        ``scale``, ``kernels``, ``adapt``, ``smooth`` and ``rms``).
      scales: the step multipliers of the ``scale`` and ``kernels`` groups.
      adaptations: the step-adaptation rates of the ``adapt`` group.
      steps: the run length (the ``free`` group's schedules reach zero there).
      smoothings: the loss-smoothing decays of the ``smooth`` group (and of ``rms``).
      rms_decays: the second-moment decays of the ``rms`` group.
      grid_rms_decay: the ``grid`` group's second-moment decay (named when not 0.999).
      custom: the ``custom`` group: a name and ``CeloAdam`` constructor arguments each.

    Returns:
      One sweep per variant.
    """
    out = []
    if "warmups" in groups:
        for w in WARMUPS:
            opt = nadamw.adam_warmup_cosine(lr, warmup_fraction=w)
            out.append(sweeps.optimizer_sweep(opt, name=f"WC warmup {w:g}"))
    if "frontier" in groups:
        for kind, rate in FRONTIER:
            opt = Adam(rate) if kind == "Adam" else nadamw.adam_warmup_cosine(rate)
            out.append(sweeps.optimizer_sweep(opt, name=f"{kind} {rate:g}"))
    released = pretrained.load("CeloAdam")
    if "celo" in groups:
        out.append(sweeps.learned_sweep(released.lopt, released.theta, name="CeloAdam"))
    if "heads" in groups:
        lopt = CeloAdam(schedule_head=True)
        for name, (weights, bias) in HEADS.items():
            theta = head_theta(released.theta, weights, bias)
            out.append(sweeps.learned_sweep(lopt, theta, name=name))
    if "regime" in groups:
        regime = CeloAdam(regime_head=True)
        for bias in REGIME_BIASES:
            theta = with_regime_head(released.theta)
            head = theta["rnn_params"]["regime_step_size"]
            theta["rnn_params"]["regime_step_size"] = {**head, "b": jnp.full((1,), bias)}
            out.append(sweeps.learned_sweep(regime, theta, name=f"CeloAdam regime b={bias:g}"))
    if "weight_decay" in groups:
        for decay in weight_decays:
            for by_progress in (False, True):
                lopt = CeloAdam(weight_decay=decay, weight_decay_by_progress=by_progress)
                name = f"CeloAdam wd={decay:g}" + (" by progress" if by_progress else "")
                out.append(sweeps.learned_sweep(lopt, released.theta, name=name))
    if "grid" in groups:
        tag = "" if grid_rms_decay == 0.999 else f" b2={grid_rms_decay:g}"
        for rate in GRID:
            opt = nadamw.adam_warmup_cosine(rate, beta2=grid_rms_decay)
            out.append(sweeps.optimizer_sweep(opt, name=f"WC {rate:g}{tag}"))
    for scale in scales if "scale" in groups else ():
        theta = head_theta(released.theta, (), math.log(scale))
        out += _celo_sweeps(f"CeloAdam x{scale:g}", theta, weight_decays, schedule_head=True)
    for scale in scales if "kernels" in groups else ():
        name = f"CeloAdam kernels x{scale:g}"
        out += _celo_sweeps(name, released.theta, weight_decays, kernel_step_mult=scale)
    for beta in adaptations if "adapt" in groups else ():
        name = f"CeloAdam hd={beta:g}"
        out += _celo_sweeps(name, released.theta, weight_decays, step_adaptation=beta)
    for k in smoothings if "smooth" in groups else ():
        out += _celo_sweeps(
            f"CeloAdam smooth={k:g}", released.theta, weight_decays, loss_smoothing=k
        )
    for b2 in rms_decays if "rms" in groups else ():
        name = f"CeloAdam b2={b2:g}"
        out += _celo_sweeps(name, released.theta, weight_decays, initial_rms_decays=(b2,))
        for k in smoothings:
            lopt = CeloAdam(initial_rms_decays=(b2,), loss_smoothing=k)
            out.append(sweeps.learned_sweep(lopt, released.theta, name=f"{name} smooth={k:g}"))
    for name, options in (custom or {}).items() if "custom" in groups else ():
        out.append(sweeps.learned_sweep(CeloAdam(**options), released.theta, name=name))
    if "free" in groups:
        warmup = max(1, steps // 20)
        # D-Adaptation divides by the rate-weighted sum of its steps: a rate of exactly 0
        # at the first step makes that 0 / 0, so the warmup starts at 1/warmup.
        shape = optax.warmup_cosine_decay_schedule(1.0 / warmup, 1.0, warmup, steps)
        free = {
            "Prodigy WC": optax.contrib.prodigy(shape, safeguard_warmup=True),
            "D-Adapt AdamW WC": optax.contrib.dadapt_adamw(shape),
        }
        out += [sweeps.optimizer_sweep(OptaxOptimizer(tx), name=n) for n, tx in free.items()]
    # Groups can share a variant (frontier's and grid's "WC 0.01"): train it once.
    unique: dict[str, sweeps.Sweep] = {}
    for sweep in out:
        unique.setdefault(sweep.name, sweep)
    return list(unique.values())


def _celo_sweeps(
    name: str, theta: dict, weight_decays: tuple[float, ...], **options: Any
) -> list[sweeps.Sweep]:
    """``CeloAdam(**options)`` with ``theta``, alone and with each decay by progress."""
    out = [sweeps.learned_sweep(CeloAdam(**options), theta, name=name)]
    for decay in weight_decays:
        lopt = CeloAdam(**options, weight_decay=decay, weight_decay_by_progress=True)
        out.append(sweeps.learned_sweep(lopt, theta, name=f"{name} wd={decay:g} by progress"))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", default=",".join(DEFAULT_TASKS), help="comma-separated")
    parser.add_argument("--lr", type=float, default=0.0316, help="warmup-cosine's peak rate")
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--seeds", type=int, default=8)
    parser.add_argument("--out", default="runs/schedule-shapes")
    parser.add_argument(
        "--groups",
        default=None,
        help=f"comma-separated, of {', '.join(GROUPS)} (default: {', '.join(DEFAULT_GROUPS)}, "
        "with weight_decay, scale and adapt if --weight-decays, --scales and "
        "--adaptations are given)",
    )
    parser.add_argument(
        "--weight-decays",
        default="",
        help="comma-separated decoupled weight decays of Celo-Adam (e.g. 0.03,0.1,0.3)",
    )
    parser.add_argument(
        "--scales",
        default="",
        help="comma-separated step multipliers of Celo-Adam (e.g. 2,4)",
    )
    parser.add_argument(
        "--smoothings",
        default="",
        help="comma-separated loss-smoothing decays of Celo-Adam, each in (0, 1) (e.g. 0.9,0.99)",
    )
    parser.add_argument(
        "--rms-decays",
        default="",
        help="comma-separated second-moment decays b2 of Celo-Adam's Adam, each in (0, 1)",
    )
    parser.add_argument(
        "--grid-rms-decay",
        type=float,
        default=0.999,
        help="second-moment decay b2 of the grid group's warmup-cosine Adam (default 0.999)",
    )
    parser.add_argument(
        "--adaptations",
        default="",
        help="comma-separated step-adaptation rates of Celo-Adam (e.g. 0.01,0.03)",
    )
    parser.add_argument(
        "--celoadam",
        action="append",
        default=[],
        metavar="NAME=JSON",
        help="a custom Celo-Adam variant: its name and its constructor arguments as a JSON "
        "object, on the released theta (repeatable; the custom group)",
    )
    args = parser.parse_args(argv)
    custom = _custom_variants(parser, args.celoadam)
    decays = _positive_list(parser, "--weight-decays", args.weight_decays)
    scales = _positive_list(parser, "--scales", args.scales)
    adaptations = _positive_list(parser, "--adaptations", args.adaptations)
    smoothings = _positive_list(parser, "--smoothings", args.smoothings)
    rms_decays = _positive_list(parser, "--rms-decays", args.rms_decays)
    for flag, values in (("--smoothings", smoothings), ("--rms-decays", rms_decays)):
        if any(k >= 1.0 for k in values):
            parser.error(f"{flag}: every value must be below 1, got {values}")
    groups = DEFAULT_GROUPS + (("weight_decay",) if decays else ())
    groups += (("scale",) if scales else ()) + (("adapt",) if adaptations else ())
    groups += (("smooth",) if smoothings else ()) + (("rms",) if rms_decays else ())
    groups += ("custom",) if custom else ()
    if args.groups is not None:
        groups = tuple(g for g in args.groups.split(",") if g)
        unknown = sorted(set(groups) - set(GROUPS))
        if unknown:
            parser.error(f"--groups: unknown {', '.join(unknown)} (known: {', '.join(GROUPS)})")
    if "weight_decay" in groups and not decays:
        parser.error("--groups weight_decay needs --weight-decays")
    for group in ("scale", "kernels"):
        if group in groups and not scales:
            parser.error(f"--groups {group} needs --scales")
    if "adapt" in groups and not adaptations:
        parser.error("--groups adapt needs --adaptations")
    if "smooth" in groups and not smoothings:
        parser.error("--groups smooth needs --smoothings")
    if not 0.0 < args.grid_rms_decay < 1.0:
        parser.error(f"--grid-rms-decay must be in (0, 1), got {args.grid_rms_decay}")
    if "rms" in groups and not rms_decays:
        parser.error("--groups rms needs --rms-decays")
    if "custom" in groups and not custom:
        parser.error("--groups custom needs --celoadam NAME=JSON")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    settings = engine.TrainingSettings(num_steps=args.steps, num_seeds=args.seeds)
    rows = []
    tasks = [t for t in args.tasks.split(",") if t]
    for i, name in enumerate(tasks):
        print(f"schedule_shapes: {name} ({i + 1} of {len(tasks)})", file=sys.stderr, flush=True)
        sweeps_ = variants(
            args.lr,
            groups,
            decays,
            scales,
            adaptations,
            args.steps,
            smoothings,
            rms_decays,
            args.grid_rms_decay,
            custom,
        )
        rows += _task_rows(name, sweeps_, settings, args.lr, out / "tasks")
    with open(out / "schedule_shapes.csv", "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["task", "variant", "seed", "final_train", "final_valid"])
        writer.writerows(rows)
    labels = list(dict.fromkeys(r[1] for r in rows))
    stats = {}
    lines = [
        f"# Schedule shapes ({args.steps} steps, {args.seeds} seeds, warmup-cosine at {args.lr:g})",
        "",
        "final train = mean train loss of the last tenth; final valid = last valid "
        "evaluation; mean over seeds (standard error).",
        "",
        "| task | variant | final train | final valid |",
        "| --- | --- | ---: | ---: |",
    ]
    for name in tasks:
        for label in labels:
            train = np.array([r[3] for r in rows if r[0] == name and r[1] == label])
            valid = np.array([r[4] for r in rows if r[0] == name and r[1] == label])
            se = np.sqrt(len(valid))
            stats[name, label] = (train.mean(), train.std() / se, valid.mean(), valid.std() / se)
            t, ts, v, vs = stats[name, label]
            lines.append(f"| {name} | {label} | {t:.4g} ({ts:.2g}) | {v:.4g} ({vs:.2g}) |")
    (out / "schedule_shapes.md").write_text("\n".join(lines) + "\n")
    _plot(out / "schedule_shapes.png", tasks, labels, stats)
    print(f"schedule_shapes: wrote {out}/schedule_shapes.md, .csv, .png", file=sys.stderr)
    return 0


def _task_rows(
    name: str,
    sweeps_: list[sweeps.Sweep],
    settings: engine.TrainingSettings,
    lr: float,
    folder: Path,
) -> list[tuple]:
    """One task's (task, variant, seed, final train, final valid) rows, trained or reused.

    Each finished task is kept in ``folder/<task>.json`` with its settings and variant
    names; a later run with the same ``--out`` reuses it when those match (so a stopped
    run resumes task by task) and trains the task again when they do not.
    """
    steps, seeds = settings.num_steps, settings.num_seeds
    key = {"steps": steps, "seeds": seeds, "lr": lr, "variants": [s.name for s in sweeps_]}
    path = folder / f"{name}.json"
    if path.exists():
        saved = json.loads(path.read_text())
        if saved["key"] == key:
            print("  reused (finished by an earlier run)", file=sys.stderr, flush=True)
            return [tuple(r) for r in saved["rows"]]
    start = time.time()
    bar = tqdm(total=steps, desc=f"{name} ({len(sweeps_)} variants)", unit="step")
    result = engine.TaskEvaluator(tasks_base.get_task(name), sweeps_, settings=settings).run(
        progress=bar.update
    )
    bar.close()
    tail = max(1, steps // 10)
    rows = []
    for label, curves in result.curves.items():
        train = curves.train_loss[0, :, -tail:].mean(axis=-1)
        valid = curves.valid_loss[0, :, -1]
        rows += [(name, label, s, float(train[s]), float(valid[s])) for s in range(seeds)]
    folder.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"key": key, "rows": rows}))
    print(f"  {time.time() - start:.0f} s", file=sys.stderr, flush=True)
    return rows


def _custom_variants(parser: argparse.ArgumentParser, given: list[str]) -> dict[str, dict]:
    """``--celoadam NAME=JSON`` values as ``{name: constructor arguments}``; checked."""
    out = {}
    for text in given:
        # The JSON object starts at the first "={", so a name may hold "=" ("b1=0.95").
        cut = text.find("={")
        name, sep, config = (text[:cut], "=", text[cut + 1 :]) if cut > 0 else text.partition("=")
        if not sep or not name:
            parser.error(f"--celoadam: expected NAME=JSON, got {text!r}")
        try:
            options = json.loads(config)
        except json.JSONDecodeError as e:
            parser.error(f"--celoadam {name}: not JSON ({e}): {config}")
        if not isinstance(options, dict):
            parser.error(f"--celoadam {name}: expected a JSON object, got {config}")
        try:
            CeloAdam(**options)
        except (TypeError, ValueError) as e:
            parser.error(f"--celoadam {name}: {e}")
        out[name] = options
    return out


def _positive_list(parser: argparse.ArgumentParser, flag: str, text: str) -> tuple[float, ...]:
    """``text`` as comma-separated positive numbers; a clear argument error otherwise."""
    try:
        values = tuple(float(x) for x in text.split(",") if x)
    except ValueError:
        parser.error(f"{flag}: not a comma-separated list of numbers: {text}")
    if any(not (v > 0 and math.isfinite(v)) for v in values):
        parser.error(f"{flag}: every value must be a positive number, got {text}")
    return values


def _plot(path: Path, tasks: list[str], labels: list[str], stats: dict) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(tasks), figsize=(5.5 * len(tasks), 4.2), squeeze=False)
    colors = plt.cm.tab20(np.linspace(0, 1, len(labels)))
    for ax, name in zip(axes[0], tasks, strict=True):
        for label, color in zip(labels, colors, strict=True):
            t, ts, v, vs = stats[name, label]
            marker = "s" if label.startswith("CeloAdam") else "o"
            ax.errorbar(t, v, xerr=ts, yerr=vs, fmt=marker, color=color, capsize=3, label=label)
        ax.set_xscale("log")
        ax.set_xlabel("final train loss")
        ax.set_ylabel("final valid loss")
        ax.set_title(name, fontsize=9)
    axes[0][-1].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


if __name__ == "__main__":
    sys.exit(main())
