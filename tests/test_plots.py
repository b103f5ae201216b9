"""Tests for learnopt.plots: PNGs from the Agg canvas, without pyplot state."""

from __future__ import annotations

import sys

import numpy as np

from learnopt import plots

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def test_line_plot_writes_a_png_and_skips_non_finite_points(tmp_path):
    x = np.arange(50)
    ys = {"a": np.exp(-x / 10.0), "b": np.where(x < 25, 1.0 / (1 + x), np.nan)}
    path = plots.line_plot(tmp_path / "sub" / "curves.png", x, ys, xlabel="step", ylabel="loss")
    assert path.read_bytes()[:8] == PNG_MAGIC
    import matplotlib.image

    image = matplotlib.image.imread(path)
    assert image.shape[0] > 100 and image.shape[1] > 100
    assert "matplotlib.pyplot" not in sys.modules or not _pyplot_figures()


def _pyplot_figures():
    import matplotlib.pyplot as plt

    return plt.get_fignums()


def test_mean_band_ignores_diverged_seeds():
    fig = plots.new_figure()
    ax = fig.add_subplot()
    runs = np.array([[3.0, 2.0, 1.0], [np.nan, np.nan, np.nan], [5.0, 4.0, 3.0]])
    plots.plot_mean_band(ax, [0, 1, 2], runs, label="x", color="k")
    (line,) = ax.get_lines()
    np.testing.assert_allclose(line.get_ydata(), [4.0, 3.0, 2.0])
    assert len(ax.collections) == 1  # the min-max band


def test_log_scale_for_non_negative_values_spanning_more_than_30x():
    assert plots.use_log_scale(np.array([0.0, 1.0, 100.0, np.nan]))
    assert not plots.use_log_scale(np.array([1.0, 10.0]))
    assert not plots.use_log_scale(np.array([-1.0, 100.0]))
