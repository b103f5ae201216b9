"""The fast forms of the per-element MLPs compute what the reference form computes.

``learnopt.learned_optimizers.blocks.per_element.mlp`` evaluates every per-parameter network
(MLPLOpt, AdafacMLPLOpt, MLPNomLOpt, Celo2, HyperV2's generated MLPs, RNNMLPLOpt) either
as the obvious concatenate-and-matmul (``"reference"``) or in a faster form
(``"elementwise"``, ``"blocked"``). Here every architecture runs a short unroll in each
form from the same perturbed theta, and the parameter updates and the meta-gradient of
the unroll's loss with respect to theta are checked three ways:

* in float64 (jax's x64 mode), each fast form equals the reference to 1e-10: the same
  maths, where float32 rounding cannot hide a difference;
* in float32, each fast form is within ``RTOL`` (relative 1e-5) of the float64 truth, or,
  where float32 itself cannot get that close (the float32 *reference* is farther than
  that from the truth), no farther from the truth than ``ACCURACY_FACTOR`` (3) times the
  reference is: the fast form is about as accurate as float32 evaluation of the maths;
* for bfloat16 params, each new parameter equals the reference's to one bfloat16 ulp.

``BLOCK`` is shrunk so the blocked form's ``lax.map`` over padded blocks runs.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from learnopt.learned_optimizers import adafac_mlp_lopt, celo2, hyper_v2, mlp_lopt, rnn_mlp_lopt
from learnopt.learned_optimizers.blocks import fused_kernel, per_element

# Step sizes such that every step moves the params by a few percent of their size: larger
# ones push the magnitude output's exp() to underflow (HyperV2 with step_mult=0.1 and
# exp_mult=0.1 made every step after the first exactly zero) or move the params by twice
# their size in one step (Celo2 with step_mult=0.1), points where the maths itself is
# ill-conditioned in float32 and the comparison says little about the forms.
ARCHITECTURES = {
    "MLPLOpt": lambda: mlp_lopt.MLPLOpt(hidden_size=4, step_mult=0.1, exp_mult=0.1),
    "AdafacMLPLOpt": lambda: adafac_mlp_lopt.AdafacMLPLOpt(step_mult=0.1, exp_mult=0.1),
    # Celo2-base: Newton-Schulz after the MLP amplifies float32 summation-order
    # differences in the meta-gradient (2.5e-4 measured), which is not the form's error.
    "Celo2": lambda: celo2.Celo2(
        ff_hidden_size=4, step_mult=0.01, exp_mult=0.1, orthogonalize=False
    ),
    "HyperV2": lambda: hyper_v2.HyperV2(
        lstm_hidden_size=4, param_inits=2, step_mult=0.01, exp_mult=0.001
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
#: Fast forms vs the float64 truth, relative to each leaf's largest value.
RTOL = 1e-5
#: Where the float32 reference is itself farther than ``RTOL`` from the float64 truth, a
#: fast form may be at most this many times as far. Measured 2026-12-02, errors against
#: the float64 truth, float32 reference / worst fast form: updates 4.8e-6 / 4.8e-6
#: (MLPLOpt), 2.1e-6 / 2.1e-6 (AdafacMLPLOpt), 1.0e-6 / 1.5e-6 (Celo2), 1.7e-6 / 1.7e-6
#: (HyperV2), 1.1e-5 / 1.3e-5 (RNNMLPLOpt); meta-gradients 1.6e-6 / 1.7e-6, 1.8e-5 /
#: 1.7e-5 (AdafacMLPLOpt's decay leaves: ``1 - b`` of a float32 ``b`` near 1), 5.9e-6 /
#: 1.2e-5 (Celo2: 2.0x, the largest ratio; 0.75x-14x over five theta seeds, always
#: under the 1e-5 floor or within 2x), 1.8e-6 / 5.0e-6 (HyperV2), 3.0e-7 / 3.0e-7
#: (RNNMLPLOpt). Directly against the float32 reference the fast forms differ by up to
#: 1.7e-5 (RNNMLPLOpt's updates) and 1.0e-5 (Celo2's meta-gradient), where the reference
#: is itself 1.1e-5 and 5.9e-6 from the truth: float32 rounding of the maths, amplified
#: by its conditioning. In float64 the forms agree to 1e-14.
ACCURACY_FACTOR = 3.0
#: The forms in float64: the same maths up to float64 rounding.
RTOL_FLOAT64 = 1e-10


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
    """``theta -> (meta-loss, (updates, params))`` of STEPS steps on ``0.5 |p - target|^2``
    (the update and the new params of every step)."""
    lopt.mlp_form = form
    params = _params(dtype)
    target = jax.tree_util.tree_map(lambda p: 0.5 * jnp.ones_like(p), params)
    wide = jnp.promote_types(dtype, jnp.float32)  # float32, or float64 for float64 params

    def run(theta):
        opt = lopt.opt_fn(theta)
        state = opt.init(params, num_steps=10)
        total, updates, new_params = 0.0, [], []
        for _ in range(STEPS):
            p = opt.get_params(state)
            diff = jax.tree_util.tree_map(lambda a, t: a.astype(wide) - t.astype(wide), p, target)
            loss = sum(0.5 * jnp.sum(d * d) for d in jax.tree_util.tree_leaves(diff))
            grads = jax.tree_util.tree_map(lambda d, a: d.astype(a.dtype), diff, p)
            state = opt.update(state, grads, loss=loss)
            new = opt.get_params(state)
            updates.append(
                jax.tree_util.tree_map(lambda a, b: a.astype(wide) - b.astype(wide), new, p)
            )
            new_params.append(new)
            total = total + loss
        return total, (updates, new_params)

    return run


@pytest.fixture(scope="module")
def small_blocks():
    """Blocks of 256 rows: the 1,200-element tensor takes the padded ``lax.map`` path."""
    saved = per_element.BLOCK
    per_element.BLOCK = 256
    yield
    per_element.BLOCK = saved


def _relative_error(actual, expected) -> float:
    """The largest error of any leaf, relative to that leaf's largest value (floored at
    1e-3 of the tree's largest, so all-but-zero leaves are not over-judged)."""
    a_leaves = jax.tree_util.tree_leaves(actual)
    e_leaves = jax.tree_util.tree_leaves(expected)
    assert len(a_leaves) == len(e_leaves)
    e_leaves = [np.asarray(e, np.float64) for e in e_leaves]
    overall = max(float(np.max(np.abs(e))) for e in e_leaves if e.size)
    worst = 0.0
    for a, e in zip(a_leaves, e_leaves, strict=True):
        scale = max(float(np.max(np.abs(e), initial=0.0)), 1e-3 * overall)
        worst = max(
            worst, float(np.max(np.abs(np.asarray(a, np.float64) - e), initial=0.0)) / scale
        )
    return worst


