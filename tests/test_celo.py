"""Celo (Moudgil et al., 2025, arXiv:2501.12670) and its two-phase meta-training.

* Reference match: on fixed inputs, Celo's steps equal a plain-numpy re-derivation of
  the equations of the authors' release (github.com/amoudgl/celo at
  66d976116f39da286951f0c5e0a18eee8d1fd66b, ``celo/optimizers/celo.py``) for what
  differs from HyperV2: the scheduler's 18 inputs (``_fractional_tanh_embed`` and the
  loss buffer), the scheduler (mixing layers, Haiku LSTM, softmax controls,
  ``lr_mult = 0.1 exp(step_size)``), the bank mixing ``mean_i c_i W_i`` without VeLO's
  100 and the step ``step_mult * d * exp(exp_mult * a) * rms(p)``, times ``lr_mult``
  only when ``train_phase > 1``. The per-parameter MLP's feature groups are HyperV2's
  (tested in its own tests); here its hidden weights are zero so that its output is
  its last bias, a known ``(d, a)`` per bank member.
* tau reaches the scheduler: at the same state, a different ``num_steps`` changes the
  phase-2 update and leaves the phase-1 update exactly as it is.
* The step is proportional to the parameters' RMS.
* Two-phase meta-training: the frozen keys of each phase; the learner's
  ``frozen_keys`` keep those leaves bit-identical through outer steps (also under an
  outer weight decay) while the others move; phase 2 starts from phase 1's theta file.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from learnopt.learned_optimizers import celo, theta_files
from learnopt.optimizers import base as opt_base
from learnopt.outer_trainers import gradient_learner
from learnopt.outer_trainers.outer_update import frozen_mask

H = 8  # LSTM width of the tests
SHAPES = {"b": (5,), "w": (3, 4)}
T = 10


def _tree(seed, scale=1.0):
    rng = np.random.default_rng(seed)
    return {k: jnp.asarray(scale * rng.standard_normal(s), jnp.float32) for k, s in SHAPES.items()}


def _leaves(tree):
    return [np.asarray(x, np.float64) for x in jax.tree_util.tree_leaves(tree)]


# ----------------------------------------------------------- a numpy re-derivation


def _np_loss_buffer(losses, num_steps):
    """The release's BufferLossAccumulators: init(num_steps), update per loss, features."""
    decays = np.exp(-1.0 / np.logspace(1, np.log10(num_steps), 10))
    means, running_min, it = np.zeros(10), np.full(10, 999999999999.0), 0
    out = []
    for loss in losses:
        cor = means / (1 - decays ** (it + 1))
        approx_max = loss if it == 0 else np.max(cor)
        loss = min(abs(approx_max) * 2, loss)
        means = means * decays + loss * (1 - decays)
        running_min = np.minimum(running_min, means / (1 - decays ** (it + 1)))
        it += 1
        cor = means / (1 - decays**it)
        den = np.maximum(1e-8, cor[1:] - running_min[:-1])
        feat = np.clip((cor[:-1] - running_min[:-1]) / den - 1.0, -1, 1)
        out.append(feat * 0 if it <= 2 else feat)
    return out


def _np_scheduler_inputs(iteration, num_steps, loss_features):
    """``_fractional_tanh_embed(t / T)`` then the loss features (sorted dict keys)."""
    s = np.array([0.03, 0.1, 0.2, 0.4, 0.6, 0.8, 0.9, 1.0, 1.1])
    return np.concatenate([np.tanh((iteration / num_steps - s) * 10), loss_features])


def _sigmoid(x):
    return 1 / (1 + np.exp(-x))


