"""learnopt.optimizers.opt_to_optax: any learnopt optimizer as an optax transformation.

Pins the library's expectations (an Adam and a learned optimizer run through
``opt_to_optax_opt``; ``extra_args={"loss": ..., "key": ...}``) and what learnopt adds:
the loss and key actually reach the optimizer (also through ``optax.chain`` and
``LearnedOptimizer.as_optax``), and the result composes with ``optax.chain``,
schedules and ``optax.add_decayed_weights`` (before the optimizer, as L2
regularization), and ``as_optax(weight_decay=...)`` decays the weights (decoupled).
"""

from __future__ import annotations

from typing import Any

import flax.struct
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from learnopt.learned_optimizers import base as lopt_base
from learnopt.optimizers import base as opt_base
from learnopt.optimizers import opt_to_optax, optax_opts
from learnopt.tasks import quadratics


@pytest.fixture(scope="module")
def quadratic():
    task = quadratics.QuadraticTask()
    return task, task.init(jax.random.PRNGKey(0))


def _run(tx, params, grads_fn, steps=3, **extra):
    state = tx.init(params)
    for _ in range(steps):
        updates, state = tx.update(grads_fn(params), state, params, **extra)
        params = optax.apply_updates(params, updates)
    return params, state


def test_adam_runs_as_an_optax_transformation_and_matches_its_own_steps(quadratic):
    _, p = quadratic
    opt = optax_opts.Adam(1e-2)
    tx = opt_to_optax.opt_to_optax_opt(opt)
    assert isinstance(tx, optax.GradientTransformationExtraArgs)
    grads_fn = lambda q: jax.tree_util.tree_map(lambda x: 2 * x, q)  # noqa: E731
    params, state = _run(tx, p, grads_fn)

    direct = opt.init(p)
    for _ in range(3):
        direct = opt.update(direct, grads_fn(opt.get_params(direct)))
    np.testing.assert_allclose(params, opt.get_params(direct), rtol=1e-6)
    assert state.params == ()  # the loop owns the params: they are not stored twice


def test_learned_optimizer_takes_loss_and_key_as_extra_args(quadratic):
    lopt = lopt_base.LearnableAdam(initial_lr=0.1)
    tx = opt_to_optax.opt_to_optax_opt(lopt.opt_fn(lopt.init(jax.random.PRNGKey(0))), 100)
    _, p = quadratic
    key = jax.random.PRNGKey(1)
    params, _ = _run(tx, p, lambda q: q, extra_args={"loss": 1.0, "key": key})
    assert np.all(np.abs(np.asarray(params)) < np.abs(np.asarray(p)))


@flax.struct.dataclass
class _Seen:
    params: Any
    model_state: Any
    iteration: jax.Array
    loss: jax.Array
    key_sum: jax.Array


class _RecordsLossAndKey(opt_base.Optimizer):
    """SGD that records the loss and (a digest of) the key it was given."""

    def init(self, params, model_state=None, num_steps=None, key=None):
        zero = jnp.zeros((), jnp.float32)
        return _Seen(params, model_state, jnp.zeros((), jnp.int32), zero, zero)

    def update(self, opt_state, grads, loss=None, model_state=None, key=None, **kwargs):
        params = jax.tree_util.tree_map(lambda p, g: p - 0.1 * g, opt_state.params, grads)
        key_sum = opt_state.key_sum
        if key is not None:
            key_sum = jnp.sum(jax.random.key_data(key)).astype(jnp.float32)
        return _Seen(
            params=params,
            model_state=opt_state.model_state,
            iteration=opt_state.iteration + 1,
            loss=opt_state.loss if loss is None else loss,
            key_sum=key_sum,
        )


def _key_sum(key):
    return float(jnp.sum(jax.random.key_data(key)))


@pytest.mark.parametrize(
    "how",
    ["extra_args", "keywords", "optax_value", "chain_extra_args", "chain_value", "jit"],
)
def test_loss_and_key_reach_the_optimizer(how):
    params = {"w": jnp.ones(3)}
    grads = {"w": jnp.full(3, 0.5)}
    key = jax.random.PRNGKey(7)
    loss = jnp.float32(2.5)
    tx = opt_to_optax.opt_to_optax_opt(_RecordsLossAndKey())
    if how.startswith("chain"):
        tx = optax.chain(optax.clip_by_global_norm(10.0), tx)
    state = tx.init(params)
    if how in ("extra_args", "chain_extra_args"):
        _, state = tx.update(grads, state, params, extra_args={"loss": loss, "key": key})
    elif how == "keywords":
        _, state = tx.update(grads, state, params, loss=loss, key=key)
    elif how in ("optax_value", "chain_value"):
        _, state = tx.update(grads, state, params, value=loss, key=key)
    else:
        step = jax.jit(
            lambda s, v, k: tx.update(grads, s, params, extra_args={"loss": v, "key": k})
        )
        _, state = step(state, loss, key)
    seen = state[-1] if how.startswith("chain") else state
    assert float(seen.loss) == pytest.approx(2.5)
    assert float(seen.key_sum) == pytest.approx(_key_sum(key))


class _RecordingLOpt(lopt_base.LearnedOptimizer):
    def init(self, key):
        return {"unused": jnp.zeros(())}

    def opt_fn(self, theta, is_training=False):
        return _RecordsLossAndKey()


