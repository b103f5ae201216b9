"""Unit tests of the built-in optimizers, the Optimizer base class and its helpers."""

from __future__ import annotations

from typing import Any

import flax.struct
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from learnopt.learned_optimizers import base as lopt_base
from learnopt.optimizers import base as opt_base
from learnopt.optimizers import optax_opts, test_utils
from learnopt.testing import TraceCounter
from learnopt.tree_utils import tree_map_multi


def _params():
    return {"w": jnp.asarray([[0.5, -1.0], [2.0, 0.25]]), "b": jnp.asarray([0.1, -0.3])}


def _grads_seq(n=5, seed=0):
    rng = np.random.default_rng(seed)
    return [
        {"w": jnp.asarray(rng.normal(size=(2, 2)), jnp.float32),
         "b": jnp.asarray(rng.normal(size=(2,)), jnp.float32)}
        for _ in range(n)
    ]  # fmt: skip


def _run_learnopt(opt, grads_seq):
    state = opt.init(_params())
    for g in grads_seq:
        state = opt.update(state, g, 1.0)
    return opt.get_params(state)


def _run_optax(tx, grads_seq):
    params = _params()
    state = tx.init(params)
    for g in grads_seq:
        updates, state = tx.update(g, state, params)
        params = optax.apply_updates(params, updates)
    return params


def _assert_trees_close(a, b, rtol=1e-5, atol=1e-6):
    jax.tree_util.tree_map(
        lambda x, y: np.testing.assert_allclose(np.asarray(x), np.asarray(y), rtol, atol), a, b
    )


# --- hand-computed first steps -------------------------------------------------------


def test_sgd_step_by_hand():
    opt = opt_base.SGD(learning_rate=0.1)
    state = opt.update(opt.init({"a": 1.0}), {"a": 2.0}, 0.0)
    np.testing.assert_allclose(opt.get_params(state)["a"], 1.0 - 0.1 * 2.0)
    assert int(state.iteration) == 1


def test_sgdm_steps_by_hand():
    opt = opt_base.SGDM(learning_rate=0.1, momentum=0.9)
    state = opt.init({"a": 1.0})
    state = opt.update(state, {"a": 2.0}, 0.0)  # m = 2, p = 1 - 0.2
    state = opt.update(state, {"a": 1.0}, 0.0)  # m = 0.9 * 2 + 1 = 2.8, p = 0.8 - 0.28
    np.testing.assert_allclose(state.momentums["a"], 2.8, rtol=1e-6)
    np.testing.assert_allclose(opt.get_params(state)["a"], 0.52, rtol=1e-6)


def test_adam_first_step_by_hand():
    # Bias correction makes m_hat = g and v_hat = g^2: the step is lr * g / (|g| + eps).
    opt = opt_base.Adam(learning_rate=0.1, epsilon=1e-8)
    state = opt.update(opt.init({"a": 1.0, "b": 1.0}), {"a": 4.0, "b": -0.5}, 0.0)
    np.testing.assert_allclose(opt.get_params(state)["a"], 0.9, rtol=1e-6)
    np.testing.assert_allclose(opt.get_params(state)["b"], 1.1, rtol=1e-6)
    np.testing.assert_allclose(state.mu["a"], 0.1 * 4.0, rtol=1e-6)
    np.testing.assert_allclose(state.nu["a"], 0.001 * 16.0, rtol=1e-4)  # 1 - b2 in f32


def test_adamw_first_step_by_hand():
    opt = opt_base.AdamW(learning_rate=0.1, weight_decay=0.5)
    state = opt.update(opt.init({"a": 2.0}), {"a": 3.0}, 0.0)
    np.testing.assert_allclose(opt.get_params(state)["a"], 2.0 - 0.1 * (1.0 + 0.5 * 2.0))


