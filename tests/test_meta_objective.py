"""Meta-objectives (learnopt.outer_trainers.meta_objective): end-of-run and late weighting,
the valid split, the log transform, full-run ES on the last window, and their flags.

Every expected value is computed here in plain numpy on a task whose inner run is known
in closed form: ``L(p) = sum((p - x)^2)`` over 3 coordinates from ``p = 0``, trained by
``LearnableSGD`` toward the train target ``x = 2`` (the valid split's target is 3), so
``p_t = 2 - 2 r^t`` with ``r = 1 - 2 lr``. With ``meta_loss_split=None`` the meta-loss
of step ``t`` is ``L(p_t)`` (before its update); with a split it is the updated params'
``L(p_{t+1})`` on that split's target.
"""

from __future__ import annotations

import argparse

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from learnopt import cli, train
from learnopt.cli import args as cli_args
from learnopt.cli import meta_train as meta_train_cmd
from learnopt.learned_optimizers import base as lopt_base
from learnopt.optimizers import base as opt_base
from learnopt.outer_trainers import (
    common,
    full_es,
    full_grad,
    gradient_learner,
    lopt_truncated_step,
    meta_objective,
    truncated_pes,
    truncation_schedule,
)
from learnopt.run import build
from learnopt.run import config as run_config
from learnopt.tasks import base as tasks_base
from learnopt.testing import count_compiles

TRAIN_X, VALID_X = 2.0, 3.0


class _Split:
    """Constant batches ``x = value`` (``take(*shape)``)."""

    def __init__(self, value):
        self.value = value

    def take(self, *shape):
        return {"x": np.full((*shape, 3), self.value, np.float32)}


class _Datasets:
    train = test = inner_valid = _Split(TRAIN_X)
    outer_valid = _Split(VALID_X)


class _TargetTask(tasks_base.Task):
    """``sum((p - x)^2)`` from ``p = 0``."""

    datasets = _Datasets()

    def init(self, key):
        return jnp.zeros((3,), jnp.float32)

    def loss_with_state(self, params, state, key, batch):
        return jnp.sum((params - batch["x"]) ** 2), state


def _losses(lr, steps, split=None):
    """The numpy meta-losses of steps ``0 .. steps - 1`` (float64)."""
    p, out = np.zeros(3), []
    for _ in range(steps):
        before = np.sum((p - TRAIN_X) ** 2)
        p = p - lr * 2 * (p - TRAIN_X)
        out.append(before if split is None else np.sum((p - VALID_X) ** 2))
    return np.asarray(out)


def _weights(weighting, t, n, window=None, power=1.0):
    """The module doc's weights, written out in numpy."""
    t = np.asarray(t, np.float64)
    if weighting == "last_window":
        w = round(window * n) if isinstance(window, float) else window
        w = min(max(w, 1), n)
        return np.where(t >= n - w, n / w, 0.0)
    return (power + 1) * ((t + 0.5) / n) ** power


def _step(lr=0.1, length=10, num_tasks=2, offset=0, **kw):
    lopt = lopt_base.LearnableSGD(initial_lr=lr)
    step = lopt_truncated_step.VectorizedLOptTruncatedStep(
        _TargetTask(),
        lopt,
        truncation_schedule.ConstantTruncationSchedule(length),
        num_tasks=num_tasks,
        random_initial_iteration_offset=offset,
        **kw,
    )
    return step, lopt.init(jax.random.PRNGKey(0))


