"""How much of a heldout win is seed noise: the seed-to-seed spread beside each margin.

``learnopt evaluate`` counts a task as won when the candidate's seed-mean final loss is
below the tuned baseline's. This script reads evaluation folders (their ``summary.csv``
and ``curves.npz``) and prints, per task and column (final train loss: the mean of the
last ``final_window`` steps, as the evaluation's; final valid loss), the candidate's
margin against a tuned baseline, ``ln(candidate) - ln(baseline)``, beside the seed
spread: the largest ``|ln(seed i) - ln(seed j)|`` of the candidate and the baseline at its
tuned rate. A margin smaller than the spread is a win or loss that another pair of seeds
could reverse. ``LABEL=DIR,DIR`` pools evaluations of one candidate on other seeds
(``learnopt evaluate --seed 100``): their per-seed finals are concatenated and the baseline
is tuned again on the pooled seeds. Writes ``seed_spread.csv`` into ``--out``::

    python benchmarks/seed_spread.py --baseline AdamWarmupCosine \\
        CeloAdam=runs/heldout-celoadam-start default=runs/heldout-default \\
        "CeloAdam (4 seeds)=runs/heldout-celoadam-start,runs/heldout-seed100-CeloAdam"
"""

from __future__ import annotations

import argparse
import csv
import itertools
import json
import math
import sys
from pathlib import Path

import numpy as np

#: The steps the evaluation's final train loss averages (``learnopt evaluate``'s default).
FINAL_WINDOW = 100


def _finals(curves: np.lib.npyio.NpzFile, task: str, name: str, label: str, window: int):
    """Per-seed final train and valid losses of one sweep point, as float64 arrays."""
    labels = [str(x) for x in curves[f"{task}/{name}/labels"]]
    i = labels.index(label)
    train = np.asarray(curves[f"{task}/{name}/train_loss"][i], np.float64)[:, -window:]
    valid = np.asarray(curves[f"{task}/{name}/valid_loss"][i], np.float64)[:, -1]
    return train.mean(axis=-1), valid


def _spread(values: np.ndarray) -> float:
    """The largest absolute log difference between two seeds (0 for one seed)."""
    pairs = itertools.combinations([float(v) for v in values], 2)
    return max((abs(math.log(a / b)) for a, b in pairs if a > 0 and b > 0), default=0.0)


def _window(folder: Path) -> int:
    """The final-train window the evaluation recorded in its config.json (else the default)."""
    try:
        return int(json.loads((folder / "config.json").read_text()).get("window", FINAL_WINDOW))
    except (OSError, ValueError):
        return FINAL_WINDOW


def _candidate_finals(curves, rows: list[dict], window: int) -> dict[str, tuple]:
    """``{task: (per-seed final train, per-seed final valid)}`` of the candidate."""
    cands = [r for r in rows if r["role"] == "candidate"]
    return {
        r["task"]: _finals(curves, r["task"], r["optimizer"], r["setting"], window) for r in cands
    }


def _pooled_baseline(curves_list, task: str, baseline: str, windows) -> tuple[str, tuple]:
    """The baseline's setting with the lowest seed-mean final train loss over every
    evaluation's seeds (among the settings all of them ran), and its pooled finals."""
    per_eval = []
    for curves, window in zip(curves_list, windows, strict=True):
        labels = [str(x) for x in curves[f"{task}/{baseline}/labels"]]
        per_eval.append({lab: _finals(curves, task, baseline, lab, window) for lab in labels})
    common = [lab for lab in per_eval[0] if all(lab in e for e in per_eval)]
    if not common:
        raise ValueError(f"{task}: no {baseline!r} setting was run by every evaluation")
    pooled = {
        lab: tuple(np.concatenate([e[lab][i] for e in per_eval]) for i in (0, 1)) for lab in common
    }
    best = min(pooled, key=lambda lab: pooled[lab][0].mean())
    return best, pooled[best]