def test_rmsprop_first_step_by_hand_has_epsilon_inside_the_root():
    opt = opt_base.RMSProp(learning_rate=0.1, decay=0.9, epsilon=0.5)
    state = opt.update(opt.init({"a": 1.0}), {"a": 2.0}, 0.0)
    # v = 0.1 * 4; step = lr * g / sqrt(v + eps) = 0.1 * 2 / sqrt(0.9)
    np.testing.assert_allclose(opt.get_params(state)["a"], 1.0 - 0.2 / np.sqrt(0.9), rtol=1e-6)


# --- against optax over several steps --------------------------------------------------

MATCHES = {
    "sgd": (lambda: opt_base.SGD(0.1), lambda: optax.sgd(0.1)),
    "sgdm": (lambda: opt_base.SGDM(0.1, 0.9), lambda: optax.sgd(0.1, momentum=0.9)),
    "adam": (
        lambda: opt_base.Adam(0.01, beta1=0.8, beta2=0.99, epsilon=1e-6),
        lambda: optax.adam(0.01, b1=0.8, b2=0.99, eps=1e-6),
    ),
    "adamw": (
        lambda: opt_base.AdamW(0.01, b1=0.8, eps_root=1e-4, weight_decay=0.1),
        lambda: optax.adamw(0.01, b1=0.8, eps_root=1e-4, weight_decay=0.1),
    ),
    "rmsprop": (
        lambda: opt_base.RMSProp(0.01, decay=0.9, epsilon=1e-6),
        lambda: optax.rmsprop(0.01, decay=0.9, eps=1e-6),
    ),
    "rmsprop_momentum": (
        lambda: opt_base.RMSProp(0.01, decay=0.95, epsilon=1e-6, momentum=0.9),
        lambda: optax.rmsprop(0.01, decay=0.95, eps=1e-6, momentum=0.9),
    ),
    "rmsprop_nesterov": (
        lambda: opt_base.RMSProp(0.01, decay=0.95, epsilon=1e-6, momentum=0.9, nesterov=True),
        lambda: optax.rmsprop(0.01, decay=0.95, eps=1e-6, momentum=0.9, nesterov=True),
    ),
    "adam_eps_root": (
        lambda: opt_base.Adam(0.01, epsilon=1e-6, epsilon_root=1e-4),
        lambda: optax.adam(0.01, eps=1e-6, eps_root=1e-4),
    ),
}


@pytest.mark.parametrize("name", list(MATCHES))
def test_matches_optax(name):
    ours, theirs = MATCHES[name]
    grads = _grads_seq()
    _assert_trees_close(_run_learnopt(ours(), grads), _run_optax(theirs(), grads))


# --- the notes' custom optimizer ---------------------------------------------------------


@flax.struct.dataclass
class MomentumOptState:
    params: Any
    model_state: Any
    iteration: jnp.ndarray
    momentums: Any


class MomentumOptimizer(opt_base.Optimizer):
    """The notes' ``MomentumOptimizer`` with its typos fixed and nothing else changed."""

    def __init__(self, lr=1e-3, momentum=0.9):
        super().__init__()
        self._lr = lr
        self._momentum = momentum

    def init(self, params, model_state=None, **kwargs):
        return MomentumOptState(
            params=params,
            model_state=model_state,
            momentums=jax.tree_util.tree_map(lambda p: jnp.zeros_like(p), params),
            iteration=jnp.asarray(0, dtype=jnp.int32),
        )

    def get_params(self, opt_state):
        return opt_state.params

    def get_state(self, opt_state):
        return opt_state.model_state

    def update(self, opt_state, grads, loss, model_state=None, **kwargs):
        struct = jax.tree_util.tree_structure(grads)
        flat_momentum = jax.tree_util.tree_leaves(opt_state.momentums)
        flat_params = jax.tree_util.tree_leaves(opt_state.params)
        flat_grads = jax.tree_util.tree_leaves(grads)

        output_params = []
        output_momentums = []
        for m, g, p in zip(flat_momentum, flat_grads, flat_params):  # noqa: B905
            next_m = m * self._momentum + g * (1 - self._momentum)
            next_p = p - self._lr * next_m
            output_momentums.append(next_m)
            output_params.append(next_p)

        return MomentumOptState(
            params=jax.tree_util.tree_unflatten(struct, output_params),
            momentums=jax.tree_util.tree_unflatten(struct, output_momentums),
            iteration=opt_state.iteration + 1,
            model_state=model_state,
        )


