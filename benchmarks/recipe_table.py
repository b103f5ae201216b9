"""The recipe table of docs/meta-training-results.md: heldout results of each recipe, side by side.

Reads ``learnopt evaluate`` folders (their ``summary.csv``) and, where given, the
meta-training run folder of each row (``metrics.csv``, ``eval.csv``: outer steps, wall
time, best meta-validation score), and prints one markdown row per entry: wins on final
train and valid loss against each baseline, geometric-mean loss ratios, the mean
log-loss difference and, with ``--init EVAL_DIR`` (the evaluation of the recipes'
initial theta), on how many tasks the entry's final train and valid losses are below
its starting point's (the "beats its own initialization" test); writes
``recipe_table.csv`` and ``recipe_table.png`` (wins per baseline) into ``--out``::

    python benchmarks/recipe_table.py --out docs/figures --init runs/eval-init \\
        "initial theta=runs/eval-init" "scheduledadam-cosine-tensor=runs/eval-A:runs/mt-A"

Each entry is ``LABEL=EVAL_DIR`` or ``LABEL=EVAL_DIR:RUN_DIR``.
"""

from __future__ import annotations

import argparse
import csv
import math
import sys
from pathlib import Path

BASELINES = ("Adam", "AdamWarmupCosine", "OptList", "Reference")


def _rows(path: Path) -> list[dict[str, str]]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def _geomean(values: list[float]) -> float:
    values = [v for v in values if math.isfinite(v) and v > 0]
    if not values:
        return math.nan
    return math.exp(sum(math.log(v) for v in values) / len(values))


def heldout_figures(eval_dir: Path) -> dict[str, dict[str, float]]:
    """Per baseline: tasks, wins (train, valid), geo-mean ratios, mean log-loss diff.

    Args:
      eval_dir: a ``learnopt evaluate`` output folder.

    Returns:
      ``{baseline: {"tasks", "wins", "wins_valid", "ratio", "ratio_valid", "log_diff"}}``.
    """
    out: dict[str, dict[str, float]] = {}
    rows = [r for r in _rows(eval_dir / "summary.csv") if r["role"] != "candidate"]
    for name in sorted({r["optimizer"] for r in rows}, key=_baseline_order):
        mine = [r for r in rows if r["optimizer"] == name]
        diffs = [float(r["log_loss_diff"]) for r in mine if r["log_loss_diff"] not in ("", "nan")]
        out[name] = {
            "tasks": len(mine),
            "wins": sum(int(r["wins"]) for r in mine),
            "wins_valid": sum(int(r["wins_valid"]) for r in mine),
            "ratio": _geomean([float(r["normalized_loss"] or "nan") for r in mine]),
            "ratio_valid": _geomean([float(r["normalized_valid"] or "nan") for r in mine]),
            "log_diff": sum(diffs) / len(diffs) if diffs else math.nan,
        }
    return out


def _candidate_losses(eval_dir: Path) -> dict[str, tuple[float, float]]:
    rows = _rows(eval_dir / "summary.csv")
    return {
        r["task"]: (float(r["final_train"] or "nan"), float(r["final_valid"] or "nan"))
        for r in rows
        if r["role"] == "candidate"
    }


def beats_start(eval_dir: Path, init_dir: Path) -> dict[str, int]:
    """On how many shared tasks the candidate's final losses are below its start's.

    Args:
      eval_dir: the ``learnopt evaluate`` folder of a recipe's theta.
      init_dir: the same evaluation of the recipe's initial theta.

    Returns:
      ``{"tasks", "train", "valid"}``: tasks in both, and those where the candidate's final
      train (valid) loss is strictly lower than the initial theta's.
    """
    mine, start = _candidate_losses(eval_dir), _candidate_losses(init_dir)
    shared = [t for t in mine if t in start]
    return {
        "tasks": len(shared),
        "train": sum(mine[t][0] < start[t][0] for t in shared),
        "valid": sum(mine[t][1] < start[t][1] for t in shared),
    }


def _baseline_order(name: str) -> tuple[int, str]:
    return (BASELINES.index(name) if name in BASELINES else len(BASELINES), name)


def _chosen(path: Path) -> tuple[float, int] | None:
    """``(score, step)`` of the periodic evaluation's choice recorded in a theta file."""
    if not path.exists():
        return None
    from learnopt import checkpoints

    chosen = (checkpoints.load_theta_metadata(path) or {}).get("meta_training") or {}
    if "score" not in chosen or "step" not in chosen:
        return None
    return float(chosen["score"]), int(chosen["step"])


