"""Architecture-specific checks of the learned optimizers beyond the conformance sweep.

Layouts are checked against the library's (the shapes its Haiku modules create, so its
checkpoints load); the maths where a closed form exists: NNAdam at its initial theta is
the documented Adam variant, MLPNomLOpt's nominal term is the documented preconditioned
AggMo step, AdafacMLPLOpt's learned decays move its accumulators, Celo2-base's steps
have RMS ``step_mult`` per tensor (Celo2 against the authors' release:
``tests/test_celo2.py``), RNNMLPLOpt's validation updates touch only the
validation-loss statistics.
"""

from __future__ import annotations

import functools
from typing import Any

import flax.serialization
import flax.struct
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from learnopt.learned_optimizers import (
    adafac_mlp_lopt,
    adafac_nominal,
    celo2,
    common,
    convert,
    hyper_v2,
    nn_adam,
    rnn_mlp_lopt,
    theta_files,
)
from learnopt.learned_optimizers import base as lopt_base
from learnopt.testing import conformance


def _shapes(lopt):
    return jax.tree_util.tree_map(
        lambda x: tuple(x.shape), jax.eval_shape(lopt.init, jax.random.PRNGKey(0))
    )


def _params(seed):
    rng = np.random.default_rng(seed)
    return {
        "w": jnp.asarray(rng.standard_normal((5, 3)), jnp.float32),
        "b": jnp.asarray(rng.standard_normal(3), jnp.float32),
        "s": jnp.asarray(rng.standard_normal(()), jnp.float32),
    }


def test_theta_layouts_match_the_library():
    # AdafacMLPLOpt: 28 normalized features + 11 time features, MLP 39-4-4-2.
    shapes = _shapes(adafac_mlp_lopt.AdafacMLPLOpt())
    assert shapes["nn"]["~"]["w0"] == (39, 4) and shapes["nn"]["~"]["w2"] == (4, 2)
    assert shapes["momentum_decays"] == (3,) and shapes["rms_decays"] == (1,)
    assert _shapes(adafac_nominal.MLPNomLOpt())["nn"]["~"]["w2"] == (4, 4)
    # RNNMLPLOpt: LSTM on 18 + 18 + 16 inputs, MLP on 37 + 17 inputs.
    shapes = _shapes(rnn_mlp_lopt.RNNMLPLOpt())
    assert shapes["rnn_params"]["rnn/linear"]["w"] == (52 + 64, 4 * 64)
    assert shapes["ffmod_params"]["mlp/~/linear_0"]["w"] == (54, 32)
    assert shapes["ffmod_params"]["mlp/~/linear_2"]["w"] == (32, 18)
    assert shapes["lstm_init_state"] == common.LSTMState((1, 64), (1, 64))
    # NNAdam: LSTM on 19 inputs (hidden 32), zero-initialized 4 controls.
    shapes = _shapes(nn_adam.NNAdam())
    assert shapes["rnn_params"]["rnn/linear"]["w"] == (19 + 32, 128)
    assert shapes["rnn_to_controls_params"]["rnn_to_controls"]["w"] == (32, 4)
    # HyperV2 as VeLO: LSTM 512, 256 MLPs in the bank, 30 LSTM inputs, 14 feature groups.
    velo = hyper_v2.HyperV2(lstm_hidden_size=512, param_inits=256)
    shapes = _shapes(velo)
    rnn = shapes["rnn_params"]
    assert set(rnn) == {
        "linear",
        "linear_1",
        "linear_2",
        "rnn/linear",
        "rnn_to_controls",
        "step_size",
    }
    assert rnn["linear_2"]["w"] == (30, 512) and rnn["rnn/linear"]["w"] == (1024, 2048)
    assert rnn["rnn_to_controls"]["w"] == (512, 256) and rnn["step_size"]["w"] == (512, 1)
    stack = shapes["ff_mod_stack"]["~"]
    assert len([k for k in stack if k.startswith("w0__")]) == 14
    assert sum(stack[f"w0__{i}"][1] for i in range(14)) == 30
    assert stack["w0__3"] == (256, 3, 4) and stack["w2"] == (256, 4, 3)
    # Celo2: the same 14 groups, hidden 8, 3 outputs.
    stack = _shapes(celo2.Celo2())["ff_mod_stack"]["~"]
    assert stack["w0__0"] == (1, 8) and stack["w2"] == (8, 3)