def test_notes_momentum_optimizer_runs_unchanged():
    opt = MomentumOptimizer(lr=1)
    opt_state = opt.init({"a": 1.0, "b": 2.0})
    opt_state = opt.update(opt_state, {"a": -1.0, "b": 1.0}, 1.0)
    np.testing.assert_allclose(opt_state.params["a"], 1.1, rtol=1e-6)
    np.testing.assert_allclose(opt_state.params["b"], 1.9, rtol=1e-6)
    np.testing.assert_allclose(opt_state.momentums["a"], -0.1, rtol=1e-6)
    assert int(opt_state.iteration) == 1


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.bfloat16], ids=["f32", "bf16"])
def test_notes_momentum_optimizer_compiles_once(dtype):
    """Python-float params are weakly typed; the base class settles them at init."""
    opt = MomentumOptimizer(lr=0.1)
    counter = TraceCounter()

    @jax.jit
    @counter.wrap
    def step(state):
        grads = jax.tree_util.tree_map(lambda p: 2.0 * p, opt.get_params(state))
        return opt.update(state, grads, 1.0)

    state = opt.init({"a": jnp.asarray(1.0, dtype), "b": 2.0})
    for _ in range(10):
        state = step(state)
    counter.assert_count(1)
    assert state.params["a"].dtype == dtype


def test_tree_map_multi_returns_one_tree_per_output():
    def update_fn(momentum, grad, param):
        next_m = momentum * 0.9 + grad * 0.1
        return param - next_m, next_m

    params, momentums = tree_map_multi(
        update_fn, {"a": 0.0, "b": 0.0}, {"a": -1.0, "b": 1.0}, {"a": 1.0, "b": 2.0}
    )
    assert params == pytest.approx({"a": 1.1, "b": 1.9})
    assert momentums == pytest.approx({"a": -0.1, "b": 0.1})
    assert tree_map_multi(lambda x: (x,), {}) == ()


# --- input checks ------------------------------------------------------------------------


def test_grads_with_another_tree_structure_raise_naming_both():
    opt = opt_base.Adam()
    state = opt.init({"w": jnp.ones((2,)), "b": jnp.ones(())})
    with pytest.raises(ValueError, match="tree structure") as info:
        opt.update(state, {"w": jnp.ones((2,))}, 0.0)
    assert "params:" in str(info.value) and "grads:" in str(info.value)
    assert "'b'" in str(info.value)


def test_grads_of_wrong_shape_raise_naming_the_leaf():
    opt = opt_base.SGD()
    state = opt.init({"w": jnp.ones((2, 3))})
    with pytest.raises(ValueError, match=r"\['w'\].*\(3, 2\).*\(2, 3\)"):
        opt.update(state, {"w": jnp.ones((3, 2))}, 0.0)


def test_integer_params_raise_type_error_naming_the_path():
    with pytest.raises(TypeError, match=r"\['layer'\]\['b'\]"):
        opt_base.Adam().init({"layer": {"w": jnp.ones((2,)), "b": 1}})
    with pytest.raises(TypeError, match=r"\['n'\].*int32"):
        opt_base.SGD().init({"n": jnp.arange(3)})


def test_python_floats_and_numpy_arrays_are_accepted():
    opt = opt_base.Adam(0.1)
    state = opt.init({"w": np.ones((2,), np.float32), "s": 1.0})
    state = opt.update(state, {"w": np.array([1.0, -1.0]), "s": 0.5}, np.float64(3.0))
    state = opt.update(state, {"w": np.array([1.0, 2.0], np.float16), "s": 1}, 2)
    params = opt.get_params(state)
    assert params["w"].dtype == jnp.float32 and params["s"].dtype == jnp.float32
    assert np.all(np.isfinite(params["w"]))


