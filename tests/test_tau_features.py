"""Fraction-of-training inputs (``tau = t / T``) and ScheduledAdam.

* ScheduledAdam at its initial theta is ``optax.adam`` step for step; once its schedule
  MLP's output layer is non-zero, its steps depend on ``tau``; each tensor kind has its
  own offset; it refuses to run without a run length.
* Each architecture's ``tau_features`` option: with it on, the same state at the same
  step gives a different update for a different ``num_steps`` (tau reaches the
  network); with it off, ``num_steps`` changes nothing (the library's maths; the
  architectures' own tests check that maths against references).
* MLPLOpt's ``param_scale_steps``: the step is the plain step times ``rms(p) + floor``.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from learnopt.learned_optimizers import base as lopt_base
from learnopt.learned_optimizers import mlp_lopt, scheduled_adam
from learnopt.learned_optimizers.blocks import progress

# A bias, a matrix, an embedding table and a conv kernel (one of each tensor kind).
SHAPES = {"b": (3,), "w": (4, 3), "embed": {"table": (5, 2)}, "conv": (2, 2, 1, 3)}


def _tree(seed, scale=1.0):
    rng = np.random.default_rng(seed)
    return jax.tree_util.tree_map(
        lambda s: jnp.asarray(scale * rng.standard_normal(s), jnp.float32),
        SHAPES,
        is_leaf=lambda x: isinstance(x, tuple),
    )


def _grads(steps):
    return [_tree(100 + i) for i in range(steps)]


def _max_diff(a, b):
    return max(
        float(np.max(np.abs(np.asarray(x) - np.asarray(y))))
        for x, y in zip(jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b), strict=True)
    )


# ------------------------------------------------------------------------- the embedding


def test_tau_embedding_values_at_the_start_and_end_of_training():
    start = np.asarray(progress.tau_embedding(jnp.int32(0), jnp.int32(50)))
    np.testing.assert_allclose(start, [0, 0, 1, 0, 1, 0, 0], atol=1e-6)
    end = np.asarray(progress.tau_embedding(jnp.int32(50), jnp.int32(50)))
    np.testing.assert_allclose(end, [1, 1, -1, 0, 1, 0, 1], atol=1e-6)
    half = np.asarray(progress.tau_embedding(jnp.int32(25), jnp.int32(50)))
    np.testing.assert_allclose(half[:6], [0.5, 0.25, 0, 1, -1, 0], atol=1e-6)
    # Past the end (random initial offsets in meta-training) it stays at the end.
    np.testing.assert_allclose(progress.tau_embedding(jnp.int32(80), jnp.int32(50)), end)
    assert start.shape == (progress.NUM_TAU_FEATURES,)


def test_resolve_num_steps_needs_a_run_length():
    with pytest.raises(ValueError, match="num_steps"):
        progress.resolve_num_steps(None, None, "X")
    assert int(progress.resolve_num_steps(None, 7, "X")) == 7
    assert progress.resolve_num_steps(12, None, "X").dtype == jnp.int32


# --------------------------------------------------------------------------- ScheduledAdam


@pytest.fixture(scope="module")
def sched():
    """ScheduledAdam and one compiled unroll: ``(theta, params, num_steps, grads) ->
    params after each step`` (stacked)."""
    lopt = scheduled_adam.ScheduledAdam(initial_lr=3e-2, initial_beta1=0.8, initial_beta2=0.99)

    @jax.jit
    def run(theta, params, num_steps, grads):
        opt = lopt.opt_fn(theta)
        state = opt.init(params, num_steps=num_steps)

        def body(s, g):
            s = opt.update(s, g)
            return s, opt.get_params(s)

        return jax.lax.scan(body, state, grads)[1]

    return lopt, run


def _stacked(grads):
    return jax.tree_util.tree_map(lambda *xs: jnp.stack(xs), *grads)


def test_scheduled_adam_at_its_initial_theta_is_optax_adam(sched):
    lopt, run = sched
    theta = lopt.init(jax.random.PRNGKey(0))
    params, grads = _tree(0), _grads(6)
    got = run(theta, params, jnp.int32(6), _stacked(grads))
    tx = optax.adam(3e-2, b1=0.8, b2=0.99, eps=1e-8)
    ref, tx_state = params, tx.init(params)
    for i, g in enumerate(grads):
        updates, tx_state = tx.update(g, tx_state, ref)
        ref = optax.apply_updates(ref, updates)
        step_i = jax.tree_util.tree_map(lambda x: x[i], got)  # noqa: B023
        for a, b in zip(
            jax.tree_util.tree_leaves(step_i), jax.tree_util.tree_leaves(ref), strict=True
        ):
            np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-5, atol=1e-7)
    assert _max_diff(jax.tree_util.tree_map(lambda x: x[-1], got), params) > 0.05  # it moved


def test_as_optax_passes_the_run_length_to_optimizers_that_read_tau(sched):
    lopt, _ = sched
    theta = lopt.init(jax.random.PRNGKey(0))
    params = _tree(0)
    tx = lopt.as_optax(theta, num_steps=6)
    updates, _ = tx.update(_grads(1)[0], tx.init(params), params)
    ref = optax.adam(3e-2, b1=0.8, b2=0.99, eps=1e-8)
    expected, _ = ref.update(_grads(1)[0], ref.init(params), params)
    leaves = jax.tree_util.tree_leaves
    for a, b in zip(leaves(updates), leaves(expected), strict=True):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-5, atol=1e-7)
    with pytest.raises(ValueError, match="num_steps"):
        lopt.as_optax(theta).init(params)


def test_scheduled_adam_steps_depend_on_tau_once_the_schedule_is_learned(sched):
    lopt, run = sched
    theta = lopt.init(jax.random.PRNGKey(0))
    params, grads = _tree(0), _stacked(_grads(3))
    # At the initial theta the run length does not matter (s(tau) = 0).
    assert (
        _max_diff(
            run(theta, params, jnp.int32(3), grads), run(theta, params, jnp.int32(300), grads)
        )
        == 0
    )
    head = theta["schedule"]["mlp/~/linear_1"]
    learned = {**theta, "schedule": {**theta["schedule"], "mlp/~/linear_1": {
        "w": jnp.full_like(head["w"], 0.5), "b": head["b"]}}}  # fmt: skip
    short = run(learned, params, jnp.int32(3), grads)
    long = run(learned, params, jnp.int32(300), grads)
    assert _max_diff(short, long) > 1e-3


def test_scheduled_adam_kind_offsets_scale_only_their_kind(sched):
    lopt, run = sched
    theta = lopt.init(jax.random.PRNGKey(0))
    params, grads = _tree(0), _stacked(_grads(1))
    base = jax.tree_util.tree_map(lambda x: x[-1], run(theta, params, jnp.int32(5), grads))
    kinds = scheduled_adam.TENSOR_KINDS
    offsets = jnp.zeros((len(kinds),)).at[kinds.index("embedding")].set(np.log(2.0))
    moved = run({**theta, "kind_offsets": offsets}, params, jnp.int32(5), grads)
    moved = jax.tree_util.tree_map(lambda x: x[-1], moved)
    for key in ("b", "w", "conv"):
        np.testing.assert_array_equal(np.asarray(moved[key]), np.asarray(base[key]))
    d_base = np.asarray(base["embed"]["table"]) - np.asarray(params["embed"]["table"])
    d_moved = np.asarray(moved["embed"]["table"]) - np.asarray(params["embed"]["table"])
    np.testing.assert_allclose(d_moved, 2 * d_base, rtol=1e-5, atol=1e-8)


def test_scheduled_adam_tensor_kinds_and_arguments():
    kind = lambda tree: jax.tree_util.tree_map_with_path(  # noqa: E731
        lambda path, x: scheduled_adam.TENSOR_KINDS[scheduled_adam.tensor_kind(path, x.shape)],
        tree,
    )
    kinds = kind(jax.tree_util.tree_map(np.zeros, SHAPES, is_leaf=lambda x: isinstance(x, tuple)))
    assert kinds == {"b": "vector", "w": "matrix", "embed": {"table": "embedding"}, "conv": "conv"}
    assert scheduled_adam.tensor_kind((), ()) == 0
    lopt = scheduled_adam.ScheduledAdam()
    assert lopt.initial_lr == 1e-3
    theta = lopt.init(jax.random.PRNGKey(0))
    assert np.isclose(np.exp(float(theta["log_lr"])), 1e-3)
    assert float(jax.nn.sigmoid(theta["beta2_logit"])) == pytest.approx(0.999, abs=1e-6)
    with pytest.raises(ValueError, match="num_steps"):
        lopt.opt_fn(theta).init(_tree(0))
    with pytest.raises(ValueError, match="initial_lr"):
        scheduled_adam.ScheduledAdam(initial_lr=-1.0)
    assert "ScheduledAdam" in lopt_base.registered_learned_optimizers()


@pytest.fixture(scope="module")
def sched_options():
    """ScheduledAdam with the warmup-cosine prior and the per-tensor network, one unroll."""
    lopt = scheduled_adam.ScheduledAdam(
        initial_lr=3e-2, schedule_prior="warmup_cosine", warmup_fraction=0.25, tensor_features=True
    )

    @jax.jit
    def run(theta, params, num_steps, grads):
        opt = lopt.opt_fn(theta)
        state = opt.init(params, num_steps=num_steps)
        return jax.lax.scan(lambda s, g: (opt.update(s, g), opt.get_params(opt.update(s, g))),
                            state, grads)[1]  # fmt: skip

    return lopt, run


def test_scheduled_adam_with_the_cosine_prior_is_adam_warmup_cosine_at_init(sched_options):
    from learnopt.optimizers import nadamw

    lopt, run = sched_options
    theta = lopt.init(jax.random.PRNGKey(0))
    assert set(theta) >= {"tensor_mlp", "schedule"}
    params, grads = _tree(0), _grads(8)
    got = run(theta, params, jnp.int32(8), _stacked(grads))
    ref_opt = nadamw.adam_warmup_cosine(3e-2, warmup_fraction=0.25)
    state = ref_opt.init(params, num_steps=8)
    for i, g in enumerate(grads):
        state = ref_opt.update(state, g)
        step_i = jax.tree_util.tree_map(lambda x: x[i], got)  # noqa: B023
        leaves = jax.tree_util.tree_leaves
        for a, b in zip(leaves(step_i), leaves(ref_opt.get_params(state)), strict=True):
            np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-5, atol=1e-7)
    first = jax.tree_util.tree_map(lambda x: x[0], got)
    assert _max_diff(first, params) == 0  # the warmup's first step is zero
    assert _max_diff(jax.tree_util.tree_map(lambda x: x[-1], got), params) > 0.01
    # The last step of a run is (nearly) zero: cosine to zero at T.
    last_two = jax.tree_util.tree_map(lambda x: x[-2:], got)
    steps = [np.abs(np.asarray(x[1]) - np.asarray(x[0])).max() for x in leaves(last_two)]
    assert max(steps) < 2e-3


def test_scheduled_adam_without_a_learned_schedule_is_the_prior_with_per_kind_steps():
    from learnopt.optimizers import nadamw

    lopt = scheduled_adam.ScheduledAdam(
        initial_lr=3e-2, schedule_prior="warmup_cosine", warmup_fraction=0.25, learn_schedule=False
    )
    theta = lopt.init(jax.random.PRNGKey(0))
    assert set(theta) == {"beta1_logit", "beta2_logit", "kind_offsets", "log_epsilon", "log_lr"}
    assert sum(np.size(x) for x in jax.tree_util.tree_leaves(theta)) == 8
    params, grads = _tree(0), _grads(8)

    @jax.jit
    def run(theta):
        opt = lopt.opt_fn(theta)
        state = opt.init(params, num_steps=8)
        return jax.lax.scan(lambda s, g: (opt.update(s, g),) * 2, state, _stacked(grads))[1]

    ref_opt = nadamw.adam_warmup_cosine(3e-2, warmup_fraction=0.25)
    ref = ref_opt.init(params, num_steps=8)
    got = run(theta)
    leaves = jax.tree_util.tree_leaves
    for i, g in enumerate(grads):
        ref = ref_opt.update(ref, g)
        step_i = jax.tree_util.tree_map(lambda x: x[i], lopt.opt_fn(theta).get_params(got))  # noqa: B023
        for a, b in zip(leaves(step_i), leaves(ref_opt.get_params(ref)), strict=True):
            np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-5, atol=1e-7)
    # The matrix kind's offset scales the matrices' steps alone, at every step.
    kind = scheduled_adam.TENSOR_KINDS.index("matrix")
    shifted = dict(theta, kind_offsets=theta["kind_offsets"].at[kind].set(np.log(2.0)))
    moved = lopt.opt_fn(theta).get_params(run(shifted))
    base = lopt.opt_fn(theta).get_params(got)
    flat = jax.tree_util.tree_flatten_with_path(params)[0]
    for (path, p0), a, b in zip(flat, leaves(moved), leaves(base), strict=True):
        step_a, step_b = np.asarray(a[1]) - np.asarray(p0), np.asarray(b[1]) - np.asarray(p0)
        factor = 2.0 if scheduled_adam.tensor_kind(path, np.shape(p0)) == kind else 1.0
        np.testing.assert_allclose(step_a, factor * step_b, rtol=1e-4, atol=1e-7)


def test_scheduled_adam_tensor_features_move_each_tensor_by_its_own_statistics(sched_options):
    lopt, run = sched_options
    theta = lopt.init(jax.random.PRNGKey(0))
    params, grads = _tree(0), _stacked(_grads(6))
    base = jax.tree_util.tree_map(lambda x: x[-1], run(theta, params, jnp.int32(6), grads))
    head = theta["tensor_mlp"]["mlp/~/linear_1"]
    learned = {**theta, "tensor_mlp": {**theta["tensor_mlp"], "mlp/~/linear_1": {
        "w": jnp.full_like(head["w"], 0.5), "b": head["b"]}}}  # fmt: skip
    moved = jax.tree_util.tree_map(lambda x: x[-1], run(learned, params, jnp.int32(6), grads))
    ratios = []
    for k in ("b", "w", "conv"):
        d0 = np.asarray(base[k]) - np.asarray(params[k])
        d1 = np.asarray(moved[k]) - np.asarray(params[k])
        assert np.abs(d1 - d0).max() > 1e-6
        ratios.append(np.linalg.norm(d1) / np.linalg.norm(d0))
    assert np.ptp(ratios) > 1e-3  # a per-tensor offset, not one global factor
    phi = scheduled_adam.tensor_features(
        jnp.ones((3, 2)), jnp.ones((3, 2)), jnp.ones((3, 2)), 1, jnp.zeros(7)
    )
    assert phi.shape == (scheduled_adam.NUM_TENSOR_FEATURES,)
    np.testing.assert_allclose(np.asarray(phi[7:10]), [1.0, 0.0, np.log10(6) / 6], atol=1e-5)
    with pytest.raises(ValueError, match="schedule_prior"):
        scheduled_adam.ScheduledAdam(schedule_prior="linear")
    with pytest.raises(ValueError, match="warmup_fraction"):
        scheduled_adam.ScheduledAdam(warmup_fraction=1.0)


# ------------------------------------------------------------- tau options of the others

SMALL_PARAMS = {"w": (4, 3), "b": (3,)}

#: name -> (constructor arguments, theta tweak making the tau path visible).
TAU_CASES = {
    "MLPLOpt": dict(hidden_size=4, step_mult=0.03, exp_mult=0.1),
    "AdafacMLPLOpt": dict(hidden_size=4, step_mult=0.03, exp_mult=0.1),
    "MLPNomLOpt": dict(hidden_size=4, step_mult=0.03, exp_mult=(0.1, 0.1, 0.1)),
    "RNNMLPLOpt": dict(
        hidden_size=4, lstm_hidden_size=4, from_mlp_size=2, from_lstm_size=2, lstm_to_ff=2
    ),
    "HyperV2": dict(lstm_hidden_size=4, param_inits=4),
    "NNAdam": dict(),
}


def _nonzero_controls(name, theta):
    """NNAdam's control layer starts at zero (its LSTM cannot act yet): make it act."""
    if name != "NNAdam":
        return theta
    layer = theta["rnn_to_controls_params"]["rnn_to_controls"]
    w = jax.random.normal(jax.random.PRNGKey(5), layer["w"].shape) * 0.5
    return {**theta, "rnn_to_controls_params": {"rnn_to_controls": {**layer, "w": w}}}