# ---------------------------------------------------------------------------------- weights
def test_step_weights_match_the_documented_formulas():
    t = np.arange(12)  # steps 10 and 11 are past the run's end (a staggered first run)
    cases = [("last_window", 3, 1.0), ("last_window", 0.25, 1.0), ("late", None, 1.0)]
    cases += [("late", None, 2.0), ("late", None, 0.5)]
    for weighting, window, power in cases:
        got = np.asarray(
            meta_objective.step_weight(weighting, jnp.asarray(t, jnp.int32), 10, window, power)
        )
        np.testing.assert_allclose(got, _weights(weighting, t, 10, window, power), rtol=1e-6)
    # Mean 1 over a run: exact for the window and for p = 1, 1 - 1/(4 T^2) for p = 2.
    run = jnp.arange(10, dtype=jnp.int32)
    for window in (1, 3, 10, 0.1, 0.25, 1.0):
        w = np.asarray(meta_objective.step_weight("last_window", run, 10, window))
        assert np.isclose(w.mean(), 1.0) and np.count_nonzero(w) == _count(window, 10)
    assert np.isclose(np.mean(meta_objective.step_weight("late", run, 10, power=1.0)), 1.0)
    late2 = np.mean(meta_objective.step_weight("late", run, 10, power=2.0))
    assert np.isclose(late2, 1 - 1 / 400, rtol=1e-6)


def _count(window, n):
    return min(max(round(window * n) if isinstance(window, float) else window, 1), n)


# --------------------------------------------------------- a truncation's meta-loss by hand
@pytest.mark.parametrize(
    "weighting, window, power",
    [("last_window", 3, 1.0), ("last_window", 0.3, 1.0), ("late", None, 2.0)],
)
def test_truncation_meta_loss_is_the_weighted_sum_over_its_steps(weighting, window, power):
    # A 10-step run in two 5-step truncations.
    step, theta = _step(
        meta_loss_weighting=weighting, meta_loss_window=window, meta_loss_power=power
    )
    state = step.init_population(theta, jax.random.PRNGKey(1))
    unroll = jax.jit(lambda s: step.unroll(theta, s, jax.random.PRNGKey(2), step.get_batch(5), 5))
    state, first = unroll(state)
    state, second = unroll(state)
    assert bool(jnp.all(state.is_done))

    losses = _losses(0.1, 10)
    w = _weights(weighting, np.arange(10), 10, window, power)
    for out, steps in ((first, slice(0, 5)), (second, slice(5, 10))):
        np.testing.assert_allclose(np.asarray(out.loss[:, 0]), losses[steps], rtol=1e-5)
        expected = np.sum(w[steps] * losses[steps]) / 5
        np.testing.assert_allclose(np.asarray(common.reduce_loss(out)), expected, rtol=1e-5)
    # Summed over the run's truncations: T/K times the run's weighted mean (times the
    # weights' mean over the run: 1, and 1 - 1/(4 T^2) for p = 2).
    total = common.reduce_loss(first) + common.reduce_loss(second)
    weighted_mean = np.sum(w * losses) / np.sum(w)
    expected = 10 / 5 * weighted_mean * (1 - 1 / 400 if power == 2.0 else 1.0)
    np.testing.assert_allclose(np.asarray(total), expected, rtol=1e-5)


def test_valid_split_composes_with_the_last_window():
    step, theta = _step(
        meta_loss_split="outer_valid", meta_loss_weighting="last_window", meta_loss_window=2
    )
    data = step.get_batch(10)
    assert set(data) == {"train", "meta"}  # the meta-loss draws its own valid batches
    state = step.init_population(theta, jax.random.PRNGKey(1))
    _, out = jax.jit(lambda s: step.unroll(theta, s, jax.random.PRNGKey(2), data, 10))(state)
    valid = _losses(0.1, 10, split="outer_valid")
    assert not np.allclose(valid, _losses(0.1, 10))  # a different objective than training
    np.testing.assert_allclose(np.asarray(out.loss[:, 0]), valid, rtol=1e-5)
    # The mean of the last 2 steps' valid losses: L(p_9), L(p_10) on x = 3.
    expected = valid[-2:].mean()
    np.testing.assert_allclose(np.asarray(common.reduce_loss(out)), expected, rtol=1e-5)