def test_nnadam_at_its_initial_theta_is_the_documented_adam_variant():
    lopt = nn_adam.NNAdam(initial_learning_rate=1e-2, initial_epsilon=1e-3)
    theta = lopt.init(jax.random.PRNGKey(0))
    params = _params(0)
    grads = [_params(i + 1) for i in range(3)]

    @jax.jit
    def run(params, grads):
        opt = lopt.opt_fn(theta)
        state = opt.init(params, num_steps=10)
        for g in grads:
            state = opt.update(state, g, loss=jnp.float32(1.0))
        return state

    state = run(params, grads)
    lr, b1, b2, eps = 1e-2, 0.9, 0.999, 1e-3
    for k in params:
        p, m, v = np.float64(params[k]), 0.0, 0.0
        for g in grads:
            g = np.float64(g[k])
            m, v = b1 * m + (1 - b1) * g, b2 * v + (1 - b2) * g**2
            p = p - lr * (1 + eps) / (eps + np.sqrt(v + 1e-10)) * m
        np.testing.assert_allclose(np.asarray(state.params[k]), p, rtol=2e-5, atol=1e-6)
        # Zero-initialized controls: the per-tensor hyperparameters have not moved.
        np.testing.assert_allclose(float(state.per_layer_lr[k]), 0.1 * np.log(lr), rtol=1e-5)


def test_nominal_term_is_preconditioned_aggmo():
    lopt = adafac_nominal.MLPNomLOpt(step_mult=0.0, nominal_stepsize=0.1, exp_mult=(0, 0, 0))
    theta = lopt.init(jax.random.PRNGKey(0))
    params, grads = _params(0), _params(1)
    new = jax.jit(lambda p, g: lopt.opt_fn(theta).update(lopt.opt_fn(theta).init(p), g))(
        params, grads
    )
    for k in params:
        g = np.float64(grads[k])
        m = (1 - np.array([0.9, 0.99, 0.999])) * g[..., None]
        v = (1 - 0.999) * g**2
        g_est = np.mean(m / np.sqrt(v[..., None] + 1e-6), axis=-1)
        np.testing.assert_allclose(
            np.asarray(new.params[k]), np.float64(params[k]) - 0.1 * g_est, rtol=1e-4
        )


def test_nominal_weight_decay_scales_the_params_and_off_leaves_only_the_learned_step():
    """``p <- (1 - wd * exp(e2 * 0)) * p - step``: with weight decay 0.1 the params shrink
    by 0.9 beside the learned step; with the defaults (nothing nominal on) the update is
    the learned step alone, exactly (the skipped terms are a factor 1 and a 0)."""
    params, grads = _params(0), _params(1)

    def new_params(**kwargs):
        lopt = adafac_nominal.MLPNomLOpt(exp_mult=(0, 0, 0), **kwargs)
        theta = lopt.init(jax.random.PRNGKey(0))
        opt = lopt.opt_fn(theta)
        return jax.jit(lambda p, g: opt.update(opt.init(p), g))(params, grads).params

    plain, decayed = new_params(), new_params(weight_decay=0.1)
    frozen = new_params(step_mult=0.0)
    for k in params:
        p = np.float64(params[k])
        step = p - np.float64(plain[k])
        assert np.max(np.abs(step)) > 0
        np.testing.assert_array_equal(np.asarray(frozen[k]), np.asarray(params[k]))
        np.testing.assert_allclose(np.asarray(decayed[k]), 0.9 * p - step, rtol=1e-5, atol=1e-7)