def spread_rows(folder: Path | list[Path], baseline: str, window: int | None = None) -> list[dict]:
    """Margins and seed spreads of a candidate against ``baseline``, on one evaluation or
    several pooled.

    With several folders (evaluations of the same candidate on different seeds, e.g.
    ``learnopt evaluate --seed 0`` and ``--seed 100``), every per-seed final is pooled,
    and the baseline is tuned again, by the pooled mean final train loss, over the
    settings that every evaluation ran.

    Args:
      folder: a ``learnopt evaluate`` output folder, or a list of them.
      baseline: the tuned baseline to compare with (e.g. ``"AdamWarmupCosine"``).
      window: the steps the final train loss averages (default: each evaluation's own,
        from its ``config.json``).

    Returns:
      One dict per task and column (``"train"``, ``"valid"``): ``task``, ``column``,
      ``baseline_setting``, ``seeds``, ``margin`` (log candidate - log baseline, seed
      means), ``spread`` (the largest seed-to-seed log difference of either), ``won``,
      ``within_noise`` and ``seeds_won`` (on how many seeds the candidate is lower than
      the baseline on the same seed).
    """
    folders = [Path(f) for f in (folder if isinstance(folder, list | tuple) else [folder])]
    windows = [_window(f) if window is None else window for f in folders]
    summaries = [list(csv.DictReader(open(f / "summary.csv", newline=""))) for f in folders]
    tuned = {
        r["task"]: r
        for r in summaries[0]
        if r["optimizer"] == baseline and r["role"] != "candidate"
    }
    if not tuned:
        raise ValueError(f"{folders[0]}: no tuned {baseline!r} rows in summary.csv")
    curves_list = [np.load(f / "curves.npz") for f in folders]
    cands = [
        _candidate_finals(c, rows, w)
        for c, rows, w in zip(curves_list, summaries, windows, strict=True)
    ]
    out = []
    for task in cands[0]:
        missing = [str(f) for f, c in zip(folders, cands, strict=True) if task not in c]
        if missing:
            raise ValueError(f"{task}: no candidate in {', '.join(missing)}")
        mine = tuple(np.concatenate([c[task][i] for c in cands]) for i in (0, 1))
        if len(folders) == 1:
            setting = tuned[task]["setting"]
            theirs = _finals(curves_list[0], task, baseline, setting, windows[0])
        else:
            setting, theirs = _pooled_baseline(curves_list, task, baseline, windows)
        for col, a, b in (("train", mine[0], theirs[0]), ("valid", mine[1], theirs[1])):
            margin = math.log(a.mean() / b.mean())
            spread = max(_spread(a), _spread(b))
            # Seeds pair up (seed s of every optimizer: the same init and batches).
            # A non-finite final ranks last, as the evaluation's rank_key ranks it.
            ranked = [np.where(np.isfinite(x), x, np.inf) for x in (a, b)]
            seeds_won = int(np.sum(ranked[0] < ranked[1]))
            out.append(
                dict(task=task, column=col, baseline_setting=setting, seeds=len(a),
                     margin=margin, spread=spread, won=margin < 0,
                     within_noise=abs(margin) < spread, seeds_won=seeds_won)
            )  # fmt: skip
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "entries",
        nargs="+",
        help="LABEL=EVAL_DIR, or LABEL=EVAL_DIR,EVAL_DIR,... to pool evaluations on other seeds",
    )
    parser.add_argument("--baseline", default="AdamWarmupCosine", help="the tuned baseline")
    parser.add_argument("--out", type=Path, default=None, help="folder for seed_spread.csv")
    args = parser.parse_args(argv)
    table = []
    for entry in args.entries:
        label, sep, folder = entry.partition("=")
        if not sep or not folder:
            parser.error(f"entry {entry!r} is not LABEL=EVAL_DIR[,EVAL_DIR...]")
        for row in spread_rows([Path(f) for f in folder.split(",")], args.baseline):
            table.append({"entry": label, **row})
    head = f"| entry | task | column | seeds | tuned {args.baseline} | margin (ln) | spread (ln) |"
    print(head)
    print("| --- | --- | --- | ---: | --- | ---: | ---: |")
    for r in table:
        flag = " (within noise)" if r["within_noise"] else ""
        cells = (r["entry"], r["task"], r["column"], r["seeds"], r["baseline_setting"])
        print("| " + " | ".join(map(str, cells)) + f" | {r['margin']:+.3f}{flag} "
              f"| {r['spread']:.3f} |")  # fmt: skip
    for label in dict.fromkeys(r["entry"] for r in table):
        for col in ("train", "valid"):
            mine = [r for r in table if r["entry"] == label and r["column"] == col]
            wins = sum(r["won"] for r in mine)
            noisy = sum(r["within_noise"] for r in mine)
            every = sum(r["seeds_won"] == r["seeds"] for r in mine)
            none = sum(r["seeds_won"] == 0 for r in mine)
            print(f"{label}, {col}: {wins}/{len(mine)} won; {noisy}/{len(mine)} margins within "
                  f"the seed spread; lower on every seed on {every}, higher on every seed on "
                  f"{none}")  # fmt: skip
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        with open(args.out / "seed_spread.csv", "w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=list(table[0]))
            writer.writeheader()
            writer.writerows(table)
        print(f"wrote {args.out / 'seed_spread.csv'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
