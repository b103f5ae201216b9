"""learnopt.optimizers.nadamw and learning_rate_schedules: NAdamW and its schedules.

The library's ``nadamw_test`` smoke-tests Nesterov, both weight decays and a cosine
schedule; here the same cases pass the smoke test, the update is checked against a
numpy transcription of the formula in the module docstring, the L2 decay is checked
to be the gradient of ``l2 / 2 |p|^2`` added to the loss, and each schedule is
checked at hand-computed points, also with traced hyperparameters.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from learnopt.optimizers import learning_rate_schedules as lrs
from learnopt.optimizers import nadamw, test_utils

LIBRARY_CASES = {
    "nesterov": lambda: nadamw.NAdamW(use_nesterov=True),
    "weight_decays": lambda: nadamw.NAdamW(adamw_weight_decay=1.0, l2_weight_decay=1.0),
    "schedule": lambda: nadamw.NAdamW(
        learning_rate=lrs.CosineLearningRateSchedule(1e-3, 0.1, 0.3, 0.1)
    ),
}


@pytest.mark.parametrize("case", list(LIBRARY_CASES))
def test_library_cases_pass_the_smoke_test(case):
    test_utils.smoketest_optimizer(LIBRARY_CASES[case]())


def _numpy_nadamw(p, grads, lr_fn, b1, b2, eps, adamw_wd, l2_wd, nesterov):
    m, v = np.zeros_like(p), np.zeros_like(p)
    for k, g in enumerate(grads):
        g = g + l2_wd * p
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        t = k + 1
        lr_t = lr_fn(k) * math.sqrt(1 - b2**t) / (1 - b1**t)
        u = b1 * m + (1 - b1) * g if nesterov else m
        p = p - lr_t * (u / (np.sqrt(v) + eps) + adamw_wd * p)
    return p


@pytest.mark.parametrize("nesterov", [True, False], ids=["nesterov", "plain"])
def test_update_follows_the_documented_formula(nesterov):
    rng = np.random.default_rng(0)
    p0 = rng.normal(size=(4,))
    grads = [rng.normal(size=(4,)) for _ in range(5)]
    schedule = lrs.CosineLearningRateSchedule(0.05, 0.1, 0.4, 0.2)
    opt = nadamw.NAdamW(schedule, 0.8, 0.95, 1e-3, 0.1, 0.05, nesterov)
    state = opt.init({"p": jnp.asarray(p0, jnp.float32)}, num_steps=10)
    for g in grads:
        state = opt.update(state, {"p": jnp.asarray(g, jnp.float32)})
    expected = _numpy_nadamw(
        p0, grads, lambda k: float(schedule(k, 10)), 0.8, 0.95, 1e-3, 0.1, 0.05, nesterov
    )
    np.testing.assert_allclose(opt.get_params(state)["p"], expected, rtol=2e-5, atol=1e-7)


def test_l2_weight_decay_is_the_gradient_of_a_squared_norm_penalty():
    """Decaying by ``l2`` equals adding ``l2 / 2 * |p|^2`` to the loss (weights shrink)."""
    l2 = 0.5
    loss = lambda p: jnp.sum((p["w"] - 1.0) ** 2)  # noqa: E731
    penalized = lambda p: loss(p) + l2 / 2 * jnp.sum(p["w"] ** 2)  # noqa: E731
    p0 = {"w": jnp.asarray([2.0, -1.0, 0.5])}
    with_decay, plain = nadamw.NAdamW(0.05, l2_weight_decay=l2), nadamw.NAdamW(0.05)
    s1, s2 = with_decay.init(p0), plain.init(p0)
    for _ in range(5):
        s1 = with_decay.update(s1, jax.grad(loss)(with_decay.get_params(s1)))
        s2 = plain.update(s2, jax.grad(penalized)(plain.get_params(s2)))
    np.testing.assert_allclose(with_decay.get_params(s1)["w"], plain.get_params(s2)["w"], 1e-6)


def test_traced_nesterov_flag_gives_the_python_flag_result():
    p0, g = {"w": jnp.asarray([1.0, -2.0])}, {"w": jnp.asarray([0.3, 0.1])}

    def run(flag):
        opt = nadamw.NAdamW(0.1, use_nesterov=flag)
        state = opt.update(opt.update(opt.init(p0), g), g)
        return opt.get_params(state)["w"]

    traced = jax.jit(run)
    for flag in (True, False):
        np.testing.assert_allclose(traced(jnp.asarray(flag)), run(flag), rtol=1e-6)


def test_a_schedule_needs_the_run_length():
    opt = nadamw.NAdamW(lrs.CosineLearningRateSchedule(1e-3))
    with pytest.raises(ValueError, match="num_steps"):
        opt.init({"w": jnp.ones(2)})
    state = nadamw.NAdamW(1e-3).init({"w": jnp.ones(2)})  # a constant rate does not
    assert state.state is None and state.model_state is None


# --- schedules ----------------------------------------------------------------------


def test_cosine_schedule_warms_up_holds_then_decays():
    s = lrs.CosineLearningRateSchedule(1.0, min_learning_rate_mult=0.1, constant_fraction=0.5,
                                       warmup_fraction=0.1)  # fmt: skip
    # The ramp lasts max(warmup, constant) = 50 of 100 steps.
    points = {0: 0.0, 10: 0.2, 25: 0.5, 50: 1.0, 75: 0.55, 100: 0.1, 150: 0.1}
    for step, value in points.items():
        assert float(s(step, 100)) == pytest.approx(value, abs=1e-6), step
    no_warmup = lrs.CosineLearningRateSchedule(1.0, 0.1, 0.5, warmup_fraction=0.0)
    assert float(no_warmup(10, 100)) == pytest.approx(1.0)
    late = lrs.CosineLearningRateSchedule(1.0, 0.0, constant_fraction=0.5, warmup_fraction=0.6)
    assert float(late(30, 100)) == pytest.approx(0.5)
    assert float(late(61, 100)) == pytest.approx(math.cos(0.22 * math.pi) / 2 + 0.5, abs=1e-6)
    with pytest.raises(ValueError, match="max_steps"):
        s(3)


def test_cosine_schedule_with_traced_hyperparameters_matches_python_ones():
    cases = [(1e-2, 0.0, 0.5, 0.1), (3e-3, 0.2, 0.3, 0.0), (1e-3, 0.5, 0.0, 0.7)]
    steps = jnp.arange(0, 101, 7)

    def traced(lr, mult, const, warm):
        sched = lrs.CosineLearningRateSchedule(lr, mult, const, warm)
        return jax.vmap(lambda t: sched(t, 100))(steps)

    got = jax.vmap(traced)(*(jnp.asarray(c, jnp.float32) for c in zip(*cases, strict=True)))
    for row, case in zip(got, cases, strict=True):
        sched = lrs.CosineLearningRateSchedule(*case)
        expected = [float(sched(int(t), 100)) for t in steps]
        np.testing.assert_allclose(row, expected, rtol=1e-5, atol=1e-9)


def test_other_schedules_at_hand_computed_points():
    ramp = lrs.LinearRampupSqrtDecay(peak_lr=1.0, warmup_steps=100)
    for step, value in {0: 0.01, 50: 0.5, 100: 1.0, 400: 0.5}.items():
        assert float(ramp(jnp.asarray(step))) == pytest.approx(value), step
    piecewise = lrs.PiecewiseLinear((10, 20), (1.0, 3.0))
    for step, value in {0: 1.0, 15: 2.0, 20: 3.0, 30: 3.0}.items():
        assert float(piecewise(step)) == pytest.approx(value), step
    with pytest.raises(ValueError, match="as many vals as times"):
        lrs.PiecewiseLinear((1, 2), (1.0,))
    assert float(lrs.ExponentialDecay(2.0, 0.5)(3)) == pytest.approx(0.25)
    assert isinstance(ramp, lrs.ScalarSchedule)
