"""Celo2 (arXiv:2602.19142) against the authors' release, re-derived here from its equations.

Reference matched: github.com/amoudgl/celo at commit
66d976116f39da286951f0c5e0a18eee8d1fd66b, ``celo/optimizers/celo2.py`` (class ``Celo2``:
tensors matching ``regex_1d`` take Adam at ``mult_1d * step_mult``, the others the
learned rule; ``p <- p - lr * step - weight_decay * lr * p``) and
``celo/optimizers/celo2_optax.py`` (``Celo2Transformation._ff_mod``: the 14 feature
groups, the second-moment normalizer with eps 1e-9 over the tensor's last two axes,
Newton-Schulz batched over the leading axes), in the configuration of that commit's
``celo/factory.py`` ``"celo2"`` (Adam betas (0.9, 0.95), eps 1e-8 inside the square
root, no bias correction, ``mult_1d = 20``). The reference below is plain numpy in
float64, written from those equations, not from learnopt's code.
"""

from __future__ import annotations

import pickle
import struct
import zipfile

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from learnopt.learned_optimizers import celo2, common
from learnopt.testing import conformance

# The learned rule's decays are float32 arrays in the release (``jnp.asarray`` of the
# Python tuples), and in learnopt.
MOM, RMS, FAC = (
    np.float64(np.float32(d)) for d in ([0.9, 0.99, 0.999], [0.95], [0.9, 0.99, 0.999])
)
STEP_MULT, WEIGHT_DECAY = 0.01, 0.1


# --------------------------------------------------------------- the reference, in numpy


def _normalize(x, axes):
    """The release's second-moment normalizer: ``x / sqrt(mean(x^2) + 1e-9)``."""
    return x / np.sqrt(np.mean(x * x, axis=axes, keepdims=True) + 1e-9)


def _safe_rsqrt(x):
    return 1 / np.sqrt(np.maximum(x, 1e-9))


def _ref_newton_schulz(x, a=3.4445, b=-4.7750, c=2.0315, iters=5, eps=1e-8):
    """Muon's quintic iteration on each trailing 2-D slice (wide orientation)."""
    wide = x.shape[-2] <= x.shape[-1]
    x = x if wide else np.swapaxes(x, -2, -1)
    x = x / (np.sqrt(np.sum(x * x, axis=(-2, -1), keepdims=True)) + eps)
    for _ in range(iters):
        gram = x @ np.swapaxes(x, -2, -1)
        x = a * x + (b * gram + c * gram @ gram) @ x
    return x if wide else np.swapaxes(x, -2, -1)


class _Learned:
    """One tensor under the learned rule: accumulators and the MLP step."""

    def __init__(self, shape):
        self.m = np.zeros((*shape, 3))
        self.v = np.zeros((*shape, 1))
        self.factored = len(shape) >= 2
        if self.factored:
            self.d1, self.d0 = (int(i) for i in np.argsort(shape)[-2:])
            self.row = np.zeros((*np.delete(shape, self.d0), 3))
            self.col = np.zeros((*np.delete(shape, self.d1), 3))
        else:
            self.diag = np.zeros((*shape, 3))

    def _precondition(self, x):
        """``x * rsqrt(row / mean(row)) * rsqrt(col)``, Adafactor's factored scaling."""
        reduced = self.d1 - 1 if self.d1 > self.d0 else self.d1
        row_mean = np.mean(self.row, axis=reduced, keepdims=True)
        row_factor = _safe_rsqrt(self.row / (row_mean + 1e-9))
        col_factor = _safe_rsqrt(self.col)
        return x * np.expand_dims(row_factor, self.d0) * np.expand_dims(col_factor, self.d1)

    def step(self, w, p, g):
        g = np.clip(g, -1000, 1000)
        self.m = MOM * self.m + (1 - MOM) * g[..., None]
        self.v = RMS * self.v + (1 - RMS) * (g * g)[..., None]
        g2 = (g * g + 1e-30)[..., None]
        if self.factored:
            self.row = FAC * self.row + (1 - FAC) * np.mean(g2, axis=self.d0)
            self.col = FAC * self.col + (1 - FAC) * np.mean(g2, axis=self.d1)
            fac_g = self._precondition(g[..., None])
        else:
            self.diag = FAC * self.diag + (1 - FAC) * g2
            fac_g = g[..., None] * _safe_rsqrt(self.diag + 1e-9)
        r = 1 / np.sqrt(self.v + 1e-8)
        inputs = [g[..., None], np.clip(g, -0.1, 0.1)[..., None], p[..., None], self.m, self.v]
        inputs += [self.m * r, r, fac_g, g[..., None] * r]
        if self.factored:
            full = (*p.shape, 3)
            row = np.broadcast_to(np.expand_dims(self.row, self.d0), full)
            col = np.broadcast_to(np.expand_dims(self.col, self.d1), full)
            inputs += [row, col, 1 / np.sqrt(row + 1e-8), 1 / np.sqrt(col + 1e-8)]
            inputs += [self._precondition(self.m)]
        axes = tuple(range(p.ndim))[-2:]
        # First layer: one matrix per group, summed (the release's w0__i, in this order).
        h = sum(_normalize(x, axes) @ w[f"w0__{i}"] for i, x in enumerate(inputs)) + w["b0"]
        h = np.maximum(h, 0)
        h = np.maximum(h @ w["w1"] + w["b1"], 0)
        direction = (h @ w["w2"] + w["b2"])[..., 0]  # exp_mult = 0: the magnitude is unused
        if p.ndim >= 2:
            direction = _ref_newton_schulz(direction)
        step = _normalize(direction, axes)
        return p - STEP_MULT * step - WEIGHT_DECAY * STEP_MULT * p


