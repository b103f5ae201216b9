"""learnopt.optimizers.optax_opts: the library's optax-backed optimizers, same names and defaults.

learned_optimization's ``optax_opts_test`` smoke-tests every class (SM3 with loose
dtypes); here each class passes the same smoke test with strict dtypes, keeps the
library's constructor defaults, and computes what the optax transform of the same
name computes.
"""

from __future__ import annotations

import inspect

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from learnopt.optimizers import base as opt_base
from learnopt.optimizers import optax_opts, test_utils

# The library's optax_opts_test cases (constructor -> instance).
LIBRARY_CASES = {
    "RMSProp": lambda: optax_opts.RMSProp(1e-4),
    "SGDM": lambda: optax_opts.SGDM(1e-4),
    "SGD": lambda: optax_opts.SGD(1e-3),
    "Adam": lambda: optax_opts.Adam(1e-4),
    "AdaBelief": lambda: optax_opts.AdaBelief(1e-4),
    "AdaGrad": lambda: optax_opts.AdaGrad(1e-4),
    "Adafactor": lambda: optax_opts.Adafactor(1e-4),
    "Yogi": lambda: optax_opts.Yogi(1e-4),
    "RAdam": lambda: optax_opts.RAdam(1e-4),
    "AdamW": lambda: optax_opts.AdamW(1e-4),
    "Lamb": lambda: optax_opts.Lamb(1e-4),
    "Lars": lambda: optax_opts.Lars(1e-4),
    "Fromage": lambda: optax_opts.Fromage(1e-4),
    "PiecewiseLinearAdam": optax_opts.PiecewiseLinearAdam,
    "SM3": lambda: optax_opts.SM3(1e-4),
    "OptaxWrapper": lambda: optax_opts.OptaxWrapper(optax.adam, learning_rate=1e-4),
}


@pytest.mark.parametrize("name", list(LIBRARY_CASES))
def test_every_class_passes_the_smoke_test_with_strict_dtypes(name):
    test_utils.smoketest_optimizer(LIBRARY_CASES[name](), strict_types=True)


# name -> the library's (parameter, default) list; "required" marks a required argument.
LIBRARY_SIGNATURES = {
    "SGD": [("learning_rate", 0.01)],
    "SGDM": [("learning_rate", 0.01), ("momentum", 0.9)],
    "Adam": [
        ("learning_rate", 0.01), ("beta1", 0.9), ("beta2", 0.999), ("epsilon", 1e-8),
        ("epsilon_root", 1e-8),
    ],
    "RMSProp": [
        ("learning_rate", 0.01), ("decay", 0.9), ("epsilon", 1e-8), ("momentum", 0.0),
        ("nesterov", False),
    ],
    "AdaBelief": [
        ("learning_rate", 0.01), ("b1", 0.9), ("b2", 0.999), ("eps", 1e-16), ("eps_root", 1e-16),
    ],
    "AdamW": [
        ("learning_rate", "required"), ("b1", 0.9), ("b2", 0.999), ("eps", 1e-8),
        ("eps_root", 0.0), ("mu_dtype", None), ("weight_decay", 1e-4), ("mask", None),
    ],
    "Fromage": [("learning_rate", "required"), ("min_norm", 1e-6)],
    "Lars": [
        ("learning_rate", "required"), ("weight_decay", 0.0), ("weight_decay_mask", True),
        ("trust_coefficient", 0.001), ("eps", 0.0), ("trust_ratio_mask", True),
        ("momentum", 0.9), ("nesterov", False), ("min_norm", 1e-6),
    ],
    "Lamb": [
        ("learning_rate", "required"), ("b1", 0.9), ("b2", 0.999), ("eps", 1e-6),
        ("eps_root", 0.0), ("weight_decay", 0.0), ("mask", None),
    ],
    "RAdam": [
        ("learning_rate", "required"), ("b1", 0.9), ("b2", 0.999), ("eps", 1e-8),
        ("eps_root", 0.0), ("threshold", 5.0),
    ],
    "SM3": [("learning_rate", "required"), ("momentum", 0.9), ("b2", 1.0)],
    "Yogi": [("learning_rate", "required"), ("b1", 0.9), ("b2", 0.999), ("eps", 1e-3)],
    "Adafactor": [
        ("learning_rate", "required"), ("min_dim_size_to_factor", 128), ("decay_rate", 0.8),
        ("decay_offset", 0), ("multiply_by_parameter_scale", True), ("clipping_threshold", 1.0),
        ("momentum", None), ("dtype_momentum", jnp.float32), ("weight_decay_rate", None),
        ("eps", 1e-30), ("factored", True), ("weight_decay_mask", None),
    ],
    "AdaGrad": [
        ("learning_rate", "required"), ("initial_accumulator_value", 0.1), ("eps", 1e-7),
    ],
    "PiecewiseLinearAdam": [
        ("times", (10000, 20000)), ("lrs", (1e-4, 1e-5)), ("beta1", 0.9), ("beta2", 0.999),
        ("epsilon", 1e-8), ("epsilon_root", 1e-8),
    ],
}  # fmt: skip