def _np_scheduler(rnn, x, h, c):
    """The release's ``_rnn_forward``: mixing layers, hk.LSTM, softmax, 0.1 exp."""
    lin = {
        k: (np.asarray(v["w"], np.float64), np.asarray(v["b"], np.float64)) for k, v in rnn.items()
    }
    mix = np.maximum(x @ lin["linear_1"][0] + lin["linear_1"][1], 0)
    x = x @ lin["linear_2"][0] + lin["linear_2"][1] + np.max(mix, axis=0, keepdims=True)
    gates = np.concatenate([x, h], axis=1) @ lin["rnn/linear"][0] + lin["rnn/linear"][1]
    i, g, f, o = np.split(gates, 4, axis=1)
    c = _sigmoid(f + 1) * c + _sigmoid(i) * np.tanh(g)
    h = _sigmoid(o) * np.tanh(c)
    logits = h @ lin["rnn_to_controls"][0] + lin["rnn_to_controls"][1]
    controls = np.exp(logits - logits.max(1, keepdims=True))
    controls /= controls.sum(1, keepdims=True)
    lr_mult = 0.1 * np.exp((h @ lin["step_size"][0] + lin["step_size"][1])[:, 0])
    return controls, lr_mult, h, c


def _known_output_theta(lopt, key):
    """A theta whose MLPs output their last bias: member j gives ``(d_j, a_j, 0)``."""
    theta = lopt.init(key)
    k = lopt.param_inits
    stack = {name: jnp.zeros_like(w) for name, w in theta["ff_mod_stack"]["~"].items()}
    rng = np.random.default_rng(7)
    b2 = np.stack([rng.uniform(0.5, 2.0, k), rng.uniform(-1.0, 1.0, k), np.zeros(k)], 1)
    stack["b2"] = jnp.asarray(b2, jnp.float32)
    rnn = dict(theta["rnn_params"])
    rnn["rnn_to_controls"] = {
        "w": rnn["rnn_to_controls"]["w"],
        "b": jax.random.normal(jax.random.PRNGKey(11), (k,), jnp.float32),
    }
    rnn["step_size"] = {"w": rnn["step_size"]["w"], "b": jnp.full((1,), 0.7, jnp.float32)}
    return {**theta, "ff_mod_stack": {"~": stack}, "rnn_params": rnn}, b2


@pytest.mark.parametrize("phase", [1, 2])
def test_steps_match_a_numpy_rederivation_of_the_release(phase):
    exp_mult, step_mult = 0.5, 0.01
    lopt = celo.Celo(
        lstm_hidden_size=H,
        param_inits=3,
        exp_mult=exp_mult,
        step_mult=step_mult,
        train_phase=phase,
    )
    theta, b2 = _known_output_theta(lopt, jax.random.PRNGKey(0))
    opt = lopt.opt_fn(theta)
    params = _tree(1)
    state = opt.init(params, num_steps=T)
    losses = [2.0, 1.5, 1.7, 1.1, 0.9]
    loss_feats = _np_loss_buffer(losses, T)
    n = len(SHAPES)
    h = np.zeros((n, H))
    c = np.zeros((n, H))
    expected = {k: np.asarray(v, np.float64) for k, v in params.items()}
    for t, loss in enumerate(losses):
        x_np = _np_scheduler_inputs(t, T, loss_feats[t])
        # Celo's own scheduler-input function on the same fraction and loss features.
        x = lopt.lstm_features_for_tensor(
            params["w"],
            jnp.zeros((3, 4, 3)),
            None,
            jnp.float32(t / T),
            jnp.asarray(loss_feats[t], jnp.float32),
        )
        np.testing.assert_allclose(np.asarray(x), x_np, rtol=1e-5, atol=1e-6)
        assert x.shape == (18,)
        controls, lr_mult, h, c = _np_scheduler(theta["rnn_params"], np.tile(x_np, (n, 1)), h, c)
        for i, name in enumerate(sorted(SHAPES)):  # the tree's leaf order
            d, a = (controls[i] @ b2[:, :2]) / lopt.param_inits  # mean_j c_j W_j
            p = expected[name]
            step = step_mult * d * np.exp(exp_mult * a) * np.sqrt(np.mean(p**2) + 1e-9)
            expected[name] = p - (lr_mult[i] * step if phase > 1 else step)
        state = opt.update(state, _tree(50 + t), loss=jnp.float32(loss))
        for name in SHAPES:
            np.testing.assert_allclose(
                np.asarray(state.params[name]), expected[name], rtol=2e-6, atol=1e-7
            )
    assert int(state.iteration) == len(losses)
    # The steps were not trivially equal to the plain step: lr_mult is far from 1.
    assert abs(lr_mult[0] - 1) > 0.5


