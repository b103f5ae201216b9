"""The notes' library's outer-training API runs on learnopt's one implementation.

* A library-style outer loop (central ``GradientLearner`` + ``gradient_worker_compute``
  with ``WorkerWeights``, as the library's ``SingleMachineGradientLearner`` and its
  tutorials write it) gives the same theta as learnopt's fused learner, and compiles once.
* The library's own tests of ``gradient_learner`` (fake estimators written in its
  convention, run on the host) pass.
* ``compute_gradient_estimate(worker_weights, key, state, with_summary=...)`` on a learnopt
  estimator equals its traced call and is jitted once.
* One vocabulary: ``trunc_length`` (steps per estimate; ``unroll_length`` accepted),
  ``steps_per_jit`` validated; the library's argument orders.
* FullES / FullGrad with ``truncation_schedule=`` (constant, variable, outer-iteration
  dependent), ``loss_type="min"``; ``ScheduledTruncationSchedule``; ``meta_loss_split=
  "same_data"`` and ``meta_loss_with_aux_key`` on the truncated step.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.flatten_util import ravel_pytree

from learnopt.learned_optimizers import base as lopt_base
from learnopt.optimizers import base as opt_base
from learnopt.outer_trainers import (
    common,
    full_es,
    full_grad,
    gradient_learner,
    lopt_truncated_step,
    noise_reuse_es,
    truncated_es,
    truncated_grad,
    truncated_pes,
    truncation_schedule,
)
from learnopt.tasks import base as tasks_base
from learnopt.tasks import quadratics
from learnopt.testing import count_compiles

FAMILY = quadratics.CurvatureQuadraticFamily(3)  # data-free; loss ignores its key


def _flat(tree):
    return np.asarray(ravel_pytree(tree)[0])


def _step(sched, num_tasks=4, **kw):
    return lopt_truncated_step.VectorizedLOptTruncatedStep(
        FAMILY, lopt_base.LearnableSGDM(initial_lr=0.05), sched, num_tasks, **kw
    )


def _estimators(lopt):
    pes_step = lopt_truncated_step.VectorizedLOptTruncatedStep(
        FAMILY,
        lopt,
        truncation_schedule.ConstantTruncationSchedule(12),
        num_tasks=4,
        random_initial_iteration_offset=12,
    )
    es_step = lopt_truncated_step.VectorizedLOptTruncatedStep(
        FAMILY, lopt, truncation_schedule.NeverEndingTruncationSchedule(), num_tasks=4
    )
    return [
        truncated_pes.TruncatedPES(truncated_step=pes_step, trunc_length=4, std=0.01),
        full_es.FullES(es_step, truncation_schedule.ConstantTruncationSchedule(6), std=0.01),
    ]


# ----------------------------------------------------------------------------------------
# A ported library-style loop == learnopt's learner
# ----------------------------------------------------------------------------------------

NUM_STEPS = 5


def test_library_style_loop_matches_fused_learner_and_compiles_once():
    seed = jax.random.PRNGKey(42)

    # learnopt's own learner: one fused program per outer step.
    lopt = lopt_base.LearnableSGDM(initial_lr=0.05)
    learner = gradient_learner.SingleMachineGradientLearner(
        lopt, _estimators(lopt), opt_base.Adam(1e-2)
    )
    state = learner.init(seed)
    step_keys = jax.random.split(jax.random.PRNGKey(7), NUM_STEPS)
    fused_losses = []
    for k in step_keys:
        state, loss, _ = learner.update(state, k)
        fused_losses.append(float(loss))
    fused_theta = learner.get_meta_params(state)

    # The library's way, written as its SingleMachineGradientLearner and tutorials do.
    lopt = lopt_base.LearnableSGDM(initial_lr=0.05)
    gradient_estimators = _estimators(lopt)
    central_learner = gradient_learner.GradientLearner(lopt, opt_base.Adam(1e-2))
    key1, key = jax.random.split(seed)
    central_state = central_learner.init(key1)
    worker_weights = central_learner.get_state_for_worker(central_state)
    keys = jax.random.split(key, len(gradient_estimators))
    unroll_states = [
        grad_est.init_worker_state(worker_weights, key)
        for key, grad_est in zip(keys, gradient_estimators, strict=True)
    ]
    losses = []
    with count_compiles() as names:
        for k in step_keys:
            key1, key2 = jax.random.split(k)
            worker_weights = central_learner.get_state_for_worker(central_state)
            out = gradient_learner.gradient_worker_compute(
                worker_weights, gradient_estimators, unroll_states, key=key1, with_metrics=False
            )
            unroll_states = out.unroll_states
            central_state, metrics = central_learner.update(central_state, [out.to_put], key=key2)
            losses.append(float(out.to_put.mean_loss))
    theta = central_learner.get_meta_params(central_state)

    assert names.count("_gradient_worker_compute") == 1, names
    assert names.count("_apply") == 1, names
    np.testing.assert_allclose(losses, fused_losses, rtol=1e-5)
    np.testing.assert_allclose(_flat(theta), _flat(fused_theta), rtol=1e-5, atol=1e-7)
    assert not np.allclose(_flat(theta), _flat(lopt.init(jax.random.PRNGKey(0))))  # it moved
    assert int(central_state.theta_opt_state.iteration) == NUM_STEPS
    assert {"meta_loss", "grad_norm", "finite", "num_nonfinite"} <= set(metrics)


# ----------------------------------------------------------------------------------------
# The library's gradient_learner tests, with the import prefix changed
# ----------------------------------------------------------------------------------------


class FakeGradientEstimator(gradient_learner.GradientEstimator):
    """Written in the library's convention: runs on the host."""

    def __init__(self, grad_val):
        self.task_family = quadratics.FixedDimQuadraticFamily(10)
        self.grad_val = grad_val

    def init_worker_state(self, worker_weights, key):
        return 0

    def compute_gradient_estimate(self, worker_weights, key, state, with_summary):
        out = gradient_learner.GradientEstimatorOut(
            1.0,
            grad=jax.tree_util.tree_map(lambda x: x * 0 + self.grad_val, worker_weights.theta),
            unroll_state=state + 1,
            unroll_info=None,
        )
        return out, {"mean||metric": 1}


