"""The periodic meta-validation (learnopt.evaluation.periodic): ``eval.csv``, ``eval.png``,
``theta_best.msgpack``.

``PeriodicEval`` is driven here as ``meta_train`` drives it, with the information of each
metrics flush (every 2 meta-steps of a 4-step run, then a resumed run to step 6);
``tests/test_recipe.py`` runs it inside ``learnopt meta-train --eval-every``.
"""

from __future__ import annotations

import math
import types

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from learnopt.evaluation import config, periodic
from learnopt.learned_optimizers import base as lopt_base
from learnopt.tasks import base as tasks_base
from learnopt.tasks.datasets import base as datasets_base

STEPS = 20  # inner steps per evaluation run


def _flush(step, lopt, theta, out_dir, num_steps, rows=2):
    """What a callback receives at a metrics flush (``learnopt.train.StepInfo``)."""
    learner = types.SimpleNamespace(lopt=lopt)
    return types.SimpleNamespace(
        step=step, num_steps=num_steps, rows=[{}] * rows, learner=learner, theta=theta,
        out_dir=out_dir,
    )  # fmt: skip


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """A 4-step "run" with flushes at steps 2 and 4, evaluated every 2 steps."""
    out = tmp_path_factory.mktemp("periodic") / "run"
    out.mkdir()
    lopt = lopt_base.LearnableAdam()
    theta = lopt.init(jax.random.PRNGKey(0))
    callback = periodic.PeriodicEval(2, ["QuadraticTask"], steps=STEPS, progress=False)
    for step in (2, 4):
        callback(_flush(step, lopt, theta, out, num_steps=4))
    return out, lopt, theta, callback


def test_periodic_evaluation_is_logged_and_plotted(run):
    out, _, _, callback = run
    rows = periodic.read_eval_csv(out / "eval.csv")
    assert [r["step"] for r in rows] == [2, 4]
    for r in rows:
        assert r["task"] == "QuadraticTask"
        assert math.isfinite(r["final_train"]) and r["adam_final_train"] > 0
        assert r["adam_lr"] in config.EVAL_LEARNING_RATES
        assert r["normalized_loss"] == pytest.approx(r["final_train"] / r["adam_final_train"])
    assert (out / "eval.png").read_bytes()[:4] == b"\x89PNG"
    assert list(rows[0]) == list(periodic.EVAL_COLUMNS)
    assert [r["step"] for r in callback.history] == [2, 4]


def test_a_resumed_run_appends_evaluations(run):
    out, lopt, theta, _ = run
    again = periodic.PeriodicEval(2, ["QuadraticTask"], steps=STEPS, progress=False)
    again(_flush(6, lopt, theta, out, num_steps=6))
    rows = periodic.read_eval_csv(out / "eval.csv")
    assert [r["step"] for r in rows] == [2, 4, 6]
    # The same theta on the same data (a task built by name): the same figures.
    assert rows[2]["final_train"] == rows[0]["final_train"]


def test_flushes_between_multiples_do_not_evaluate(tmp_path):
    lopt = lopt_base.LearnableSGD()
    theta = lopt.init(jax.random.PRNGKey(0))
    callback = periodic.PeriodicEval(
        4, ["QuadraticTask"], steps=5, learning_rates=(), progress=False, at_start=True
    )
    # at_start: the first flush (step 0); then the first flush at or after 4 and 8.
    for step in (0, 2, 4, 6, 9):
        callback(_flush(step, lopt, theta, tmp_path, num_steps=9, rows=0 if step == 0 else 2))
    assert [r["step"] for r in callback.history] == [0, 4, 9]
    assert all(math.isnan(r["normalized_loss"]) for r in callback.history)  # no baseline


def test_at_start_evaluates_the_initial_theta_of_a_new_run(tmp_path):
    from learnopt import train

    lopt = lopt_base.LearnableSGD(initial_lr=0.05)
    callback = periodic.PeriodicEval(
        2, ["QuadraticTask"], steps=5, learning_rates=(), progress=False, at_start=True
    )
    train.meta_train(
        task="QuadraticTask", lopt=lopt, steps=3, log_every=1, checkpoint_every=0,
        out_dir=tmp_path / "run", plots=False, progress=False, callbacks=[callback],
    )  # fmt: skip
    assert [r["step"] for r in callback.history] == [0, 2]
    # Step 0 is the initial theta: the same figures as evaluating lopt.init directly.
    direct = periodic.PeriodicEval(
        2, ["QuadraticTask"], steps=5, learning_rates=(), progress=False, out_dir=None
    )
    (row,) = direct.evaluate(lopt, lopt.init(jax.random.PRNGKey(0)), 0)
    assert callback.history[0]["final_train"] == row["final_train"]
    assert callback.history[1]["final_train"] != row["final_train"]  # theta moved
    assert periodic.settings(callback)["at_start"] is True
    assert periodic.from_settings(periodic.settings(callback), progress=False).at_start