def test_update_returns_the_dtypes_it_was_given():
    opt = opt_base.SGDM(0.1)
    state = opt.init({"w": jnp.ones((2,), jnp.bfloat16)})
    state = opt.update(state, {"w": jnp.ones((2,), jnp.float32)}, 0.0)
    assert state.params["w"].dtype == jnp.bfloat16
    assert state.momentums["w"].dtype == jnp.float32  # f32 accumulators for bf16 params
    assert not state.iteration.weak_type


# --- optax export ------------------------------------------------------------------------


def _optax_loop(tx, grads_seq):
    params = _params()
    state = tx.init(params)

    @jax.jit
    def step(params, state, g):
        updates, state = tx.update(g, state, params, value=jnp.zeros(()))
        return optax.apply_updates(params, updates), state

    for g in grads_seq:
        params, state = step(params, state, g)
    return params


def test_as_optax_adam_matches_optax_adam():
    grads = _grads_seq(6)
    ours = _optax_loop(opt_base.Adam(1e-2).as_optax(), grads)
    _assert_trees_close(ours, _optax_loop(optax.adam(1e-2), grads))


def test_learnable_adam_at_fixed_theta_as_optax_matches_optax_adam():
    lopt = lopt_base.LearnableAdam()
    theta = lopt.init(jax.random.PRNGKey(0))
    grads = _grads_seq(6, seed=1)
    ours = _optax_loop(lopt.as_optax(theta), grads)
    _assert_trees_close(ours, _optax_loop(optax.adam(1e-3), grads), rtol=1e-4)


def test_as_optax_in_optax_chain():
    tx = optax.chain(optax.clip_by_global_norm(1.0), opt_base.SGD(0.5).as_optax())
    params = {"w": jnp.zeros((2,))}
    updates, _ = tx.update({"w": jnp.asarray([3.0, 4.0])}, tx.init(params), params)
    np.testing.assert_allclose(updates["w"], [-0.3, -0.4], rtol=1e-6)


# --- meta-gradients through zero gradients ---------------------------------------------------


def test_learnable_adam_meta_gradient_is_finite_with_dead_relu():
    """A dead ReLU unit has gradients exactly 0: d sqrt(v)/dv at v = 0 must not make NaN."""
    lopt = lopt_base.LearnableAdam(initial_lr=1e-2)
    x = jnp.asarray(np.random.default_rng(0).normal(size=(8, 3)), jnp.float32)
    params = {
        "w": jnp.ones((3, 2)) * 0.1,
        "b": jnp.asarray([0.0, -100.0]),  # the second unit is dead for every input
        "v": jnp.ones((2,)),
    }

    def loss(p):
        return jnp.mean(jnp.square(jax.nn.relu(x @ p["w"] + p["b"]) @ p["v"] - 1.0))

    def meta_loss(theta):
        opt = lopt.opt_fn(theta)
        state = opt.init(params)
        total = 0.0
        for _ in range(3):
            value, grads = jax.value_and_grad(loss)(opt.get_params(state))
            total = total + value
            state = opt.update(state, grads, value)
        return total + loss(opt.get_params(state))

    grads = jax.grad(loss)(params)
    assert float(jnp.abs(grads["w"][:, 1]).max()) == 0.0  # the test's premise
    theta = lopt.init(jax.random.PRNGKey(0))
    meta_grads = jax.jit(jax.grad(meta_loss))(theta)
    for name, g in meta_grads.items():
        assert np.isfinite(float(g)), (name, meta_grads)
    assert float(meta_grads["log_lr"]) != 0.0


# --- the library's base-class conventions ---------------------------------------------