def test_library_gradient_learner_averages_the_list():
    lopt = lopt_base.LearnableSGD(1)
    theta_opt = opt_base.SGD(3)
    learner = gradient_learner.GradientLearner(lopt, theta_opt)
    key = jax.random.PRNGKey(0)
    state = learner.init(key)
    theta = lopt.init(key)
    ones_g = gradient_learner.AggregatedGradient(
        theta_grads=jax.tree_util.tree_map(lambda x: x * 0 + 1, theta),
        theta_model_state=None,
        mean_loss=0.0,
    )
    zeros_g = gradient_learner.AggregatedGradient(
        theta_grads=jax.tree_util.tree_map(lambda x: x * 0, theta),
        theta_model_state=None,
        mean_loss=0.0,
    )
    next_state, _ = learner.update(state, [ones_g, zeros_g])
    # The mean gradient is 0.5: SGD(3) moves log_lr from 0 to -1.5.
    assert float(theta_opt.get_params(next_state.theta_opt_state)["log_lr"]) == -1.5


def test_library_gradient_worker_compute_with_host_estimators():
    estimators = [FakeGradientEstimator(0), FakeGradientEstimator(1)]
    key = jax.random.PRNGKey(0)
    theta = {"theta": jnp.asarray(12.0)}
    worker_weights = gradient_learner.WorkerWeights(theta, None, gradient_learner.OuterState(1))
    unroll_states = [t.init_worker_state(worker_weights, key) for t in estimators]
    out = gradient_learner.gradient_worker_compute(
        worker_weights, estimators, unroll_states, key, with_metrics=True
    )
    assert float(out.to_put.theta_grads["theta"]) == 0.5
    assert out.unroll_states[0] == 1
    assert "mean||0_FakeGradientEstimator/metric" in out.metrics
    out = gradient_learner.gradient_worker_compute(
        worker_weights, estimators, out.unroll_states, key, with_metrics=True
    )
    assert float(out.to_put.theta_grads["theta"]) == 0.5
    assert out.unroll_states[0] == 2