class _Adam:
    """One tensor under the release's Adam branch (no bias correction by default)."""

    def __init__(self, shape, bias_correction=False):
        self.m, self.v, self.t = np.zeros(shape), np.zeros(shape), 0
        self.bias_correction = bias_correction

    def step(self, p, g):
        self.t += 1
        self.m = 0.9 * self.m + 0.1 * g
        self.v = 0.95 * self.v + 0.05 * g * g
        m, v = self.m, self.v
        if self.bias_correction:
            m, v = m / (1 - 0.9**self.t), v / (1 - 0.95**self.t)
        lr = 20 * STEP_MULT
        return p - lr * m / np.sqrt(v + 1e-8) - WEIGHT_DECAY * lr * p


# ------------------------------------------------------------------------------ helpers


def _tree(seed, shapes, scales=None, dtype=jnp.float32):
    rng = np.random.default_rng(seed)
    scales = scales or {}
    return {
        group: {
            name: jnp.asarray(scales.get(name, 1.0) * rng.standard_normal(shape), dtype)
            for name, shape in leaves.items()
        }
        for group, leaves in shapes.items()
    }


def _steps(lopt, theta, params, grads_seq):
    """learnopt's parameters after each update (one compile)."""
    opt = lopt.opt_fn(theta)
    update = jax.jit(opt.update)
    state, out = opt.init(params), []
    for grads in grads_seq:
        state = update(state, grads)
        out.append(jax.tree_util.tree_map(lambda x: np.asarray(x, np.float64), state.params))
    return out


SHAPES = {"conv": {"kernel": (2, 2, 3, 4)}, "dense": {"w": (5, 3), "b": (3,)}}
# Gradient scales far apart: the normalizations make the learned steps scale-free.
SCALES = {"kernel": 1e-3, "w": 1.0, "b": 10.0}


# -------------------------------------------------------------------------------- tests


