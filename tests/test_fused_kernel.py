"""The fused CPU kernel (``form="fused"``) computes per_element.mlp's function."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import pytest

from learnopt.learned_optimizers import fused_kernel, per_element


def _case(n_features=(1, 1, 3), shape=(37, 29), seed=0, n_out=2):
    keys = iter(jax.random.split(jax.random.PRNGKey(seed), 16))
    nf = sum(n_features)
    layers = [
        (
            0.3 * jax.random.normal(next(keys), (nf + 3, 32)),
            0.1 * jax.random.normal(next(keys), (32,)),
        ),
        (0.2 * jax.random.normal(next(keys), (32, 32)), 0.1 * jax.random.normal(next(keys), (32,))),
        (
            0.2 * jax.random.normal(next(keys), (32, n_out)),
            0.1 * jax.random.normal(next(keys), (n_out,)),
        ),
    ]
    groups = [jax.random.normal(next(keys), (*shape, w)) for w in n_features]
    return layers, groups, shape, jax.random.normal(next(keys), (3,))


def _mlp(layers, groups, shape, t, form, norm_axes=(0, 1)):
    return per_element.mlp(layers, groups, shape, tensor_inputs=t, norm_axes=norm_axes, form=form)


def _rel(a, b):
    la, lb = jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b)
    return max(
        float(jnp.max(jnp.abs(x - y)) / jnp.max(jnp.abs(x))) for x, y in zip(la, lb, strict=True)
    )


def test_the_kernel_builds_wherever_a_compiler_is_found():
    assert fused_kernel.available() == (fused_kernel._compiler() is not None), (
        fused_kernel.unavailable_reason()
    )


@pytest.mark.parametrize("norm_axes", [(0, 1), (0,)], ids=["whole", "rows"])
def test_fused_values_and_derivatives_equal_the_reference(norm_axes):
    if not fused_kernel.available():
        with pytest.raises(RuntimeError, match="not available"):
            _mlp(*_case(), "fused", norm_axes)
        return
    layers, groups, shape, t = _case()
    ref = _mlp(layers, groups, shape, t, "reference", norm_axes)
    assert _rel(ref, _mlp(layers, groups, shape, t, "fused", norm_axes)) < 1e-5

    def loss(ls, gs, form):
        return sum(jnp.sum(jnp.sin(o)) for o in _mlp(ls, gs, shape, t, form, norm_axes))

    grad = jax.jit(jax.grad(loss, argnums=(0, 1)), static_argnums=2)
    assert _rel(grad(layers, groups, "reference"), grad(layers, groups, "fused")) < 1e-5


@pytest.mark.parametrize("shape", [(37, 29), (3000,)], ids=["2d", "3-chunks"])
def test_fused_with_mean_outputs_equals_the_reference(shape):
    """RNNMLPLOpt's use: 2 outputs per element and 5 needed only as means over elements
    (from the second hidden layer's sum, accumulated per chunk of rows; a partial last
    tile left out)."""
    if not fused_kernel.available():
        assert fused_kernel._compiler() is None, fused_kernel.unavailable_reason()
        return
    layers, groups, shape, t = _case(shape=shape, n_out=7)
    norm_axes = tuple(range(len(shape)))

    def mlp(ls, gs, form):
        return per_element.mlp(
            ls, gs, shape, tensor_inputs=t, norm_axes=norm_axes, mean_outputs_from=2, form=form
        )

    ref, fused = mlp(layers, groups, "reference"), mlp(layers, groups, "fused")
    assert [o.shape for o in fused] == [shape, shape, (5,)]
    assert _rel(ref, fused) < 1e-5

    def loss(ls, gs, form):
        a, b, means = mlp(ls, gs, form)
        return jnp.sum(jnp.sin(a) * b) + jnp.sum(jnp.cos(means))

    grad = jax.jit(jax.grad(loss, argnums=(0, 1)), static_argnums=2)
    assert _rel(grad(layers, groups, "reference"), grad(layers, groups, "fused")) < 1e-5


def test_fused_under_vmap_equals_each_slice():
    if not fused_kernel.available():
        assert fused_kernel._compiler() is None, fused_kernel.unavailable_reason()
        return
    layers, groups, shape, t = _case(shape=(5000,))
    stacked = [jnp.stack([g, 2.0 * g]) for g in groups]
    out = jax.vmap(lambda gs: _mlp(layers, gs, shape, t, "fused", (0,)))(stacked)
    second = _mlp(layers, [2.0 * g for g in groups], shape, t, "reference", (0,))
    assert _rel(second, [o[1] for o in out]) < 1e-5


def test_fused_names_what_it_cannot_compute():
    layers, groups, shape, t = _case()
    narrow = [(w[:, :16], b[:16]) for w, b in layers[:1]] + [
        (layers[1][0][:16, :16], layers[1][1][:16]),
        (layers[2][0][:16], layers[2][1]),
    ]
    with pytest.raises(ValueError, match=r"widths \[16, 16\]"):
        _mlp(narrow, groups, shape, t, "fused")
