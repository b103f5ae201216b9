"""Tests for learnopt.tensorboard: ``--tensorboard DIR`` writes the CSV's numbers as events.

The evaluation's events are checked in tests/test_eval_cli.py (with its partial-run test).
"""

from __future__ import annotations

import sys

import numpy as np
import pytest

from learnopt import cli, tensorboard
from learnopt.run import metrics


def test_meta_train_writes_the_metrics_csv_columns_as_scalars(tmp_path):
    run, board = tmp_path / "run", tmp_path / "tb"
    argv = ["meta-train", "--task", "QuadraticTask", "--steps", "6", "--out", str(run)]
    assert cli.main([*argv, "--quiet", "--no-plots", "--tensorboard", str(board)]) == 0
    csv = metrics.read_metrics(run / "metrics.csv")
    scalars = tensorboard.read_scalars(board)
    for column in ("meta_loss", "learning_rate", "grad_norm"):
        steps, values = zip(*scalars[f"meta_train/{column}"], strict=True)
        assert list(steps) == csv["step"].astype(int).tolist() == [1, 2, 3, 4, 5, 6]
        # float32 in the event, the float32 metric's repr in the CSV: equal bit for bit
        np.testing.assert_array_equal(np.float32(values), csv[column].astype(np.float32))
    assert len(set(dict(scalars["meta_train/meta_loss"]).values())) > 1  # it trained


def test_a_missing_extra_is_named_before_anything_runs(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "tensorboardX", None)  # import fails as if absent
    run = tmp_path / "run"
    argv = ["meta-train", "--task", "QuadraticTask", "--steps", "2", "--out", str(run)]
    with pytest.raises(SystemExit) as e:
        cli.main([*argv, "--quiet", "--tensorboard", str(tmp_path / "tb")])
    assert e.value.code == 1
    assert "pip install 'learnopt[tensorboard]'" in capsys.readouterr().err
    assert not run.exists()
    argv = ["evaluate", "--optimizer", "SGD", "--lr", "0.1", "--tasks", "QuadraticTask"]
    with pytest.raises(SystemExit) as e:
        cli.main([*argv, "--out", str(tmp_path / "eval"), "--tensorboard", str(tmp_path / "t")])
    assert e.value.code == 1
    assert "pip install 'learnopt[tensorboard]'" in capsys.readouterr().err
    assert not (tmp_path / "eval").exists()


def test_a_resumed_run_hides_what_the_killed_one_wrote_past_its_checkpoint(tmp_path):
    class Info:  # what meta_train passes its callbacks (learnopt.run.results.StepInfo)
        def __init__(self, first, last, offset):
            self.rows = [
                {"step": s, "meta_loss": s + offset, "note": "x"} for s in range(first, last)
            ]

    killed = tensorboard.MetaTrainWriter(tmp_path)
    killed(Info(1, 6, 0.0))  # steps 1-5 written, the checkpoint at step 3
    killed.close()
    resumed = tensorboard.MetaTrainWriter(tmp_path)
    resumed(Info(4, 7, 0.5))  # the resumed run redoes steps 4-6
    resumed.close()
    assert tensorboard.read_scalars(tmp_path) == {
        "meta_train/meta_loss": [(1, 1.0), (2, 2.0), (3, 3.0), (4, 4.5), (5, 5.5), (6, 6.5)]
    }