@pytest.mark.parametrize("name", list(LIBRARY_SIGNATURES))
def test_constructor_arguments_and_defaults_are_the_librarys(name):
    params = list(inspect.signature(getattr(optax_opts, name)).parameters.values())
    got = [(p.name, "required" if p.default is p.empty else p.default) for p in params]
    library = LIBRARY_SIGNATURES[name]
    # The library's arguments first, in its order; learnopt's additions (Adam's
    # one_minus_beta1/2, a numerically safe alternative spelling) come after them,
    # keyword-only and off by default, so positional calls port unchanged.
    assert got[: len(library)] == library
    for p in params[len(library) :]:
        assert p.kind is p.KEYWORD_ONLY and p.default is None, p


def test_base_and_optax_opts_share_one_class_per_name():
    for name in ("SGD", "SGDM", "Adam", "RMSProp", "AdamW", "OptaxOptimizer"):
        assert getattr(optax_opts, name) is getattr(opt_base, name)


def _params():
    rng = np.random.default_rng(0)
    return {"w": jnp.asarray(rng.normal(size=(3, 2)), jnp.float32), "b": jnp.ones(2)}


def _grads(i):
    rng = np.random.default_rng(i + 1)
    return {"w": jnp.asarray(rng.normal(size=(3, 2)), jnp.float32),
            "b": jnp.asarray(rng.normal(size=(2,)), jnp.float32)}  # fmt: skip


def _run(opt, steps=4):
    state = opt.init(_params())
    for i in range(steps):
        state = opt.update(state, _grads(i), 1.0)
    return opt.get_params(state)


def _run_optax(tx, steps=4):
    params = _params()
    state = tx.init(params)
    for i in range(steps):
        updates, state = tx.update(_grads(i), state, params)
        params = optax.apply_updates(params, updates)
    return params


SAME_AS_OPTAX = {
    "AdaBelief": (lambda: optax_opts.AdaBelief(0.05), lambda: optax.adabelief(0.05)),
    "Yogi": (lambda: optax_opts.Yogi(0.05), lambda: optax.yogi(0.05)),
    "Lamb": (
        lambda: optax_opts.Lamb(0.05, weight_decay=0.1),
        lambda: optax.lamb(0.05, weight_decay=0.1),
    ),
    "RAdam": (lambda: optax_opts.RAdam(0.05), lambda: optax.radam(0.05)),
    "AdaGrad": (lambda: optax_opts.AdaGrad(0.05), lambda: optax.adagrad(0.05)),
    "SGDM": (lambda: optax_opts.SGDM(0.05), lambda: optax.sgd(0.05, momentum=0.9)),
    "Adam_with_epsilon_root": (
        lambda: optax_opts.Adam(0.05),
        lambda: optax.adam(0.05, eps_root=1e-8),
    ),
}  # fmt: skip


@pytest.mark.parametrize("name", list(SAME_AS_OPTAX))
def test_updates_are_the_optax_transform_of_the_same_name(name):
    ours, theirs = SAME_AS_OPTAX[name]
    jax.tree_util.tree_map(
        lambda a, b: np.testing.assert_allclose(a, b, rtol=2e-5, atol=1e-6),
        _run(ours()),
        _run_optax(theirs()),
    )


def test_sm3_runs_on_scalar_params_and_matches_sm3_on_one_element_vectors():
    opt = optax_opts.SM3(0.1)
    state = opt.init({"s": jnp.float32(2.0), "v": jnp.ones(3)})
    for g in (1.0, -0.5, 2.0):
        state = opt.update(state, {"s": jnp.float32(g), "v": jnp.full(3, g)})
    assert opt.get_params(state)["s"].shape == ()

    tx = optax.chain(optax.scale_by_sm3(0.9, b2=1.0), optax.scale(-0.1))
    p = {"s": jnp.asarray([2.0])}
    tx_state = tx.init(p)
    for g in (1.0, -0.5, 2.0):
        u, tx_state = tx.update({"s": jnp.asarray([g])}, tx_state, p)
        p = optax.apply_updates(p, u)
    np.testing.assert_allclose(opt.get_params(state)["s"], p["s"][0], rtol=1e-6)


def test_piecewise_linear_adam_scales_adam_steps_by_the_schedule_of_the_step():
    times, lrs = (0, 2), (0.1, 0.3)
    opt = optax_opts.PiecewiseLinearAdam(times=times, lrs=lrs)
    adam = optax.scale_by_adam(eps_root=1e-8)
    params, state = _params(), None
    state = opt.init(params)
    adam_state = adam.init(params)
    expected = params
    for i in range(4):
        state = opt.update(state, _grads(i))
        u, adam_state = adam.update(_grads(i), adam_state)
        lr = np.interp(i, times, lrs)  # steps counted from 0, constant outside [0, 2]
        expected = jax.tree_util.tree_map(lambda p, u, lr=lr: p - lr * u, expected, u)
    jax.tree_util.tree_map(
        lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-7),
        opt.get_params(state),
        expected,
    )
    assert float(optax_opts.piecewise_linear(times, lrs)(1)) == pytest.approx(0.2)


def test_optax_state_answers_the_librarys_field_names():
    opt = optax_opts.Yogi(0.1)
    state = opt.init(_params(), model_state={"count": jnp.int32(3)})
    assert state.optax_opt_state is state.optax_state
    assert state.state is state.model_state