def test_defaults_come_from_the_configuration():
    callback = periodic.PeriodicEval(10)
    defaults = config.PeriodicEvalConfig()
    assert callback.tasks == defaults.tasks == config.EVAL_TASKS
    assert (callback.steps, callback.seeds) == (defaults.steps, defaults.seeds) == (300, 1)
    assert callback.learning_rates == config.EVAL_LEARNING_RATES
    with pytest.raises(ValueError, match="tasks"):
        periodic.PeriodicEval(10, "QuadraticTask")


def test_the_default_tasks_are_the_meta_valid_suite():
    from learnopt.tasks import suites

    assert config.EVAL_TASKS == suites.get_suite("meta-valid") == suites.META_VALID
    assert not set(config.EVAL_TASKS) & set(suites.get_suite("heldout"))


def test_eval_score_is_the_geometric_mean_and_a_diverged_task_is_never_best():
    rows = [
        {"normalized_loss": 0.5, "final_train": 1.0, "adam_final_train": 2.0},
        {"normalized_loss": 8.0, "final_train": 4.0, "adam_final_train": 0.5},
    ]
    assert periodic.eval_score(rows) == pytest.approx(2.0)  # sqrt(0.5 * 8)
    diverged = [rows[0], {**rows[1], "normalized_loss": math.nan, "final_train": math.nan}]
    assert periodic.eval_score(diverged) == math.inf
    no_baseline = [{**r, "normalized_loss": math.nan, "adam_final_train": math.nan} for r in rows]
    assert periodic.eval_score(no_baseline) == pytest.approx(2.0)  # sqrt(1 * 4)
    assert periodic.eval_score([]) == math.inf


def test_selection_by_the_validation_loss_scores_the_final_valid_losses():
    rows = [
        {"normalized_loss": 0.5, "final_train": 1.0, "final_valid": 2.0},
        {"normalized_loss": 8.0, "final_train": 4.0, "final_valid": 8.0},
    ]
    assert periodic.eval_score(rows, "valid") == pytest.approx(4.0)  # sqrt(2 * 8)
    assert periodic.eval_score([rows[0], {**rows[1], "final_valid": math.nan}], "valid") == math.inf
    # Both columns: the geometric mean of the train score (2.0) and the valid score (4.0).
    assert periodic.eval_score(rows, "train+valid") == pytest.approx(math.sqrt(8.0))
    broken = [rows[0], {**rows[1], "normalized_loss": math.nan, "final_train": math.nan}]
    assert periodic.eval_score(broken, "train+valid") == math.inf
    callback = periodic.PeriodicEval(2, ["QuadraticTask"], select_by="valid", progress=False)
    assert periodic.from_settings(periodic.settings(callback)).select_by == "valid"
    older = {k: v for k, v in periodic.settings(callback).items() if k != "select_by"}
    assert periodic.from_settings(older).select_by == "train"  # a run from before the option
    with pytest.raises(ValueError, match="select_by must be one of"):
        periodic.PeriodicEval(2, select_by="test")