def run_figures(run_dir: Path) -> dict[str, float]:
    """Outer steps, wall minutes and the best meta-validation score of a meta-training run.

    The best score and step are the run's own choice, read from ``theta_best.msgpack``'s
    metadata (it records the selection, by training or validation loss); a run without
    one falls back to the lowest geometric mean of ``eval.csv``'s normalized train loss.

    Args:
      run_dir: a ``learnopt meta-train`` output folder.

    Returns:
      ``{"steps", "minutes", "best_score", "best_step"}`` (NaN where not recorded).
    """
    metrics = _rows(run_dir / "metrics.csv")
    steps = int(metrics[-1]["step"]) if metrics else 0
    minutes = math.nan
    if metrics and "wall_seconds" in metrics[-1]:
        minutes = float(metrics[-1]["wall_seconds"]) / 60
    best, best_step = math.inf, math.nan
    chosen = _chosen(run_dir / "theta_best.msgpack")
    eval_csv = run_dir / "eval.csv"
    if chosen is not None:
        best, best_step = chosen
    elif eval_csv.exists():
        by_step: dict[int, list[float]] = {}
        for r in _rows(eval_csv):
            by_step.setdefault(int(r["step"]), []).append(float(r["normalized_loss"]))
        for step, values in sorted(by_step.items()):
            score = _geomean(values) if all(math.isfinite(v) for v in values) else math.inf
            if score < best:
                best, best_step = score, step
    return {"steps": steps, "minutes": minutes, "best_score": best, "best_step": best_step}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("entries", nargs="+", help="LABEL=EVAL_DIR[:RUN_DIR]")
    parser.add_argument("--out", type=Path, default=None, help="folder for the CSV and PNG")
    parser.add_argument(
        "--init", type=Path, default=None, help="evaluation folder of the initial theta"
    )
    args = parser.parse_args(argv)
    table = []
    for entry in args.entries:
        label, _, dirs = entry.partition("=")
        eval_dir, _, run_dir = dirs.partition(":")
        if not label or not eval_dir:
            parser.error(f"an entry must look like LABEL=EVAL_DIR[:RUN_DIR], got {entry!r}")
        figures = heldout_figures(Path(eval_dir))
        run = run_figures(Path(run_dir)) if run_dir else {}
        if args.init is not None:
            start = beats_start(Path(eval_dir), args.init)
            run = {**run, "beats_start_train": start["train"], "beats_start_valid": start["valid"]}
            run["beats_start_tasks"] = start["tasks"]
        table.append((label, figures, run))
    names = [n for n in BASELINES if any(n in f for _, f, _ in table)]
    head = "| recipe | outer steps | best meta-valid score (step) | "
    head += " | ".join(f"vs {n}: wins train / valid, ratio" for n in names)
    init = args.init is not None
    head += " | better than its initial theta: train / valid |" if init else " |"
    print(head)
    rule = "| --- | ---: | --- | " + " | ".join("---:" for _ in names)
    print(rule + (" | ---: |" if init else " |"))
    csv_rows = []
    for label, figures, run in table:
        cells = []
        for n in names:
            f = figures.get(n)
            if f is None:
                cells.append("-")
                continue
            cells.append(
                f"{f['wins']}/{f['tasks']}, {f['wins_valid']}/{f['tasks']}, {f['ratio']:.3g}"
            )
            csv_rows.append({"recipe": label, "baseline": n, **f, **run})
        steps = f"{run['steps']:,}" if "steps" in run else "-"
        best = run.get("best_score", math.inf)
        score = f"{best:.3g} ({run['best_step']})" if math.isfinite(best) else "-"
        if init:
            n = run["beats_start_tasks"]
            cells.append(f"{run['beats_start_train']}/{n}, {run['beats_start_valid']}/{n}")
        print(f"| {label} | {steps} | {score} | " + " | ".join(cells) + " |")
    if args.out is not None and csv_rows:
        args.out.mkdir(parents=True, exist_ok=True)
        with open(args.out / "recipe_table.csv", "w", newline="") as f:
            fields = ["recipe", "baseline", "tasks", "wins", "wins_valid", "ratio"]
            fields += ["ratio_valid", "log_diff", "steps", "minutes", "best_score", "best_step"]
            fields += ["beats_start_train", "beats_start_valid", "beats_start_tasks"]
            writer = csv.DictWriter(f, fieldnames=fields, restval="")
            writer.writeheader()
            writer.writerows(csv_rows)
        _plot(table, names, args.out / "recipe_table.png")
        print(f"wrote {args.out / 'recipe_table.csv'} and recipe_table.png", file=sys.stderr)
    return 0


def _plot(table, names, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    legend_inches = 0.28 * (len(table) + 1)  # one legend line per entry, below the axes
    height = 4.2 + legend_inches
    fig, axes = plt.subplots(1, 2, figsize=(11, height), sharey=True)
    width = 0.8 / max(len(table), 1)
    for ax, key, title in zip(
        axes, ("wins", "wins_valid"), ("final train loss", "final valid loss"), strict=True
    ):
        for i, (label, figures, _) in enumerate(table):
            xs = [j + i * width for j in range(len(names))]
            ys = [figures.get(n, {}).get(key, 0) for n in names]
            ax.bar(xs, ys, width, label=label)
        ticks = [j + width * (len(table) - 1) / 2 for j in range(len(names))]
        ax.set_xticks(ticks, names, rotation=15)
        ax.axhline(7 if key == "wins" else 5, color="k", ls="--", lw=1)
        ax.set_title(f"wins on {title}")
        ax.set_ylim(0, 9)
        ax.set_yticks(range(10))
    axes[0].set_ylabel("heldout tasks won (of 9)")
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=1, frameon=False)
    fig.suptitle("Recipes against each baseline (dashed: the targets against tuned Adam)")
    fig.tight_layout(rect=(0, legend_inches / height, 1, 1))
    fig.savefig(path, dpi=120)
    plt.close(fig)


if __name__ == "__main__":
    raise SystemExit(main())