# ----------------------------------------------- full backprop: value and gradient by hand
def _objective(lr, transform, window=3, steps=10):
    losses = _losses(lr, steps)
    if transform == "log":
        losses = np.log(losses)
    return losses[-window:].mean()


@pytest.mark.parametrize("transform", [None, "log"])
def test_full_grad_follows_the_end_of_run_objective(transform):
    step, theta = _step(
        num_tasks=1,
        meta_loss_weighting="last_window",
        meta_loss_window=3,
        meta_loss_transform=transform,
    )
    est = full_grad.FullGrad(step)
    out, _ = jax.jit(
        lambda th: est.compute_gradient_estimate(th, jax.random.PRNGKey(3), None, est.get_datas())
    )(theta)
    log_lr = float(theta["log_lr"])
    lr = float(np.exp(log_lr))
    h = 1e-5  # central difference in log_lr of the float64 numpy run
    grad = _objective(np.exp(log_lr + h), transform) - _objective(np.exp(log_lr - h), transform)
    grad /= 2 * h
    np.testing.assert_allclose(float(out.mean_loss), _objective(lr, transform), rtol=1e-5)
    np.testing.assert_allclose(float(out.grad["log_lr"]), grad, rtol=1e-4)
    if transform == "log":
        # log L_t = log 12 + 2 t log r: the objective is a mean of log-losses.
        t = np.arange(7, 10)
        by_hand = np.mean(np.log(12.0) + 2 * t * np.log(1 - 2 * lr))
        np.testing.assert_allclose(float(out.mean_loss), by_hand, rtol=1e-5)


class _ShiftedNormalizerTask(_TargetTask):
    """A normalizer that shifts the loss below zero, as the library's parametric ones do."""

    def normalizer(self, loss):
        return loss - 100.0


def test_the_log_transform_reads_the_raw_loss_not_a_shifting_normalizer():
    lopt = lopt_base.LearnableSGD(initial_lr=0.1)
    theta = lopt.init(jax.random.PRNGKey(0))
    step = lopt_truncated_step.VectorizedLOptTruncatedStep(
        _ShiftedNormalizerTask(),
        lopt,
        truncation_schedule.ConstantTruncationSchedule(10),
        num_tasks=1,
        meta_loss_weighting="last_window",
        meta_loss_window=3,
        meta_loss_transform="log",
    )
    est = full_grad.FullGrad(step)
    out, _ = jax.jit(
        lambda th: est.compute_gradient_estimate(th, jax.random.PRNGKey(3), None, est.get_datas())
    )(theta)
    # Every normalized value is negative: through the normalizer the log would floor at
    # log(LOG_FLOOR) everywhere, with a zero gradient.
    np.testing.assert_allclose(float(out.mean_loss), _objective(0.1, "log"), rtol=1e-5)
    h = 1e-5
    log_lr = float(theta["log_lr"])
    grad = (_objective(np.exp(log_lr + h), "log") - _objective(np.exp(log_lr - h), "log")) / (2 * h)
    np.testing.assert_allclose(float(out.grad["log_lr"]), grad, rtol=1e-4)
    assert abs(grad) > 1.0
    values = meta_objective.finite_loss(jnp.asarray([jnp.nan, jnp.inf, 2.0, 1e9]))
    np.testing.assert_array_equal(
        np.asarray(values), [meta_objective.LOG_CEIL, meta_objective.LOG_CEIL, 2.0, 1e6]
    )