def _float64(tree):
    return jax.tree_util.tree_map(
        lambda x: jnp.asarray(x, jnp.float64) if jnp.issubdtype(x.dtype, jnp.floating) else x,
        tree,
    )


def _run_forms(name: str, theta, forms, dtype, architectures=ARCHITECTURES) -> dict:
    """``form -> (updates, meta-gradient)`` as numpy trees, each form in a fresh lopt."""
    results = {}
    for form in forms:
        fn = jax.value_and_grad(_unroll(architectures[name](), form, dtype), has_aux=True)
        (_, (updates, _)), grad = jax.jit(fn)(theta)
        results[form] = jax.tree_util.tree_map(np.asarray, (updates, grad))
    return results


@pytest.mark.parametrize("name", list(ARCHITECTURES))
def test_fast_forms_updates_and_meta_gradients_equal_the_reference(small_blocks, name):
    theta = _perturbed_theta(ARCHITECTURES[name]())
    forms = ("reference", *ARCHITECTURE_FORMS[name])
    float32 = _run_forms(name, theta, forms, jnp.float32)
    with jax.enable_x64(True):
        float64 = _run_forms(name, _float64(theta), forms, jnp.float64)
    truth_updates, truth_grad = float64["reference"]
    # Every step moves the params and the meta-gradient is not zero: the comparisons
    # below compare something.
    for i, step in enumerate(truth_updates):
        assert all(np.max(np.abs(u)) > 0 for u in jax.tree_util.tree_leaves(step)), i
    assert max(np.max(np.abs(g)) for g in jax.tree_util.tree_leaves(truth_grad)) > 0
    ref_errors = [_relative_error(float32["reference"][k], float64["reference"][k]) for k in (0, 1)]
    for form in forms[1:]:
        for k, what in enumerate(("updates", "meta-gradient")):
            same_maths = _relative_error(float64[form][k], float64["reference"][k])
            assert same_maths <= RTOL_FLOAT64, (name, form, what, "float64", same_maths)
            fast, ref = _relative_error(float32[form][k], float64["reference"][k]), ref_errors[k]
            assert fast <= max(RTOL, ACCURACY_FACTOR * ref), (name, form, what, fast, ref)