def test_adafac_learned_decay_offsets_move_the_accumulators():
    lopt = adafac_mlp_lopt.AdafacMLPLOpt()
    theta = lopt.init(jax.random.PRNGKey(0))
    theta = {**theta, "momentum_decays": jnp.asarray([0.05, 0.0, -0.05], jnp.float32)}
    params, grads = _params(0), _params(1)
    opt = lopt.opt_fn(theta)
    state = jax.jit(lambda p, g: opt.update(opt.init(p), g))(params, grads)
    decays = 1 - (1 - np.array([0.9, 0.99, 0.999])) * np.exp(10 * np.array([0.05, 0.0, -0.05]))
    expected = (1 - decays)[:, None, None] * np.float64(grads["w"])
    # learnopt's accumulators are one array per decay (accumulators.py): m[k], decay k.
    got = np.stack(state.mom_rolling.m["w"])
    np.testing.assert_allclose(got, expected, rtol=1e-4)


def test_adafac_non_factored_momentum_feature_matches_the_library():
    """learned_optimization's adafac_mlp_lopt (commit 08d79a53b24889e62b4c9c9eded936ee133cfa54,
    since its "Minor bugfix to adafac_mlp_lopt" of 2022-04-11): for tensors of rank < 2
    the last feature group is ``m * (v + 1e-6) ** -0.5``; at ``v = 0`` that is ``1000 m``
    (a floor at 1e-20 instead gave 1e10 m)."""
    from learnopt.learned_optimizers.blocks import accumulators

    lopt = adafac_mlp_lopt.AdafacMLPLOpt()
    # One row per decay, [3 decays, 2 elements] (accumulators.py's layout).
    m = jnp.asarray([[0.5, -1.0, 2.0], [0.1, 0.0, -0.3]], jnp.float32).T
    v = jnp.asarray([[0.0, 0.0, 0.0], [4.0, 1e-4, 0.25]], jnp.float32).T
    acc = accumulators.FactoredAccum(v_row=jnp.zeros((0,)), v_col=jnp.zeros((0,)), v_diag=v)
    p = g = jnp.ones((2,), jnp.float32)
    groups = adafac_mlp_lopt.adafac_features(p, g, m, v[:1], v, acc, lopt.mom_eps)
    expected = np.float64(m) * (np.float64(v) + 1e-6) ** -0.5
    np.testing.assert_allclose(np.asarray(groups[-1]), expected, rtol=1e-5)


def _np_velo_lstm_features(p, m, rms, fraction, loss_features):
    """learned_optimization's hyper_v2 per-tensor LSTM inputs, in float64 and its order:
    the accumulators scaled by ``1 / rms(p)`` first, then their statistics."""
    norm_mult = 1 / np.sqrt(max(1e-9, np.mean(p**2)))
    m, rms = m * norm_mult, rms * norm_mult
    axes = tuple(range(p.ndim))
    mean_m = np.mean(m, axis=axes, keepdims=True)

    def clip_log_abs(v):
        return np.clip(np.log(1e-8 + np.abs(10.0 * v)), -5, 5) * 0.5

    feats = {
        "fraction_left": np.tanh((fraction - np.asarray(hyper_v2._FRACTION_TIMESCALES)) * 10),
        "loss_features": loss_features,
        "mean_rms": clip_log_abs(np.mean(rms, axis=axes)),
        "rank": np.eye(5)[int(np.sum(np.asarray(p.shape) > 1))],
        "var_m": clip_log_abs(np.mean((m - mean_m) ** 2, axis=axes)),
        "var_rms": clip_log_abs(np.mean((rms - mean_m) ** 2, axis=axes)),
    }
    return np.concatenate([np.reshape(feats[k], (-1,)) for k in sorted(feats)])


@pytest.mark.parametrize("shape", [(6, 5), (7,), ()])
def test_velo_lstm_features_match_the_library_order(shape):
    """HyperV2 takes the statistics of the raw accumulators and scales them (means by
    ``1 / rms(p)``, variances by its square) instead of scaling whole copies first: the
    same features to float32 rounding. The inputs are picked so the clipped logs sit
    inside (-5, 5), where a wrong scale would show."""
    lopt = hyper_v2.HyperV2()
    rng = np.random.default_rng(3)
    p = 0.05 * rng.standard_normal(shape)
    m = 0.01 * (1.0 + rng.standard_normal((*shape, 3)))
    rms = 1e-4 * rng.random((*shape, 1))
    loss_features = rng.uniform(-1, 1, 9)
    # HyperV2's accumulators: one array per decay (accumulators.py); the library's last.
    got = lopt.lstm_features_for_tensor(
        jnp.float32(p),
        jnp.float32(np.moveaxis(m, -1, 0)),
        jnp.float32(np.moveaxis(rms, -1, 0)),
        jnp.float32(0.3),
        jnp.float32(loss_features),
    )
    expected = _np_velo_lstm_features(p, m, rms, 0.3, loss_features)
    assert got.shape == (lopt.rnn_input_features,)
    inside = np.abs(expected) < 2.5  # not clipped: these entries depend on the scale
    assert inside.sum() >= 7 if shape else inside.sum() >= 4
    np.testing.assert_allclose(np.asarray(got), expected, rtol=1e-5, atol=1e-6)


