"""Meta-training machinery: the learner, the truncated step and truncation schedules.

* ``SingleMachineGradientLearner`` with PES meta-trains ``LearnableAdam`` on
  ``ImageMLP_Digits8_Relu32`` and lowers the meta-loss; each outer step is one program
  that compiles once, with the same metrics every step (asking for them or not).
* Non-finite estimates are counted and skipped; several estimators are averaged;
  ``max_grad_norm`` clips; compile time does not grow with the unroll length.
* ``VectorizedLOptTruncatedStep``: ``reset_done`` re-initializes exactly the finished
  runs and skips the initialization when none is finished; staggered starts.
* Truncation schedules.

(Estimates against exact meta-gradients and truncation bias: ``test_estimator_bias.py``.)
"""

from __future__ import annotations

import functools
import os
import time

import flax.struct
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.flatten_util import ravel_pytree

from learnopt.learned_optimizers import base as lopt_base
from learnopt.optimizers import base as opt_base
from learnopt.outer_trainers import (
    full_es,
    full_grad,
    gradient_learner,
    truncated_pes,
)
from learnopt.outer_trainers import lopt_truncated_step as lts
from learnopt.outer_trainers import truncation_schedule as tsched
from learnopt.run import trainers
from learnopt.tasks import base as tasks_base
from learnopt.tasks import quadratics
from learnopt.tasks.datasets import base as datasets_base
from learnopt.testing import count_compiles


def _tree_equal(a, b):
    return all(
        np.array_equal(np.asarray(x), np.asarray(y))
        for x, y in zip(jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b), strict=True)
    )


def _flat(tree):
    return np.asarray(ravel_pytree(tree)[0])


# ----------------------------------------------------------------------------------------
# PES meta-training on ImageMLP_Digits8_Relu32
# ----------------------------------------------------------------------------------------

DIGITS_STEPS = 150


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    """Prepared datasets go to a temporary data dir, not ``~/tensorflow_datasets``."""
    old = os.environ.get("LEARNOPT_DATA_DIR")
    os.environ["LEARNOPT_DATA_DIR"] = str(tmp_path_factory.mktemp("learnopt_data"))
    yield os.environ["LEARNOPT_DATA_DIR"]
    if old is None:
        os.environ.pop("LEARNOPT_DATA_DIR", None)
    else:
        os.environ["LEARNOPT_DATA_DIR"] = old


def test_pes_meta_trains_learnable_adam_on_digits8(data_dir):
    """150 outer PES steps on 8 staggered inner runs of 40 steps, unrolls of 10.

    The meta-loss goes down, the outer step compiles once (asking for metrics or not),
    and the metrics are the same finite scalars every step. (One test: pytest-xdist
    would repeat a shared fixture on every worker.)
    """
    task = tasks_base.get_task("ImageMLP_Digits8_Relu32")
    lopt = lopt_base.LearnableAdam(initial_lr=1e-3)
    ts = lts.VectorizedLOptTruncatedStep(
        task,
        lopt,
        tsched.ConstantTruncationSchedule(40),
        num_tasks=8,
        random_initial_iteration_offset=40,
    )
    est = truncated_pes.TruncatedPES(ts, trunc_length=10, std=0.01)
    learner = gradient_learner.SingleMachineGradientLearner(lopt, [est], opt_base.Adam(3e-2))

    # Evaluation: the mean training loss of 4 fresh 40-step runs on fixed batches.
    eval_est = full_grad.FullGrad(
        lts.VectorizedLOptTruncatedStep(
            task, lopt, tsched.ConstantTruncationSchedule(40), num_tasks=4
        )
    )
    eval_datas = eval_est.get_datas()
    evaluate = jax.jit(lambda th: eval_est.meta_loss(th, jax.random.PRNGKey(7), eval_datas)[0])

    state = learner.init(jax.random.PRNGKey(0))
    theta0 = learner.get_theta(state)
    losses, metric_keys = [], []
    with count_compiles() as names:
        for i, k in enumerate(jax.random.split(jax.random.PRNGKey(1), DIGITS_STEPS)):
            # Asking for metrics or not is the same program.
            state, loss, metrics = learner.update(state, k, with_metrics=i % 2 == 0)
            losses.append(float(loss))
            metric_keys.append(tuple(sorted(metrics)))
            assert all(np.isfinite(np.asarray(v)).all() for v in metrics.values()), i
    theta = learner.get_theta(state)
    losses = np.asarray(losses)
    eval0, eval1 = float(evaluate(theta0)), float(evaluate(theta))
    lr0, lr1 = float(jnp.exp(theta0["log_lr"])), float(jnp.exp(theta["log_lr"]))
    print(
        f"\nDigits8 PES: eval meta-loss {eval0:.4f} -> {eval1:.4f}, training meta-loss "
        f"{losses[:20].mean():.4f} -> {losses[-20:].mean():.4f}, lr {lr0:.2e} -> {lr1:.2e}"
    )

    assert names.count("_update") == 1
    # Measured: 2.18 -> 0.54 (lr 1e-3 -> ~5e-2).
    assert eval1 < 0.6 * eval0
    assert losses[-20:].mean() < 0.6 * losses[:20].mean()
    assert lr1 > np.e * lr0
    assert int(metrics["num_nonfinite"]) == 0

    assert all(k == metric_keys[0] for k in metric_keys)
    expected = {
        "meta_loss",
        "grad_norm",
        "finite",
        "num_nonfinite",
        "learning_rate",
        "theta/log_lr",
        "TruncatedPES/meta_loss",
        "TruncatedPES/num_done",
        "TruncatedPES/delta_loss_abs",
    }
    assert expected <= set(metric_keys[0]), set(metric_keys[0])