def test_library_single_machine_learner_with_host_estimators():
    estimators = [FakeGradientEstimator(0), FakeGradientEstimator(1)]
    lopt = lopt_base.LearnableSGD(1)
    learner = gradient_learner.SingleMachineGradientLearner(lopt, estimators, opt_base.SGD(3))
    key = jax.random.PRNGKey(0)
    state = learner.init(key)
    state2, loss, _ = learner.update(state, key)
    assert float(learner.get_lopt_params(state)["log_lr"]) == 0.0
    assert float(learner.get_meta_params(state2)["log_lr"]) == -1.5
    assert float(loss) == 1.0
    assert state2.gradient_estimator_states == (1, 1)


def test_gradient_worker_compute_rejects_mismatched_lists():
    est = FakeGradientEstimator(0)
    weights = gradient_learner.WorkerWeights({"theta": jnp.float32(1)}, None, 0)
    with pytest.raises(ValueError, match="2 unroll_states for 1 gradient_estimators"):
        gradient_learner.gradient_worker_compute(weights, [est], [0, 0], jax.random.PRNGKey(0))
    with pytest.raises(ValueError, match="at least one"):
        gradient_learner.gradient_worker_compute(weights, [], [], jax.random.PRNGKey(0))


# ----------------------------------------------------------------------------------------
# The library's call on a learnopt estimator
# ----------------------------------------------------------------------------------------


def test_library_call_equals_traced_call_and_compiles_once():
    lopt = lopt_base.LearnableSGDM(initial_lr=0.05)
    est = _estimators(lopt)[0]  # TruncatedPES, 4 tasks, 4 steps per estimate
    theta = lopt.init(jax.random.PRNGKey(0))
    weights = gradient_learner.WorkerWeights(theta, None, gradient_learner.OuterState(0))
    state = est.init_worker_state(weights, key=jax.random.PRNGKey(1))
    assert state.accumulator["log_lr"].shape == (4,)

    traced = jax.jit(est.compute_gradient_estimate)
    with count_compiles() as names:
        for i in range(3):
            key = jax.random.PRNGKey(10 + i)
            datas = est.get_datas()
            out, metrics = est.compute_gradient_estimate(
                weights, key, state, with_summary=False, datas_list=datas
            )
            ref, ref_metrics = traced(theta, key, state, datas, gradient_learner.OuterState(0))
            np.testing.assert_allclose(_flat(out.grad), _flat(ref.grad), rtol=1e-6)
            np.testing.assert_allclose(float(out.mean_loss), float(ref.mean_loss), rtol=1e-6)
            state = out.unroll_state
    assert names.count("TruncatedPES_estimate") == 1, names
    assert set(metrics) == {f"mean||{k}" for k in ref_metrics}
    info = out.unroll_info
    assert info.loss.shape == (4, 4) and info.iteration.shape == (4, 4)
    assert info.is_done.shape == (4,)
    # the library's fields and the settable task family
    assert isinstance(out, gradient_learner.GradientEstimatorOut)
    est.task_family = quadratics.CurvatureQuadraticFamily(5)
    assert est.task_family.dim == 5


# ----------------------------------------------------------------------------------------
# Vocabulary and the library's argument orders
# ----------------------------------------------------------------------------------------