def test_celo2_steps_have_rms_step_mult_per_tensor():
    # Celo2-base (orthogonalize=False): the learned rule on every tensor, the vector too.
    lopt = celo2.Celo2(step_mult=0.01, orthogonalize=False)
    theta = lopt.init(jax.random.PRNGKey(0))
    params = {"w": _params(0)["w"], "b": _params(0)["b"]}
    grads = {"w": 1e-6 * _params(1)["w"], "b": 1e3 * _params(1)["b"]}  # any gradient scale
    opt = lopt.opt_fn(theta)
    state = jax.jit(lambda p, g: opt.update(opt.init(p), g))(params, grads)
    for k in params:
        step = np.asarray(state.params[k], np.float64) - np.float64(params[k])
        # (The normalizer's 1e-9 inside its square root is negligible here.)
        np.testing.assert_allclose(np.sqrt(np.mean(step**2)), 0.01, rtol=1e-4)


def test_newton_schulz_orthogonalizes():
    x = jnp.asarray(np.random.default_rng(0).standard_normal((6, 4)), jnp.float32)
    y = np.asarray(celo2.newton_schulz(x), np.float64)
    singular = np.linalg.svd(y, compute_uv=False)
    assert np.all((singular > 0.6) & (singular < 1.3)), singular  # Muon's iteration band
    assert celo2.newton_schulz(x.T).shape == (4, 6)
    grad = jax.grad(lambda z: jnp.sum(celo2.newton_schulz(z)))(jnp.zeros((3, 2)))
    assert np.all(np.isfinite(np.asarray(grad)))


def test_rnn_mlp_lopt_validation_loss_updates_only_its_statistics():
    lopt = rnn_mlp_lopt.RNNMLPLOpt(hidden_size=4, lstm_hidden_size=4)
    opt = lopt.opt_fn(lopt.init(jax.random.PRNGKey(0)))
    params = _params(0)
    state = opt.init(params)
    valid = opt.update(state, params, loss=jnp.float32(2.0), is_valid=True)
    assert int(valid.iteration) == 1 and int(valid.valid_loss_accum.updates) == 1
    np.testing.assert_allclose(float(valid.valid_loss_accum.mean), 0.05 * 2.0, rtol=1e-6)
    for a, b in zip(
        jax.tree_util.tree_leaves(valid.params), jax.tree_util.tree_leaves(params), strict=True
    ):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    with pytest.raises(ValueError, match="needs the training loss"):
        opt.update(state, params)


def test_library_lstm_checkpoint_formats_load(tmp_path):
    """NNAdam theta written with a Haiku LSTMState (current and pre-2022 flax formats)."""
    lopt = nn_adam.NNAdam()
    theta = jax.tree_util.tree_map(np.asarray, lopt.init(jax.random.PRNGKey(3)))
    state = flax.serialization.to_state_dict(theta)
    hidden, cell = theta["lstm_init_state"]
    old = dict(state)  # flax < 0.4 wrote named tuples as name / fields / values
    old["lstm_init_state"] = {
        "name": "LSTMState",
        "fields": {"0": "hidden", "1": "cell"},
        "values": {"0": hidden, "1": cell},
    }
    for i, tree in enumerate((state, old)):
        path = tmp_path / f"params{i}"
        path.write_bytes(
            flax.serialization.msgpack_serialize({"params": tree, "gen_id": "", "step": 1})
        )
        loaded = convert.load_library_theta(path, lopt)
        assert isinstance(loaded["lstm_init_state"], common.LSTMState)
        for a, b in zip(
            jax.tree_util.tree_leaves(loaded), jax.tree_util.tree_leaves(theta), strict=True
        ):
            np.testing.assert_array_equal(np.asarray(a), b)