def test_states_answer_the_librarys_name_for_the_model_state_and_set_params():
    opt = opt_base.Adam()
    state = opt.init({"w": jnp.ones(2)}, model_state={"count": jnp.int32(1)})
    assert state.state is state.model_state is opt.get_state(state)
    moved = opt.set_params(state, {"w": jnp.zeros(2)})
    np.testing.assert_allclose(opt.get_params(moved)["w"], 0.0)
    np.testing.assert_allclose(moved.mu["w"], state.mu["w"])


@flax.struct.dataclass
class _LibraryStyleState:
    params: Any
    state: Any  # the library's field name
    iteration: jnp.ndarray
    last_loss: jnp.ndarray


class _LibraryStyleSGD(opt_base.Optimizer):
    """Written like the library's newest classes: loss arrives as a keyword."""

    def init(self, params, model_state=None, num_steps=None, key=None):
        return _LibraryStyleState(params, model_state, jnp.int32(0), jnp.float32(0))

    def update(self, opt_state, grad, model_state=None, **kwargs):
        params = jax.tree_util.tree_map(lambda p, g: p - 0.1 * g, opt_state.params, grad)
        loss = kwargs.get("loss")
        return _LibraryStyleState(
            params,
            model_state if model_state is not None else opt_state.state,
            opt_state.iteration + 1,
            opt_state.last_loss if loss is None else loss,
        )


def test_library_style_subclass_gets_the_loss_and_its_state_field():
    opt = _LibraryStyleSGD()
    state = opt.init({"w": jnp.ones(2)}, model_state=jnp.int32(5))
    state = opt.update(state, {"w": jnp.ones(2)}, 2.0)  # the notes' positional loss
    assert float(state.last_loss) == 2.0
    state = opt.update(state, {"w": jnp.ones(2)}, loss=3.0, model_state=jnp.int32(6))
    assert float(state.last_loss) == 3.0
    assert int(opt.get_state(state)) == 6  # get_state reads the library's ``state`` field
    np.testing.assert_allclose(opt.get_params(state)["w"], 0.8, rtol=1e-6)


def test_gradient_clip_optimizer_clips_each_element_then_steps():
    opt = opt_base.GradientClipOptimizer(opt_base.SGD(1.0), grad_clip=0.5)
    state = opt.update(opt.init({"w": jnp.zeros(3)}), {"w": jnp.asarray([2.0, -3.0, 0.1])})
    np.testing.assert_allclose(opt.get_params(state)["w"], [-0.5, 0.5, -0.1], rtol=1e-6)
    test_utils.smoketest_optimizer(opt_base.GradientClipOptimizer(optax_opts.Adam(1e-4)))
    with pytest.raises(ValueError, match="instance"):
        opt_base.GradientClipOptimizer(opt_base.Adam)


def test_grafted_step_has_the_magnitude_of_one_and_the_direction_of_the_other():
    mag, direction = opt_base.SGD(0.1), opt_base.Adam(0.01)
    opt = opt_base.GraftedOptimizer(mag, direction)
    params = {"w": jnp.asarray([1.0, -1.0]), "b": jnp.asarray([0.5])}
    grads = {"w": jnp.asarray([3.0, 4.0]), "b": jnp.asarray([-1.0])}
    state = opt.update(opt.init(params), grads)
    step = jax.tree_util.tree_map(lambda a, b: a - b, opt.get_params(state), params)
    mag_norm = 0.1 * np.sqrt(9 + 16 + 1)  # SGD's step length
    adam_step = -0.01 * np.sign([3.0, 4.0, -1.0])  # Adam's first step: -lr * sign(g)
    flat = np.concatenate([np.asarray(step["b"]), np.asarray(step["w"])])
    expected = mag_norm * adam_step / np.linalg.norm(adam_step)
    np.testing.assert_allclose(flat, np.concatenate([expected[2:], expected[:2]]), rtol=1e-5)
    for inner in (state.mag_opt_state, state.dir_opt_state):  # both continue from there
        np.testing.assert_allclose(inner.params["w"], opt.get_params(state)["w"])
    test_utils.smoketest_optimizer(
        opt_base.GraftedOptimizer(optax_opts.SGDM(1e-2), optax_opts.Adam(1e-4))
    )