# ------------------------------------------------------------------ tau and scaling


@pytest.fixture(scope="module")
def two_phases():
    """Phase-1 and phase-2 optimizers of one random theta, and a state after 3 steps.

    ``step_mult`` is large so that steps are far above float32 rounding of ``p``.
    """
    out = {}
    theta = celo.Celo(lstm_hidden_size=H).init(jax.random.PRNGKey(3))
    for phase in (1, 2):
        lopt = celo.Celo(lstm_hidden_size=H, step_mult=0.1, train_phase=phase)
        opt = lopt.opt_fn(theta)
        state = opt.init(_tree(1), num_steps=T)
        for t in range(3):
            state = opt.update(state, _tree(20 + t), loss=jnp.float32(2.0 - 0.3 * t))
        out[phase] = (opt, state)
    return out


def _step(opt, state, params=None, num_steps=None):
    if params is not None:
        state = state.replace(params=params)
    if num_steps is not None:  # same accumulators and loss buffer, another T
        state = state.replace(num_steps=jnp.asarray(num_steps, jnp.int32))
    new = opt.update(state, _tree(99), loss=jnp.float32(1.0))
    return [a - b for a, b in zip(_leaves(new.params), _leaves(state.params), strict=True)]


def test_tau_reaches_the_scheduler_in_phase_2_only(two_phases):
    opt2, state2 = two_phases[2]
    short, long = _step(opt2, state2), _step(opt2, state2, num_steps=1000)
    rel = max(np.max(np.abs(a - b)) / np.max(np.abs(a)) for a, b in zip(short, long, strict=True))
    assert rel > 1e-3, f"phase 2: num_steps changed the step by only {rel:.2e}"
    # Phase 1: the scheduler's lr_mult does not apply (and one MLP needs no mixing).
    opt1, state1 = two_phases[1]
    for a, b in zip(_step(opt1, state1), _step(opt1, state1, num_steps=1000), strict=True):
        np.testing.assert_array_equal(a, b)
    # Same theta: phase 2's step is phase 1's times one positive lr_mult per tensor.
    for a1, a2 in zip(_step(opt1, state2), short, strict=True):
        ratio = a2 / a1
        assert np.all(ratio > 0) and np.ptp(ratio) < 1e-3 * np.max(ratio)


def test_step_is_proportional_to_the_parameters_rms(two_phases):
    opt, state = two_phases[2]
    base = _step(opt, state)
    scaled = _step(opt, state, params=jax.tree_util.tree_map(lambda p: 10.0 * p, state.params))
    for a, b in zip(base, scaled, strict=True):
        np.testing.assert_allclose(b, 10.0 * a, rtol=1e-3)
        assert np.max(np.abs(a)) > 0


# --------------------------------------------------------- two-phase meta-training


def test_frozen_keys_per_phase_and_their_mask():
    lopt = celo.Celo(lstm_hidden_size=H, train_phase=1)
    assert lopt.get_frozen_param_keys() == ("lstm_init_state", "rnn_params")
    assert lopt.get_frozen_param_keys(2) == ("ff_mod_stack",)
    theta = jax.eval_shape(lopt.init, jax.random.PRNGKey(0))
    mask = frozen_mask(theta, lopt.get_frozen_param_keys())
    flat = jax.tree_util.tree_flatten_with_path(mask)[0]
    frozen = {jax.tree_util.keystr(p) for p, m in flat if m}
    assert frozen and all("ff_mod_stack" not in p for p in frozen)
    assert len(frozen) == len(flat) - len(jax.tree_util.tree_leaves(theta["ff_mod_stack"]))
    # A key names a whole path component, never a part of one; unknown keys are refused.
    with pytest.raises(ValueError, match="frozen_keys"):
        frozen_mask(theta, ["rnn"])
    with pytest.raises(ValueError, match="train_phase"):
        celo.Celo(train_phase=3)
    with pytest.raises(ValueError, match="frozen_keys"):
        gradient_learner.GradientLearner(lopt, opt_base.Adam(1e-3), frozen_keys=["nope"])