def test_trunc_length_vocabulary_and_library_argument_orders():
    step = _step(truncation_schedule.ConstantTruncationSchedule(40))
    # Defaults as the library's: PES 10 steps per estimate, TES and TBPTT 20.
    assert truncated_pes.TruncatedPES(step).trunc_length == 10
    assert truncated_es.TruncatedES(step).trunc_length == 20
    assert truncated_grad.TruncatedGrad(step).trunc_length == 20
    # The library names it unroll_length in TES and TBPTT: the same quantity.
    assert truncated_es.TruncatedES(step, unroll_length=8).trunc_length == 8
    assert truncated_grad.TruncatedGrad(step, unroll_length=8).unroll_length == 8
    assert noise_reuse_es.NoiseReuseES(step, unroll_length=5).trunc_length == 5
    # Positional orders: PES (step, trunc_length, std, steps_per_jit); TES (step,
    # unroll_length, steps_per_jit, std).
    pes = truncated_pes.TruncatedPES(step, 20, 0.03, 10)
    assert (pes.trunc_length, pes.std, pes.steps_per_jit) == (20, 0.03, 10)
    tes = truncated_es.TruncatedES(step, 20, 10, 0.03)
    assert (tes.trunc_length, tes.std, tes.steps_per_jit) == (20, 0.03, 10)
    with pytest.raises(ValueError, match="name the same thing"):
        truncated_pes.TruncatedPES(step, trunc_length=5, unroll_length=6)
    with pytest.raises(ValueError, match="multiple of steps_per_jit"):
        truncated_pes.TruncatedPES(step, trunc_length=10, steps_per_jit=3)
    with pytest.raises(ValueError, match="integer >= 1"):
        truncated_grad.TruncatedGrad(step, trunc_length=0)
    with pytest.raises(ValueError, match="std"):
        truncated_pes.TruncatedPES(step, std=0.0)


# ----------------------------------------------------------------------------------------
# FullES / FullGrad horizons
# ----------------------------------------------------------------------------------------

NEVER = truncation_schedule.NeverEndingTruncationSchedule()


def _estimate(est, key, outer_iteration=0):
    theta = est.truncated_step.learned_opt.init(jax.random.PRNGKey(0))
    outer = gradient_learner.OuterState(jnp.int32(outer_iteration))
    out, _ = jax.jit(est.compute_gradient_estimate)(
        theta, key, est.init_worker_state(theta, key), est.get_datas(), outer
    )
    return out


def test_truncation_schedule_argument_gives_the_same_horizon():
    key = jax.random.PRNGKey(3)
    const = truncation_schedule.ConstantTruncationSchedule(6)
    library_way = full_es.FullES(_step(NEVER), truncation_schedule=const)
    learnopt_way = full_es.FullES(_step(const))
    assert library_way.horizon == learnopt_way.horizon == 6
    a, b = _estimate(library_way, key), _estimate(learnopt_way, key)
    np.testing.assert_array_equal(_flat(a.grad), _flat(b.grad))
    assert full_grad.FullGrad(_step(NEVER), const).horizon == 6
    with pytest.raises(ValueError, match="NeverEndingTruncationSchedule"):
        full_es.FullES(_step(const), truncation_schedule=const)
    with pytest.raises(ValueError, match="pass truncation_schedule="):
        full_grad.FullGrad(_step(NEVER))
    with pytest.raises(ValueError, match="no static max_length"):
        full_es.FullES(
            _step(NEVER),
            truncation_schedule.ScheduledTruncationSchedule(lambda it: 5 + it),
        )
    with pytest.raises(ValueError, match="loss_type"):
        full_es.FullES(_step(NEVER), const, loss_type="max")
    # steps_per_jit rounds the horizon down to a multiple of it, as the library does.
    assert full_es.FullES(_step(NEVER), const, steps_per_jit=4).horizon == 4