def test_grafted_zero_steps_stay_finite_in_value_and_meta_gradient():
    def loss_after_step(lr):
        opt = opt_base.GraftedOptimizer(opt_base.SGD(lr), opt_base.SGD(0.1))
        state = opt.update(opt.init({"w": jnp.ones(2)}), {"w": jnp.zeros(2)})
        return jnp.sum(opt.get_params(state)["w"])

    value, grad = jax.value_and_grad(loss_after_step)(jnp.float32(0.1))
    assert float(value) == 2.0 and np.isfinite(float(grad))


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf], ids=["nan", "inf", "-inf"])
def test_a_non_finite_step_is_skipped_and_not_counted(bad):
    # One bad element used to poison the param (Adam) or the whole tensor (MLPLOpt) for
    # every later step; the notes' style user subclass gets the policy from the base class.
    lopt = lopt_base.get_learned_optimizer("MLPLOpt")
    opts = {
        "Adam": opt_base.Adam(0.1),
        "notes' MomentumOptimizer": MomentumOptimizer(lr=0.1),
        "MLPLOpt": lopt.opt_fn(lopt.init(jax.random.PRNGKey(0))),
    }
    params = {"w": jnp.array([1.0, 2.0, 3.0])}
    for name, opt in opts.items():
        state = opt.init(params, num_steps=10)
        state = opt.update(state, {"w": jnp.array([0.1, 0.2, 0.3])}, 1.0)
        skipped = opt.update(state, {"w": jnp.array([0.1, bad, 0.3])}, 1.0)
        leaves = jax.tree_util.tree_leaves(skipped), jax.tree_util.tree_leaves(state)
        for x, y in zip(*leaves, strict=True):
            np.testing.assert_array_equal(x, y, err_msg=name)
        assert int(skipped.iteration) == 1, name  # a skipped step is not counted
        bad_loss = opt.update(state, {"w": jnp.array([0.1, 0.2, 0.3])}, bad)
        np.testing.assert_array_equal(bad_loss.params["w"], state.params["w"], err_msg=name)
        after = opt.update(skipped, {"w": jnp.array([0.1, 0.2, 0.3])}, 1.0)
        assert np.all(np.isfinite(after.params["w"])), name
        assert not np.array_equal(after.params["w"], state.params["w"]), name
        assert int(after.iteration) == 2, name
    assert bool(opt_base.all_finite({"w": jnp.ones(2)}, 1.0))
    assert not bool(opt_base.all_finite({"w": jnp.array([1.0, bad])}))
    assert not bool(opt_base.all_finite({"w": jnp.ones(2)}, bad))


def test_a_non_finite_step_is_skipped_in_optax_form_and_under_jit():
    tx = opt_base.Adam(0.1).as_optax()
    params = {"w": jnp.array([1.0, 2.0])}
    state = tx.init(params)

    @jax.jit
    def step(params, state, grads):
        updates, state = tx.update(grads, state, params)
        return optax.apply_updates(params, updates), state

    same, state2 = step(params, state, {"w": jnp.array([jnp.nan, 1.0])})
    np.testing.assert_array_equal(same["w"], params["w"])
    assert int(state2.iteration) == 0
    moved, _ = step(params, state, {"w": jnp.array([1.0, 1.0])})
    assert np.all(moved["w"] < params["w"])


def test_skip_nonfinite_false_propagates_as_optax_does():
    opt = opt_base.Adam(0.1)
    opt.skip_nonfinite = False
    state = opt.update(opt.init({"w": jnp.array([1.0, 2.0])}), {"w": jnp.array([jnp.nan, 1.0])})
    assert np.isnan(state.params["w"][0]) and np.isfinite(state.params["w"][1])
    assert int(state.iteration) == 1