# ------------------------------------------------------------------------- PES and FullES
def test_pes_counts_only_the_window():
    step, theta = _step(num_tasks=4, meta_loss_weighting="last_window", meta_loss_window=3)
    pes = truncated_pes.TruncatedPES(step, trunc_length=5, std=1e-3)
    estimate = jax.jit(pes.compute_gradient_estimate)
    state = pes.init_worker_state(theta, jax.random.PRNGKey(1))
    losses = _losses(0.1, 10)
    # Steps 0-4 lie before the window: meta-loss 0 and an estimate of exactly 0.
    out, _ = estimate(theta, jax.random.PRNGKey(2), state, pes.get_datas())
    assert float(out.mean_loss) == 0.0 and float(out.grad["log_lr"]) == 0.0
    # Steps 5-9: (1/5) sum_{t=7..9} (10/3) L_t (std 1e-3 moves it by ~1e-6).
    out, _ = estimate(theta, jax.random.PRNGKey(3), out.unroll_state, pes.get_datas())
    expected = np.sum(10 / 3 * losses[7:]) / 5
    np.testing.assert_allclose(float(out.mean_loss), expected, rtol=1e-4)
    assert float(out.grad["log_lr"]) != 0.0


def test_pes_over_a_run_follows_the_end_of_run_objective():
    # PES is unbiased for the whole run: its estimates summed over the run's two
    # truncations average to (T / K) dJ_w / dtheta, J_w the mean of the last 3 losses
    # (the module doc's scale). Measured with 8192 pairs: -2.71, -2.73, -2.86 on three
    # seeds for -2.78.
    step, theta = _step(num_tasks=8192, meta_loss_weighting="last_window", meta_loss_window=3)
    pes = truncated_pes.TruncatedPES(step, trunc_length=5, std=0.01)
    estimate = jax.jit(pes.compute_gradient_estimate)
    state = pes.init_worker_state(theta, jax.random.PRNGKey(100))
    total = 0.0
    for k in range(2):
        out, _ = estimate(theta, jax.random.PRNGKey(k), state, pes.get_datas())
        state, total = out.unroll_state, total + float(out.grad["log_lr"])
    log_lr, h = float(theta["log_lr"]), 1e-5
    exact = _objective(np.exp(log_lr + h), None) - _objective(np.exp(log_lr - h), None)
    exact /= 2 * h
    np.testing.assert_allclose(total, 10 / 5 * exact, rtol=0.1)


def test_full_es_over_1000_steps_on_the_last_tenth():
    step, theta = _step(
        lr=1e-3,
        length=1000,
        meta_loss_weighting="last_window",
        meta_loss_window=0.1,
    )
    est = full_es.FullES(step, std=1e-4)
    assert est.horizon == 1000
    out, _ = jax.jit(
        lambda th: est.compute_gradient_estimate(th, jax.random.PRNGKey(3), None, est.get_datas())
    )(theta)
    losses = _losses(1e-3, 1000)
    # The mean of the last 100 losses, not of the run (which is 3x larger here).
    assert losses.mean() > 2 * losses[-100:].mean()
    np.testing.assert_allclose(float(out.mean_loss), losses[-100:].mean(), rtol=1e-3)


def test_pes_learner_with_late_weights_compiles_once():
    # Staggered 10-step runs in 5-step truncations: the weights change at every step,
    # runs restart; the outer step is one program.
    step, _ = _step(num_tasks=4, offset=10, meta_loss_weighting="late", meta_loss_power=2.0)
    pes = truncated_pes.TruncatedPES(step, trunc_length=5, std=0.01)
    learner = gradient_learner.SingleMachineGradientLearner(
        step.learned_opt, [pes], opt_base.Adam(1e-2)
    )
    state = learner.init(jax.random.PRNGKey(0))
    with count_compiles() as names:
        for k in jax.random.split(jax.random.PRNGKey(1), 6):
            state, loss, _ = learner.update(state, k)
            assert np.isfinite(float(loss))
    assert names.count("_update") == 1