def _one_update(lopt, theta):
    """A compiled ``num_steps -> state after one update at step 5``."""
    params = jax.tree_util.tree_map(
        lambda s: jnp.asarray(np.random.default_rng(1).standard_normal(s), jnp.float32),
        SMALL_PARAMS,
        is_leaf=lambda x: isinstance(x, tuple),
    )
    grads = jax.tree_util.tree_map(lambda p: 0.3 * p + 0.1, params)

    @jax.jit
    def update(num_steps):
        opt = lopt.opt_fn(theta)
        state = opt.init(params, num_steps=num_steps)
        state = state.replace(iteration=jnp.asarray(5, jnp.int32))
        out = opt.update(state, grads, loss=jnp.float32(1.5))
        # NNAdam's LSTM steers the next step's hyperparameters.
        return {"params": out.params, "next": getattr(out, "per_layer_lr", out.params)}

    return update


@pytest.mark.parametrize("name", list(TAU_CASES))
def test_tau_option_reaches_the_network(name):
    on = lopt_base.get_learned_optimizer(f"{name}_tau", **TAU_CASES[name])
    assert on.tau_features and on.name == f"{name}_tau"
    off = lopt_base.get_learned_optimizer(name, **TAU_CASES[name])
    assert not off.tau_features
    shapes = lambda lo: jax.tree_util.tree_leaves(  # noqa: E731
        jax.tree_util.tree_map(lambda s: s.size, jax.eval_shape(lo.init, jax.random.PRNGKey(0)))
    )
    assert sum(shapes(on)) > sum(shapes(off))  # the tau inputs have their own weights
    theta = _nonzero_controls(name, on.init(jax.random.PRNGKey(0)))
    update = _one_update(on, theta)
    short, long = update(jnp.int32(10)), update(jnp.int32(1000))
    assert _max_diff(short, long) > 1e-7, f"{name}_tau: num_steps does not reach the update"
    assert all(np.all(np.isfinite(np.asarray(x))) for x in jax.tree_util.tree_leaves(short))


