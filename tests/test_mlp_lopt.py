"""Tests of the ported per-parameter MLP learned optimizer (``mlp_lopt.MLPLOpt``).

The reference is an independent float64 numpy implementation of learned_optimization's
``MLPLOpt`` definition (features ``[g, p, m_1..m_6]`` normalized over the tensor, 11 tanh
time features of the pre-update step count, Haiku MLP, ``p - step_mult * d *
exp(exp_mult * a)``), run on a theta built directly in the library's Haiku layout.
"""

from __future__ import annotations

import functools

import flax.serialization
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from learnopt.learned_optimizers import base as lopt_base
from learnopt.learned_optimizers import convert, mlp_lopt
from learnopt.testing import assert_max_compiles

DECAYS = np.array([0.1, 0.5, 0.9, 0.99, 0.999, 0.9999])
TIMESCALES = np.array([1, 3, 10, 30, 100, 300, 1000, 3000, 10000, 30000, 100000], np.float64)


def _params(seed, dtype=jnp.float32):
    """A matrix, a vector and a scalar (numpy RNG: no compiles)."""
    rng = np.random.default_rng(seed)
    shapes = {"w": (5, 3), "b": (3,), "s": ()}
    return {k: jnp.asarray(rng.standard_normal(v), dtype=dtype) for k, v in shapes.items()}


def _reference_theta(seed, hidden=(6, 5)):
    """A theta in the library's Haiku layout, built without learnopt."""
    rng = np.random.default_rng(seed)
    sizes = [19, *hidden, 2]
    return {
        f"mlp/~/linear_{i}": {
            "w": rng.normal(0, 1 / np.sqrt(a), (a, b)).astype(np.float32),
            "b": rng.normal(0, 0.1, (b,)).astype(np.float32),
        }
        for i, (a, b) in enumerate(zip(sizes[:-1], sizes[1:], strict=True))
    }


def _numpy_mlp_lopt(theta, params, grads_seq, step_mult, exp_mult):
    """The library's MLPLOpt update, in float64 numpy, over a sequence of gradients."""
    params = {k: np.asarray(v, np.float64) for k, v in params.items()}
    m = {k: np.zeros(np.shape(v) + (6,)) for k, v in params.items()}
    layers = [theta[f"mlp/~/linear_{i}"] for i in range(len(theta))]
    for t, grads in enumerate(grads_seq):
        time = np.tanh(t / TIMESCALES - 1.0)
        new = {}
        for k, p in params.items():
            g = np.asarray(grads[k], np.float64)
            m[k] = DECAYS * m[k] + (1 - DECAYS) * g[..., None]
            p1, g1, m1 = (
                np.atleast_1d(p),
                np.atleast_1d(g),
                m[k].reshape(*np.atleast_1d(p).shape, 6),
            )
            x = np.concatenate([g1[..., None], p1[..., None], m1], axis=-1)
            axes = tuple(range(p1.ndim))
            x = x / np.sqrt(1e-5 + np.mean(x**2, axis=axes, keepdims=True))
            x = np.concatenate([x, np.broadcast_to(time, p1.shape + (11,))], axis=-1)
            for i, layer in enumerate(layers):
                x = x @ np.float64(layer["w"]) + np.float64(layer["b"])
                if i < len(layers) - 1:
                    x = np.maximum(x, 0)
            step = x[..., 0] * np.exp(x[..., 1] * exp_mult) * step_mult
            new[k] = (p1 - step).reshape(np.shape(p))
        params = new
    return params


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


def test_theta_has_the_library_haiku_layout(lopt, theta):
    shapes = jax.tree_util.tree_map(np.shape, theta)
    assert shapes == {
        "mlp/~/linear_0": {"w": (19, 32), "b": (32,)},
        "mlp/~/linear_1": {"w": (32, 32), "b": (32,)},
        "mlp/~/linear_2": {"w": (32, 2), "b": (2,)},
    }
    for leaf in jax.tree_util.tree_leaves(theta):
        assert leaf.dtype == jnp.float32 and not leaf.weak_type
    assert not np.any(theta["mlp/~/linear_0"]["b"])  # Haiku: zero biases
    w0 = np.asarray(theta["mlp/~/linear_0"]["w"])
    assert np.abs(w0).max() <= 2 / np.sqrt(19) + 1e-6  # truncated at 2 std
    other = jax.jit(lopt.init)(jax.random.PRNGKey(1))
    assert not np.allclose(w0, other["mlp/~/linear_0"]["w"])
    single = mlp_lopt.MLPLOpt(hidden_layers=0)
    assert jax.tree_util.tree_map(np.shape, single.init(jax.random.PRNGKey(0))) == {
        "mlp/~/linear_0": {"w": (19, 2), "b": (2,)}
    }


