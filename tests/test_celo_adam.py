"""CeloAdam: Celo's learned scheduler on Adam, and the shipped release weights."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from learnopt import pretrained
from learnopt.learned_optimizers import base as lopt_base
from learnopt.learned_optimizers import theta_files
from learnopt.learned_optimizers.blocks import loss_timescales
from learnopt.learned_optimizers.celo_adam import (
    CeloAdam,
    with_regime_head,
    with_schedule_head,
    with_weight_decay_head,
)
from learnopt.learned_optimizers.celo_adam_heads import with_rms_decay_head
from learnopt.testing import conformance


def _pinned_case():
    """A 1-D, a 2-D and a 4-D (conv kernel) tensor, 10 gradients and losses, T = 20.

    The values of ``benchmarks/compare_published.py``'s ``case(10)`` (seed 29), flat.
    """
    rng = np.random.default_rng(29)
    shapes = {"bias": (7,), "dense": (5, 3), "conv": (3, 3, 2, 4)}
    params = {k: jnp.asarray(rng.normal(size=s) * 0.3, jnp.float32) for k, s in shapes.items()}
    grads = [
        {k: jnp.asarray(rng.normal(size=s) * 0.1, jnp.float32) for k, s in shapes.items()}
        for _ in range(10)
    ]
    return params, grads, [2.0 * 0.9**i for i in range(10)]


#: The params after the 10 steps of :func:`_pinned_case` with the shipped ``CeloAdam``
#: theta, recorded from the REFERENCE: the release's ``celo/optimizers/celo_adam.py``
#: (amoudgl/celo@66d9761, factory configuration ``celo_adam``) run on learnopt with the
#: import prefix changed, by ``python benchmarks/compare_published.py --entries CeloAdam
#: --record``: the first three values of each tensor and the summed absolute change.
PINNED_CELOADAM = {
    "bias": ([-0.12026995420455933, 0.02956584468483925, -0.05592237412929535], 0.056993739679),
    "dense": ([0.008433818817138672, 0.15695369243621826, -0.22722414135932922], 0.235305671580),
    "conv": ([0.8980536460876465, 0.08037926256656647, 0.057966358959674835], 1.259765340015),
}


def _run(opt, params, grads, losses, num_steps=20):
    state = opt.init(params, num_steps=num_steps)
    update = jax.jit(lambda s, g, loss: opt.update(s, g, loss=loss))
    for g, loss in zip(grads, losses, strict=True):
        state = update(state, g, jnp.float32(loss))
    return opt.get_params(state)


def test_shipped_celoadam_entry_reproduces_the_reference_steps():
    params, grads, losses = _pinned_case()
    new = _run(pretrained.load("CeloAdam").opt_fn(), params, grads, losses)
    for name, (first, change) in PINNED_CELOADAM.items():
        np.testing.assert_allclose(np.asarray(new[name]).ravel()[:3], first, rtol=1e-5, atol=1e-7)
        moved = float(np.abs(np.asarray(new[name]) - np.asarray(params[name])).sum())
        np.testing.assert_allclose(moved, change, rtol=1e-5)


def test_shipped_entry_has_the_release_layout_and_metadata():
    loaded = pretrained.load("CeloAdam")
    leaves = jax.tree_util.tree_leaves(loaded.theta)
    assert len(leaves) == 12 and sum(x.size for x in leaves) == 36_865
    assert set(loaded.theta["rnn_params"]) == {
        "linear",
        "linear_1",
        "linear_2",
        "rnn/linear",
        "step_size",
    }
    md = pretrained.metadata("CeloAdam")
    assert md["meta_training"]["source"]["path"] == "algoperf/submissions/celo_adam/theta.state"
    assert md["licence"] == "MIT" and md["meta_training"]["licence_file"] == "LICENSE-celo.txt"


def _constant_schedule_theta(lopt, lr_mult):
    """A theta whose scheduler outputs ``lr_mult`` for every tensor at every step."""
    theta = lopt.init(jax.random.PRNGKey(0))
    head = theta["rnn_params"]["step_size"]
    theta["rnn_params"]["step_size"] = {
        "w": jnp.zeros_like(head["w"]),
        "b": jnp.full_like(head["b"], np.log(lr_mult / 0.1)),
    }
    return theta


def test_a_constant_schedule_is_adam_at_step_mult_times_it():
    lopt = CeloAdam(lstm_hidden_size=4)
    opt = lopt.opt_fn(_constant_schedule_theta(lopt, 2.0))
    rng = np.random.default_rng(0)
    params = {"w": jnp.asarray(rng.normal(size=(4, 3)), jnp.float32), "b": jnp.zeros(3)}
    grads = [
        jax.tree_util.tree_map(lambda p: jnp.asarray(rng.normal(size=p.shape), jnp.float32), params)
        for _ in range(8)
    ]
    ours = _run(opt, params, grads, [1.0] * 8)
    tx = optax.adam(2e-3, b1=0.9, b2=0.999, eps=1e-8, eps_root=1e-10)
    ref, state = params, tx.init(params)
    for g in grads:
        updates, state = tx.update(g, state, ref)
        ref = optax.apply_updates(ref, updates)
    for k in params:
        np.testing.assert_allclose(ours[k], ref[k], rtol=2e-6, atol=1e-7)


def test_bias_correction_off_changes_the_first_steps():
    on, off = CeloAdam(lstm_hidden_size=4), CeloAdam(lstm_hidden_size=4, bias_correction=False)
    theta = _constant_schedule_theta(on, 1.0)
    params, g = {"w": jnp.ones((2, 2))}, {"w": jnp.full((2, 2), 0.5)}
    a = _run(on.opt_fn(theta), params, [g], [1.0])["w"]
    b = _run(off.opt_fn(theta), params, [g], [1.0])["w"]
    # Adam's bias-corrected first step is lr * sign(g); uncorrected, 0.1 / sqrt(0.001) of it
    # (1 - b in float32 keeps about 4 digits).
    np.testing.assert_allclose(a, 1 - 1e-3, rtol=1e-6)
    np.testing.assert_allclose(1 - b, 1e-3 * 0.1 / np.sqrt(1e-3), rtol=1e-4)


def test_bfloat16_params_stay_bfloat16_and_float32_state():
    loaded = pretrained.load("CeloAdam")
    opt = loaded.opt_fn()
    params = {"w": jnp.full((3, 2), 0.01, jnp.bfloat16)}
    state = opt.init(params, num_steps=10)
    state = jax.jit(lambda s: opt.update(s, {"w": jnp.ones((3, 2), jnp.bfloat16)}, loss=1.0))(state)
    assert state.params["w"].dtype == jnp.bfloat16
    assert state.m["w"].dtype == jnp.float32 and bool(jnp.all(state.params["w"] < 0.01))


def test_update_without_loss_is_an_error_naming_it():
    opt = pretrained.load("CeloAdam").opt_fn()
    state = opt.init({"w": jnp.ones(2)}, num_steps=5)
    with pytest.raises(ValueError, match="needs the training loss"):
        opt.update(state, {"w": jnp.ones(2)})


def test_run_length_defaults_and_bad_arguments():
    lopt = lopt_base.get_learned_optimizer("CeloAdam")
    opt = lopt.opt_fn(lopt.init(jax.random.PRNGKey(1)))
    assert int(opt.init({"w": jnp.ones(2)}).num_steps) == lopt.default_num_steps == 10_000
    with pytest.raises(ValueError, match="lstm_hidden_size must be >= 1"):
        CeloAdam(lstm_hidden_size=0)
    with pytest.raises(ValueError, match="need a value each"):
        CeloAdam(initial_rms_decays=())
    with pytest.raises(ValueError, match="does not match this learned optimizer's layout"):
        CeloAdam(lstm_hidden_size=8).opt_fn(pretrained.load("CeloAdam").theta)


# ------------------------------------------------------- learnopt's regime head (issue 32)


def test_regime_head_at_zero_takes_the_released_steps_bit_for_bit():
    params, grads, losses = _pinned_case()
    released = pretrained.load("CeloAdam")
    lopt = CeloAdam(regime_head=True)
    theta = with_regime_head(released.theta)
    assert float(jnp.abs(theta["rnn_params"]["regime_step_size"]["w"]).sum()) == 0.0
    ours = _run(lopt.opt_fn(theta), params, grads, losses)
    ref = _run(released.opt_fn(), params, grads, losses)
    for k in params:
        np.testing.assert_array_equal(ours[k], ref[k])
    # A random theta of the variant starts with the head at zero too.
    fresh = lopt.init(jax.random.PRNGKey(3))["rnn_params"]["regime_step_size"]
    assert not any(bool(jnp.any(x)) for x in jax.tree_util.tree_leaves(fresh))


def _regime_theta(bias):
    theta = with_regime_head(pretrained.load("CeloAdam").theta)
    theta["rnn_params"]["regime_step_size"] = {"w": jnp.zeros((64, 1)), "b": jnp.full((1,), bias)}
    return theta


def test_regime_head_acts_only_where_the_training_loss_fell():
    params, grads, _ = _pinned_case()
    lopt = CeloAdam(regime_head=True)
    zero, shrink = lopt.opt_fn(_regime_theta(0.0)), lopt.opt_fn(_regime_theta(5.0))
    # Rising losses: r = 0 and the head is gated off. (Not a constant loss: there the
    # release's loss features divide rounding noise by rounding noise.)
    rising = [1.0 + 0.1 * i for i in range(10)]
    a, b = _run(zero, params, grads, rising), _run(shrink, params, grads, rising)
    for k in params:  # two compiled programs (the head's constants differ): to rounding
        np.testing.assert_allclose(a[k], b[k], rtol=1e-6, atol=1e-8)
    falling = [2.0 * 0.2**i for i in range(10)]  # r < 0: a positive head shrinks the steps
    a, b = _run(zero, params, grads, falling), _run(shrink, params, grads, falling)
    moved_a = sum(float(jnp.abs(a[k] - params[k]).sum()) for k in params)
    moved_b = sum(float(jnp.abs(b[k] - params[k]).sum()) for k in params)
    assert moved_b < 0.95 * moved_a  # the last steps shrink by exp(5 r)


def _buffer(losses, num_steps=1000):
    state = loss_timescales.loss_buffer_init(num_steps)
    for loss in losses:
        state = loss_timescales.loss_buffer_update(state, jnp.float32(loss))
    return state


def test_loss_progress_tells_memorizing_from_underfitted_runs():
    progress = loss_timescales.loss_progress
    assert float(progress(loss_timescales.loss_buffer_init(100))) == 0.0  # no loss yet
    assert float(progress(_buffer([2.0] * 50))) == pytest.approx(0.0, abs=1e-6)
    memorizing = float(progress(_buffer([2.3 * 0.97**i for i in range(300)])))
    language_model = float(progress(_buffer([5.5 - 3.2 * (1 - 0.99**i) for i in range(300)])))
    assert -1.0 <= memorizing < -0.2 and -0.05 < language_model < 0.0
    assert float(progress(_buffer([-1.0] * 20))) == 0.0  # signed losses: off
    assert float(progress(_buffer([1.0] + [1e-30] * 200))) == -1.0  # clipped


def _both_heads_theta(regime_bias, schedule_bias):
    theta = with_schedule_head(_regime_theta(regime_bias))
    w = jnp.linspace(-0.5, 0.5, 9, dtype=jnp.float32)[:, None]
    theta["rnn_params"]["schedule_step_size"] = {"w": w, "b": jnp.full((1,), schedule_bias)}
    return theta


#: Every learnopt option of CeloAdam at once (heads and weight decay).
_ALL_OPTIONS = dict(
    regime_head=True,
    schedule_head=True,
    weight_decay=0.1,
    weight_decay_by_progress=True,
    weight_decay_head=True,
    step_adaptation=0.05,
    kernel_step_mult=2.0,
    loss_smoothing=0.9,
    rms_decay_head=True,
    weight_decay_roles=("input", "hidden"),
)


def _all_heads_theta(regime_bias, schedule_bias):
    return with_rms_decay_head(
        with_weight_decay_head(_both_heads_theta(regime_bias, schedule_bias))
    )


def test_head_variants_compile_once_in_every_dtype():
    lopt = CeloAdam(**_ALL_OPTIONS)
    theta = _all_heads_theta(0.5, 0.3)
    theta["rnn_params"]["rms_decay_scale"] = {"b": jnp.full((1,), 2.0)}
    for case in conformance.DTYPE_CASES:
        result = conformance.check_conformance(lambda: lopt.opt_fn(theta), case)
        assert result.ok, (case, result)


def test_head_variants_round_trip_through_a_theta_file(tmp_path):
    lopt = CeloAdam(**_ALL_OPTIONS)
    theta = _all_heads_theta(1.0, 0.25)
    theta["rnn_params"]["weight_decay_scale"] = {"b": jnp.full((1,), -0.5)}
    theta["rnn_params"]["rms_decay_scale"] = {"b": jnp.full((1,), 1.5)}
    loaded = theta_files.load(theta_files.save(tmp_path / "t.msgpack", lopt, theta))
    rnn = loaded.theta["rnn_params"]
    assert loaded.lopt.regime_head and loaded.lopt.schedule_head
    assert loaded.lopt.weight_decay == 0.1 and loaded.lopt.weight_decay_by_progress
    assert loaded.lopt.step_adaptation == 0.05 and loaded.lopt.step_adaptation_bound == 2.0
    assert loaded.lopt.kernel_step_mult == 2.0 and loaded.lopt.loss_smoothing == 0.9
    assert tuple(loaded.lopt.weight_decay_roles) == ("input", "hidden")
    assert float(rnn["regime_step_size"]["b"][0]) == 1.0
    assert float(rnn["schedule_step_size"]["b"][0]) == 0.25
    assert float(rnn["weight_decay_scale"]["b"][0]) == -0.5
    assert loaded.lopt.rms_decay_head and float(rnn["rms_decay_scale"]["b"][0]) == 1.5
    with pytest.raises(ValueError, match="already has a regime head"):
        with_regime_head(loaded.theta)
    with pytest.raises(ValueError, match="already has a schedule head"):
        with_schedule_head(loaded.theta)
    with pytest.raises(ValueError, match="already has a weight-decay scale"):
        with_weight_decay_head(loaded.theta)
    with pytest.raises(ValueError, match="already has a second-moment decay scale"):
        with_rms_decay_head(loaded.theta)
    heads = (with_regime_head, with_schedule_head, with_weight_decay_head, with_rms_decay_head)
    for extend in heads:
        with pytest.raises(ValueError, match="not a Celo-Adam theta"):
            extend({"params": 1})


# ----------------------------------------------------- learnopt's schedule head (issue 32)


def test_schedule_head_at_zero_takes_the_released_steps_bit_for_bit():
    params, grads, losses = _pinned_case()
    released = pretrained.load("CeloAdam")
    lopt = CeloAdam(regime_head=True, schedule_head=True)
    theta = lopt.extend_theta(released.theta)  # both heads added at zero
    assert set(theta["rnn_params"]) - set(released.theta["rnn_params"]) == {
        "regime_step_size",
        "schedule_step_size",
    }
    ours = _run(lopt.opt_fn(theta), params, grads, losses)
    ref = _run(released.opt_fn(), params, grads, losses)
    for k in params:
        np.testing.assert_array_equal(ours[k], ref[k])
    fresh = CeloAdam(schedule_head=True).init(jax.random.PRNGKey(3))
    head = fresh["rnn_params"]["schedule_step_size"]
    assert head["w"].shape == (9, 1) and not any(
        bool(jnp.any(x)) for x in jax.tree_util.tree_leaves(head)
    )


def test_schedule_head_multiplies_the_step_by_a_function_of_tau():
    """The first step (tau = 0) with ``w`` on the ``s = 0.2`` input and bias ``b`` is the
    released first step times ``exp(b + w tanh(10 (0 - 0.2)))``, on every tensor."""
    params, grads, losses = _pinned_case()
    lopt = CeloAdam(schedule_head=True)
    theta = with_schedule_head(pretrained.load("CeloAdam").theta)
    zero = _run(lopt.opt_fn(theta), params, grads[:1], losses[:1])
    w = np.zeros((9, 1), np.float32)
    w[2, 0] = 0.7
    theta["rnn_params"]["schedule_step_size"] = {"w": jnp.asarray(w), "b": jnp.full((1,), 0.4)}
    moved = _run(lopt.opt_fn(theta), params, grads[:1], losses[:1])
    factor = np.exp(0.4 + 0.7 * np.tanh(10 * (0.0 - 0.2)))
    for k in params:
        np.testing.assert_allclose(
            np.asarray(moved[k] - params[k]),
            factor * np.asarray(zero[k] - params[k]),
            rtol=2e-4,
            atol=1e-9,
        )


# ------------------------------------------------ learnopt's weight decay (issue 32)


def _first_step(lopt, theta, params, grads, losses):
    return _run(lopt.opt_fn(theta), params, grads[:1], losses[:1])


def test_weight_decay_is_decoupled_and_scaled_by_the_scheduled_step():
    """First step: Adam's bias-corrected direction is ``sign(g)`` (to ``eps`` and the
    ``1e-10`` under the square root), so the released step moves most elements by the
    scheduled rate ``lr``; weight decay ``lambda`` then moves each by a further
    ``-lr lambda p`` (AdamW's decoupled form)."""
    params, grads, losses = _pinned_case()
    released = pretrained.load("CeloAdam")
    plain = _first_step(released.lopt, released.theta, params, grads, losses)
    decayed = _first_step(CeloAdam(weight_decay=0.3), released.theta, params, grads, losses)
    for k in params:
        lr = float(np.median(np.abs(np.asarray(plain[k] - params[k]))))
        assert 1e-5 < lr < 1e-2
        np.testing.assert_allclose(
            np.asarray(decayed[k] - plain[k]),
            -lr * 0.3 * np.asarray(params[k]),
            rtol=2e-3,
            atol=1e-7,  # float32 rounding of p - step at |p| up to 0.9
        )


def test_weight_decay_by_progress_acts_only_where_the_training_loss_fell():
    params, grads, _ = _pinned_case()
    released = pretrained.load("CeloAdam")
    gated = CeloAdam(weight_decay=1.0, weight_decay_by_progress=True)
    rising = [1.0 + 0.1 * i for i in range(10)]  # r = 0: no decay at all
    a = _run(released.opt_fn(), params, grads, rising)
    b = _run(gated.opt_fn(released.theta), params, grads, rising)
    for k in params:
        np.testing.assert_allclose(a[k], b[k], rtol=1e-6, atol=1e-8)
    falling = [2.0 * 0.2**i for i in range(10)]  # r < 0: the weights shrink
    a = _run(released.opt_fn(), params, grads, falling)
    b = _run(gated.opt_fn(released.theta), params, grads, falling)
    norm = lambda tree: sum(float(jnp.sum(jnp.square(x))) for x in tree.values())  # noqa: E731
    assert norm(b) < 0.999 * norm(a)


def test_weight_decay_head_multiplies_the_decay_by_exp_of_its_value():
    params, grads, losses = _pinned_case()
    released = pretrained.load("CeloAdam")
    theta = CeloAdam(weight_decay=0.05, weight_decay_head=True).extend_theta(released.theta)
    assert float(theta["rnn_params"]["weight_decay_scale"]["b"][0]) == 0.0
    theta["rnn_params"]["weight_decay_scale"] = {"b": jnp.full((1,), np.log(4.0), jnp.float32)}
    headed = _run(
        CeloAdam(weight_decay=0.05, weight_decay_head=True).opt_fn(theta), params, grads, losses
    )
    plain = _run(CeloAdam(weight_decay=0.2).opt_fn(released.theta), params, grads, losses)
    for k in params:
        np.testing.assert_allclose(headed[k], plain[k], rtol=1e-5, atol=1e-7)


def test_weight_decay_roles_decay_only_the_tensors_of_those_roles():
    """``("input",)`` on an MLP: the first matrix (it reads the data) moves as under
    full decay, the hidden and output matrices and the bias as without decay."""
    rng = np.random.default_rng(3)
    shapes = {"w0": (6, 8), "b0": (8,), "w1": (8, 8), "w2": (8, 3)}
    params = {k: jnp.asarray(rng.normal(size=s) * 0.3, jnp.float32) for k, s in shapes.items()}
    grads = [
        {k: jnp.asarray(rng.normal(size=s) * 0.1, jnp.float32) for k, s in shapes.items()}
        for _ in range(5)
    ]
    losses = [2.0 * 0.5**i for i in range(5)]
    theta = pretrained.load("CeloAdam").theta
    plain = _run(CeloAdam().opt_fn(theta), params, grads, losses)
    full = _run(CeloAdam(weight_decay=0.5).opt_fn(theta), params, grads, losses)
    inputs = CeloAdam(weight_decay=0.5, weight_decay_roles=["input"])
    only = _run(inputs.opt_fn(theta), params, grads, losses)
    assert inputs.weight_decay_roles == ("input",)
    assert float(jnp.max(jnp.abs(full["w0"] - plain["w0"]))) > 1e-4  # decay moved it
    np.testing.assert_allclose(only["w0"], full["w0"], rtol=1e-6, atol=1e-8)
    for k in ("b0", "w1", "w2"):
        np.testing.assert_allclose(only[k], plain[k], rtol=1e-6, atol=1e-8)
    hidden = _run(
        CeloAdam(weight_decay=0.5, weight_decay_roles=("hidden", "output")).opt_fn(theta),
        params,
        grads,
        losses,
    )
    np.testing.assert_allclose(hidden["w0"], plain["w0"], rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(hidden["w2"], full["w2"], rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(weight_decay_roles=("input",)), "give weight_decay > 0"),
        (dict(weight_decay=0.1, weight_decay_roles=()), "non-empty list of roles"),
        (dict(weight_decay=0.1, weight_decay_roles="input"), "non-empty list of roles"),
        (dict(weight_decay=0.1, weight_decay_roles=("inputs",)), r"\['inputs'\] are not roles"),
        (dict(weight_decay=-0.1), "weight_decay must be >= 0"),
        (dict(weight_decay=float("nan")), "weight_decay must be >= 0"),
        (dict(weight_decay=float("inf")), "weight_decay must be >= 0 and finite"),
        (dict(weight_decay_by_progress=True), "give weight_decay > 0"),
        (dict(weight_decay_head=True), "give weight_decay > 0"),
    ],
)
def test_bad_weight_decay_options_are_errors_naming_them(kwargs, match):
    with pytest.raises(ValueError, match=match):
        CeloAdam(**kwargs)