@pytest.mark.parametrize("name", [n for n in TAU_CASES if n != "HyperV2"])
def test_without_the_option_num_steps_changes_nothing(name):
    # (HyperV2's LSTM reads t / T in the library's own design.)
    off = lopt_base.get_learned_optimizer(name, **TAU_CASES[name])
    theta = _nonzero_controls(name, off.init(jax.random.PRNGKey(0)))
    update = _one_update(off, theta)
    assert _max_diff(update(jnp.int32(10)), update(jnp.int32(1000))) == 0


def test_tau_option_needs_a_run_length():
    lopt = mlp_lopt.MLPLOpt(hidden_size=4, tau_features=True)
    opt = lopt.opt_fn(lopt.init(jax.random.PRNGKey(0)))
    params = {"w": jnp.ones((2, 2))}
    with pytest.raises(ValueError, match="MLPLOpt.*num_steps"):
        opt.init(params)
    with_default = mlp_lopt.MLPLOpt(hidden_size=4, tau_features=True, default_num_steps=50)
    state = with_default.opt_fn(with_default.init(jax.random.PRNGKey(0))).init(params)
    assert int(state.num_steps) == 50
    # Off: the state has no num_steps leaf (the library's state).
    plain = mlp_lopt.MLPLOpt(hidden_size=4)
    assert plain.opt_fn(plain.init(jax.random.PRNGKey(0))).init(params).num_steps is None


