"""The fast forms of the per-element MLPs compute what the reference form computes.

``learnopt.learned_optimizers.per_element.mlp`` evaluates every per-parameter network
(MLPLOpt, AdafacMLPLOpt, MLPNomLOpt, Celo2, HyperV2's generated MLPs, RNNMLPLOpt) either
as the obvious concatenate-and-matmul (``"reference"``) or in a faster form
(``"elementwise"``, ``"blocked"``). Here every architecture runs a short unroll in each
form from the same perturbed theta: the parameter updates and the meta-gradient of the
unroll's loss with respect to theta must match the reference's to float32 rounding
(relative 1e-4; the measured differences are listed at ``RTOL``) for float32 params,
and the updates to bfloat16 rounding for bfloat16 params. ``BLOCK`` is shrunk so the
blocked form's ``lax.map`` over padded blocks runs.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from learnopt.learned_optimizers import (
    adafac_mlp_lopt,
    celo2,
    hyper_v2,
    mlp_lopt,
    per_element,
    rnn_mlp_lopt,
)

ARCHITECTURES = {
    "MLPLOpt": lambda: mlp_lopt.MLPLOpt(hidden_size=4, step_mult=0.1, exp_mult=0.1),
    "AdafacMLPLOpt": lambda: adafac_mlp_lopt.AdafacMLPLOpt(step_mult=0.1, exp_mult=0.1),
    # Celo2-base: Newton-Schulz after the MLP amplifies float32 summation-order
    # differences in the meta-gradient (2.5e-4 measured), which is not the form's error.
    "Celo2": lambda: celo2.Celo2(
        ff_hidden_size=4, step_mult=0.1, exp_mult=0.1, orthogonalize=False
    ),
    "HyperV2": lambda: hyper_v2.HyperV2(
        lstm_hidden_size=4, param_inits=2, step_mult=0.1, exp_mult=0.1
    ),
    "RNNMLPLOpt": lambda: rnn_mlp_lopt.RNNMLPLOpt(
        hidden_size=4, lstm_hidden_size=4, step_multiplier=0.1, magnitude_rate=0.1
    ),
}
FAST_FORMS = ("elementwise", "blocked")
# The forms each architecture is unrolled in: the one "auto" takes for its default width
# on large tensors, and both for the 32-wide designs (blocked by default, elementwise
# when narrowed). The blocked form's own paths (scales folded into w0, partial-axis
# norms, padded blocks, mean outputs) are covered for every shape by the direct test of
# ``per_element.mlp`` below. MLPNomLOpt evaluates AdafacMLPLOpt's ``mlp_forward``.
ARCHITECTURE_FORMS = {
    "MLPLOpt": FAST_FORMS,
    "AdafacMLPLOpt": ("elementwise",),
    "Celo2": ("elementwise",),
    "HyperV2": ("elementwise",),
    "RNNMLPLOpt": FAST_FORMS,
}
STEPS = 2
# Measured largest differences (2026-12-01): updates 4e-6 (MLPLOpt, AdafacMLPLOpt,
# MLPNomLOpt, Celo2, RNNMLPLOpt) and 5.5e-5 (HyperV2, whose initial steps are ~2e-6);
# meta-gradients 1e-5 or less, except Celo2 and HyperV2 (3e-5 and 5e-5, through their
# tensor-wide normalizations). Both fast forms differ from the reference by the same
# amounts, so these are float32 summation-order effects, not a form's error.
RTOL = 1e-4


def _params(dtype) -> dict[str, jax.Array]:
    rng = np.random.default_rng(0)
    shapes = {"w": (40, 30)}  # one tensor: compiles dominate; shapes: the direct test
    return {k: jnp.asarray(0.1 * rng.standard_normal(s), dtype) for k, s in shapes.items()}


def _perturbed_theta(lopt, scale: float = 0.1) -> dict:
    """The initial theta plus noise, so no output layer starts at zero."""
    theta = lopt.init(jax.random.PRNGKey(0))
    leaves, treedef = jax.tree_util.tree_flatten(theta)
    keys = jax.random.split(jax.random.PRNGKey(1), len(leaves))
    noisy = [
        x + scale * jax.random.normal(k, x.shape, x.dtype)
        if jnp.issubdtype(x.dtype, jnp.floating)
        else x
        for x, k in zip(leaves, keys, strict=True)
    ]
    return jax.tree_util.tree_unflatten(treedef, noisy)


def _unroll(lopt, form: str, dtype):
    """``theta -> (meta-loss, updates)`` of STEPS steps on ``0.5 |p - target|^2``."""
    lopt.mlp_form = form
    params = _params(dtype)
    target = jax.tree_util.tree_map(lambda p: 0.5 * jnp.ones_like(p), params)

    def run(theta):
        opt = lopt.opt_fn(theta)
        state = opt.init(params, num_steps=10)
        total, updates = 0.0, []
        for _ in range(STEPS):
            p = opt.get_params(state)
            diff = jax.tree_util.tree_map(
                lambda a, t: a.astype(jnp.float32) - t.astype(jnp.float32), p, target
            )
            loss = sum(0.5 * jnp.sum(d * d) for d in jax.tree_util.tree_leaves(diff))
            grads = jax.tree_util.tree_map(lambda d, a: d.astype(a.dtype), diff, p)
            state = opt.update(state, grads, loss=loss)
            new = opt.get_params(state)
            updates.append(
                jax.tree_util.tree_map(
                    lambda a, b: a.astype(jnp.float32) - b.astype(jnp.float32), new, p
                )
            )
            total = total + loss
        return total, updates

    return run


@pytest.fixture(scope="module")
def small_blocks():
    """Blocks of 256 rows: the 1,200-element tensor takes the padded ``lax.map`` path."""
    saved = per_element.BLOCK
    per_element.BLOCK = 256
    yield
    per_element.BLOCK = saved


def _assert_close(actual, expected, rtol: float, what: str) -> None:
    """Each leaf within ``rtol`` of the reference, relative to that leaf's largest value
    (floored at 1e-3 of the tree's largest, so all-but-zero leaves are not over-judged)."""
    a_leaves = jax.tree_util.tree_leaves(actual)
    e_leaves = jax.tree_util.tree_leaves(expected)
    assert len(a_leaves) == len(e_leaves)
    overall = max(float(jnp.max(jnp.abs(e))) for e in e_leaves if e.size)
    assert overall > 0, f"{what}: the reference is all zeros, the comparison proves nothing"
    for i, (a, e) in enumerate(zip(a_leaves, e_leaves, strict=True)):
        a, e = np.asarray(a, np.float64), np.asarray(e, np.float64)
        scale = max(float(np.max(np.abs(e), initial=0.0)), 1e-3 * overall)
        err = float(np.max(np.abs(a - e), initial=0.0))
        assert err <= rtol * scale, f"{what}, leaf {i}: max error {err:.3g} vs scale {scale:.3g}"


@pytest.mark.parametrize("name", list(ARCHITECTURES))
def test_fast_forms_updates_and_meta_gradients_equal_the_reference(small_blocks, name):
    lopt = ARCHITECTURES[name]()
    theta = _perturbed_theta(lopt)
    results = {}
    forms = ARCHITECTURE_FORMS[name]
    for form in ("reference", *forms):
        fn = jax.value_and_grad(_unroll(ARCHITECTURES[name](), form, jnp.float32), has_aux=True)
        (_, updates), grad = jax.jit(fn)(theta)
        results[form] = updates, grad
    ref_updates, ref_grad = results["reference"]
    for form in forms:
        updates, grad = results[form]
        _assert_close(updates, ref_updates, RTOL, f"{name} {form} updates")
        _assert_close(grad, ref_grad, RTOL, f"{name} {form} meta-gradient")


# The params' dtype reaches the MLP only through the compute dtype (float32 for
# bfloat16 params), the same in every architecture: one of them is checked.
@pytest.mark.parametrize("name", ["MLPLOpt"])
def test_fast_forms_on_bfloat16_params_equal_the_reference(small_blocks, name):
    lopt = ARCHITECTURES[name]()
    theta = _perturbed_theta(lopt)
    ref = jax.jit(_unroll(lopt, "reference", jnp.bfloat16))(theta)[1]
    for form in FAST_FORMS:
        lopt = ARCHITECTURES[name]()
        updates = jax.jit(_unroll(lopt, form, jnp.bfloat16))(theta)[1]
        # The arithmetic is float32; a float32 rounding difference can move a stored
        # bfloat16 value by one of its ulps: at most 2^-8 for these params (|p| < 1).
        leaves = zip(
            jax.tree_util.tree_leaves(updates), jax.tree_util.tree_leaves(ref), strict=True
        )
        for a, e in leaves:
            np.testing.assert_allclose(np.asarray(a), np.asarray(e), atol=2**-8, rtol=0)
        assert any(float(jnp.max(jnp.abs(e))) > 0 for e in jax.tree_util.tree_leaves(ref))


def _random_mlp(key, n_features, n_tensor, widths, n_out):
    sizes = [n_features + n_tensor, *widths, n_out]
    layers = []
    for a, b in zip(sizes[:-1], sizes[1:], strict=True):
        key, k1, k2 = jax.random.split(key, 3)
        layers.append((jax.random.normal(k1, (a, b)) / np.sqrt(a), jax.random.normal(k2, (b,))))
    return layers


@pytest.mark.parametrize("form", FAST_FORMS)
@pytest.mark.parametrize("shape", [(1,), (7,), (40, 30), (3, 4, 5)])
def test_mlp_forms_agree_with_tensor_inputs_partial_norm_and_mean_outputs(
    small_blocks, shape, form
):
    key = jax.random.PRNGKey(len(shape))
    groups = [
        jax.random.normal(jax.random.fold_in(key, i), (*shape, w)) * (i + 1)
        for i, w in enumerate((1, 3, 2))
    ]
    layers = _random_mlp(key, 6, 2, (5, 5), 4)
    t = jnp.array([0.3, -1.2])
    axes = tuple(range(len(shape)))[-2:]
    kwargs = dict(tensor_inputs=t, norm_axes=axes, activation=jnp.tanh, mean_outputs_from=2)
    ref = per_element.mlp(layers, groups, shape, form="reference", **kwargs)
    fast = jax.jit(lambda g: per_element.mlp(layers, g, shape, form=form, **kwargs))(groups)
    assert len(fast) == 3 and fast[2].shape == (2,) and fast[0].shape == shape
    for a, e in zip(fast, ref, strict=True):
        np.testing.assert_allclose(np.asarray(a), np.asarray(e), rtol=1e-5, atol=1e-5)
    # The same features held one array per column (the accumulators' per-decay layout)
    # and features-first: the same function.
    per_column = [[g[..., j] for j in range(g.shape[-1])] for g in groups]
    first = [jnp.moveaxis(groups[0], -1, 0), *per_column[1:]]
    for feats in (per_column, first):
        cols = jax.jit(
            lambda g: per_element.mlp(layers, g, shape, form=form, feature_axis=0, **kwargs)
        )(feats)
        for a, e in zip(cols, ref, strict=True):
            np.testing.assert_allclose(np.asarray(a), np.asarray(e), rtol=1e-5, atol=1e-5)


def test_mlp_rejects_an_unknown_form():
    with pytest.raises(ValueError, match="form must be one of"):
        per_element.mlp([(jnp.ones((1, 1)), jnp.ones(1))], [jnp.ones((3, 1))], (3,), form="fast")


def test_auto_unrolls_only_narrow_mlps_on_large_tensors():
    large = per_element.ELEMENTWISE_MIN_SIZE
    assert per_element.choose_form([4, 4], large) == "elementwise"
    assert per_element.choose_form([32, 32], large) == "blocked"
    assert per_element.choose_form([4, 4], large - 1) == "blocked"