# ------------------------------------ learnopt's hypergradient step adaptation (issue 32)


def _equal_magnitude_case(signs):
    """Gradients of equal magnitude everywhere, each step's sign given: Adam's last
    direction ``m / (sqrt(v) + eps)`` is then exactly parallel (or opposite) to them."""
    params = {"w": jnp.full((4, 3), 0.5, jnp.float32), "b": jnp.zeros((3,), jnp.float32)}
    grads = [
        jax.tree_util.tree_map(lambda p, s=s: jnp.full(p.shape, 0.1 * s), params) for s in signs
    ]
    return params, grads, [2.0 * 0.9**i for i in range(len(signs))]


def _states(opt, params, grads, losses):
    state = opt.init(params, num_steps=20)
    update = jax.jit(lambda s, g, loss: opt.update(s, g, loss=loss))
    states = [state]
    for g, loss in zip(grads, losses, strict=True):
        states.append(update(states[-1], g, jnp.float32(loss)))
    return states


def test_step_adaptation_moves_each_tensors_log_step_by_beta_times_the_cosine():
    """Hypergradient descent's multiplicative form: the first step has no last direction
    (cosine 0, the released step); a gradient along the last step raises every tensor's
    log multiplier by ``beta``, one against it lowers it by ``beta``; the bound holds."""
    released = pretrained.load("CeloAdam")
    params, grads, losses = _equal_magnitude_case([1, 1, -1])
    adapted = _states(CeloAdam(step_adaptation=0.3).opt_fn(released.theta), params, grads, losses)
    plain = _states(released.opt_fn(), params, grads, losses)
    logs = [np.asarray(s.log_step_adaptation) for s in adapted]
    np.testing.assert_array_equal(logs[1], 0.0)
    np.testing.assert_allclose(logs[2], 0.3, rtol=1e-5)
    np.testing.assert_allclose(logs[3], 0.0, atol=1e-5)
    np.testing.assert_array_equal(np.asarray(plain[-1].log_step_adaptation), 0.0)
    for k in params:  # step 1 is the release's; step 2 is e^0.3 times it
        np.testing.assert_array_equal(adapted[1].params[k], plain[1].params[k])
        np.testing.assert_allclose(
            adapted[1].params[k] - adapted[2].params[k],
            np.exp(0.3) * (plain[1].params[k] - plain[2].params[k]),
            rtol=1e-4,
        )
    bounded = _states(
        CeloAdam(step_adaptation=5.0, step_adaptation_bound=1.0).opt_fn(released.theta),
        *_equal_magnitude_case([1, 1, 1, -1, -1]),
    )
    np.testing.assert_allclose(np.asarray(bounded[3].log_step_adaptation), 1.0)
    np.testing.assert_allclose(np.asarray(bounded[5].log_step_adaptation), -1.0)