def test_celo2_matches_the_release_on_a_conv_kernel_a_matrix_and_a_bias():
    lopt = celo2.Celo2(step_mult=STEP_MULT, weight_decay=WEIGHT_DECAY)
    theta = lopt.init(jax.random.PRNGKey(0))
    # Non-zero biases everywhere (they are 0 at init) so every weight matters.
    noise = jax.random.split(jax.random.PRNGKey(1), len(jax.tree_util.tree_leaves(theta)))
    theta = jax.tree_util.tree_unflatten(
        jax.tree_util.tree_structure(theta),
        [
            x + 0.3 * jax.random.normal(k, x.shape)
            for x, k in zip(jax.tree_util.tree_leaves(theta), noise, strict=True)
        ],
    )
    # In float64 (learnopt computes in the params' float64), so the comparison is not
    # limited by float32 rounding of the parameters (~1e-5 of a step).
    with conformance.dtype_case("f64") as (f64, _):
        params = _tree(0, SHAPES, dtype=f64)
        grads_seq = [_tree(10 + i, SHAPES, SCALES, dtype=f64) for i in range(3)]
        got = _steps(lopt, common.cast_tree(theta, f64), params, grads_seq)
        params, grads_seq = jax.device_get((params, grads_seq))

    w = {k: np.asarray(v, np.float64) for k, v in theta["ff_mod_stack"]["~"].items()}
    kernel, dense_w = _Learned(SHAPES["conv"]["kernel"]), _Learned(SHAPES["dense"]["w"])
    bias = _Adam(SHAPES["dense"]["b"])
    p = params
    for t, grads in enumerate(grads_seq):
        g = grads
        new = {
            "conv": {"kernel": kernel.step(w, p["conv"]["kernel"], g["conv"]["kernel"])},
            "dense": {
                "w": dense_w.step(w, p["dense"]["w"], g["dense"]["w"]),
                "b": bias.step(p["dense"]["b"], g["dense"]["b"]),
            },
        }
        for group, name in (("conv", "kernel"), ("dense", "w"), ("dense", "b")):
            ref_step = new[group][name] - p[group][name]
            got_step = got[t][group][name] - (p[group][name] if t == 0 else got[t - 1][group][name])
            np.testing.assert_allclose(
                got_step, ref_step, rtol=1e-8, atol=0, err_msg=f"{group}/{name} step {t}"
            )
        # The conv kernel's step has RMS step_mult on each [cin, cout] slice.
        kernel_step = new["conv"]["kernel"] - p["conv"]["kernel"] * (1 - WEIGHT_DECAY * STEP_MULT)
        np.testing.assert_allclose(
            np.sqrt(np.mean(kernel_step**2, axis=(2, 3))), STEP_MULT, rtol=1e-6
        )
        p = new


@pytest.mark.parametrize("bias_correction", [False, True])
def test_vectors_and_scalars_follow_adam_at_20x_the_step(bias_correction):
    lopt = celo2.Celo2(
        ff_hidden_size=2,
        step_mult=STEP_MULT,
        weight_decay=WEIGHT_DECAY,
        adam_bias_correction=bias_correction,
    )
    shapes = {"m": {"w": (4, 3), "b": (3,), "s": ()}}
    params = _tree(0, shapes)
    grads_seq = [_tree(20 + i, shapes, {"b": 3.0, "s": 0.1}) for i in range(3)]
    got = _steps(lopt, lopt.init(jax.random.PRNGKey(0)), params, grads_seq)
    for name in ("b", "s"):
        adam, p = _Adam(shapes["m"][name], bias_correction), np.float64(params["m"][name])
        for t, grads in enumerate(grads_seq):
            p = adam.step(p, np.float64(grads["m"][name]))
            np.testing.assert_allclose(
                got[t]["m"][name], p, rtol=1e-6, atol=1e-7, err_msg=f"{name} {t}"
            )
    # The matrix takes the learned rule (normalized: RMS step_mult, not Adam's ~0.2).
    step = got[0]["m"]["w"] - np.float64(params["m"]["w"]) * (1 - WEIGHT_DECAY * STEP_MULT)
    np.testing.assert_allclose(np.sqrt(np.mean(step**2)), STEP_MULT, rtol=1e-4)


def test_which_tensors_adam_takes():
    params = {
        "embed": {"embedding": jnp.zeros((7, 4))},
        "mlp/~/linear_0": {"w": jnp.zeros((4, 3)), "b": jnp.zeros(3)},
        "norm": {"scale": jnp.zeros(3)},
        "s": jnp.zeros(()),
    }  # leaves: embedding, b, w, scale, s
    assert celo2.Celo2().adam_mask(params) == [True, True, False, True, True]
    # The meta-training wrapper's regex on "/"-joined paths: Haiku biases only.
    assert celo2.Celo2(regex_1d=r"/b$").adam_mask(params) == [False, True, False, False, False]
    assert celo2.Celo2(orthogonalize=False).adam_mask(params) == [False] * 5  # Celo2-base
    assert celo2.Celo2(regex_1d="").adam_mask(params) == [False] * 5
    with pytest.raises(ValueError, match="regex_1d"):
        celo2.Celo2(regex_1d="(")