def test_masked_unroll_and_losses_equal_a_shorter_unroll():
    """``unroll(length=L)`` of 8 steps == an unroll of L steps; losses past L masked."""
    step = _step(NEVER)
    theta = step.learned_opt.init(jax.random.PRNGKey(0))
    start = step.init_population(theta, jax.random.PRNGKey(1))

    @jax.jit
    def both(length):
        masked = step.unroll(theta, start, jax.random.PRNGKey(2), None, 8, length=length)
        return masked, {n: common.reduce_loss(masked[1], n, length) for n in ("avg", "min", "last")}

    (state, out), reduced = both(jnp.int32(5))
    ref_state, ref_out = jax.jit(
        lambda: step.unroll(theta, start, jax.random.PRNGKey(2), None, 5)
    )()
    np.testing.assert_allclose(_flat(state), _flat(ref_state), rtol=1e-6)
    np.testing.assert_allclose(out.loss[:5], ref_out.loss, rtol=1e-6)
    np.testing.assert_array_equal(out.loss[5:], 0.0)
    np.testing.assert_array_equal(np.asarray(state.inner_step), 5)
    for name, value in reduced.items():
        expected = common.reduce_loss(ref_out, name)
        np.testing.assert_allclose(value, expected, rtol=1e-6, err_msg=name)
    np.testing.assert_allclose(reduced["min"], ref_out.loss.min(0), rtol=1e-6)