# ----------------------------------------------------------------------------------------
# Non-finite estimates
# ----------------------------------------------------------------------------------------


def test_diverging_inner_runs_are_counted_and_not_applied():
    """A learning rate of 1e3 on curvatures up to 10 overflows: every estimate is NaN."""
    lopt = lopt_base.LearnableSGD(initial_lr=1e3)
    ts = lts.VectorizedLOptTruncatedStep(
        quadratics.CurvatureQuadraticFamily(4),
        lopt,
        tsched.ConstantTruncationSchedule(20),
        num_tasks=4,
    )
    learner = gradient_learner.SingleMachineGradientLearner(
        lopt, [full_es.FullES(ts, std=0.01)], opt_base.Adam(0.1)
    )
    state = learner.init(jax.random.PRNGKey(0))
    theta0 = learner.get_theta(state)
    for i, k in enumerate(jax.random.split(jax.random.PRNGKey(1), 3)):
        state, loss, metrics = learner.update(state, k)
        assert not bool(metrics["finite"])
        assert not np.isfinite(float(loss))  # the inner runs overflowed
        assert int(metrics["num_nonfinite"]) == i + 1
    assert int(state.num_nonfinite) == 3
    assert int(state.outer_iteration) == 3
    assert _tree_equal(learner.get_theta(state), theta0)
    # The outer optimizer's state did not advance either (Adam's step count).
    assert int(state.theta_opt_state.iteration) == 0


@flax.struct.dataclass
class _FlakyState:
    calls: jax.Array  # int32: estimates made since this state was initialized


class _FlakyEstimator(gradient_learner.GradientEstimator):
    """Gradient 1 on the first call after (re)initialization, NaN on the next."""

    truncated_step = None

    def init_worker_state(self, theta, key):
        return _FlakyState(calls=jnp.zeros((), jnp.int32))

    def get_datas(self):
        return None

    def compute_gradient_estimate(self, theta, key, state, datas):
        bad = state.calls % 2 == 1
        grad = jax.tree_util.tree_map(lambda t: jnp.where(bad, jnp.nan, 1.0).astype(t.dtype), theta)
        out = gradient_learner.GradientEstimatorOut(
            mean_loss=jnp.float32(1.0), grad=grad, unroll_state=_FlakyState(state.calls + 1)
        )
        return out, {"calls": state.calls}