def test_newton_schulz_orthogonalizes_each_trailing_slice_of_a_conv_kernel():
    x = np.random.default_rng(0).standard_normal((2, 3, 4, 6)).astype(np.float32)
    x[0, 0] *= 100.0  # slices of very different norms: each is normalized on its own
    y = np.asarray(jax.jit(celo2.newton_schulz)(jnp.asarray(x)), np.float64)
    assert y.shape == x.shape
    np.testing.assert_allclose(y, _ref_newton_schulz(np.float64(x)), rtol=1e-4, atol=1e-5)
    for i in range(2):
        for j in range(3):
            singular = np.linalg.svd(y[i, j], compute_uv=False)
            assert np.all((singular > 0.6) & (singular < 1.3)), (i, j, singular)
    # Not the flattened [2 * 3 * 4, 6] matrix's orthogonalization.
    flat = _ref_newton_schulz(np.float64(x).reshape(-1, 6)).reshape(x.shape)
    assert np.max(np.abs(y - flat)) > 0.1
    with pytest.raises(ValueError, match="rank >= 2"):
        celo2.newton_schulz(jnp.zeros(3))


# ------------------------------------------------- PyLO's deployment and its shipped entry


def test_pylo_options_send_the_first_and_last_matrices_to_adam():
    params = [jnp.zeros((6, 5)), jnp.zeros((4, 2, 3, 3)), jnp.zeros((5, 3)), jnp.zeros(7)]
    params.append(jnp.zeros((3, 6)))
    assert celo2.Celo2(adam_first_last=True).adam_mask(params) == [True, False, False, True, True]
    assert celo2.Celo2().adam_mask(params) == [False, False, False, True, False]
    # Added to the rule regex_1d sets; one matrix is both the first and the last.
    assert celo2.Celo2(regex_1d="", adam_first_last=True).adam_mask(params) == [
        True, False, False, False, True
    ]  # fmt: skip
    assert celo2.Celo2(adam_first_last=True).adam_mask({"b": jnp.zeros(2), "w": jnp.zeros((2, 2))})
    assert celo2.Celo2(adam_first_last=True).adam_mask({"s": jnp.zeros(())}) == [True]


def test_adamw_form_of_the_adam_branch_is_optax_adamw():
    lopt = celo2.Celo2(
        ff_hidden_size=2,
        step_mult=0.01,
        weight_decay=0.1,
        mult_1d=1.0,
        adam_bias_correction=True,
        adam_eps_inside_sqrt=False,
    )
    params = {"b": jnp.asarray([0.5, -1.0, 2.0, 0.0])}
    grads_seq = [
        {"b": jnp.asarray(np.random.default_rng(i).normal(size=4) * 1e-3)} for i in range(4)
    ]
    got = _steps(lopt, lopt.init(jax.random.PRNGKey(0)), params, grads_seq)
    tx = optax.adamw(0.01, b1=0.9, b2=0.95, eps=1e-8, weight_decay=0.1)
    state, p = tx.init(params), params
    for t, grads in enumerate(grads_seq):
        updates, state = tx.update(grads, state, p)
        p = optax.apply_updates(p, updates)
        np.testing.assert_allclose(got[t]["b"], np.asarray(p["b"]), rtol=1e-6, atol=1e-8)
    # The default (eps inside the square root) differs at gradients ~eps-sized.
    default = celo2.Celo2(ff_hidden_size=2, step_mult=0.01, mult_1d=1.0, adam_bias_correction=True)
    other = _steps(default, default.init(jax.random.PRNGKey(0)), params, grads_seq)
    assert np.max(np.abs(other[0]["b"] - got[0]["b"])) > 1e-5


def test_weight_decay_after_step_decays_the_stepped_parameters():
    params = {"w": jnp.asarray(np.random.default_rng(0).normal(size=(4, 3)), jnp.float32)}
    grads = [{"w": jnp.asarray(np.random.default_rng(1).normal(size=(4, 3)), jnp.float32)}]
    theta = celo2.Celo2().init(jax.random.PRNGKey(0))
    plain = _steps(celo2.Celo2(step_mult=0.01), theta, params, grads)[0]["w"]
    after = celo2.Celo2(step_mult=0.01, weight_decay=0.5, weight_decay_after_step=True)
    before = celo2.Celo2(step_mult=0.01, weight_decay=0.5)
    # p <- (p - lr * step) * (1 - lr * wd), against p - lr * step - lr * wd * p.
    np.testing.assert_allclose(
        _steps(after, theta, params, grads)[0]["w"], plain * 0.995, rtol=1e-6
    )
    p0 = np.asarray(params["w"], np.float64)
    expected = plain - 0.005 * p0
    np.testing.assert_allclose(_steps(before, theta, params, grads)[0]["w"], expected, rtol=1e-6)


