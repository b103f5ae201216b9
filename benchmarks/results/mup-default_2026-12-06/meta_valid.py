"""The shipped default and its width-aware version on meta-valid, as a meta-training run's
periodic evaluation measures a theta (6 tasks, 1000 steps, 3 seeds; final train loss
normalized by Adam tuned over 7 rates on the same batches; final valid loss).

    python benchmarks/results/mup-default_2026-12-06/meta_valid.py

Writes meta_valid.csv beside this file and prints the geometric means.
"""

import csv
import math
from pathlib import Path

from learnopt import pretrained
from learnopt.evaluation.periodic import PeriodicEval
from learnopt.learned_optimizers.width_aware import WidthAware

HERE = Path(__file__).resolve().parent


def main() -> None:
    entry = pretrained.load("ScheduledAdam_cosine_hparams")
    candidates = {
        "default": entry.lopt,
        "default_muP64": WidthAware(entry.lopt, base_width=64, max_multiplier=1.0),
    }
    rows = []
    for name, lopt in candidates.items():
        ev = PeriodicEval(every=1, steps=1000, seeds=3, keep_best=False, progress=True)
        for row in ev.evaluate(lopt, entry.theta, step=0):
            rows.append({"candidate": name, **row})
    with open(HERE / "meta_valid.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    for name in candidates:
        mine = [r for r in rows if r["candidate"] == name]
        train, valid = (_geo_mean(mine, k) for k in ("normalized_loss", "final_valid"))
        print(f"{name}: normalized train {train:.3f}, valid {valid:.4f}")


def _geo_mean(rows: list[dict], key: str) -> float:
    return math.exp(sum(math.log(float(r[key])) for r in rows) / len(rows))


if __name__ == "__main__":
    main()