# ------------------------------------------------- a new architecture from the base alone


@flax.struct.dataclass
class _ToyState:
    params: Any
    model_state: Any
    iteration: jax.Array


class _ToySignOptimizer(common.ThetaOptimizer):
    def init(self, params, model_state=None, num_steps=None, key=None):
        return _ToyState(params, model_state, jnp.zeros((), jnp.int32))

    def update(self, opt_state, grads, loss=None, model_state=None, **kwargs):
        lr = jnp.exp(self.theta["log_lr"])
        params = jax.tree_util.tree_map(
            lambda p, g: p - (lr * jnp.sign(g)).astype(p.dtype), opt_state.params, grads
        )
        model_state = opt_state.model_state if model_state is None else model_state
        return _ToyState(params, model_state, opt_state.iteration + 1)


class ToySign(lopt_base.LearnedOptimizer):
    """signSGD with a learned rate: an architecture is its init and its optimizer class."""

    optimizer_class = _ToySignOptimizer

    def __init__(self, initial_lr: float = 0.01, name_tag: str = "toy"):
        self.initial_lr = initial_lr
        self.name_tag = name_tag

    def init(self, key):
        return {"log_lr": jnp.asarray(np.log(self.initial_lr), jnp.float32)}


def test_a_new_architecture_gets_checking_repr_registration_and_conformance_from_the_base(
    monkeypatch,
):
    monkeypatch.setitem(lopt_base.LOPTS._entries, "ToySign", ToySign)
    assert "ToySign" in lopt_base.registered_learned_optimizers()
    lopt = lopt_base.get_learned_optimizer("ToySign", initial_lr=0.1)
    assert repr(lopt) == "ToySign(initial_lr=0.1)"
    assert repr(ToySign()) == "ToySign()"
    assert theta_files.lopt_config(lopt) == {"initial_lr": 0.1, "name_tag": "toy"}
    with pytest.raises(ValueError, match=r"ToySign\(\): theta does not match.*wrong shapes"):
        ToySign().opt_fn({"log_lr": jnp.zeros(3)})
    opt = lopt.opt_fn(lopt.init(jax.random.PRNGKey(0)))
    assert isinstance(opt, _ToySignOptimizer) and opt.lopt is lopt
    for case in conformance.DTYPE_CASES:
        result = conformance.check_conformance(
            functools.partial(conformance._learned, "ToySign"), case, num_calls=3
        )
        assert result.ok, (case, result)
        assert result.last_loss < result.first_loss


class ToySignTau(ToySign):
    """ToySign with a ``tau_features`` switch (unused by its step)."""

    def __init__(self, initial_lr: float = 0.01, tau_features: bool = False):
        super().__init__(initial_lr)
        self.tau_features = tau_features


def test_registering_with_tau_adds_the_fraction_of_training_twin(monkeypatch):
    monkeypatch.setattr(lopt_base.LOPTS, "_entries", dict(lopt_base.LOPTS._entries))
    twin = lopt_base.register_learned_optimizer("ToySignTau", ToySignTau, tau="ToySignTau_tau")
    plain = lopt_base.get_learned_optimizer("ToySignTau")
    tau = lopt_base.get_learned_optimizer("ToySignTau_tau", initial_lr=0.1)
    assert isinstance(tau, twin) and isinstance(tau, ToySignTau)
    assert (plain.tau_features, tau.tau_features, tau.name) == (False, True, "ToySignTau_tau")
    assert theta_files.lopt_config(tau) == {"initial_lr": 0.1, "tau_features": True}
    assert lopt_base.register_learned_optimizer("ToySignPlain", ToySign) is None
    with pytest.raises(TypeError, match="no tau_features argument"):
        lopt_base.register_learned_optimizer("ToySign2", ToySign, tau="ToySign2_tau")
