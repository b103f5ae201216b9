"""benchmarks/recipe_table.py: the recipe table counts wins and 'beats its start' correctly."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

FIELDS = ["task", "optimizer", "role", "final_train", "final_valid", "wins", "wins_valid"]
FIELDS += ["normalized_loss", "normalized_valid", "log_loss_diff"]


@pytest.fixture(scope="module")
def table(repo_script):
    return repo_script("benchmarks/recipe_table.py")


def _summary(folder: Path, losses: dict[str, tuple[float, float]], adam: float) -> Path:
    """A summary.csv with one candidate row and one Adam row per task."""
    folder.mkdir()
    with open(folder / "summary.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=FIELDS)
        writer.writeheader()
        for task, (train, valid) in losses.items():
            writer.writerow(dict(task=task, optimizer="X", role="candidate", final_train=train,
                                 final_valid=valid, wins="", wins_valid="", normalized_loss="",
                                 normalized_valid="", log_loss_diff=""))  # fmt: skip
            writer.writerow(dict(task=task, optimizer="Adam", role="best baseline",
                                 final_train=adam, final_valid=adam, wins=int(train < adam),
                                 wins_valid=int(valid < adam), normalized_loss=train / adam,
                                 normalized_valid=valid / adam, log_loss_diff=0.0))  # fmt: skip
    return folder


def test_beats_start_counts_strictly_lower_final_losses_per_task(tmp_path, table):
    start = _summary(tmp_path / "init", {"a": (1.0, 2.0), "b": (1.0, 2.0), "c": (1.0, 2.0)}, 1.5)
    trained = _summary(tmp_path / "run", {"a": (0.5, 2.5), "b": (1.0, 1.0), "c": (2.0, 1.9)}, 1.5)
    assert table.beats_start(trained, start) == {"tasks": 3, "train": 1, "valid": 2}
    assert table.beats_start(start, start) == {"tasks": 3, "train": 0, "valid": 0}
    figures = table.heldout_figures(trained)["Adam"]
    assert (figures["wins"], figures["wins_valid"], figures["tasks"]) == (2, 1, 3)


def test_the_markdown_row_carries_the_start_column_and_writes_csv_and_png(tmp_path, capsys, table):
    start = _summary(tmp_path / "init", {"a": (1.0, 2.0), "b": (1.0, 2.0)}, 1.5)
    trained = _summary(tmp_path / "run", {"a": (0.5, 2.5), "b": (0.9, 1.0)}, 1.5)
    out = tmp_path / "figs"
    assert table.main(["--out", str(out), "--init", str(start), f"R={trained}"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert "better than its initial theta" in lines[0]
    assert lines[2].startswith("| R | - | - | 2/2, 1/2,") and lines[2].endswith("| 2/2, 1/2 |")
    rows = list(csv.DictReader(open(out / "recipe_table.csv")))
    assert rows[0]["beats_start_train"] == "2" and (out / "recipe_table.png").stat().st_size > 0


def test_the_best_score_is_the_runs_own_choice_recorded_in_theta_best(tmp_path, table):
    """A run selected on the validation loss reports that choice, not the train-loss best."""
    from learnopt import checkpoints

    run = tmp_path / "run"
    run.mkdir()
    (run / "metrics.csv").write_text("step,wall_seconds\n0,0\n500,600\n")
    (run / "eval.csv").write_text("step,normalized_loss\n0,0.4\n500,0.6\n")
    assert (table.run_figures(run)["best_score"], table.run_figures(run)["best_step"]) == (0.4, 0)
    meta = {"meta_training": {"score": 0.257, "step": 500, "selected_by": "valid"}}
    checkpoints.save_theta(run / "theta_best.msgpack", {"w": [1.0]}, metadata=meta)
    figures = table.run_figures(run)
    assert (figures["best_score"], figures["best_step"], figures["steps"]) == (0.257, 500, 500)