#: The designs whose default 32-wide MLP the fused CPU kernel computes (``"auto"`` takes
#: it for tensors of at least ``per_element.FUSED_MIN_SIZE`` elements).
WIDE_ARCHITECTURES = {
    "MLPLOpt": lambda: mlp_lopt.MLPLOpt(step_mult=0.1, exp_mult=0.1),
    "RNNMLPLOpt": lambda: rnn_mlp_lopt.RNNMLPLOpt(
        lstm_hidden_size=4, step_multiplier=0.1, magnitude_rate=0.1
    ),
}


@pytest.mark.parametrize("name", list(WIDE_ARCHITECTURES))
def test_fused_kernel_updates_and_meta_gradients_equal_the_reference(name):
    """The fused kernel is float32-only: judged against the float64 truth as the other
    fast forms are (its derivative is the blocked form's)."""
    theta = _perturbed_theta(WIDE_ARCHITECTURES[name]())
    if not fused_kernel.available():
        assert fused_kernel._compiler() is None, fused_kernel.unavailable_reason()
        with pytest.raises(RuntimeError, match="not available"):
            _run_forms(name, theta, ("fused",), jnp.float32, WIDE_ARCHITECTURES)
        return
    float32 = _run_forms(name, theta, ("reference", "fused"), jnp.float32, WIDE_ARCHITECTURES)
    with jax.enable_x64(True):
        truth = _run_forms(name, _float64(theta), ("reference",), jnp.float64, WIDE_ARCHITECTURES)
    for k, what in enumerate(("updates", "meta-gradient")):
        assert max(np.max(np.abs(x)) for x in jax.tree_util.tree_leaves(truth["reference"][k]))
        ref = _relative_error(float32["reference"][k], truth["reference"][k])
        fast = _relative_error(float32["fused"][k], truth["reference"][k])
        assert fast <= max(RTOL, ACCURACY_FACTOR * ref), (name, what, fast, ref)


def _bfloat16_ulp(x: np.ndarray) -> np.ndarray:
    """The spacing of bfloat16 numbers at ``|x|`` (8 significant bits)."""
    x = np.maximum(np.abs(np.asarray(x, np.float64)), np.finfo(np.float32).tiny)
    return np.exp2(np.floor(np.log2(x)) - 7)