# ---------------------------------------------------------------- MLPLOpt's param scale


def test_mlp_lopt_param_scale_steps_multiply_by_rms_plus_floor():
    kwargs = dict(hidden_size=4, step_mult=0.03, exp_mult=0.1, compute_summary=False)
    plain = mlp_lopt.MLPLOpt(**kwargs)
    scaled = mlp_lopt.MLPLOpt(**kwargs, param_scale_steps=True, param_scale_floor=0.01)
    theta = plain.init(jax.random.PRNGKey(0))
    params = {"w": 3.0 * _tree(0)["w"], "b": jnp.zeros((3,))}  # a zero bias: floor only
    grads = {"w": _tree(1)["w"], "b": _tree(1)["b"]}

    @jax.jit
    def steps(theta):
        out = []
        for lopt in (plain, scaled):
            opt = lopt.opt_fn(theta)
            new = opt.get_params(opt.update(opt.init(params), grads))
            out.append(jax.tree_util.tree_map(lambda n, p: n - p, new, params))
        return out

    d_plain, d_scaled = steps(theta)
    rms_w = float(np.sqrt(np.mean(np.square(np.asarray(params["w"])))))
    np.testing.assert_allclose(d_scaled["w"], d_plain["w"] * (rms_w + 0.01), rtol=1e-4)
    np.testing.assert_allclose(d_scaled["b"], d_plain["b"] * 0.01, rtol=1e-4, atol=1e-12)
    assert np.max(np.abs(d_plain["b"])) > 0


