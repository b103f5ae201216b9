"""Tests for learnopt.train.meta_train: the API, forced divergence, stalls, step keys.

Runs use QuadraticTask (no data, fast to compile). Resume and faults: test_resume.py and
test_faults.py; the command line: test_cli.py.
"""

from __future__ import annotations

import json

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from learnopt import checkpoints, train
from learnopt.learned_optimizers import base as lopt_base
from learnopt.optimizers import base as opt_base
from learnopt.outer_trainers import gradient_learner
from learnopt.run.session import StepKeys
from learnopt.tasks import quadratics

FAST = dict(progress=False, plots=False)
QUAD = dict(task="QuadraticTask", **FAST)


def _finite_theta(result):
    return all(np.all(np.isfinite(np.asarray(v))) for v in jax.tree.leaves(result.theta))


def test_run_without_out_dir_writes_nothing_and_calls_back(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    seen = []
    result = train.meta_train(steps=7, log_every=3, callbacks=[seen.append], **QUAD)
    assert result.ok and result.exit_code == 0 and result.step == 7
    assert list(tmp_path.iterdir()) == []
    assert [info.step for info in seen] == [3, 6, 7]
    assert [len(info.rows) for info in seen] == [3, 3, 1]
    assert [r["step"] for info in seen for r in info.rows] == list(range(1, 8))
    assert seen[-1].theta.keys() == result.theta.keys()
    cols = result.columns
    assert list(cols) == list(train.BASE_COLUMNS) + sorted(f"theta/{k}" for k in result.theta)
    np.testing.assert_array_equal(cols["step"], np.arange(1, 8))
    assert np.all(cols["finite"] == 1) and np.all(cols["skipped"] == 0)
    assert float(cols["theta/log_lr"][-1]) == float(result.theta["log_lr"])


@pytest.mark.parametrize(
    "outer, first_skipped",
    # theta overflows at once (an outer optimizer object: outer_lr=1e39, inf in float32, is
    # refused before any work) / theta jumps to where nothing is finite
    [(dict(theta_opt=opt_base.Adam(1e39)), 1), (dict(outer_lr=1e3), 2)],
)
def test_forced_divergence_never_leaves_a_nonfinite_theta(outer, first_skipped, tmp_path):
    out = tmp_path / "div"
    with pytest.warns(train.MetaTrainWarning, match="meta-steps were skipped"):
        result = train.meta_train(
            **outer, steps=500, health_window=30, log_every=10, out_dir=out, **QUAD
        )
    assert result.status == "diverged" and result.exit_code == 1
    assert "meta-training diverged" in result.message
    assert _finite_theta(result)
    # The run stopped once theta had not changed for a window, with a checkpoint.
    assert result.step < 500
    cols = result.columns
    assert np.all(cols["skipped"][first_skipped - 1 :] == 1)
    assert np.all(cols["skipped"][: first_skipped - 1] == 0)
    saved = checkpoints.load_theta(out / "theta.msgpack")
    for name, value in saved.items():
        assert np.isfinite(value) and float(value) == float(result.theta[name])
    for name in result.theta:
        assert np.all(np.isfinite(cols[f"theta/{name}"]))


def test_theta_that_stops_moving_ends_the_run_as_stalled():
    learner = train.build_learner(task="QuadraticTask", theta_opt=optax.sgd(0.0))
    result = train.meta_train(
        learner=learner, steps=100, health_window=12, log_every=4, progress=False
    )
    assert result.status == "stalled" and result.exit_code == 1
    assert "theta has not changed for 12 meta-steps" in result.message
    assert result.step == 12
    assert np.all(result.columns["update_norm"] == 0)
    assert np.all(result.columns["skipped"] == 0)


def test_learner_skips_a_finite_estimate_whose_step_overflows_theta():
    lopt = lopt_base.LearnableSGD()
    learner = gradient_learner.GradientLearner(lopt, opt_base.SGD(1e38))
    state = learner.init(jax.random.PRNGKey(0))
    theta = learner.get_meta_params(state)
    grads = gradient_learner.AggregatedGradient(
        theta_grads=jax.tree.map(lambda t: jnp.full_like(t, 1e3), theta),
        theta_model_state=None,
        mean_loss=jnp.float32(1.0),
    )
    new, metrics = learner.update(state, [grads], key=jax.random.PRNGKey(1))
    assert bool(metrics["finite"]) and bool(metrics["skipped"])
    assert int(metrics["num_nonfinite"]) == 1 and float(metrics["update_norm"]) == 0.0
    for a, b in zip(
        jax.tree.leaves(learner.get_meta_params(new)), jax.tree.leaves(theta), strict=True
    ):
        np.testing.assert_array_equal(a, b)
    small = grads.replace(  # a step that fits is applied: 1e38 * 1e-37 = 10
        theta_grads=jax.tree.map(lambda t: jnp.full_like(t, 1e-37), theta)
    )
    new, metrics = learner.update(state, [small], key=jax.random.PRNGKey(1))
    assert not bool(metrics["skipped"]) and float(metrics["update_norm"]) > 0


class _NaNLossTask(quadratics.QuadraticTask):
    """A task whose loss is NaN everywhere (a bug in a user's task)."""

    def loss(self, params, key, data):
        return super().loss(params, key, data) * jnp.nan


@pytest.mark.parametrize("trainer", ["full_grad", "pes"])
def test_a_loss_that_is_never_finite_stops_the_run_early_and_says_why(trainer):
    result = train.meta_train(task=_NaNLossTask(), trainer=trainer, steps=400, log_every=5, **FAST)
    assert result.status == "diverged" and result.exit_code == 1
    assert result.step == 10  # the first flush at or after 10 steps, not the whole run
    assert "the meta-loss is not finite at any of the first 10 meta-steps" in result.message
    assert "outer learning rate neither causes nor cures this" in result.message
    assert _finite_theta(result)
    short = train.meta_train(task=_NaNLossTask(), steps=3, **FAST)  # shorter than the check
    assert short.status == "diverged" and "not finite at any of the first 3" in short.message


def test_custom_task_object_is_needed_again_to_resume(tmp_path):
    out = tmp_path / "custom"
    result = train.meta_train(
        task=quadratics.QuadraticTask(dim=3), steps=2, out_dir=out, progress=False, plots=False
    )
    assert result.ok
    with pytest.raises(ValueError, match="started with a custom task object"):
        train.meta_train(out_dir=out, resume=True, steps=3)
    with pytest.raises(ValueError, match="started with a custom task object"):
        train.meta_train(out_dir=out, resume=True, task="QuadraticTask")
    named = tmp_path / "named"  # a run started with a name is refused an object
    named.mkdir()
    config = json.loads((out / "config.json").read_text())
    (named / "config.json").write_text(json.dumps(dict(config, custom=[])))
    with pytest.raises(ValueError, match="started with task='QuadraticTask'; pass that"):
        train.meta_train(out_dir=named, resume=True, task=quadratics.QuadraticTask())
    resumed = train.meta_train(
        task=quadratics.QuadraticTask(dim=3), out_dir=out, resume=True, steps=3, progress=False
    )
    assert resumed.ok and resumed.step == 3


@pytest.mark.parametrize(
    "kwargs, error, message",
    [
        (dict(steps=0), ValueError, "steps must be an integer >= 1, got 0"),
        (dict(steps=2.5), TypeError, "steps must be an integer, got 2.5"),
        (dict(steps=True), TypeError, "steps must be an integer, got True"),
        (dict(seed=-1), ValueError, r"seed must be an integer in \[0, 4294967295\], got -1"),
        (dict(seed=2**32), ValueError, "seed must be an integer in"),
        (dict(outer_lr=float("nan")), ValueError, "outer_lr must be a finite number > 0"),
        (dict(outer_lr=-1.0), ValueError, "outer_lr must be a finite number > 0, got -1.0"),
        (dict(outer_lr="fast"), TypeError, "outer_lr must be a real number"),
        (dict(outer_lr=1e39), ValueError, r"outer_lr must be a finite number in float32"),
        (dict(std=3.5e38), ValueError, r"std must be a finite number in float32"),
        (dict(std=float("inf")), ValueError, "std must be a finite number > 0"),
        (dict(max_grad_norm=0.0), ValueError, "max_grad_norm must be a finite number > 0"),
        (
            dict(family_balance="max"),
            ValueError,
            r"family_balance must be one of \['mean', 'norm'\]",
        ),
        (dict(num_tasks=0), ValueError, "num_tasks must be an integer >= 1"),
        (dict(trunc_length=-2), ValueError, "trunc_length must be an integer >= 1"),
        (dict(log_every=0), ValueError, "log_every must be an integer >= 1"),
        (dict(checkpoint_every=-1), ValueError, "checkpoint_every must be an integer >= 0"),
        (dict(keep_checkpoints=0), ValueError, "keep_checkpoints must be an integer >= 1"),
        (dict(health_window=-5), ValueError, "health_window must be an integer >= 0"),
        (dict(trainer="sgd"), ValueError, "trainer must be one of"),
        (dict(trainer=3), TypeError, "trainer must be a name"),
        (dict(task="NoSuchTask"), ValueError, "task: Unknown task 'NoSuchTask'"),
        (dict(task=3), TypeError, "task must be a registered task name, a Task or a TaskFamily"),
        (dict(lopt="Adamm"), ValueError, "lopt: Unknown learned optimizer 'Adamm'"),
        (dict(lopt=opt_base.Adam()), TypeError, "lopt must be a registered learned optimizer"),
        (dict(trainer="full_grad", trunc_length=3), ValueError, "unrolls whole inner runs"),
        (dict(trainer="pes", trunc_length=9, total_length=8), ValueError, "must be <="),
        (dict(resume=True), ValueError, "resume needs out_dir"),
        (dict(resume=1, out_dir="x"), TypeError, "resume must be True or False"),
        (dict(resume=True, overwrite=True, out_dir="x"), ValueError, "exclude each other"),
        (dict(callbacks=[3]), TypeError, "callbacks must be callables"),
        (dict(data_dir=__file__), ValueError, "data_dir: .* is a file, expected a directory"),
        (dict(out_dir=""), ValueError, "out_dir must be a non-empty path"),
        (dict(out_dir=3), TypeError, r"out_dir must be a path \(str or os.PathLike\)"),
        (dict(theta_opt=opt_base.Adam(), outer_lr=0.1), ValueError, "theta_opt= replaces"),
    ],
)
def test_bad_arguments_raise_before_any_work(kwargs, error, message, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(error, match=message):
        train.meta_train(progress=False, **kwargs)
    assert list(tmp_path.iterdir()) == []


def test_learner_and_its_settings_are_exclusive():
    learner = train.build_learner(task="QuadraticTask")
    with pytest.raises(ValueError, match="learner= already defines trainer"):
        train.meta_train(learner=learner, trainer="pes")


def test_step_keys_are_a_function_of_the_step_alone(monkeypatch):
    monkeypatch.setattr(StepKeys, "BLOCK", 4)
    keys = StepKeys(jax.random.PRNGKey(0))
    got = [tuple(int(x) for x in keys[i]) for i in range(10)]
    assert len(set(got)) == 10
    again = StepKeys(jax.random.PRNGKey(0))
    assert [tuple(int(x) for x in again[i]) for i in (9, 2, 5)] == [got[9], got[2], got[5]]
    other = StepKeys(jax.random.PRNGKey(1))
    assert tuple(int(x) for x in other[0]) != got[0]