def test_injected_nan_is_skipped_and_finite_steps_are_applied():
    lopt = lopt_base.LearnableSGD(initial_lr=1e-2)
    learner = gradient_learner.SingleMachineGradientLearner(
        lopt, [_FlakyEstimator()], opt_base.SGD(0.1)
    )
    state = learner.init(jax.random.PRNGKey(0))
    log_lr0 = float(learner.get_theta(state)["log_lr"])
    finite = []
    with count_compiles() as names:
        for k in jax.random.split(jax.random.PRNGKey(1), 6):
            state, _, metrics = learner.update(state, k)
            finite.append(bool(metrics["finite"]))
    # A NaN step also re-initializes the estimator states, so the pattern repeats.
    assert finite == [True, False] * 3
    assert int(metrics["num_nonfinite"]) == 3
    np.testing.assert_allclose(
        float(learner.get_theta(state)["log_lr"]), log_lr0 - 3 * 0.1, rtol=1e-6
    )
    assert names.count("_update") == 1


# ----------------------------------------------------------------------------------------
# Averaging several estimators; gradient clipping
# ----------------------------------------------------------------------------------------


class _FixedQuadratic(tasks_base.Task):
    """``0.5 * sum(c * p^2)`` from a fixed init: its FullGrad estimate needs no key."""

    def __init__(self, curvatures):
        self.curvatures = np.asarray(curvatures, np.float32)

    def init(self, key):
        return jnp.linspace(1.0, -0.5, self.curvatures.size, dtype=jnp.float32)

    def loss(self, params, key, data):
        return 0.5 * jnp.sum(jnp.asarray(self.curvatures) * jnp.square(params))


def _two_family_setup():
    lopt = lopt_base.LearnableSGDM(initial_lr=0.05, initial_momentum=0.5)
    estimators = [
        full_grad.FullGrad(
            lts.VectorizedLOptTruncatedStep(
                _FixedQuadratic(c), lopt, tsched.ConstantTruncationSchedule(10), num_tasks=2
            )
        )
        for c in ([1.0, 2.0, 3.0], [0.5, 8.0])
    ]
    theta = lopt.init(jax.random.PRNGKey(0))
    exact = []
    for est in estimators:
        fn = lambda th, est=est: est.meta_loss(th, jax.random.PRNGKey(3), est.get_datas())[0]
        exact.append(jax.value_and_grad(fn)(theta))
    return lopt, estimators, theta, exact


@pytest.fixture(scope="module")
def two_families():
    return _two_family_setup()