def test_learner_keeps_frozen_leaves_fixed_and_trains_the_others():
    # Phase 1 (phase 2's keys are checked by the mask test; one compile is enough here).
    lopt = celo.Celo(lstm_hidden_size=H, train_phase=1)
    # An outer weight decay would move a leaf whose gradient is only zeroed.
    theta_opt = optax.adamw(1e-2, weight_decay=0.1)
    learner = gradient_learner.GradientLearner(
        lopt, theta_opt, frozen_keys=lopt.get_frozen_param_keys()
    )
    state = learner.init(jax.random.PRNGKey(0))
    theta0 = learner.get_meta_params(state)
    mask = jax.tree_util.tree_leaves(frozen_mask(theta0, lopt.get_frozen_param_keys()))
    for i in range(3):
        grads = jax.tree_util.tree_map(lambda x, i=i: jnp.full_like(x, 0.1 * (i + 1)), theta0)
        agg = gradient_learner.AggregatedGradient(
            theta_grads=grads, theta_model_state=None, mean_loss=jnp.float32(1.0)
        )
        state, metrics = learner.update(state, [agg])
        assert not bool(metrics["skipped"])
    before, after = _leaves(theta0), _leaves(learner.get_meta_params(state))
    for frozen, a, b in zip(mask, before, after, strict=True):
        if frozen:
            np.testing.assert_array_equal(a, b)
        else:
            assert np.all(a != b)
    assert any(mask) and not all(mask)


def test_phase_2_starts_from_phase_1_theta_file(tmp_path):
    phase1 = celo.Celo(lstm_hidden_size=H, train_phase=1)
    theta1 = jax.tree_util.tree_map(lambda x: x + 0.25, phase1.init(jax.random.PRNGKey(1)))
    path = tmp_path / "theta.msgpack"
    theta_files.save(path, phase1, theta1)  # what `learnopt meta-train` writes
    phase2 = celo.Celo(lstm_hidden_size=H, train_phase=2)
    learner = gradient_learner.GradientLearner(
        phase2,
        opt_base.Adam(1e-2),
        init_theta_from_path=path,
        frozen_keys=phase2.get_frozen_param_keys(),
    )
    theta2 = learner.get_meta_params(learner.init(jax.random.PRNGKey(2)))
    for a, b in zip(_leaves(theta1), _leaves(theta2), strict=True):
        np.testing.assert_array_equal(a, b)
    # theta files rebuild the phase from the constructor arguments.
    assert theta_files.load(path).lopt.train_phase == 1


def _pinned_case():
    """A 1-D, a 2-D and a 4-D (conv kernel) tensor, 10 gradients and losses, T = 20."""
    rng = np.random.default_rng(29)
    shapes = {"bias": (7,), "dense": (5, 3), "conv": (3, 3, 2, 4)}
    params = {k: jnp.asarray(rng.normal(size=s) * 0.3, jnp.float32) for k, s in shapes.items()}
    grads = [
        {k: jnp.asarray(rng.normal(size=s) * 0.1, jnp.float32) for k, s in shapes.items()}
        for _ in range(10)
    ]
    return params, grads, [2.0 * 0.9**i for i in range(10)]