def test_matches_numpy_reference_of_the_library_definition():
    lopt = mlp_lopt.MLPLOpt(step_mult=0.1, exp_mult=0.5, hidden_size=6, hidden_layers=2)
    ref_theta = _reference_theta(0, hidden=(6, 6))
    theta = jax.tree_util.tree_map(jnp.asarray, ref_theta)
    params = _params(1)
    grads_seq = [_params(10 + i) for i in range(4)]

    @jax.jit
    def run(theta, params, grads_seq):
        opt = lopt.opt_fn(theta)
        state = opt.init(params)
        for grads in grads_seq:
            state = opt.update(state, grads, loss=jnp.float32(0.0))
        return state

    state = run(theta, params, grads_seq)
    expected = _numpy_mlp_lopt(ref_theta, params, grads_seq, step_mult=0.1, exp_mult=0.5)
    for k in params:
        moved = np.abs(expected[k] - np.asarray(params[k], np.float64)).max()
        assert moved > 1e-2  # the comparison is not dominated by unchanged params
        np.testing.assert_allclose(np.asarray(state.params[k]), expected[k], rtol=2e-5, atol=2e-6)
    m_w = DECAYS * 0  # the accumulators follow the library's EMA too
    for grads in grads_seq:
        m_w = DECAYS * m_w + (1 - DECAYS) * np.asarray(grads["s"], np.float64)
    # rtol: 1 - 0.9999 in float32 is off by ~1e-4 relative.
    np.testing.assert_allclose(np.asarray(state.rolling_features.m["s"]), m_w, rtol=1e-3)
    assert int(state.iteration) == 4


@pytest.mark.parametrize("wrap", ["parameter_checkpoint", "tuple", "bare"])
def test_library_checkpoint_loads_and_gives_the_same_update(tmp_path, wrap):
    """A file written like learned_optimization writes theta loads into MLPLOpt."""
    ref_theta = _reference_theta(3, hidden=(4, 4))
    if wrap == "parameter_checkpoint":
        state = {"params": ref_theta, "gen_id": "abc", "step": 7}
    elif wrap == "tuple":
        state = (ref_theta, "", 0)
    else:
        state = ref_theta
    path = tmp_path / "params"
    path.write_bytes(flax.serialization.to_bytes(state))

    lopt = mlp_lopt.MLPLOpt(hidden_size=4, step_mult=0.1, exp_mult=0.5)
    theta = convert.load_library_theta(path, lopt)
    assert jax.tree_util.tree_structure(theta) == jax.tree_util.tree_structure(
        lopt.init(jax.random.PRNGKey(0))
    )
    for x, y in zip(
        jax.tree_util.tree_leaves(theta), jax.tree_util.tree_leaves(ref_theta), strict=True
    ):
        assert x.dtype == jnp.float32
        np.testing.assert_array_equal(np.asarray(x), y)
    params, grads = _params(1), _params(2)
    new = _run(lopt, theta, params, grads).params
    expected = _numpy_mlp_lopt(ref_theta, params, [grads], step_mult=0.1, exp_mult=0.5)
    np.testing.assert_allclose(np.asarray(new["w"]), expected["w"], rtol=2e-5, atol=2e-6)


def test_library_checkpoint_with_other_sizes_is_rejected_clearly(tmp_path):
    path = tmp_path / "params"
    path.write_bytes(flax.serialization.to_bytes({"params": _reference_theta(0, hidden=(8, 8))}))
    with pytest.raises(ValueError, match=r"linear_0'\]\['b'\] has shape \(8,\).*expects \(4,\)"):
        convert.load_library_theta(path, mlp_lopt.MLPLOpt(hidden_size=4))
    with pytest.raises(ValueError, match="layout"):
        convert.theta_from_library({"nope": np.zeros(2)}, mlp_lopt.MLPLOpt(hidden_size=4))
    with pytest.raises(FileNotFoundError):
        convert.load_library_theta(tmp_path / "missing", mlp_lopt.MLPLOpt())