def test_learned_optimizer_as_optax_passes_the_loss():
    """``LearnedOptimizer.as_optax`` goes through the same code: the loss is not dropped."""
    lopt = _RecordingLOpt()
    tx = lopt.as_optax(lopt.init(None))
    params = {"w": jnp.ones(2)}
    _, state = tx.update({"w": jnp.ones(2)}, tx.init(params), params, value=jnp.float32(4.0))
    assert float(state.loss) == pytest.approx(4.0)
    assert isinstance(opt_base.SGD(0.1).as_optax(), optax.GradientTransformationExtraArgs)


def test_composes_with_add_decayed_weights_as_l2_regularization():
    """``chain(add_decayed_weights(wd), sgd)`` is SGD on ``loss + wd / 2 |p|^2``."""
    wd, lr = 0.3, 0.1
    tx = optax.chain(optax.add_decayed_weights(wd), opt_base.SGD(lr).as_optax())
    params = {"w": jnp.asarray([1.0, -2.0, 0.5])}
    grads_fn = lambda p: {"w": jnp.asarray([0.2, 0.1, -0.4])}  # noqa: E731
    got, _ = _run(tx, params, grads_fn)
    expected = params["w"]
    for _ in range(3):
        expected = expected - lr * (grads_fn(None)["w"] + wd * expected)
    np.testing.assert_allclose(got["w"], expected, rtol=1e-6)


def test_weight_decay_option_decays_the_weights_after_the_signed_step(quadratic):
    """``as_optax(weight_decay=wd)``: ``p <- p + step - wd * p``; with zero gradients
    (SGD's step is then zero) the params shrink by ``(1 - wd)`` a step, where chaining
    ``add_decayed_weights(wd)`` after the signed step would grow them by ``(1 + wd)``."""
    wd = 0.1
    params = {"w": jnp.asarray([1.0, -2.0, 0.5])}
    zero = lambda p: {"w": jnp.zeros(3)}  # noqa: E731
    got, _ = _run(opt_base.SGD(0.1).as_optax(weight_decay=wd), params, zero)
    np.testing.assert_allclose(got["w"], params["w"] * (1 - wd) ** 3, rtol=1e-6)
    wrong = optax.chain(opt_base.SGD(0.1).as_optax(), optax.add_decayed_weights(wd))
    grown, _ = _run(wrong, params, zero)
    np.testing.assert_allclose(grown["w"], params["w"] * (1 + wd) ** 3, rtol=1e-6)
    # With gradients: the step, then the decay of the params the step started from.
    grads_fn = lambda p: {"w": jnp.asarray([0.2, 0.1, -0.4])}  # noqa: E731
    got, _ = _run(opt_base.SGD(0.1).as_optax(weight_decay=wd), params, grads_fn)
    expected = params["w"]
    for _ in range(3):
        expected = expected - 0.1 * grads_fn(None)["w"] - wd * expected
    np.testing.assert_allclose(got["w"], expected, rtol=1e-6)
    # A mask leaves the other params alone; a learned optimizer takes the same option.
    both = {"w": jnp.ones(2), "b": jnp.ones(2)}
    tx = opt_base.SGD(0.1).as_optax(weight_decay=wd, weight_decay_mask={"w": True, "b": False})
    got, _ = _run(tx, both, lambda p: jax.tree_util.tree_map(jnp.zeros_like, p), steps=1)
    np.testing.assert_allclose(got["w"], 0.9, rtol=1e-6)
    np.testing.assert_allclose(got["b"], 1.0, rtol=1e-6)
    lopt = lopt_base.LearnableSGD()
    got, _ = _run(lopt.as_optax(lopt.init(None), weight_decay=wd), params, zero, steps=2)
    np.testing.assert_allclose(got["w"], params["w"] * (1 - wd) ** 2, rtol=1e-6)


@pytest.mark.parametrize("bad", [-0.1, 1.0, float("nan"), True, "0.1"])
def test_weight_decay_outside_zero_one_is_refused(bad):
    with pytest.raises(ValueError, match=r"weight_decay must be a number in \[0, 1\)"):
        opt_base.SGD(0.1).as_optax(weight_decay=bad)


def test_composes_with_a_schedule_scaling_the_steps():
    schedule = optax.linear_schedule(1.0, 0.25, transition_steps=3)
    tx = optax.chain(opt_base.SGD(0.1).as_optax(), optax.scale_by_schedule(schedule))
    params = {"w": jnp.ones(2)}
    got, _ = _run(tx, params, lambda p: {"w": jnp.ones(2)})
    expected = 1.0 - 0.1 * sum(float(schedule(i)) for i in range(3))
    np.testing.assert_allclose(got["w"], expected, rtol=1e-6)


def test_low_precision_params_get_low_precision_updates_in_a_jitted_loop():
    tx = opt_base.Adam(1e-2).as_optax()
    params = {"w": jnp.ones(4, jnp.bfloat16)}

    @jax.jit
    def step(params, state):
        updates, state = tx.update({"w": jnp.full(4, 0.5, jnp.bfloat16)}, state, params)
        return optax.apply_updates(params, updates), state

    state = tx.init(params)
    for _ in range(3):
        params, state = step(params, state)
    assert params["w"].dtype == jnp.bfloat16
    assert float(params["w"][0]) < 1.0


def test_params_are_required():
    tx = opt_base.SGD().as_optax()
    with pytest.raises(ValueError, match="needs params"):
        tx.update({"w": jnp.ones(2)}, tx.init({"w": jnp.ones(2)}))
    with pytest.raises(TypeError, match="Optimizer instance"):
        opt_to_optax.opt_to_optax_opt(optax.adam(1e-3))