#: The params after the 10 steps of :func:`_pinned_case` with the shipped ``Celo`` theta
#: (the release's weights), recorded from the REFERENCE: the release's own
#: ``celo/optimizers/celo.py`` (amoudgl/celo@66d9761) run on learnopt with the import
#: prefix changed, by ``python benchmarks/compare_published.py --entries Celo --record``
#: (the same case, its 1-D tensor nested as ``bias/b``): the first three values of each
#: tensor and the summed absolute change.
PINNED_CELO = {
    "bias": ([-0.1176329031586647, 0.020075630396604538, -0.0574040561914444], 0.028416967951),
    "dense": ([0.008472299203276634, 0.1561858355998993, -0.22566689550876617], 0.269782657735),
    "conv": ([0.8906725645065308, 0.08642745763063431, 0.07149742543697357], 2.078010900877),
}


def test_shipped_celo_entry_reproduces_its_pinned_steps():
    from learnopt import pretrained

    params, grads, losses = _pinned_case()
    opt = pretrained.load("Celo").opt_fn()
    state = opt.init(params, num_steps=20)
    update = jax.jit(lambda s, g, loss: opt.update(s, g, loss=loss))
    for g, loss in zip(grads, losses, strict=True):
        state = update(state, g, jnp.float32(loss))
    new = opt.get_params(state)
    for name, (first, change) in PINNED_CELO.items():
        np.testing.assert_allclose(np.asarray(new[name]).ravel()[:3], first, rtol=1e-5, atol=1e-7)
        moved = float(np.abs(np.asarray(new[name]) - np.asarray(params[name])).sum())
        np.testing.assert_allclose(moved, change, rtol=1e-5)


def test_celo_is_hyperv2s_settings_with_three_changes():
    """Celo changes HyperV2's settings dataclass, not its signature: three fields differ,
    every other setting is HyperV2's, and a Celo rebuilds from its constructor arguments."""
    import dataclasses

    from learnopt.learned_optimizers import base as lopt_base
    from learnopt.learned_optimizers import hyper_v2

    ours, velo = celo.Celo.default_config, hyper_v2.HyperV2.default_config
    changed = {
        f.name for f in dataclasses.fields(ours) if getattr(ours, f.name) != getattr(velo, f.name)
    }
    assert changed == {
        "lstm_hidden_size",
        "param_inits",
        "use_bugged_loss_features",
    }
    lopt = celo.Celo(lstm_hidden_size=8, train_phase=1, with_p=False)
    assert (lopt.lstm_hidden_size, lopt.with_p, lopt.param_inits) == (8, False, 1)
    assert repr(lopt) == "Celo(train_phase=1, lstm_hidden_size=8, with_p=False)"
    again = celo.Celo(**lopt_base.constructor_args(lopt))
    assert again.config == lopt.config and again.train_phase == 1
    assert celo.Celo(lopt.config).config == lopt.config


def test_a_setting_hyperv2_lacks_is_a_clear_error():
    from learnopt.learned_optimizers import hyper_v2

    with pytest.raises(TypeError, match=r"unknown argument 'with_gg' \(did you mean 'with_g'"):
        hyper_v2.HyperV2(with_gg=True)
    with pytest.raises(TypeError, match="config must be a HyperV2Config"):
        celo.Celo({"lstm_hidden_size": 8})
    with pytest.raises(ValueError, match="lstm_hidden_size must be >= 1"):
        celo.Celo(lstm_hidden_size=0)
    # A decay of 1 froze its accumulator at zero (features that never move), silently.
    for name in ("initial_momentum_decays", "initial_rms_decays", "initial_adafactor_decays"):
        for bad in ((0.9, 1.0), (-0.1,), ()):
            with pytest.raises(ValueError, match=f"{name} must be values in"):
                celo.Celo(**{name: bad})
            with pytest.raises(ValueError, match=f"{name} must be values in"):
                hyper_v2.HyperV2(**{name: bad})
    tau = hyper_v2.HyperV2Tau()
    assert tau.tau_features and not hyper_v2.HyperV2Tau(tau_features=False).tau_features
    assert tau.name == "HyperV2_tau" and not hyper_v2.HyperV2().tau_features