def test_scheduled_adam_offset_kinds_share_an_offset_and_the_config_round_trips(tmp_path):
    from learnopt.learned_optimizers import theta_files

    shared = ("vector", "matrix", "matrix", "matrix")
    lopt = scheduled_adam.ScheduledAdam(learn_schedule=False, offset_kinds=shared)
    theta = lopt.init(jax.random.PRNGKey(0))
    theta = dict(theta, kind_offsets=jnp.asarray([0.5, 1.0, 7.0, -3.0], jnp.float32))
    got = np.asarray(lopt.log_step_sizes(theta, jnp.int32(0), jnp.int32(10)))
    np.testing.assert_allclose(got - float(theta["log_lr"]), [0.5, 1.0, 1.0, 1.0], rtol=1e-6)
    own = scheduled_adam.ScheduledAdam(learn_schedule=False)  # the default: each its own
    got = np.asarray(own.log_step_sizes(theta, jnp.int32(0), jnp.int32(10)))
    np.testing.assert_allclose(got - float(theta["log_lr"]), [0.5, 1.0, 7.0, -3.0], rtol=1e-6)
    path = theta_files.save(tmp_path / "t.msgpack", lopt, theta)
    assert theta_files.load(path).lopt.offset_kinds == shared
    with pytest.raises(ValueError, match="offset_kinds"):
        scheduled_adam.ScheduledAdam(offset_kinds=("vector", "matrix", "conv", "kernel"))