def test_registered_named_and_the_notes_constructor_works(lopt):
    assert "MLPLOpt" in lopt_base.registered_learned_optimizers()
    built = lopt_base.get_learned_optimizer(
        "MLPLOpt", hidden_size=16, hidden_layers=2, step_mult=0.01, exp_mult=0.1
    )
    assert isinstance(built, mlp_lopt.MLPLOpt)
    assert jax.eval_shape(built.init, jax.random.PRNGKey(0))["mlp/~/linear_0"]["w"].shape == (
        19,
        16,
    )
    assert lopt.name == "MLPLOpt"
    assert "1810.10180" in mlp_lopt.MLPLOpt.__doc__
    assert repr(lopt) == "MLPLOpt()"  # the base class's repr: arguments off their defaults
    assert repr(built) == "MLPLOpt(exp_mult=0.1, step_mult=0.01, hidden_size=16)"


def test_opt_fn_rejects_mismatched_theta(theta):
    with pytest.raises(ValueError, match=r"linear_0/w: \(19, 32\) \(want \(19, 8\)\)"):
        mlp_lopt.MLPLOpt(hidden_size=8).opt_fn(theta)


@pytest.mark.parametrize("dtype", [jnp.bfloat16])  # every dtype: tests/test_conformance.py
def test_init_update_keeps_dtypes(lopt, theta, dtype):
    params = _params(1, dtype)
    state = _run(lopt, theta, params, _params(2, dtype), steps=3)
    for p, q in zip(
        jax.tree_util.tree_leaves(params), jax.tree_util.tree_leaves(state.params), strict=True
    ):
        assert (q.dtype, q.shape) == (p.dtype, p.shape)
    for m in jax.tree_util.tree_leaves(state.rolling_features):
        assert m.dtype == jnp.float32
    assert state.iteration.dtype == jnp.int32 and int(state.iteration) == 3
    assert _all_finite(state)


def test_jitted_step_compiles_once(lopt, theta):
    @jax.jit
    def mlp_lopt_step(theta, state, grads):
        return lopt.opt_fn(theta).update(state, grads, loss=jnp.float32(0.0))

    params = _params(1, jnp.bfloat16)
    state = lopt.opt_fn(theta).init(params)
    grads = _params(2, jnp.float32)  # mixed precision: f32 grads for bf16 params
    with assert_max_compiles(1, name="mlp_lopt_step"):
        for _ in range(10):
            state = mlp_lopt_step(theta, state, grads)
    assert int(state.iteration) == 10
    assert state.params["w"].dtype == jnp.bfloat16


def test_update_is_small_at_init_and_scales_with_step_mult(theta):
    params, grads = _params(3), _params(4)

    def delta(step_mult):
        new = _run(mlp_lopt.MLPLOpt(step_mult=step_mult), theta, params, grads).params
        return np.asarray(new["w"] - params["w"])

    small = delta(0.001)
    assert 0 < np.abs(small).max() < 10 * 0.001
    # Differences of params near 1 in float32 carry ~1e-7 rounding error.
    np.testing.assert_allclose(delta(0.01), 10 * small, rtol=1e-3, atol=2e-6)


def test_summary(theta):
    lopt = mlp_lopt.MLPLOpt(compute_summary=True)
    params = _params(3)
    state = _run(lopt, theta, params, _params(4))
    assert set(state.summary) == {
        "avg_step_size",
        "direction_mean_abs",
        "magnitude_mean",
        "magnitude_mean_abs",
    }
    moved = np.concatenate(
        [np.abs(np.asarray(state.params[k] - params[k])).ravel() for k in params]
    )
    np.testing.assert_allclose(float(state.summary["avg_step_size"]), moved.mean(), rtol=1e-3)
    assert mlp_lopt.MLPLOpt(compute_summary=False).opt_fn(theta).init(params).summary == {}


def test_vmap_over_param_sets_matches_unbatched(lopt, theta):
    stack = lambda trees: jax.tree_util.tree_map(lambda *xs: jnp.stack(xs), *trees)  # noqa: E731
    params = stack([_params(s) for s in range(3)])
    grads = stack([_params(s + 3) for s in range(3)])
    states = jax.jit(jax.vmap(lambda p, g: _run(lopt, theta, p, g, steps=2)))(params, grads)
    assert states.params["w"].shape == (3, 5, 3)
    assert states.rolling_features.m["w"].shape == (3, 5, 3, 6)
    # The per-tensor normalization must not mix the members of the population.
    for i in range(3):
        single = _run(lopt, theta, _params(i), _params(i + 3), steps=2)
        for k in ("w", "b", "s"):
            np.testing.assert_allclose(states.params[k][i], single.params[k], rtol=1e-5, atol=1e-6)