@pytest.mark.parametrize("name", list(ARCHITECTURES))
def test_fast_forms_on_bfloat16_params_equal_the_reference(small_blocks, name):
    theta = _perturbed_theta(ARCHITECTURES[name]())

    def new_params(form):
        run = _unroll(ARCHITECTURES[name](), form, jnp.bfloat16)
        updates, params = jax.jit(run)(theta)[1]
        assert all(u.dtype == jnp.float32 for u in jax.tree_util.tree_leaves(updates))
        return params

    ref = new_params("reference")
    assert all(p.dtype == jnp.bfloat16 for p in jax.tree_util.tree_leaves(ref))
    before = jax.tree_util.tree_leaves(_params(jnp.bfloat16))
    moved = zip(jax.tree_util.tree_leaves(ref[0]), before, strict=True)
    assert all(bool(jnp.any(a != b)) for a, b in moved)  # the first step moves the params
    for form in ARCHITECTURE_FORMS[name]:
        # The arithmetic is float32; a float32 rounding difference may move a stored
        # bfloat16 value across a rounding boundary: by one bfloat16 ulp, never more.
        leaves = zip(
            jax.tree_util.tree_leaves(new_params(form)), jax.tree_util.tree_leaves(ref), strict=True
        )
        for a, e in leaves:
            a, e = np.asarray(a, np.float64), np.asarray(e, np.float64)
            ulp = _bfloat16_ulp(np.maximum(np.abs(a), np.abs(e)))
            assert np.all(np.abs(a - e) <= ulp), (name, form, float(np.max(np.abs(a - e) / ulp)))


@pytest.mark.parametrize("name", list(WIDE_ARCHITECTURES))
def test_fused_kernel_on_bfloat16_params_equals_the_reference(name):
    """bf16 params with float32 arithmetic take the kernel (and its update epilogue): the
    new params equal the reference form's to one bfloat16 ulp."""
    if not fused_kernel.available():
        assert fused_kernel._compiler() is None, fused_kernel.unavailable_reason()
        return
    theta = _perturbed_theta(WIDE_ARCHITECTURES[name]())

    def new_params(form):
        run = _unroll(WIDE_ARCHITECTURES[name](), form, jnp.bfloat16)
        return jax.jit(run)(theta)[1][1]

    ref, fused = new_params("reference"), new_params("fused")
    before = jax.tree_util.tree_leaves(_params(jnp.bfloat16))
    moved = zip(jax.tree_util.tree_leaves(ref[0]), before, strict=True)
    assert all(bool(jnp.any(a != b)) for a, b in moved)  # the first step moves the params
    pairs = zip(jax.tree_util.tree_leaves(fused), jax.tree_util.tree_leaves(ref), strict=True)
    for a, e in pairs:
        assert a.dtype == jnp.bfloat16
        a, e = np.asarray(a, np.float64), np.asarray(e, np.float64)
        ulp = _bfloat16_ulp(np.maximum(np.abs(a), np.abs(e)))
        assert np.all(np.abs(a - e) <= ulp), (name, float(np.max(np.abs(a - e) / ulp)))


def _random_mlp(key, n_features, n_tensor, widths, n_out):
    sizes = [n_features + n_tensor, *widths, n_out]
    layers = []
    for a, b in zip(sizes[:-1], sizes[1:], strict=True):
        key, k1, k2 = jax.random.split(key, 3)
        layers.append((jax.random.normal(k1, (a, b)) / np.sqrt(a), jax.random.normal(k2, (b,))))
    return layers


@pytest.mark.parametrize("form", FAST_FORMS)
@pytest.mark.parametrize("shape", [(1,), (7,), (40, 30), (3, 4, 5)])
def test_mlp_forms_agree_with_tensor_inputs_partial_norm_mean_outputs_and_broadcasts(
    small_blocks, shape, form
):
    key = jax.random.PRNGKey(len(shape))
    groups = [
        jax.random.normal(jax.random.fold_in(key, i), (*shape, w)) * (i + 1)
        for i, w in enumerate((1, 3, 2))
    ]
    # The last group's two columns are constant along the first and along the last axis
    # (an Adafactor row and column statistic): given unbroadcast below.
    small = [
        jax.random.normal(jax.random.fold_in(key, 10), (1, *shape[1:])),
        jax.random.normal(jax.random.fold_in(key, 11), (*shape[:-1], 1)),
    ]
    groups[2] = jnp.stack([jnp.broadcast_to(c, shape) for c in small], axis=-1)
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
    # Columns given before their broadcast (the row and column statistics).
    unbroadcast = [*per_column[:2], small]
    for feats in (per_column, first, unbroadcast):
        cols = jax.jit(
            lambda g: per_element.mlp(layers, g, shape, form=form, feature_axis=0, **kwargs)
        )(feats)
        for a, e in zip(cols, ref, strict=True):
            assert a.shape == e.shape
            np.testing.assert_allclose(np.asarray(a), np.asarray(e), rtol=1e-5, atol=1e-5)
    if len(axes) == len(shape):
        # Normalized over the whole tensor, a statistics column may be given as its mean
        # square (a MeanSquare), computed by the caller.
        stats = [[per_element.MeanSquare(jnp.mean(jnp.square(c))) for c in g]
                 for g in per_column]  # fmt: skip
        cols = jax.jit(
            lambda g, s: per_element.mlp(
                layers, g, shape, form=form, feature_axis=0, stat_groups=s, **kwargs
            )
        )(unbroadcast, stats)
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