def _pylo_case(steps=10):
    """The case of ``benchmarks/compare_celo2_torch.py`` (its ``case``; the same draws).

    Five float32 tensors in PyLO's parameter order (a 2-D input layer, a 4-D conv kernel
    in torch's ``[out, in, kh, kw]`` layout, a 2-D hidden matrix, a 1-D bias, a 2-D
    output layer) and ``steps`` gradients of very different scales.
    """
    shapes = (((6, 5), 0.1), ((4, 2, 3, 3), 1e-3), ((5, 3), 1.0), ((7,), 10.0), ((3, 6), 0.01))
    rng = np.random.default_rng(2602)
    params = [(0.3 * rng.standard_normal(s)).astype(np.float32) for s, _ in shapes]
    grads = [
        [(scale * rng.standard_normal(s)).astype(np.float32) for s, scale in shapes]
        for _ in range(steps)
    ]
    return params, grads


#: PyLO's own torch ``Celo2_naive`` (github.com/Belilovsky-Lab/pylo at faf6fcb, its
#: ``celo2_weights.pt``, lr 1e-3, no weight decay) after the 10 steps of
#: :func:`_pylo_case`: the first three values of each tensor and the summed absolute
#: distance moved. Recorded from the torch reference by
#: ``python benchmarks/compare_celo2_torch.py --record`` (torch in its own virtualenv;
#: learnopt matched it there to 4e-7 relative over 12 steps).
PINNED_PYLO = [
    # the input layer (AdamW)
    ([0.5629421472549438, 0.2309713363647461, -0.6713907122612], 0.07686592893151101),
    # the conv kernel (the learned rule)
    ([-0.08441842347383499, 0.2383396476507187, 0.02622324973344803], 0.3354015634395182),
    # the hidden matrix (the learned rule)
    ([0.11095824092626572, 0.038762666285037994, -0.42208677530288696], 0.09151082509197295),
    # the bias (AdamW)
    ([0.09516409039497375, -0.2100544273853302, -0.3622051179409027], 0.02251863991841674),
    # the output layer (AdamW)
    ([-0.4292382299900055, 0.0033183626364916563, 0.29290521144866943], 0.06250649986031931),
]


def _pinned_mismatches(trained, theta):
    """Where learnopt's 10 steps with ``theta`` leave PyLO's pinned numbers (rtol 1e-5)."""
    params, grads = _pylo_case()
    opt = trained.lopt.opt_fn(theta)
    update = jax.jit(opt.update)
    state = opt.init([jnp.asarray(p) for p in params])
    for g in grads:
        state = update(state, [jnp.asarray(x) for x in g])
    bad = []
    for i, (p0, new, (first, moved)) in enumerate(
        zip(params, opt.get_params(state), PINNED_PYLO, strict=True)
    ):
        new = np.asarray(new, np.float64)
        got_moved = float(np.abs(new - p0).sum())
        if not np.allclose(new.ravel()[:3], first, rtol=1e-5, atol=0):
            bad.append(f"tensor {i}: {new.ravel()[:3]} != {first}")
        if not np.isclose(got_moved, moved, rtol=1e-5, atol=0):
            bad.append(f"tensor {i}: moved {got_moved} != {moved}")
    return bad


def test_shipped_celo2_entry_reproduces_pylos_torch_reference():
    from learnopt import pretrained

    trained = pretrained.load("Celo2")
    assert _pinned_mismatches(trained, trained.theta) == []
    # The check can fail: 1% more on one weight matrix of the MLP moves every tensor
    # the learned rule takes past the tolerance.
    theta = jax.tree_util.tree_map(lambda x: x, trained.theta)
    theta["ff_mod_stack"]["~"]["w1"] = theta["ff_mod_stack"]["~"]["w1"] * 1.01
    bad = _pinned_mismatches(trained, theta)
    assert any(b.startswith("tensor 1") for b in bad) and any(b.startswith("tensor 2") for b in bad)