def test_outer_iteration_dependent_horizon_equals_that_constant_horizon():
    """A horizon of 3 + outer_iteration: at iteration 2, FullES/FullGrad == a horizon of 5."""
    sched = truncation_schedule.ScheduledTruncationSchedule(
        lambda it: 3 + it, min_length=1, max_length=8
    )
    five = truncation_schedule.ConstantTruncationSchedule(5)
    key = jax.random.PRNGKey(5)
    es_var = full_es.FullES(_step(NEVER), sched, loss_type="min")
    assert es_var.horizon == 8
    a, b = (
        _estimate(es_var, key, 2),
        _estimate(full_es.FullES(_step(NEVER), five, loss_type="min"), key, 2),
    )
    # ES divides loss differences by 2 std^2: float rounding shows at ~1e-5.
    np.testing.assert_allclose(_flat(a.grad), _flat(b.grad), rtol=1e-3)
    np.testing.assert_allclose(float(a.mean_loss), float(b.mean_loss), rtol=1e-6)
    a = _estimate(full_grad.FullGrad(_step(NEVER), sched), key, 2)
    b = _estimate(full_grad.FullGrad(_step(NEVER), five), key, 2)
    np.testing.assert_allclose(_flat(a.grad), _flat(b.grad), rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(float(a.mean_loss), float(b.mean_loss), rtol=1e-6)


def test_learner_with_a_growing_horizon_compiles_once():
    sched = truncation_schedule.ScheduledTruncationSchedule(
        lambda it: 2 + 2 * it, min_length=1, max_length=10
    )
    lopt = lopt_base.LearnableSGDM(initial_lr=0.05)
    step = lopt_truncated_step.VectorizedLOptTruncatedStep(FAMILY, lopt, NEVER, num_tasks=2)
    learner = gradient_learner.SingleMachineGradientLearner(
        lopt, [full_grad.FullGrad(step, sched)], opt_base.Adam(1e-2)
    )
    state = learner.init(jax.random.PRNGKey(0))
    last_losses = []
    with count_compiles() as names:
        for i in range(5):
            state, _, metrics = learner.update(state, jax.random.PRNGKey(i))
            last_losses.append(float(metrics["FullGrad/last_loss"]))
    assert names.count("_update") == 1
    assert all(np.isfinite(last_losses))


# ----------------------------------------------------------------------------------------
# Truncation schedules
# ----------------------------------------------------------------------------------------


def test_scheduled_truncation_schedule_follows_the_outer_iteration():
    outer = gradient_learner.OuterState
    sched = truncation_schedule.ScheduledTruncationSchedule(lambda it: 10 * (it + 1))
    sample = jax.jit(sched.sample_length)
    for it in (0, 3, 7):
        assert int(sample(jax.random.PRNGKey(it), outer(jnp.int32(it)))) == 10 * (it + 1)
    # max_steps is passed to the schedule (the library's ScalarSchedule signature).
    with_max = truncation_schedule.ScheduledTruncationSchedule(
        lambda it, max_steps: 100 * it / max_steps, max_steps=10, min_length=1
    )
    assert int(with_max.sample_length(jax.random.PRNGKey(0), outer(jnp.int32(5)))) == 50
    # std > 0 shifts lengths randomly, never below min_length.
    noisy = truncation_schedule.ScheduledTruncationSchedule(lambda it: 20, std=10.0, min_length=15)
    keys = jax.random.split(jax.random.PRNGKey(0), 500)
    lengths = np.asarray(jax.vmap(lambda k: noisy.sample_length(k, outer(jnp.int32(0))))(keys))
    assert lengths.min() == 15 and lengths.max() > 30 and len(set(lengths.tolist())) > 10
    # The library's init / next_state.
    state = sched.init(jax.random.PRNGKey(0), outer(jnp.int32(1)))
    assert int(state.length) == 20
    state, done = sched.next_state(state, 19, jax.random.PRNGKey(1), outer(jnp.int32(4)))
    assert not bool(done) and int(state.length) == 20
    state, done = sched.next_state(state, 20, jax.random.PRNGKey(1), outer(jnp.int32(4)))
    assert bool(done) and int(state.length) == 50
    with pytest.raises(TypeError, match="callable"):
        truncation_schedule.ScheduledTruncationSchedule(100)


def test_truncated_step_samples_lengths_at_the_current_outer_iteration():
    sched = truncation_schedule.ScheduledTruncationSchedule(lambda it: 4 + 2 * it, min_length=1)
    lopt = lopt_base.LearnableSGDM(initial_lr=0.05)
    step = lopt_truncated_step.VectorizedLOptTruncatedStep(FAMILY, lopt, sched, num_tasks=4)
    est = truncated_pes.TruncatedPES(step, trunc_length=2)
    learner = gradient_learner.SingleMachineGradientLearner(lopt, [est], opt_base.Adam(1e-2))
    state = learner.init(jax.random.PRNGKey(0))
    np.testing.assert_array_equal(state.gradient_estimator_states[0].pos_state.truncation_length, 4)
    seen = set()
    for i in range(6):
        state, _, _ = learner.update(state, jax.random.PRNGKey(i))
        pos = state.gradient_estimator_states[0].pos_state
        restarted = np.asarray(pos.inner_step) == 0
        # Runs that restarted in the update at outer iteration i got length 4 + 2 i.
        np.testing.assert_array_equal(np.asarray(pos.truncation_length)[restarted], 4 + 2 * i)
        seen.update(np.asarray(pos.truncation_length).tolist())
    assert len(seen) >= 3 and max(seen) > 4  # lengths grew with the outer iteration


def test_log_uniform_schedule_with_scheduled_bounds():
    sched = truncation_schedule.LogUniformLengthSchedule(lambda it: 10 + it, lambda it: 20 + it)
    assert sched.max_length is None
    keys = jax.random.split(jax.random.PRNGKey(0), 200)
    outer = gradient_learner.OuterState(jnp.int32(100))
    lengths = np.asarray(jax.vmap(lambda k: sched.sample_length(k, outer))(keys))
    assert lengths.min() >= 110 and lengths.max() <= 120 and lengths.max() > lengths.min()


# ----------------------------------------------------------------------------------------
# Meta-loss of the truncated step: same_data, aux key
# ----------------------------------------------------------------------------------------


class _Split:
    """A stand-in data split: ``take(*shape)`` of constant batches ``x = 2``."""

    def take(self, *shape):
        return {"x": np.full((*shape, 3), 2.0, np.float32)}


class _Datasets:
    train = inner_valid = outer_valid = test = _Split()


class _TargetTask(tasks_base.Task):
    """``sum((p - x)^2)`` from ``p = 0``, with aux ``{"dist": sum(|p - x|)}``."""

    datasets = _Datasets()

    def init(self, key):
        return jnp.zeros((3,), jnp.float32)

    def loss_with_state_and_aux(self, params, state, key, batch):
        diff = params - batch["x"]
        return jnp.sum(diff**2), state, {"dist": jnp.sum(jnp.abs(diff))}

    def loss_with_state(self, params, state, key, batch):
        return self.loss_with_state_and_aux(params, state, key, batch)[:2]


def _one_sgd_step(task, **step_kwargs):
    """``(data, out)`` of one unrolled SGD(0.1) step of two runs of ``task``."""
    lopt = lopt_base.LearnableSGD(initial_lr=0.1)
    step = lopt_truncated_step.VectorizedLOptTruncatedStep(
        task, lopt, truncation_schedule.ConstantTruncationSchedule(10), 2, **step_kwargs
    )
    theta = lopt.init(jax.random.PRNGKey(0))
    state = step.init_step_state(theta, None, jax.random.PRNGKey(1))
    data = step.get_batch(1)
    _, out = jax.jit(lambda s: step.unroll(theta, s, jax.random.PRNGKey(2), data, 1))(state)
    return data, out


@pytest.mark.parametrize(
    "split, aux_key, expected",
    [
        # SGD(0.1) from p = 0 toward x = 2: p1 = 0.4 (grad -4 per coordinate).
        (None, None, 12.0),  # the training loss before the step: 3 * 2^2
        ("same_data", None, 3 * 1.6**2),  # the updated params on the same batch
        ("outer_valid", None, 3 * 1.6**2),  # ... on a batch of a split
        (None, "dist", 6.0),  # the aux entry instead of the loss
        ("same_data", "dist", 3 * 1.6),
    ],
)
def test_meta_loss_split_and_aux_key(split, aux_key, expected):
    data, out = _one_sgd_step(_TargetTask(), meta_loss_split=split, meta_loss_with_aux_key=aux_key)
    assert set(data) == ({"train"} if split in (None, "same_data") else {"train", "meta"})
    np.testing.assert_allclose(np.asarray(out.loss), expected, rtol=1e-5)


class _NoDataTask(_TargetTask):
    """The same loss with the target ``x = 2`` built in: a task without datasets."""

    datasets = None

    def loss_with_state_and_aux(self, params, state, key, batch):
        return super().loss_with_state_and_aux(params, state, key, {"x": jnp.full(3, 2.0)})


@pytest.mark.parametrize("split", ["train", "outer_valid", "same_data"])
def test_meta_loss_split_on_a_task_without_data_evaluates_the_updated_params(split):
    # The library's full_es_test runs meta_loss_split="train" on data-less quadratics.
    data, out = _one_sgd_step(_NoDataTask(), meta_loss_split=split)
    assert data is None or all(v is None for v in jax.tree_util.tree_leaves(data))
    np.testing.assert_allclose(np.asarray(out.loss), 3 * 1.6**2, rtol=1e-5)


class _FarSplit:
    """A split whose batches sit at ``x = 4`` (the outer-valid split of the test below)."""

    def take(self, *shape):
        return {"x": np.full((*shape, 3), 4.0, np.float32)}


class _TwoSplitDatasets:
    train = inner_valid = test = _Split()
    outer_valid = _FarSplit()


class _TwoSplitTask(_TargetTask):
    datasets = _TwoSplitDatasets()


@pytest.mark.parametrize(
    "transform, expected",
    [
        # p1 = 0.4: train batches at 2 give 3 * 1.6^2, outer-valid batches at 4 give 3 * 3.6^2.
        (None, (3 * 1.6**2 + 3 * 3.6**2) / 2),
        ("log", (np.log(3 * 1.6**2) + np.log(3 * 3.6**2)) / 2),
    ],
)
def test_the_train_plus_outer_valid_split_averages_both_meta_values(transform, expected):
    data, out = _one_sgd_step(
        _TwoSplitTask(), meta_loss_split="train+outer_valid", meta_loss_transform=transform
    )
    assert set(data["meta"]) == {"train", "outer_valid"}
    np.testing.assert_allclose(np.asarray(out.loss), expected, rtol=1e-5)


def test_bad_truncated_step_arguments_raise():
    lopt = lopt_base.LearnableSGD()
    sched = truncation_schedule.ConstantTruncationSchedule(10)
    with pytest.raises(ValueError, match="meta_loss_split"):
        lopt_truncated_step.VectorizedLOptTruncatedStep(FAMILY, lopt, sched, 2, "valid")
    with pytest.raises(ValueError, match="outer_data_split"):
        lopt_truncated_step.VectorizedLOptTruncatedStep(
            FAMILY, lopt, sched, 2, outer_data_split="nope"
        )
    with pytest.raises(TypeError, match="trunc_sched"):
        lopt_truncated_step.VectorizedLOptTruncatedStep(FAMILY, lopt, 10, 2)
    step = lopt_truncated_step.VectorizedLOptTruncatedStep(
        _TargetTask(), lopt, sched, 2, meta_loss_with_aux_key="accuracy"
    )
    theta = lopt.init(jax.random.PRNGKey(0))
    state = step.init_step_state(theta, None, jax.random.PRNGKey(1))
    with pytest.raises(ValueError, match=r"'accuracy' is not in the aux .* \['dist'\]"):
        step.unroll(theta, state, jax.random.PRNGKey(2), step.get_batch(1), 1)


def test_library_one_step_interface_of_the_truncated_step():
    """``unroll_step`` (one step, then finished runs restart) and ``meta_loss_batch``."""
    lopt = lopt_base.LearnableSGD(initial_lr=0.1)
    step = lopt_truncated_step.VectorizedLOptTruncatedStep(
        _TargetTask(),
        lopt,
        truncation_schedule.ConstantTruncationSchedule(2),
        num_tasks=2,
        task_name="target",
    )
    assert step.task_name() == "target" and step.cfg_name() == "LearnableSGD"
    theta = step.outer_init(jax.random.PRNGKey(0))
    state = step.init_step_state(theta, gradient_learner.OuterState(0), jax.random.PRNGKey(1))
    batch = step.get_batch()  # one step: leaves [num_tasks, ...]
    assert batch["train"]["x"].shape == (2, 3)
    losses = []
    for i in range(3):
        state, out = step.unroll_step(theta, state, jax.random.PRNGKey(2 + i), batch)
        losses.append(np.asarray(out.loss))
        # The library's shapes: one step, no steps axis.
        assert out.loss.shape == (2,) and out.iteration.shape == (2,)
        assert out.mask.shape == (2,) and bool(out.mask.all())
        np.testing.assert_array_equal(np.asarray(out.iteration), [0, 1, 0][i])
    # Steps 0, 1 of a run (loss 12, then 3 * 1.6^2), then a fresh run (loss 12 again).
    np.testing.assert_allclose(losses, [[12, 12], [7.68, 7.68], [12, 12]], rtol=1e-5)
    np.testing.assert_array_equal(np.asarray(state.inner_step), 1)
    # The loss of the current params (one step taken: p = 0.4) on one outer batch.
    outer_batch = step.get_outer_batch()
    assert outer_batch["x"].shape == (2, 3)
    loss = step.meta_loss_batch(theta, state, jax.random.PRNGKey(9), outer_batch)
    np.testing.assert_allclose(np.asarray(loss), 7.68, rtol=1e-5)