def test_kernel_step_mult_multiplies_only_the_rank_4_tensors_steps():
    params, grads, losses = _pinned_case()
    released = pretrained.load("CeloAdam")
    plain = _first_step(released.lopt, released.theta, params, grads, losses)
    kernels = _first_step(CeloAdam(kernel_step_mult=3.0), released.theta, params, grads, losses)
    for k in ("bias", "dense"):
        np.testing.assert_array_equal(kernels[k], plain[k])
    np.testing.assert_allclose(
        kernels["conv"] - params["conv"],
        3.0 * (plain["conv"] - params["conv"]),
        rtol=1e-4,
        atol=2e-7,  # float32 rounding of p - step at |p| up to 0.9
    )
    for value in (0.0, -1.0, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="kernel_step_mult must be > 0"):
            CeloAdam(kernel_step_mult=value)


@pytest.mark.parametrize("arg", ["step_adaptation", "step_adaptation_bound"])
def test_negative_step_adaptation_options_are_errors_naming_them(arg):
    for value in (-0.1, float("nan"), float("inf")):
        with pytest.raises(ValueError, match=f"{arg} must be >= 0 and finite"):
            CeloAdam(**{arg: value})


# ------------------------------------------------ learnopt's loss smoothing (issue 32)


def test_loss_smoothing_feeds_the_scheduler_the_bias_corrected_running_mean():
    """The same steps as the release given, as its losses, the running mean
    ``e / (1 - k^t)`` of the minibatch losses; the first step is the release's."""
    params, grads, _ = _pinned_case()
    losses = [3.0, 1.0, 2.5, 0.5, 2.0, 1.5, 0.7, 2.2, 1.1, 0.9]  # noisy, as on mixed text
    k = 0.8
    ema, means = 0.0, []
    for i, loss in enumerate(losses):
        ema = k * ema + (1 - k) * loss
        means.append(ema / (1 - k ** (i + 1)))
    released = pretrained.load("CeloAdam")
    smoothed = _states(CeloAdam(loss_smoothing=k).opt_fn(released.theta), params, grads, losses)
    on_means = _states(released.opt_fn(), params, grads, means)
    on_losses = _states(released.opt_fn(), params, grads, losses)
    for key in params:
        np.testing.assert_array_equal(smoothed[1].params[key], on_losses[1].params[key])
        np.testing.assert_allclose(
            smoothed[-1].params[key], on_means[-1].params[key], rtol=1e-5, atol=1e-6
        )
        assert not np.allclose(smoothed[-1].params[key], on_losses[-1].params[key], atol=1e-6)
    np.testing.assert_allclose(float(smoothed[-1].smoothed_loss), ema, rtol=1e-5)
    assert float(on_losses[-1].smoothed_loss) == 0.0  # unused without the option
    for value in (-0.1, 1.0, float("nan")):
        with pytest.raises(ValueError, match="loss_smoothing must be in"):
            CeloAdam(loss_smoothing=value)