def test_pretrained_celo2_is_pylos_deployment():
    from learnopt import pretrained
    from learnopt.learned_optimizers import theta_files

    trained = pretrained.load("Celo2")
    lopt, theta = trained
    assert isinstance(lopt, celo2.Celo2)
    assert (lopt.step_mult, lopt.weight_decay, lopt.mult_1d) == (1e-3, 0.0, 1.0)
    assert lopt.adam_bias_correction and not lopt.adam_eps_inside_sqrt
    assert lopt.adam_first_last and lopt.weight_decay_after_step and lopt.orthogonalize
    shapes = jax.tree_util.tree_map(np.shape, theta)
    assert shapes == jax.tree_util.tree_map(np.shape, lopt.init(jax.random.PRNGKey(0)))
    assert sum(np.size(x) for x in jax.tree_util.tree_leaves(theta)) == 347
    md = pretrained.metadata("Celo2")
    assert md["licence"] == "BSD-3-Clause" and md["meta_training"]["licence_file"] == (
        "LICENSE-pylo.txt"
    )
    assert (pretrained.path("Celo2").parent / "LICENSE-pylo.txt").is_file()
    assert pretrained.source("Celo2") == "github.com/Belilovsky-Lab/pylo@faf6fcb (BSD-3-Clause)"
    assert theta_files.lopt_config(lopt) == md["config"]  # rebuilt from the metadata
    params, _ = _pylo_case(1)
    assert lopt.adam_mask(params) == [True, False, False, True, True]


# ------------------------------------------- the converter's reader of PyLO's torch zip


def _text(s):
    raw = s.encode()
    return b"X" + struct.pack("<I", len(raw)) + raw


def _global(module, name):
    return f"c{module}\n{name}\n".encode()


def _tensor_pickle(
    rebuild=("torch._utils", "_rebuild_tensor_v2"),
    storage=("torch", "FloatStorage"),
    size=(2, 3),
    stride=(1, 2),
    numel=6,
):
    """A hand-made ``torch.save`` pickle: ``OrderedDict(w=tensor)`` (protocol 2 opcodes)."""
    ints = lambda xs: b"".join(b"K" + bytes([x]) for x in xs) + b"\x86"  # noqa: E731
    return b"".join(
        [
            b"\x80\x02", _global("collections", "OrderedDict"), b"q\x00)R(", _text("w"),
            _global(*rebuild), b"((", _text("storage"), _global(*storage), _text("0"),
            _text("cpu"), b"K" + bytes([numel]), b"tQK\x00", ints(size), ints(stride),
            b"\x89h\x00)Rt", b"Ru.",
        ]
    )  # fmt: skip


def _torch_zip(path, pickled, numel=6):
    """``torch.save``'s zip layout: the pickle, the byte order, storage 0 (0, 1, ...)."""
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("archive/data.pkl", pickled)
        archive.writestr("archive/byteorder", "little")
        archive.writestr("archive/data/0", np.arange(numel, dtype="<f4").tobytes())
    return path.read_bytes()


def test_the_torch_zip_reader_rebuilds_strided_float32_tensors(tmp_path, repo_script):
    convert = repo_script("examples/convert_published.py")
    state = convert.read_torch_state_dict(_torch_zip(tmp_path / "w.pt", _tensor_pickle()))
    assert list(state) == ["w"] and state["w"].dtype == np.float32
    # size (2, 3), stride (1, 2): element [i, j] is storage[i + 2 j] (a transposed view).
    np.testing.assert_array_equal(state["w"], [[0, 2, 4], [1, 3, 5]])
    with pytest.raises(pickle.UnpicklingError, match="past its storage"):
        convert.read_torch_state_dict(
            _torch_zip(tmp_path / "x.pt", _tensor_pickle(stride=(3, 1), numel=5), 5)
        )


@pytest.mark.parametrize(
    "global_",
    [
        ("os", "system"),
        ("builtins", "eval"),
        ("torch._utils", "_rebuild_parameter"),
        ("numpy.core.multiarray", "_reconstruct"),
        ("collections", "defaultdict"),
    ],
)
def test_the_torch_zip_reader_refuses_any_other_global(tmp_path, global_, repo_script):
    convert = repo_script("examples/convert_published.py")
    marker = tmp_path / "ran"
    # A pickle that would run a command (or call any other global) if it were honoured.
    pickled = b"\x80\x02" + _global(*global_) + b"(" + _text(f"touch {marker}") + b"tR."
    with pytest.raises(pickle.UnpicklingError, match="refused global"):
        convert.read_torch_state_dict(_torch_zip(tmp_path / "evil.pt", pickled))
    assert not marker.exists()
    # The same globals in the tensor's place, and another storage type, are refused too.
    for kwargs in ({"rebuild": global_}, {"storage": ("torch", "DoubleStorage")}):
        with pytest.raises(pickle.UnpicklingError, match="refused global"):
            convert.read_torch_state_dict(_torch_zip(tmp_path / "t.pt", _tensor_pickle(**kwargs)))
