"""The fused CPU kernel (``form="fused"``) computes per_element.mlp's function."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from learnopt.learned_optimizers.blocks import fused_kernel, per_element


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
    # The update epilogue too, with a step multiplier batched beside the features.
    p = jax.random.normal(jax.random.PRNGKey(7), shape)
    steps = jax.vmap(lambda gs, m: _step(layers, gs, shape, t, p, m, "fused"))(
        stacked, jnp.array([0.1, 0.3])
    )
    second = _step(layers, [2.0 * g for g in groups], shape, t, p, 0.3, "reference")
    assert _rel([second.params, second.sums], [steps.params[1], steps.sums[1]]) < 1e-5


def test_fused_names_what_it_cannot_compute():
    layers, groups, shape, t = _case()
    narrow = [(w[:, :16], b[:16]) for w, b in layers[:1]] + [
        (layers[1][0][:16, :16], layers[1][1][:16]),
        (layers[2][0][:16], layers[2][1]),
    ]
    with pytest.raises(ValueError, match=r"widths \[16, 16\]"):
        _mlp(narrow, groups, shape, t, "fused")


def _step(layers, groups, shape, t, p, mult, form, mean_from=None, exp_mult=0.7):
    return per_element.mlp_step(
        layers,
        groups,
        shape,
        p,
        step_mult=mult,
        exp_mult=exp_mult,
        summary=True,
        tensor_inputs=t,
        norm_axes=tuple(range(len(shape))),
        mean_outputs_from=mean_from,
        form=form,
    )


@pytest.mark.parametrize(
    "shape, n_out, mean_from", [((37, 29), 2, None), ((3000,), 7, 2)], ids=["2d", "3-chunks-means"]
)
def test_fused_step_values_and_derivatives_equal_the_reference(shape, n_out, mean_from):
    """The update epilogue (MLPLOpt's and RNNMLPLOpt's ``p - s * d * exp(e * a)``, with the
    step statistics' sums) written by the kernel: the same values, and derivatives with
    respect to theta, the features, the params and a traced step multiplier."""
    if not fused_kernel.available():
        assert fused_kernel._compiler() is None, fused_kernel.unavailable_reason()
        return
    layers, groups, shape, t = _case(shape=shape, n_out=n_out)
    p = jax.random.normal(jax.random.PRNGKey(5), shape)
    ref = _step(layers, groups, shape, t, p, 0.1, "reference", mean_from)
    fused = _step(layers, groups, shape, t, p, 0.1, "fused", mean_from)
    assert fused.params.shape == shape and fused.sums.shape == (4,)
    assert (fused.means is None) == (mean_from is None)
    assert _rel([x for x in ref if x is not None], [x for x in fused if x is not None]) < 1e-5

    def loss(ls, gs, p, mult, form):
        out = _step(ls, gs, shape, t, p, mult, form, mean_from)
        total = jnp.sum(jnp.sin(out.params)) + jnp.sum(jnp.cos(out.sums / p.size))
        return total if out.means is None else total + jnp.sum(jnp.cos(out.means))

    grad = jax.jit(jax.grad(loss, argnums=(0, 1, 2, 3)), static_argnums=4)
    args = (layers, groups, p, jnp.float32(0.1))
    assert _rel(grad(*args, "reference"), grad(*args, "fused")) < 1e-5


def test_fused_step_exponential_over_floats_whole_range():
    """The kernel's vector exp(): large magnitudes overflow to inf exactly where jnp.exp
    does, tiny ones reach the denormals and zero, NaN stays NaN."""
    if not fused_kernel.available():
        assert fused_kernel._compiler() is None, fused_kernel.unavailable_reason()
        return
    shape = (2048,)
    layers, groups, shape, t = _case(shape=shape)
    # The magnitude output a = x_0 exactly (its bias and the direction's: 1, 0), so
    # exp_mult * a sweeps -120..100 across the rows.
    exps = jnp.concatenate([jnp.linspace(-120.0, 100.0, shape[0] - 2), jnp.array([88.7, 88.73])])
    direction, magnitude = jnp.ones(shape), exps
    w0 = jnp.zeros((2, 32)).at[0, 0].set(1.0).at[0, 1].set(-1.0).at[1, 2].set(1.0)
    w1 = jnp.zeros((32, 32)).at[0, 0].set(1.0).at[1, 1].set(1.0).at[2, 2].set(1.0)
    w2 = jnp.zeros((32, 2)).at[0, 1].set(1.0).at[1, 1].set(-1.0).at[2, 0].set(1.0)
    layers = [(w0, jnp.zeros(32)), (w1, jnp.zeros(32)), (w2, jnp.zeros(2))]
    feats = [magnitude[:, None], direction[:, None]]
    p = jnp.zeros(shape).at[5].set(jnp.nan)
    out = per_element.mlp_step(
        layers, feats, shape, p, step_mult=-1.0, exp_mult=1.0, form="fused"
    ).params
    expected = jnp.exp(exps).at[5].set(jnp.nan)
    tiny = np.finfo(np.float32).tiny  # denormals: flushed to zero or not, both agree
    np.testing.assert_allclose(np.asarray(out), np.asarray(expected), rtol=3e-7, atol=tiny)
    assert bool(jnp.isinf(out[-1])) and bool(jnp.isfinite(out[-2]))