def test_the_best_theta_is_kept_and_a_resumed_run_keeps_its_best(tmp_path):
    from learnopt.learned_optimizers import theta_files

    lopt = lopt_base.LearnableSGD()
    slow, good, bad = ({"log_lr": jnp.float32(np.log(lr))} for lr in (1e-3, 0.1, 1e-4))

    def evaluate(callback, step, theta):
        callback(_flush(step, lopt, theta, tmp_path, num_steps=8))

    callback = periodic.PeriodicEval(2, ["QuadraticTask"], steps=STEPS, progress=False)
    evaluate(callback, 2, slow)
    evaluate(callback, 4, good)
    evaluate(callback, 6, bad)
    path = tmp_path / periodic.BEST_THETA_FILE
    best = theta_files.load(path)
    assert best.metadata["meta_training"]["step"] == callback.best_step == 4
    np.testing.assert_allclose(best.theta["log_lr"], good["log_lr"])
    scores = [periodic.eval_score([r]) for r in callback.history]
    assert callback.best_score == min(scores) == scores[1] < scores[0] < scores[2]

    resumed = periodic.PeriodicEval(2, ["QuadraticTask"], steps=STEPS, progress=False)
    evaluate(resumed, 8, slow)  # worse than step 4's: theta_best stays
    assert resumed.best_step == 4 and resumed.best_score == pytest.approx(scores[1])
    assert theta_files.load(path).metadata["meta_training"]["step"] == 4


# ------------------------------------------------------------ rewinding the data


class _Stream:
    """Batch ``i`` is ``{"x": [i, i]}``; reports its position unless ``positions=False``."""

    def __init__(self, positions: bool = True):
        self.position = 0
        if not positions:
            self.get_state = None  # calling it raises TypeError: no position to report

    def __next__(self):
        return {"x": self.take(1)["x"][0]}

    def take(self, *shape):
        count = int(np.prod(shape))
        idx = np.arange(self.position, self.position + count, dtype=np.float32)
        self.position += count
        return {"x": np.repeat(idx[:, None], 2, axis=1).reshape(*shape, 2)}

    def get_state(self):
        return self.position

    def set_state(self, state):
        self.position = state


class _StreamTask(tasks_base.Task):
    """Loss = mean of the batch (params get no gradient): the figures record the data."""

    name = "StreamTask"

    def __init__(self, positions: bool = True):
        self.datasets = datasets_base.Datasets(_Stream(), _Stream(), _Stream(), _Stream(positions))

    def init(self, key):
        return {"w": jnp.zeros((2,))}

    def loss(self, params, key, batch):
        return jnp.mean(batch["x"]) + 0.0 * jnp.sum(params["w"])


@pytest.mark.parametrize("positions", [True, False])
def test_the_data_is_rewound_only_when_every_split_reports_its_position(positions, monkeypatch):
    task = _StreamTask(positions)
    monkeypatch.setattr(tasks_base, "get_task", lambda name: task)
    lopt = lopt_base.LearnableSGD()
    theta = lopt.init(jax.random.PRNGKey(0))
    callback = periodic.PeriodicEval(
        1, ["StreamTask"], steps=4, learning_rates=(0.1,), progress=False
    )
    first, second = (callback.evaluate(lopt, theta, step)[0] for step in (1, 2))
    figures = [first["adam_final_train"], first["final_train"], second["final_train"]]
    # final_train is the loss of the last of 4 steps: the mean of the last batch drawn.
    # Rewound, every run (the baseline's first) sees train batches 0..3; else each run
    # continues the stream where the one before left it.
    assert figures == ([3, 3, 3] if positions else [3, 7, 11])


def test_tuned_adam_is_computed_once_per_cache_and_progress_names_each_task(tmp_path, capsys):
    lopt = lopt_base.LearnableAdam()
    theta = lopt.init(jax.random.PRNGKey(0))

    def evaluate():
        callback = periodic.PeriodicEval(
            2, ["QuadraticTask"], steps=5, learning_rates=(0.1, 0.01), baseline_cache=tmp_path
        )
        rows = callback.evaluate(lopt, theta, step=0)
        return rows, capsys.readouterr().out.splitlines()

    rows, lines = evaluate()
    assert lines[0].startswith("learnopt eval: tuning Adam over 2 rates on QuadraticTask (1 of 1")
    assert lines[1] == "learnopt eval at step 0: QuadraticTask (1 of 1)"
    assert lines[-1].startswith("learnopt eval at step 0: loss / tuned Adam: QuadraticTask")
    assert len(list(tmp_path.glob("*.npz"))) == 1
    again, lines = evaluate()  # a second run: Adam's curves come from the cache
    assert not any("tuning Adam" in line for line in lines)
    assert again[0]["adam_final_train"] == rows[0]["adam_final_train"]
    assert again[0]["adam_lr"] == rows[0]["adam_lr"]
    assert (
        periodic.settings(periodic.PeriodicEval(2, baseline_cache=None))["baseline_cache"] is None
    )
