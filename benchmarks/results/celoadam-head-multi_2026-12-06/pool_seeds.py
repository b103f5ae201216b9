"""Issue 32: the heldout comparison on 4 seeds, pooling two 2-seed evaluations.

Seeds 0-1 are the evaluations of ``commands.sh`` and ``../celoadam-mup_2026-12-06`` /
``../mup-default_2026-12-06`` (Adam with warmup and cosine decay tuned over 9 rates);
seeds 100-101 are ``replicate.sh``'s (tuned over 0.01, 0.0316, 0.1, the rates the 2-seed
evaluations chose). Warmup-cosine Adam is tuned again here, by the 4-seed mean final
train loss over the three rates both ran; each optimizer's final train (mean of the last
100 steps) and valid losses are averaged over the 4 seeds, and a task is won when the
mean is below tuned warmup-cosine Adam's. Writes ``per_seed_finals.csv`` and
``pooled_4seeds.md`` beside this file. Run from the repository root after both scripts:

    python benchmarks/results/celoadam-head-multi_2026-12-06/pool_seeds.py
"""

from __future__ import annotations

import csv
import math
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
RUNS = Path("runs")
PAIRS = {
    "the shipped default": ("heldout-mup-default-start", "heldout-seed100-default"),
    "CeloAdam": ("heldout-celoadam-start", "heldout-seed100-CeloAdam"),
    "celoadam-head-multi (step 500)": (
        "heldout-celoadam-head-multi-chosen",
        "heldout-seed100-head-multi",
    ),
    "CeloAdam, width-aware (base 64)": ("heldout-celoadam-muP64", "heldout-seed100-CeloAdam-muP64"),
}
BASELINES = ("Adam", "AdamWarmupCosine", "OptList", "Reference")
WINDOW = 100


def _finals(curves, task: str, name: str) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """``{label: (per-seed final train, per-seed final valid)}`` of one sweep."""
    labels = [str(x) for x in curves[f"{task}/{name}/labels"]]
    train = np.asarray(curves[f"{task}/{name}/train_loss"], np.float64)[..., -WINDOW:].mean(-1)
    valid = np.asarray(curves[f"{task}/{name}/valid_loss"], np.float64)[..., -1]
    return {lab: (train[i], valid[i]) for i, lab in enumerate(labels)}


def main() -> None:
    records, lines = [], []
    wc_cache: dict[str, tuple[str, np.ndarray, np.ndarray]] = {}
    for entry, (first, second) in PAIRS.items():
        a, b = np.load(RUNS / first / "curves.npz"), np.load(RUNS / second / "curves.npz")
        tasks = list(dict.fromkeys(k.split("/")[0] for k in a.keys()))
        won = {"train": 0, "valid": 0}
        rows = []
        for task in tasks:
            name = next(k.split("/")[1] for k in b.keys() if k.startswith(task + "/")
                        and k.split("/")[1] not in BASELINES)  # fmt: skip
            (tr_a, va_a), (tr_b, va_b) = (_finals(c, task, name)["theta"] for c in (a, b))
            train, valid = np.concatenate([tr_a, tr_b]), np.concatenate([va_a, va_b])
            if task not in wc_cache:
                sa, sb = (_finals(c, task, "AdamWarmupCosine") for c in (a, b))
                pooled = {
                    lab: tuple(np.concatenate([sa[lab][i], sb[lab][i]]) for i in (0, 1))
                    for lab in sb
                }
                lab = min(pooled, key=lambda k: pooled[k][0].mean())
                wc_cache[task] = (lab, *pooled[lab])
            lab, wc_train, wc_valid = wc_cache[task]
            mt = math.log(train.mean() / wc_train.mean())
            mv = math.log(valid.mean() / wc_valid.mean())
            won["train"] += mt < 0
            won["valid"] += mv < 0
            rows.append(f"| {task} | {lab} | {mt:+.3f} | {mv:+.3f} |")
            for seed, (t, v) in enumerate(zip(train, valid, strict=True)):
                records.append(dict(entry=entry, task=task, seed_index=seed, final_train=t,
                                    final_valid=v))  # fmt: skip
        lines += [f"### {entry}: {won['train']}/9 train, {won['valid']}/9 valid", "",
                  "| task | tuned warmup-cosine Adam | margin train (ln) | margin valid (ln) |",
                  "| --- | --- | ---: | ---: |", *rows, ""]  # fmt: skip
    (HERE / "pooled_4seeds.md").write_text(
        "# Heldout on 4 seeds (0, 1, 100, 101) against warmup-cosine Adam tuned on them\n\n"
        + "\n".join(lines)
    )
    with open(HERE / "per_seed_finals.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(records[0]))
        writer.writeheader()
        writer.writerows(records)
    print("\n".join(line for line in lines if line.startswith("###")))


if __name__ == "__main__":
    main()