@pytest.mark.parametrize("clip", [None, 0.25, 100.0])
def test_averages_estimators_and_clips(two_families, clip):
    """One SGD(lr=1) step moves theta by minus the (clipped) mean of the two gradients."""
    lopt, estimators, theta, ((loss_a, grad_a), (loss_b, grad_b)) = two_families
    mean_grad = (_flat(grad_a) + _flat(grad_b)) / 2
    norm = np.linalg.norm(mean_grad)
    assert norm > 0.1  # a meaningful test: the two gradients do not cancel
    max_norm = None if clip is None else clip * norm
    learner = gradient_learner.SingleMachineGradientLearner(
        lopt, estimators, opt_base.SGD(1.0), max_grad_norm=max_norm
    )
    state = learner.init(jax.random.PRNGKey(0))
    assert _tree_equal(learner.get_theta(state), theta)
    state, meta_loss, metrics = learner.update(state, jax.random.PRNGKey(1))
    step = _flat(learner.get_theta(state)) - _flat(theta)
    expected = -mean_grad * (1.0 if clip is None else min(1.0, clip))
    np.testing.assert_allclose(step, expected, rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(float(meta_loss), (float(loss_a) + float(loss_b)) / 2, rtol=1e-5)
    np.testing.assert_allclose(float(metrics["0_FullGrad/meta_loss"]), float(loss_a), rtol=1e-5)
    np.testing.assert_allclose(float(metrics["1_FullGrad/meta_loss"]), float(loss_b), rtol=1e-5)
    # grad_norm reports the norm before clipping
    np.testing.assert_allclose(float(metrics["grad_norm"]), norm, rtol=1e-4)
    # and each family's own estimate's norm
    for i, g in enumerate((grad_a, grad_b)):
        got = float(metrics[f"{i}_FullGrad/grad_norm"])
        np.testing.assert_allclose(got, np.linalg.norm(_flat(g)), rtol=1e-4)


@pytest.mark.parametrize("frozen", [None, "one_minus_momentum"])
def test_norm_balance_averages_unit_estimates_of_the_unfrozen_keys(two_families, frozen):
    """balance="norm": one SGD(lr=1) step moves theta by minus the mean of the two
    gradients, each (its frozen leaves zeroed) scaled to unit norm; the mean loss and
    each family's loss are reported as with "mean"."""
    lopt, estimators, theta, ((loss_a, grad_a), (loss_b, grad_b)) = two_families
    keep = {k: 0.0 if k == frozen else 1.0 for k in theta}
    unit = []
    for g in (grad_a, grad_b):
        masked = _flat({k: v * keep[k] for k, v in g.items()})
        unit.append(masked / np.linalg.norm(masked))
    # a meaningful test: the two gradients' norms differ, so "mean" would step elsewhere
    norms = [np.linalg.norm(_flat(g)) for g in (grad_a, grad_b)]
    assert max(norms) > 1.5 * min(norms)
    learner = gradient_learner.SingleMachineGradientLearner(
        lopt,
        estimators,
        opt_base.SGD(1.0),
        balance="norm",
        frozen_keys=None if frozen is None else [frozen],
    )
    state = learner.init(jax.random.PRNGKey(0))
    state, meta_loss, metrics = learner.update(state, jax.random.PRNGKey(1))
    step = _flat(learner.get_theta(state)) - _flat(theta)
    np.testing.assert_allclose(step, -(unit[0] + unit[1]) / 2, rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(float(meta_loss), (float(loss_a) + float(loss_b)) / 2, rtol=1e-5)
    np.testing.assert_allclose(
        float(metrics["grad_norm"]), np.linalg.norm((unit[0] + unit[1]) / 2), rtol=1e-4
    )


def test_norm_balance_keeps_a_zero_estimate_zero(two_families):
    """Every leaf frozen: the unit-scaled estimates are zero, not NaN, and the step is
    applied (theta unchanged), not skipped as non-finite."""
    lopt, estimators, theta, _ = two_families
    learner = gradient_learner.SingleMachineGradientLearner(
        lopt, estimators, opt_base.SGD(1.0), balance="norm", frozen_keys=list(theta)
    )
    state = learner.init(jax.random.PRNGKey(0))
    state, _, metrics = learner.update(state, jax.random.PRNGKey(1))
    assert bool(metrics["finite"]) and not bool(metrics["skipped"])
    assert _tree_equal(learner.get_theta(state), theta)
    # each family's own (unscaled) estimate is reported, to see which one "mean" follows
    assert float(metrics["0_FullGrad/grad_norm"]) > 0 and float(metrics["1_FullGrad/grad_norm"]) > 0


def test_balance_must_be_a_known_name(two_families):
    lopt, estimators, _, _ = two_families
    with pytest.raises(ValueError, match=r"balance must be one of \['mean', 'norm'\], got 'max'"):
        gradient_learner.SingleMachineGradientLearner(
            lopt, estimators, opt_base.SGD(1.0), balance="max"
        )


# ----------------------------------------------------------------------------------------
# Compile time does not grow with the unroll length
# ----------------------------------------------------------------------------------------


def _first_step_cost(unroll):
    """(compile seconds, StableHLO size) of a PES outer step with ``unroll`` inner steps."""
    lopt = lopt_base.LearnableSGDM(initial_lr=0.01)
    ts = lts.VectorizedLOptTruncatedStep(
        quadratics.CurvatureQuadraticFamily(4),
        lopt,
        tsched.ConstantTruncationSchedule(1000),
        num_tasks=4,
        random_initial_iteration_offset=100,
    )
    est = truncated_pes.TruncatedPES(ts, trunc_length=unroll, std=0.01)
    learner = gradient_learner.SingleMachineGradientLearner(lopt, [est], opt_base.Adam(1e-3))
    state = learner.init(jax.random.PRNGKey(0))
    k1, k2 = jax.random.split(jax.random.PRNGKey(1))
    t0 = time.perf_counter()
    state = jax.block_until_ready(learner.update(state, k1))[0]
    first = time.perf_counter() - t0
    t0 = time.perf_counter()
    jax.block_until_ready(learner.update(state, k2))
    second = time.perf_counter() - t0
    hlo = learner._update_jit.lower(state, k2, learner.get_datas()).as_text()
    return first - second, len(hlo.splitlines())


def test_compile_time_does_not_grow_with_unroll_length():
    (t10, n10), (t100, n100) = _first_step_cost(10), _first_step_cost(100)
    print(
        f"\ncompile time: unroll 10 {t10:.2f}s, unroll 100 {t100:.2f}s (ratio {t100 / t10:.2f});"
        f" StableHLO lines {n10} vs {n100}"
    )
    # The unroll is a lax.scan: the program is the same size whatever its length.
    assert n100 == n10
    assert t100 < 2.0 * t10


def test_antithetic_copies_do_not_hold_a_whole_runs_batches_twice(repo_script):
    """The + and - copies share batches, tiled step by step inside the scan.

    Tiled up front (before), a FullES estimate held the whole run's batches twice more as
    temporaries (temporaries / batches 2.0; 2.5 GB at 1000 steps on the MLP bucket).
    """
    bench = repo_script("benchmarks/bench_whole_run_memory.py")
    row = bench.measure("ImageMLP_Digits8_Relu32", 60, 2, "LearnableAdam")
    assert row["batches_mb"] > 0.5  # 60 steps x 2 runs x 3 splits of 128 8x8 images
    assert row["temporary_over_batches"] < 0.5, row


# ----------------------------------------------------------------------------------------
# VectorizedLOptTruncatedStep: reset_done, staggered starts
# ----------------------------------------------------------------------------------------

_INIT_CALLS = []


class _CountingQuadratic(tasks_base.Task):
    """A quadratic whose ``init`` reports every execution to the host."""

    def init(self, key):
        jax.debug.callback(lambda: _INIT_CALLS.append(1))
        return jax.random.normal(key, (3,), jnp.float32)

    def loss(self, params, key, data):
        return jnp.sum(jnp.square(params))


def test_reset_done_resets_exactly_the_finished_runs():
    lopt = lopt_base.LearnableSGD(initial_lr=0.1)
    ts = lts.VectorizedLOptTruncatedStep(
        _CountingQuadratic(), lopt, tsched.ConstantTruncationSchedule(5), num_tasks=6
    )
    theta = lopt.init(jax.random.PRNGKey(0))
    k_init, k_unroll, k_reset = jax.random.split(jax.random.PRNGKey(1), 3)
    state = jax.jit(ts.init_population)(theta, k_init)
    state, out = jax.jit(lambda s: ts.unroll(theta, s, k_unroll, None, 3))(state)
    assert not np.any(out.is_done)
    reset = jax.jit(ts.reset_done)

    # No run is done: the initialization does not execute and nothing changes.
    jax.effects_barrier()
    _INIT_CALLS.clear()
    new, done = reset(theta, state, k_reset)
    jax.effects_barrier()
    assert _INIT_CALLS == []
    assert not np.any(done)
    assert _tree_equal(new, state)

    # Runs 1 and 4 are done: they, and only they, restart from a fresh init.
    finished = np.array([False, True, False, False, True, False])
    state = state.replace(inner_step=jnp.where(finished, 5, state.inner_step))
    new, done = reset(theta, state, k_reset)
    jax.effects_barrier()
    assert len(_INIT_CALLS) > 0
    np.testing.assert_array_equal(np.asarray(done), finished)
    np.testing.assert_array_equal(np.asarray(new.inner_step), np.where(finished, 0, 3))
    fresh = ts.init_population(theta, k_reset)
    new_p, old_p = np.asarray(new.inner_opt_state.params), np.asarray(state.inner_opt_state.params)
    np.testing.assert_array_equal(new_p[~finished], old_p[~finished])
    np.testing.assert_array_equal(
        new_p[finished], np.asarray(fresh.inner_opt_state.params)[finished]
    )
    assert not np.allclose(new_p[finished], old_p[finished])


def test_staggered_starts_give_distinct_inner_steps():
    lopt = lopt_base.LearnableSGD(initial_lr=0.1)
    ts = lts.VectorizedLOptTruncatedStep(
        quadratics.CurvatureQuadraticFamily(2),
        lopt,
        tsched.ConstantTruncationSchedule(50),
        num_tasks=32,
        random_initial_iteration_offset=50,
    )
    theta = lopt.init(jax.random.PRNGKey(0))
    state = jax.jit(ts.init_step_state)(theta, None, jax.random.PRNGKey(1))
    steps = np.asarray(state.inner_step)
    assert steps.dtype == np.int32
    assert np.all((steps >= 0) & (steps < 50))
    assert len(set(steps.tolist())) >= 16
    # Without staggering every run starts at step 0.
    plain = jax.jit(ts.init_population)(theta, jax.random.PRNGKey(1))
    np.testing.assert_array_equal(np.asarray(plain.inner_step), 0)
    # So the staggered runs end at different times.
    _, out = jax.jit(lambda s: ts.unroll(theta, s, jax.random.PRNGKey(2), None, 10))(state)
    np.testing.assert_array_equal(np.asarray(out.is_done), steps + 10 >= 50)
    assert 0 < int(np.sum(out.is_done)) < 32


# ----------------------------------------------------------------------------------------
# Truncation schedules
# ----------------------------------------------------------------------------------------


def _samples(sched, n=4000):
    return np.asarray(
        jax.jit(jax.vmap(sched.sample_length))(jax.random.split(jax.random.PRNGKey(0), n))
    )


def test_constant_schedule():
    sched = tsched.ConstantTruncationSchedule(7)
    samples = _samples(sched, 10)
    assert samples.dtype == np.int32
    np.testing.assert_array_equal(samples, 7)
    assert sched.max_length == 7
    with pytest.raises(ValueError):
        tsched.ConstantTruncationSchedule(0)


def test_log_uniform_schedule_within_bounds():
    sched = tsched.LogUniformLengthSchedule(10, 1000)
    samples = _samples(sched)
    assert samples.dtype == np.int32
    assert samples.min() >= 10 and samples.max() <= 1000
    assert samples.min() <= 12 and samples.max() >= 900  # covers the whole range
    # log-uniform: the median is the geometric mean (100), a quarter fall below ~32
    assert 85 <= np.median(samples) <= 118
    assert 0.45 < np.mean(samples < 100) < 0.55
    assert 0.2 < np.mean(samples < 32) < 0.3
    assert sched.max_length == 1000
    with pytest.raises(ValueError):
        tsched.LogUniformLengthSchedule(20, 10)
    with pytest.raises(ValueError):
        tsched.LogUniformLengthSchedule(0, 10)


def test_never_ending_schedule():
    sched = tsched.NeverEndingTruncationSchedule()
    np.testing.assert_array_equal(_samples(sched, 4), np.iinfo(np.int32).max)
    lopt = lopt_base.LearnableSGD(initial_lr=0.1)
    ts = lts.VectorizedLOptTruncatedStep(
        quadratics.CurvatureQuadraticFamily(2), lopt, sched, num_tasks=4
    )
    theta = lopt.init(jax.random.PRNGKey(0))
    state = jax.jit(ts.init_population)(theta, jax.random.PRNGKey(1))
    state, out = jax.jit(lambda s: ts.unroll(theta, s, jax.random.PRNGKey(2), None, 50))(state)
    assert not np.any(out.is_done)
    _, done = jax.jit(ts.reset_done)(theta, state, jax.random.PRNGKey(3))
    assert not np.any(done)
    np.testing.assert_array_equal(np.asarray(state.inner_step), 50)


def test_remat_gives_the_same_meta_gradient():
    fam = quadratics.CurvatureQuadraticFamily(dim=4)
    lopt = lopt_base.LearnableAdam(initial_lr=1e-2)
    theta = lopt.init(jax.random.PRNGKey(0))
    key = jax.random.PRNGKey(1)
    grads = []
    for remat in (False, True):
        ts = lts.VectorizedLOptTruncatedStep(
            fam, lopt, tsched.ConstantTruncationSchedule(12), 3, remat=remat
        )
        est = full_grad.FullGrad(ts)
        loss_fn = functools.partial(est.meta_loss, key=key, datas=(None, None))
        grads.append(jax.jit(jax.grad(lambda t, f=loss_fn: f(t)[0]))(theta))
    for name in theta:
        np.testing.assert_allclose(grads[0][name], grads[1][name], rtol=1e-5, atol=1e-8)
    assert any(abs(float(g)) > 0 for g in grads[0].values())


def test_every_estimator_registers_itself_under_its_class_name():
    from learnopt.outer_trainers import gradient_estimator

    names = gradient_estimator.ESTIMATORS.names()
    assert names == [
        "FullES",
        "FullGrad",
        "NoiseReuseES",
        "TruncatedES",
        "TruncatedGrad",
        "TruncatedPES",
    ]
    for name in names:
        cls = gradient_estimator.ESTIMATORS.constructor(name)
        assert cls.__name__ == name and issubclass(cls, gradient_estimator.GradientEstimator)


@pytest.mark.parametrize("name", list(trainers.SPECS))
def test_estimator_registry_builds_every_trainer(name):
    from learnopt.outer_trainers import gradient_estimator
    from learnopt.run import build, config

    fam = quadratics.CurvatureQuadraticFamily(dim=3)
    lengths = (
        {"total_length": 6}
        if name in config.FULL_TRAINERS
        else {"trunc_length": 2, "total_length": 6}
    )
    est = build.make_estimator(name, fam, lopt_base.LearnableSGD(), **lengths)
    cls = gradient_estimator.ESTIMATORS.constructor(config.TRAINERS[name][0])
    assert isinstance(est, cls)
    assert est.truncated_step.num_tasks == (1 if name == "full_grad" else 8)
    theta = lopt_base.LearnableSGD().init(jax.random.PRNGKey(0))
    state = est.init_worker_state(theta, jax.random.PRNGKey(1))
    out, _ = jax.jit(est.compute_gradient_estimate)(
        theta, jax.random.PRNGKey(2), state, est.get_datas()
    )
    assert np.isfinite(float(out.mean_loss)) and np.isfinite(float(out.grad["log_lr"]))


def test_estimator_registry_rejects_bad_input():
    from learnopt.run import build

    fam = quadratics.CurvatureQuadraticFamily(dim=3)
    with pytest.raises(KeyError, match=r"did you mean 'pes'.*known: full_es, full_grad"):
        build.make_estimator("pes2", fam, lopt_base.LearnableSGD())
    with pytest.raises(ValueError, match="trunc_length"):
        build.make_estimator("pes", fam, lopt_base.LearnableSGD(), trunc_length=10, total_length=5)


# ----------------------------------------------------------------------------------------
# The learner's data state
# ----------------------------------------------------------------------------------------


def _data_learner(*tasks):
    lopt = lopt_base.LearnableSGD()
    estimators = [
        truncated_pes.TruncatedPES(
            lts.VectorizedLOptTruncatedStep(
                task, lopt, tsched.ConstantTruncationSchedule(10), num_tasks=2
            ),
            trunc_length=2,
        )
        for task in tasks
    ]
    return gradient_learner.SingleMachineGradientLearner(lopt, estimators, opt_base.SGD(0.1))


def test_learner_saves_and_restores_the_position_of_its_datasets():
    shared, other = quadratics.BatchQuadraticTask(seed=1), quadratics.BatchQuadraticTask(seed=2)
    learner = _data_learner(shared, shared, other)
    # One entry per Datasets object (the first two estimators share one).
    assert [id(ds) for ds in learner.datasets()] == [id(shared.datasets), id(other.datasets)]
    learner.get_datas()
    states, not_resumable = learner.get_data_state()
    assert not_resumable == []
    assert len(states) == 2 and all(set(s) == set(datasets_base.SPLITS) for s in states)
    expected = learner.get_datas()
    learner.set_data_state(states)
    assert _tree_equal(learner.get_datas(), expected)  # the same batches again
    with pytest.raises(
        ValueError, match="the checkpoint has data positions of 1 datasets, this run has 2"
    ):
        learner.set_data_state(states[:1])


def test_learner_names_the_splits_that_cannot_report_a_position():
    def batches():
        while True:
            yield {"x": np.zeros((4, 2), np.float32)}

    class _PlainIteratorTask(quadratics.BatchQuadraticTask):
        def __init__(self):
            self.datasets = datasets_base.Datasets(batches(), batches(), batches(), batches())

    learner = _data_learner(quadratics.BatchQuadraticTask(), _PlainIteratorTask())
    states, not_resumable = learner.get_data_state()
    assert not_resumable == [
        f"datasets[1].{split} (_StackingIterator)" for split in datasets_base.SPLITS
    ]
    assert states[0]["train"] is not None and states[1] == dict.fromkeys(datasets_base.SPLITS)
    learner.set_data_state(states)  # the positions it has are restored, the others left
