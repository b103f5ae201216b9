"""Tests for learnopt.plots: PNGs from the Agg canvas, without pyplot state."""

from __future__ import annotations

import sys

import numpy as np
import pytest

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


def test_log_scale_only_for_non_negative_values_spanning_more_than_10x():
    assert plots.use_log_scale(np.array([0.0, 1.0, 100.0, np.nan]))
    assert plots.use_log_scale(np.array([0.1, 1.2]))
    assert not plots.use_log_scale(np.array([1.8, 2.0, 2.4]))  # a narrow range: linear
    assert not plots.use_log_scale(np.array([1.0, 10.0]))
    assert not plots.use_log_scale(np.array([-1.0, 100.0]))
    assert not plots.use_log_scale(np.array([1.0, 10.0]), ratio=10.0)
    assert plots.use_log_scale(np.array([1.0, 10.0]), ratio=5.0)


@pytest.fixture
def figures(monkeypatch):
    """The figures the plotting functions save, kept for inspection."""
    saved = []
    save = plots.save_figure

    def keep(fig, path):
        saved.append(fig)
        return save(fig, path)

    monkeypatch.setattr(plots, "save_figure", keep)
    return saved


def _scales(fig):
    return [ax.get_yscale() for ax in fig.axes]


@pytest.mark.parametrize(("low", "high", "scale"), [(1.8, 2.4, "linear"), (1e-3, 2.0, "log")])
def test_meta_loss_plot_is_log_only_over_a_wide_range(tmp_path, figures, low, high, scale):
    steps = np.arange(1, 201)
    loss = np.geomspace(high, low, steps.size)
    lr = np.full(steps.size, 1e-3)
    plots.meta_train_plots(tmp_path, {"step": steps, "meta_loss": loss, "learning_rate": lr})
    meta_loss, learning_rate = figures
    assert _scales(meta_loss) == [scale]
    assert [ax.get_title() for ax in meta_loss.axes] == ["meta-loss"]
    assert learning_rate.axes[0].get_title() == "learned learning rate"


def _right_of_axes(fig, legend, ax):
    renderer = fig.canvas.get_renderer()
    return legend.get_window_extent(renderer).x0 >= ax.get_window_extent(renderer).x1


def test_ratio_plot_has_a_reference_line_a_title_and_its_legend_off_the_data(tmp_path, figures):
    x = np.arange(5)
    ys = {"task A": [1.4, 1.2, 1.0, 0.9, 0.8], "task B": [1.1, 1.0, 1.05, 0.95, 0.9]}
    plots.line_plot(tmp_path / "r.png", x, ys, xlabel="meta-step", ylabel="ratio", reference=1.0)
    (fig,) = figures
    (ax,) = fig.axes
    assert ax.get_yscale() == "linear" and ax.get_title() == "ratio by meta-step"
    dashed = [line for line in ax.get_lines() if line.get_linestyle() == "--"]
    assert len(dashed) == 1 and set(dashed[0].get_ydata()) == {1.0}
    assert _right_of_axes(fig, ax.get_legend(), ax)


def test_evaluation_figure_has_titles_and_its_legend_beside_the_panels(tmp_path, figures):
    from learnopt.evaluation import figures as eval_figures
    from learnopt.evaluation.results import Curves, TaskResult, summarize_task

    rng = np.random.default_rng(0)
    steps, seeds = 40, 2

    def curves(name, scale, points=1):
        train = scale * (1.5 + rng.random((points, seeds, steps))) * np.linspace(1, 0.8, steps)
        return Curves(
            name=name,
            labels=tuple(f"lr={i}" for i in range(points)),
            values={"learning_rate": tuple(0.1 * (i + 1) for i in range(points))}
            if points > 1
            else {},
            train_loss=train.astype(np.float32),
            valid_steps=np.array([0, 20, 40]),
            valid_loss=train[..., [0, 20, 39]].astype(np.float32),
        )

    result = TaskResult(
        task="T",
        curves={"cand": curves("cand", 1.0), "SGD": curves("SGD", 1.1, points=2)},
        num_steps=steps,
        num_seeds=seeds,
        eval_every=20,
        valid_split="outer_valid",
        valid_batches=1,
        seconds=0.0,
    )
    summary = summarize_task(result, "cand", ["SGD"], "final")
    eval_figures.eval_task_figure(result, summary, tmp_path / "curves_T.png")
    (fig,) = figures
    train_ax, valid_ax = fig.axes
    assert [ax.get_title() for ax in fig.axes] == ["train loss", "outer_valid loss"]
    assert fig.get_suptitle().startswith("T: cand vs tuned baselines")
    assert _scales(fig) == ["linear", "linear"]  # losses within 2x of each other
    assert _right_of_axes(fig, valid_ax.get_legend(), valid_ax)
    texts = [t.get_text() for t in valid_ax.get_legend().get_texts()]
    assert texts[0] == "cand (candidate)" and texts[1].startswith("SGD (")
