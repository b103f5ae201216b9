"""Tests of the per-parameter MLP learned optimizer (``learnopt.learned_optimizers.mlp_lopt``)."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from learnopt.learned_optimizers import base as lopt_base
from learnopt.learned_optimizers import mlp_lopt
from learnopt.testing import assert_max_compiles


def _params(seed, dtype=jnp.float32):
    """A small params tree with a matrix, a vector and a scalar (numpy RNG: no compiles)."""
    rng = np.random.default_rng(seed)
    shapes = {"w": (5, 3), "b": (3,), "s": ()}
    return {k: jnp.asarray(rng.standard_normal(v), dtype=dtype) for k, v in shapes.items()}


def _grads_like(params, seed):
    rng = np.random.default_rng(seed)
    return jax.tree_util.tree_map(
        lambda p: jnp.asarray(rng.standard_normal(np.shape(p)), dtype=p.dtype), params
    )


def _all_finite(tree):
    leaves = jax.tree_util.tree_leaves(tree)
    return all(np.all(np.isfinite(np.asarray(x).astype(np.float64))) for x in leaves)


@functools.partial(jax.jit, static_argnames=("lopt", "steps"))
def _run(lopt, theta, params, grads, steps=1):
    """``init`` then ``steps`` updates with fixed ``grads``, all in one jitted program."""
    opt = lopt.opt_fn(theta)
    state = opt.init(params)
    for _ in range(steps):
        state = opt.update(state, grads, loss=jnp.float32(1.0))
    return state


@pytest.fixture(scope="module")
def lopt():
    return mlp_lopt.MLPLOpt()


@pytest.fixture(scope="module")
def theta(lopt):
    return jax.jit(lopt.init)(jax.random.PRNGKey(0))


def test_theta_is_dict_of_strong_float32(lopt, theta):
    assert isinstance(theta, dict)
    assert set(theta) == {"w0", "b0", "w1", "b1", "w2", "b2"}
    assert theta["w0"].shape == (lopt.num_features, 4)
    assert theta["w2"].shape == (4, 2)
    for leaf in theta.values():
        assert leaf.dtype == jnp.float32
        assert not leaf.weak_type
    other = jax.jit(lopt.init)(jax.random.PRNGKey(1))
    assert not np.allclose(theta["w0"], other["w0"])


def test_registered_and_named(lopt):
    assert "MLPLOpt" in lopt_base.registered_learned_optimizers()
    built = lopt_base.get_learned_optimizer("MLPLOpt", hidden_size=8)
    assert isinstance(built, mlp_lopt.MLPLOpt)
    assert jax.eval_shape(built.init, jax.random.PRNGKey(0))["w0"].shape == (built.num_features, 8)
    assert lopt.name == "MLPLOpt"
    assert "2203.11860" in mlp_lopt.MLPLOpt.__doc__


def test_opt_fn_rejects_mismatched_theta(theta):
    with pytest.raises(ValueError, match="layer sizes"):
        mlp_lopt.MLPLOpt(hidden_size=8).opt_fn(theta)


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.bfloat16, jnp.float16])
def test_init_update_keeps_dtypes(lopt, theta, dtype):
    params = _params(1, dtype)
    grads = _grads_like(params, 2)
    state = _run(lopt, theta, params, grads, steps=3)
    for p, q in zip(
        jax.tree_util.tree_leaves(params), jax.tree_util.tree_leaves(state.params), strict=True
    ):
        assert q.dtype == p.dtype
        assert q.shape == p.shape
    for m in jax.tree_util.tree_leaves((state.momentums, state.rms)):
        assert m.dtype == jnp.float32
    assert state.iteration.dtype == jnp.int32
    assert _all_finite(state)
    assert int(state.iteration) == 3


def test_mixed_precision_grads(lopt, theta):
    params = _params(1, jnp.bfloat16)
    grads = _grads_like(_params(1), 2)  # float32 grads for bfloat16 params
    state = _run(lopt, theta, params, grads)
    assert state.params["w"].dtype == jnp.bfloat16
    assert state.momentums["w"].dtype == jnp.float32
    assert _all_finite(state)


def test_jitted_step_compiles_once(lopt, theta):
    @jax.jit
    def mlp_lopt_step(theta, state, grads):
        return lopt.opt_fn(theta).update(state, grads, loss=jnp.float32(0.0))

    params = _params(1, jnp.bfloat16)
    state = lopt.opt_fn(theta).init(params)
    grads = _grads_like(params, 2)
    with assert_max_compiles(1, name="mlp_lopt_step"):
        for _ in range(10):
            state = mlp_lopt_step(theta, state, grads)
    assert int(state.iteration) == 10


def test_update_is_small_at_init(lopt, theta):
    params = _params(3)
    state = _run(lopt, theta, params, _grads_like(params, 4))
    deltas = [np.abs(np.asarray(state.params[k] - params[k])) for k in params]
    largest = max(float(d.max()) for d in deltas)
    assert 0 < largest < 10 * lopt.step_mult


def test_step_mult_scales_update(theta):
    params = _params(3)
    grads = _grads_like(params, 4)

    def delta(step_mult):
        new = _run(mlp_lopt.MLPLOpt(step_mult=step_mult), theta, params, grads).params
        return np.asarray(new["w"] - params["w"])

    # Differences of params near 1 in float32 carry ~1e-7 rounding error.
    np.testing.assert_allclose(delta(0.01), 10 * delta(0.001), rtol=1e-3, atol=2e-6)


def test_summary(theta):
    lopt = mlp_lopt.MLPLOpt(compute_summary=True)
    params = _params(3)
    state = _run(lopt, theta, params, _grads_like(params, 4))
    assert set(state.summary) == {
        "avg_step_size",
        "direction_mean_abs",
        "magnitude_mean",
        "magnitude_mean_abs",
    }
    assert 0 < float(state.summary["avg_step_size"]) < 10 * lopt.step_mult
    assert mlp_lopt.MLPLOpt().opt_fn(theta).init(params).summary == {}


def _quadratic(params):
    return sum(
        jnp.sum(jnp.square(x.astype(jnp.float32))) for x in jax.tree_util.tree_leaves(params)
    )


def _meta_loss(lopt, theta, params, grad_mask):
    """Mean loss over a 5-step unroll (``lax.scan``); ``grad_mask`` zeroes some gradients."""
    opt = lopt.opt_fn(theta, is_training=True)

    def body(state, _):
        loss, grads = jax.value_and_grad(_quadratic)(opt.get_params(state))
        grads = jax.tree_util.tree_map(jnp.multiply, grads, grad_mask)
        return opt.update(state, grads, loss=loss), loss

    _, losses = jax.lax.scan(body, opt.init(params), None, length=5)
    return jnp.mean(losses)


def test_meta_gradient_finite_and_nonzero(theta):
    """Meta-gradients of a 5-step unroll, for three inner problems in one compile.

    0: ordinary; 1: leaf ``b`` is zero with an exactly zero gradient at every step;
    2: every gradient is exactly zero at every step (the momentum and rms features are
    all zero; only the params and the step count drive the update).
    """
    lopt = mlp_lopt.MLPLOpt(step_mult=0.1)
    ones = {k: np.ones(np.shape(v), np.float32) for k, v in _params(0).items()}
    cases = [
        (_params(5), ones),
        ({**_params(5), "b": jnp.zeros(3)}, {**ones, "b": np.zeros(3, np.float32)}),
        (_params(5), jax.tree_util.tree_map(np.zeros_like, ones)),
    ]
    params, masks = (
        jax.tree_util.tree_map(lambda *xs: jnp.stack(xs), *trees)
        for trees in zip(*cases, strict=True)
    )
    meta_grad_fn = jax.grad(lambda t, p, m: _meta_loss(lopt, t, p, m))
    meta_grads = jax.jit(jax.vmap(meta_grad_fn, in_axes=(None, 0, 0)))(theta, params, masks)
    assert set(meta_grads) == set(theta)
    assert _all_finite(meta_grads)
    sq_norms = sum(
        np.sum(np.square(np.asarray(g)), axis=tuple(range(1, g.ndim))) for g in meta_grads.values()
    )
    assert np.all(sq_norms > 0), sq_norms


def test_vmap_over_param_sets(lopt, theta):
    params = jax.tree_util.tree_map(lambda *xs: jnp.stack(xs), *[_params(s) for s in range(3)])
    grads = jax.tree_util.tree_map(lambda *xs: jnp.stack(xs), *[_params(s + 3) for s in range(3)])
    batched = jax.jit(jax.vmap(lambda p, g: _run(lopt, theta, p, g, steps=2)))
    states = batched(params, grads)
    assert states.params["w"].shape == (3, 5, 3)
    assert states.momentums["w"].shape == (3, 5, 3, len(mlp_lopt.MOMENTUM_DECAYS))
    assert _all_finite(states)
    # Each member matches its own unbatched run (the per-tensor normalization must not
    # mix the members of the population).
    for i in range(3):
        single = _run(lopt, theta, _params(i), _params(i + 3), steps=2)
        for k in params:
            np.testing.assert_allclose(states.params[k][i], single.params[k], rtol=1e-5, atol=1e-6)
