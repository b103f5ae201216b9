"""benchmarks/seed_spread.py: margins against a tuned baseline beside the seed-to-seed spread."""

from __future__ import annotations

import csv
import math
from pathlib import Path

import numpy as np
import pytest


def _evaluation(folder: Path) -> Path:
    """One task: a candidate (2 seeds) and a 2-point baseline grid tuned at lr=0.1."""
    folder.mkdir()
    fields = ["task", "optimizer", "role", "setting"]
    with open(folder / "summary.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=fields)
        writer.writeheader()
        writer.writerow(dict(task="t", optimizer="X", role="candidate", setting="theta"))
        writer.writerow(dict(task="t", optimizer="B", role="baseline", setting="lr=0.1"))
    steps = np.arange(1, 11, dtype=np.float32)
    ones = np.ones_like(steps)
    arrays = {
        # candidate: final train 1.0 and 2.0 by seed, final valid 3.0 and 3.0
        "t/X/labels": np.array(["theta"]),
        "t/X/train_loss": np.stack([ones, 2 * ones])[None],
        "t/X/valid_loss": np.array([[[9.0, 3.0], [9.0, 3.0]]]),
        # baseline: the tuned point (index 1) has train 2.0, 2.0 and valid 2.0, 4.0
        "t/B/labels": np.array(["lr=0.01", "lr=0.1"]),
        "t/B/train_loss": np.stack(
            [np.stack([9 * ones, 9 * ones]), np.stack([2 * ones, 2 * ones])]
        ),
        "t/B/valid_loss": np.array([[[9.0, 9.0], [9.0, 9.0]], [[9.0, 2.0], [9.0, 4.0]]]),
    }
    np.savez(folder / "curves.npz", **arrays)
    return folder


def test_the_margin_is_the_seed_means_log_ratio_and_the_spread_the_widest_seed_pair(
    tmp_path, repo_script
):
    module = repo_script("benchmarks/seed_spread.py")
    rows = {r["column"]: r for r in module.spread_rows(_evaluation(tmp_path / "e"), "B", window=5)}
    assert rows["train"]["margin"] == pytest.approx(math.log(1.5 / 2.0))
    assert rows["train"]["spread"] == pytest.approx(math.log(2.0))  # the candidate's seeds
    assert rows["train"]["won"] and rows["train"]["within_noise"]
    assert rows["valid"]["margin"] == pytest.approx(math.log(3.0 / 3.0))
    assert rows["valid"]["spread"] == pytest.approx(math.log(2.0))  # the baseline's seeds
    assert not rows["valid"]["won"]
    # Paired by seed: train 1.0 < 2.0 on seed 0, 2.0 = 2.0 on seed 1; valid 3 > 2, 3 < 4.
    assert (rows["train"]["seeds_won"], rows["valid"]["seeds_won"]) == (1, 1)


def test_a_missing_baseline_is_named_and_the_csv_is_written(tmp_path, capsys, repo_script):
    module = repo_script("benchmarks/seed_spread.py")
    folder = _evaluation(tmp_path / "e")
    with pytest.raises(ValueError, match="no tuned 'Adam' rows"):
        module.spread_rows(folder, "Adam")
    assert module.main(["--baseline", "B", "--out", str(tmp_path / "o"), f"C={folder}"]) == 0
    printed = capsys.readouterr().out
    assert "C, train: 1/1 won; 1/1 margins within the seed spread" in printed
    assert "lower on every seed on 0, higher on every seed on 0" in printed
    assert len(list(csv.DictReader(open(tmp_path / "o" / "seed_spread.csv")))) == 2


def test_evaluations_on_other_seeds_pool_and_the_baseline_is_tuned_on_the_pooled_seeds(
    tmp_path, repo_script
):
    module = repo_script("benchmarks/seed_spread.py")
    first = _evaluation(tmp_path / "a")
    second = _evaluation(tmp_path / "b")
    curves = dict(np.load(second / "curves.npz"))
    curves["t/X/train_loss"] = 3 * curves["t/X/train_loss"] / curves["t/X/train_loss"]
    # on these seeds lr=0.01 (train 1.0) beats lr=0.1 (2.0); pooled, lr=0.1 (2.0 vs 5.0) wins
    curves["t/B/train_loss"][0] = 1.0
    np.savez(second / "curves.npz", **curves)
    rows = {r["column"]: r for r in module.spread_rows([first, second], "B", window=5)}
    assert rows["train"]["seeds"] == 4
    assert rows["train"]["baseline_setting"] == "lr=0.1"
    assert rows["train"]["margin"] == pytest.approx(math.log(((1 + 2 + 3 + 3) / 4) / 2.0))
    assert rows["valid"]["margin"] == pytest.approx(math.log(3.0 / 3.0))
    assert rows["train"]["seeds_won"] == 1  # (1, 2, 3, 3) against (2, 2, 2, 2), seed by seed
    alone = {r["column"]: r for r in module.spread_rows(second, "B", window=5)}
    assert alone["train"]["seeds"] == 2 and alone["train"]["baseline_setting"] == "lr=0.1"