@pytest.mark.parametrize("form", ("reference", *FAST_FORMS))
@pytest.mark.parametrize("mean_from", [None, 2], ids=["two-outputs", "mean-outputs"])
def test_mlp_step_is_mlp_then_the_update_in_every_form(small_blocks, form, mean_from):
    """``mlp_step`` = ``p - s * d * exp(e * a)`` on ``mlp``'s outputs, with the step
    statistics' sums and the other outputs' means (the fused kernel's own epilogue:
    tests/test_fused_kernel.py)."""
    shape, key = (40, 30), jax.random.PRNGKey(3)
    groups = [
        jax.random.normal(jax.random.fold_in(key, i), (*shape, w)) for i, w in enumerate((1, 3))
    ]
    layers = _random_mlp(key, 4, 2, (5, 5), 2 if mean_from is None else 5)
    p = jax.random.normal(jax.random.fold_in(key, 9), shape)
    kwargs = dict(
        tensor_inputs=jnp.array([0.3, -1.2]), norm_axes=(0, 1), mean_outputs_from=mean_from
    )
    outs = per_element.mlp(layers, groups, shape, form="reference", **kwargs)
    delta = outs[0] * jnp.exp(0.5 * outs[1]) * 0.01
    sums = [
        jnp.sum(jnp.abs(delta)),
        jnp.sum(jnp.abs(outs[0])),
        jnp.sum(outs[1]),
        jnp.sum(jnp.abs(outs[1])),
    ]
    step = jax.jit(
        lambda g, p, s: per_element.mlp_step(
            layers, g, shape, p, step_mult=s, exp_mult=0.5, summary=True, form=form, **kwargs
        )
    )(groups, p, jnp.float32(0.01))
    np.testing.assert_allclose(np.asarray(step.params), np.asarray(p - delta), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(np.asarray(step.sums), np.asarray(jnp.stack(sums)), rtol=1e-5)
    if mean_from is None:
        assert step.means is None
    else:
        np.testing.assert_allclose(
            np.asarray(step.means), np.asarray(outs[2]), rtol=1e-5, atol=1e-6
        )
    plain = per_element.mlp_step(
        layers, groups, shape, p, step_mult=0.01, exp_mult=0.5, form=form, **kwargs
    )
    assert plain.sums is None
    np.testing.assert_allclose(
        np.asarray(plain.params), np.asarray(step.params), rtol=1e-5, atol=1e-6
    )


def test_mlp_step_names_what_it_cannot_compute():
    layers = _random_mlp(jax.random.PRNGKey(0), 2, 0, (3,), 3)
    groups, shape = [jnp.ones((5, 2))], (5,)
    with pytest.raises(ValueError, match="2 per-element outputs, got 3 outputs"):
        per_element.mlp_step(layers, groups, shape, jnp.ones(shape), step_mult=1.0, exp_mult=1.0)
    with pytest.raises(TypeError, match="unexpected keyword arguments \\['norm'\\]"):
        per_element.mlp_step(
            layers, groups, shape, jnp.ones(shape), step_mult=1.0, exp_mult=1.0,
            mean_outputs_from=2, norm=(0,),
        )  # fmt: skip