# ------------------------------------ learnopt's second-moment decay head (issue 32)


def test_rms_decay_head_at_zero_is_the_release_and_at_log10_is_b2_099():
    """A zero head is the release bit for bit; ``b = log 10`` makes ``1 - b2`` ten times
    larger, the same steps as ``CeloAdam(initial_rms_decays=(0.99,))`` (moments and bias
    correction alike); a huge head is clipped at ``b2 = 0.5``."""
    params, grads, losses = _pinned_case()
    released = pretrained.load("CeloAdam")
    lopt = CeloAdam(rms_decay_head=True)
    theta = lopt.extend_theta(released.theta)
    assert set(theta["rnn_params"]) - set(released.theta["rnn_params"]) == {"rms_decay_scale"}
    ref = _run(released.opt_fn(), params, grads, losses)
    for k, v in _run(lopt.opt_fn(theta), params, grads, losses).items():
        np.testing.assert_array_equal(v, ref[k])
    theta["rnn_params"]["rms_decay_scale"] = {"b": jnp.full((1,), np.log(10.0), jnp.float32)}
    headed = _run(lopt.opt_fn(theta), params, grads, losses)
    b2 = _run(CeloAdam(initial_rms_decays=(0.99,)).opt_fn(released.theta), params, grads, losses)
    for k in params:
        np.testing.assert_allclose(headed[k], b2[k], rtol=1e-5, atol=1e-6)
        assert not np.allclose(headed[k], ref[k], atol=1e-6)
    theta["rnn_params"]["rms_decay_scale"] = {"b": jnp.full((1,), 50.0)}
    clipped = _run(lopt.opt_fn(theta), params, grads, losses)
    half = _run(CeloAdam(initial_rms_decays=(0.5,)).opt_fn(released.theta), params, grads, losses)
    for k in params:
        np.testing.assert_allclose(clipped[k], half[k], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("arg", ["initial_momentum_decays", "initial_rms_decays"])
def test_decays_outside_0_1_are_errors_naming_them(arg):
    """A decay of 1 made the bias correction 1 - b^t zero: NaN steps, silently."""
    for value in ((1.0,), (0.9, 1.5), (-0.1,), (float("nan"),)):
        with pytest.raises(ValueError, match=f"{arg} must each be in"):
            CeloAdam(**{arg: value})
    assert tuple(getattr(CeloAdam(**{arg: (0.0, 0.99)}), arg)) == (0.0, 0.99)


def test_loss_buffer_decays_are_the_float64_formula_rounded_once():
    """Computed eagerly in float32, the first ``opt.init`` of a process and the later ones
    differed in the last bit of a decay, and constant losses made that two different runs."""
    for steps in (20, 1000, 10_000):
        halflife = np.logspace(1.0, np.log10(np.float32(steps)), 10)
        expected = np.exp(-1.0 / halflife).astype(np.float32)
        np.testing.assert_array_equal(loss_timescales.loss_buffer_init(steps).decays, expected)
    traced = jax.jit(loss_timescales.loss_buffer_init)(20).decays  # a traced run length
    np.testing.assert_allclose(traced, loss_timescales.loss_buffer_init(20).decays, rtol=1e-6)
    opt = pretrained.load("CeloAdam").opt_fn()
    first, second = (opt.init({"w": jnp.ones(3)}, num_steps=20) for _ in range(2))
    for a, b in zip(
        jax.tree_util.tree_leaves(first), jax.tree_util.tree_leaves(second), strict=True
    ):
        np.testing.assert_array_equal(a, b)


def test_a_checkpoint_from_before_smoothed_loss_is_refused_naming_the_field(tmp_path, request):
    """A run checkpointed with CeloAdam inner states before ``smoothed_loss`` existed (stop
    50 added it) cannot resume silently with a made-up value: the restore names it."""
    import flax.serialization

    from learnopt import checkpoints

    params, _, _ = _pinned_case()
    opt = pretrained.load("CeloAdam").opt_fn()
    state = opt.init(params, num_steps=20)
    old = flax.serialization.to_state_dict(state)
    del old["smoothed_loss"]
    ck = checkpoints.RunCheckpointer(tmp_path / "checkpoints")
    request.addfinalizer(ck.close)
    ck.save(3, old, {"note": "older layout"})
    with pytest.raises(checkpoints.CheckpointError, match=r"missing \['smoothed_loss'\]"):
        ck.restore(state)
    ck.save(4, flax.serialization.to_state_dict(state), {})  # today's layout restores
    restored, meta = ck.restore(state, step=4)
    assert meta["step"] == 4
    np.testing.assert_array_equal(restored.smoothed_loss, state.smoothed_loss)