# ------------------------------------------------------------------------------ bad input
def test_bad_meta_objectives_raise_naming_the_argument():
    bad = [
        (dict(meta_loss_weighting="end"), ValueError, "meta_loss_weighting"),
        (dict(meta_loss_weighting="last_window"), ValueError, "meta_loss_window"),
        (dict(meta_loss_window=3), ValueError, "meta_loss_window"),
        (dict(meta_loss_weighting="last_window", meta_loss_window=0), ValueError, "window"),
        (dict(meta_loss_weighting="last_window", meta_loss_window=1.5), ValueError, "window"),
        (dict(meta_loss_weighting="last_window", meta_loss_window="10"), TypeError, "window"),
        (dict(meta_loss_weighting="late", meta_loss_power=-1.0), ValueError, "meta_loss_power"),
        (dict(meta_loss_transform="log10"), ValueError, "meta_loss_transform"),
    ]
    for kwargs, error, match in bad:
        with pytest.raises(error, match=match):
            _step(**kwargs)
    step, _ = _step(meta_loss_weighting="uniform")
    assert step.meta_loss_weighting is None  # "uniform" is the default
    step, _ = _step(meta_loss_weighting="last_window", meta_loss_window=3)
    with pytest.raises(ValueError, match="loss_type='avg'"):
        full_es.FullES(step, loss_type="last_recompute")
    with pytest.raises(ValueError, match="loss_type='avg'"):
        full_grad.FullGrad(step, loss_type="last")


# ---------------------------------------------------------------------- configuration, CLI
def test_flags_reach_the_truncated_step(monkeypatch):
    parser = cli.build_parser()
    argv = ["meta-train", "--trainer", "pes", "--meta-loss-split", "outer_valid"]
    argv += ["--meta-loss-weighting", "last_window", "--meta-loss-window", "0.1"]
    argv += ["--meta-loss-transform", "log", "--meta-loss-power", "2"]
    kwargs = meta_train_cmd.meta_train_kwargs(parser.parse_args(argv))
    assert kwargs["meta_loss_window"] == 0.1 and isinstance(kwargs["meta_loss_window"], float)
    assert (kwargs["meta_loss_split"], kwargs["meta_loss_weighting"]) == (
        "outer_valid",
        "last_window",
    )
    assert (kwargs["meta_loss_transform"], kwargs["meta_loss_power"]) == ("log", 2.0)
    assert cli_args.window("100") == 100 and isinstance(cli_args.window("100"), int)
    for text in ("0", "1.5", "ten"):
        with pytest.raises(argparse.ArgumentTypeError):
            cli_args.window(text)
    # The defaults are the truncated step's (the notes' library's meta-loss).
    empty = meta_train_cmd.meta_train_kwargs(parser.parse_args(["meta-train"]))
    assert all(empty.get(n) is None for n in build.META_OBJECTIVE_SETTINGS)
    assert set(run_config.META_LOSS_WEIGHTINGS) == set(meta_objective.WEIGHTINGS) - {None}
    assert set(run_config.META_LOSS_TRANSFORMS) == set(meta_objective.TRANSFORMS) - {None}
    splits = set(lopt_truncated_step.META_LOSS_SPLITS) - {None}
    assert set(run_config.META_LOSS_SPLITS) == splits

    # meta_train passes them through to the estimators' truncated steps.
    built = []

    class _Stop(Exception):
        pass

    original = build.build_learner

    def spy(**kw):
        built.append(original(**kw))
        raise _Stop

    monkeypatch.setattr(build, "build_learner", spy)
    settings = {k: v for k, v in kwargs.items() if k in run_config.RUN_SETTINGS}
    settings.update(task=_TargetTask(), lopt=lopt_base.LearnableSGD(), total_length=10)
    with pytest.raises(_Stop):
        train.meta_train(**settings)
    step = built[0].gradient_estimators[0].truncated_step
    assert (step.meta_loss_split, step.meta_loss_weighting) == ("outer_valid", "last_window")
    assert (step.meta_loss_window, step.meta_loss_power) == (0.1, 2.0)
    assert step.meta_loss_transform == "log"
    default = build.make_estimator("pes", _TargetTask(), lopt_base.LearnableSGD()).truncated_step
    assert default.meta_loss_weighting is None and default.meta_loss_transform is None
    assert default.meta_loss_split is None
