"""benchmarks/family_objective.py: a recipe's objective on its families, for several thetas."""

from __future__ import annotations

import csv

import numpy as np


def test_summarize_weights_average_to_one_and_final_reads_the_last_tenth(repo_script):
    module = repo_script("benchmarks/family_objective.py")
    logs = np.full((100, 3), -2.0)
    logs[-10:, 1] = -5.0  # run 1 ends lower over its last tenth only
    out = module.summarize(logs, power=2.0)
    # the late weights have mean 1 (to the midpoint rule's error): a constant passes through
    np.testing.assert_allclose(out["meta_objective"][[0, 2]], -2.0, rtol=1e-3)
    assert out["meta_objective"][1] < -2.0
    np.testing.assert_allclose(out["final_log_loss"], [-2.0, -5.0, -2.0])


def test_the_same_theta_twice_gives_the_same_runs_and_another_theta_differs(repo_script, tmp_path):
    module = repo_script("benchmarks/family_objective.py")
    out = tmp_path / "fo"
    rc = module.main(
        [
            "--theta", "a=ScheduledAdam_cosine_valid",
            "--theta", "b=ScheduledAdam_cosine_hparams",
            "--theta", "c=ScheduledAdam_cosine_valid",
            "--families", "MetaTrain_MLP_Digits8_32",
            "--splits", "train",
            "--num-tasks", "2", "--total-length", "20", "--trunc-length", "10",
            "--out", str(out),
        ]
    )  # fmt: skip
    assert rc == 0
    with open(out / "family_objective.csv") as f:
        rows = list(csv.DictReader(f))
    by = {
        label: np.array([float(r["meta_objective"]) for r in rows if r["theta"] == label])
        for label in "abc"
    }
    assert by["a"].shape == (2,)
    np.testing.assert_array_equal(by["a"], by["c"])  # common random numbers
    assert not np.allclose(by["a"], by["b"])
    text = (out / "family_objective.md").read_text()
    assert "| MetaTrain_MLP_Digits8_32 | train | c |" in text
    assert "| 0/2 |" in text  # c is never below a (equal runs)
    assert (out / "family_objective.png").stat().st_size > 0
