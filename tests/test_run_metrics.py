"""metrics.csv (``learnopt.run.metrics``): its per-family columns and how a resume reads
a file written before some columns existed."""

from __future__ import annotations

import csv

import numpy as np
import pytest

from learnopt import plots
from learnopt.run import metrics


def _rows(path):
    with open(path, newline="") as f:
        return list(csv.reader(f))


def test_family_columns_only_with_several_families():
    assert metrics.family_columns(["TruncatedPES"]) == []
    assert metrics.family_columns(["0_TruncatedPES", "1_TruncatedPES"]) == [
        "0_TruncatedPES/meta_loss",
        "0_TruncatedPES/grad_norm",
        "1_TruncatedPES/meta_loss",
        "1_TruncatedPES/grad_norm",
    ]


def test_a_resume_keeps_an_older_files_rows_with_the_new_columns_empty(tmp_path):
    path = tmp_path / "metrics.csv"
    old = ["step", "meta_loss", "theta/log_lr"]
    path.write_text("step,meta_loss,theta/log_lr\n1,0.5,-3.0\n2,0.25,-3.1\n3,0.125,-3.2\n")
    new = ["step", "meta_loss", "0_PES/meta_loss", "theta/log_lr"]
    f = metrics.MetricsFile(path, new)
    kept = f.open(keep_rows=2)
    f.write([["3", "0.2", "0.3", "-3.3"]])
    f.close()
    assert kept == [["1", "0.5", "", "-3.0"], ["2", "0.25", "", "-3.1"]]
    assert _rows(path) == [new, *kept, ["3", "0.2", "0.3", "-3.3"]]
    assert old != new  # the file now has the run's header


def test_a_resume_refuses_a_file_with_a_column_the_run_does_not_write(tmp_path):
    path = tmp_path / "metrics.csv"
    path.write_text("step,meta_loss,theta/other\n1,0.5,2.0\n")
    before = path.read_bytes()
    f = metrics.MetricsFile(path, ["step", "meta_loss", "theta/log_lr"])
    with pytest.raises(ValueError, match=r"resume: .*metrics.csv has columns .*theta/other"):
        f.open(keep_rows=1)
    assert path.read_bytes() == before  # nothing lost


def test_families_plot_shows_each_familys_loss_and_estimate_norm(tmp_path, monkeypatch):
    saved = []
    save = plots.save_figure
    monkeypatch.setattr(
        plots, "save_figure", lambda fig, path: saved.append(fig) or save(fig, path)
    )
    steps = np.arange(1, 101)
    cols = {"step": steps, "meta_loss": np.linspace(2, 1, 100)}
    for i, scale in enumerate((1.0, 30.0)):
        cols[f"{i}_TruncatedPES/meta_loss"] = np.linspace(2, 1, 100) * (i + 1)
        cols[f"{i}_TruncatedPES/grad_norm"] = np.full(100, scale)
    labels = {"0_TruncatedPES": "FamilyA", "1_TruncatedPES": "FamilyB"}
    path = metrics.families_plot(tmp_path, steps, cols, list(labels), labels)
    assert path == tmp_path / "families.png" and path.stat().st_size > 0
    loss_ax, norm_ax = saved[0].axes
    assert norm_ax.get_yscale() == "log" and len(loss_ax.lines) == len(norm_ax.lines) == 2
    assert [t.get_text() for t in norm_ax.get_legend().get_texts()] == ["FamilyA", "FamilyB"]
    # the second family's estimate is 30 times the first's
    assert norm_ax.lines[1].get_ydata()[0] / norm_ax.lines[0].get_ydata()[0] == pytest.approx(30)
