"""Dtype conformance: every optimizer compiles once, in every float dtype, jitted and scanned.

The sweep runs :func:`learnopt.testing.conformance.check_conformance` for every entry
of :func:`~learnopt.testing.conformance.conformance_optimizers` (built-in optimizers,
learned optimizers at their initial theta, the optax zoo through ``OptaxOptimizer``)
in every case of ``DTYPE_CASES`` (f32, bf16, f16, f64, bf16 params with f32 grads,
f32 params with bf16 grads). One test per optimizer runs its six cases, so the jit
and trace overhead is paid once per case and failures list every failing dtype.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from learnopt.learned_optimizers import base as lopt_base
from learnopt.optimizers import base as opt_base
from learnopt.optimizers import common as opt_common
from learnopt.optimizers import optax_zoo, sgd
from learnopt.testing import TraceCounter, assert_max_compiles, conformance

OPTIMIZERS = conformance.conformance_optimizers()
# XLA options that only make CPU compilation faster; the counts come from tracing.
FAST_COMPILE = (
    {"xla_backend_optimization_level": 0, "xla_llvm_disable_expensive_passes": True}
    if jax.default_backend() == "cpu"
    else None
)


@pytest.mark.parametrize("name", list(OPTIMIZERS))
def test_compiles_once_in_every_dtype(name):
    failures = []
    for case in conformance.DTYPE_CASES:
        try:
            result = conformance.check_conformance(
                OPTIMIZERS[name], case, compiler_options=FAST_COMPILE
            )
        except Exception as err:  # report every failing case, not just the first
            failures.append(f"{case}: raised {type(err).__name__}: {str(err)[:500]}")
            continue
        if not result.ok:
            failures.append(f"{case}: {result}")
    assert not failures, f"{name}:\n" + "\n".join(failures)


class _PromotingSGD(opt_base.Optimizer):
    """SGD with the classic dtype bug: ``p - 0.1 * g.astype(float32)`` promotes bf16
    params to float32, so the state's types change after the first step."""

    def init(self, params, model_state=None, num_steps=None, key=None):
        return sgd.SGDState.initial(params, model_state)

    def update(self, opt_state, grads, loss=None, model_state=None, key=None, **kwargs):
        def step(p, g):
            return p - 0.1 * g.astype(jnp.float32)

        params = jax.tree_util.tree_map(step, opt_state.params, grads)
        return opt_common.next_state(opt_state, params, model_state)


def test_check_conformance_catches_a_state_whose_dtype_changes():
    """The check can fail: in float32 the buggy step is fine; with bf16 params it
    returns float32 params, which the check reports."""
    assert conformance.check_conformance(_PromotingSGD, "f32", num_calls=3).ok
    result = conformance.check_conformance(_PromotingSGD, "bf16", num_calls=3)
    assert not result.params_dtype_ok and not result.ok


def test_registry_covers_the_issue_list():
    names = set(optax_zoo.optax_names())
    required = {
        "sgd", "momentum", "nesterov", "adam", "adamw", "nadam", "amsgrad", "adamax",
        "adagrad", "adadelta", "rmsprop", "adafactor", "lion", "lamb", "lars", "adabelief",
        "yogi", "radam", "novograd", "sm3", "fromage", "noisy_sgd", "adan", "optimistic_gd",
        "lbfgs_zoom", "lbfgs_backtracking", "clip_global_norm_adam", "adam_warmup_cosine",
        "inject_hyperparams_adam", "multisteps_adam", "apply_if_finite_adam", "prodigy",
        "schedule_free_adamw", "muon", "mechanize_adam",
    }  # fmt: skip
    assert required <= names, sorted(required - names)
    assert len(names) >= 40
    assert {"SGD", "SGDM", "Adam", "AdamW", "RMSProp"} <= set(OPTIMIZERS)
    library_modules = {
        "AdaBelief", "AdaGrad", "Adafactor", "Fromage", "Lamb", "Lars", "RAdam", "Yogi", "SM3",
        "PiecewiseLinearAdam", "NAdamW", "NAdamW_cosine", "OptList", "GradientAccumulator",
        "GradientClipOptimizer", "GraftedOptimizer",
    }  # fmt: skip
    assert library_modules <= set(OPTIMIZERS), sorted(library_modules - set(OPTIMIZERS))
    for lopt in lopt_base.registered_learned_optimizers():
        assert f"lopt:{lopt}" in OPTIMIZERS


def test_float64_cases_do_not_leak_x64():
    before = (jax.config.jax_enable_x64, jnp.asarray(1.0).dtype)
    with conformance.dtype_case("f64") as (params_dtype, _):
        assert params_dtype == jnp.float64
        assert jnp.asarray(1.0).dtype == jnp.float64
    assert (jax.config.jax_enable_x64, jnp.asarray(1.0).dtype) == before
    with conformance.dtype_case("bf16") as (params_dtype, grads_dtype):
        assert (params_dtype, grads_dtype) == (jnp.bfloat16, jnp.bfloat16)


def test_assert_max_compiles_sees_a_recompiling_optax_step():
    """The public helper catches what raw optax does: weak-typed init, two compiles."""
    tx = optax.lbfgs()
    params, loss_fn = conformance.tiny_problem(jnp.float32)

    @jax.jit
    def raw_step(params, state):
        loss, grads = jax.value_and_grad(loss_fn)(params)
        updates, state = tx.update(grads, state, params, value=loss, grad=grads, value_fn=loss_fn)
        return optax.apply_updates(params, updates), state

    state = tx.init(params)
    with pytest.raises(AssertionError, match="at most 1 compilation"):
        with assert_max_compiles(1, name="raw_step"):
            for _ in range(3):
                params, state = raw_step(params, state)

    opt = opt_base.OptaxOptimizer(optax.lbfgs())

    @jax.jit
    def step(state):
        loss, grads = jax.value_and_grad(loss_fn)(opt.get_params(state))
        return opt.update(state, grads, loss, value_fn=loss_fn)

    state = opt.init(conformance.tiny_problem(jnp.float32)[0])
    with assert_max_compiles(1, name="step"):
        for _ in range(3):
            state = step(state)


# --- a clear error where a transform itself fails for a dtype -------------------------


def _f32_only_transform() -> optax.GradientTransformation:
    """Like optax's old zoom line search: a lax.cond whose branches disagree on dtype

    unless the updates are float32 (one branch hard-codes float32).
    """

    def init_fn(params):
        return optax.EmptyState()

    def update_fn(updates, state, params=None):
        def scale(u):
            return jax.lax.cond(
                jnp.all(jnp.isfinite(u)), lambda: (-0.1 * u).astype(jnp.float32), lambda: u
            )

        return jax.tree_util.tree_map(scale, updates), state

    return optax.GradientTransformation(init_fn, update_fn)


def test_transform_failing_for_a_dtype_raises_clearly_at_init():
    params, _ = conformance.tiny_problem(jnp.float32)
    opt = opt_base.OptaxOptimizer(_f32_only_transform(), name="f32_only")
    opt.init(params)  # float32: fine
    opt.init(jax.tree_util.tree_map(lambda p: p.astype(jnp.bfloat16), params))  # runs in f32
    with conformance.dtype_case("f64") as (f64, _):
        params64 = jax.tree_util.tree_map(lambda p: p.astype(f64), params)
        with pytest.raises(opt_base.OptaxDtypeError) as info:
            opt.init(params64)
    message = str(info.value)
    assert "'f32_only'" in message and "float64" in message and "float32" in message
    assert "cond" in message  # the transform's own complaint, in a few lines
    assert len(message.splitlines()) < 10
    assert info.value.__cause__ is None and info.value.__suppress_context__


def test_failures_unrelated_to_dtype_pass_through():
    def init_fn(params):
        raise ValueError("this transform needs 2-D params")

    opt = opt_base.OptaxOptimizer(optax.GradientTransformation(init_fn, lambda u, s, p: (u, s)))
    with conformance.dtype_case("f64") as (f64, _):
        with pytest.raises(ValueError, match="needs 2-D params"):
            opt.init({"w": jnp.zeros((3,), f64)})


def test_plain_transforms_accept_and_ignore_extra_args():
    def update_fn(updates, state, params=None):  # no **extra_args
        return jax.tree_util.tree_map(lambda u: -0.1 * u, updates), state

    tx = optax.GradientTransformation(lambda params: optax.EmptyState(), update_fn)
    opt = opt_base.OptaxOptimizer(tx, name="plain_sgd")
    state = opt.init({"w": jnp.ones((2,))})
    state = opt.update(state, {"w": jnp.ones((2,))}, 1.0, value_fn=lambda p: 0.0)
    np.testing.assert_allclose(opt.get_params(state)["w"], 0.9)
    assert repr(opt) == "OptaxOptimizer(plain_sgd)"
    assert "lbfgs" in repr(opt_base.OptaxOptimizer(optax.scale_by_lbfgs()))


# --- the walkthrough's meta-step ---------------------------------------------------


def _tiny_task(params_dtype):
    """A 2-layer ReLU regression: params in ``params_dtype``, batches passed in."""

    def init(key):
        k1, k2 = jax.random.split(key)
        return {
            "w0": (jax.random.normal(k1, (6, 8)) / 3).astype(params_dtype),
            "b0": jnp.zeros((8,), params_dtype),
            "w1": (jax.random.normal(k2, (8, 1)) / 3).astype(params_dtype),
        }

    def loss(params, key, batch):
        x = batch["x"].astype(params["w0"].dtype)
        h = jax.nn.relu(x @ params["w0"] + params["b0"])
        return jnp.mean(jnp.square(h @ params["w1"] - batch["y"].astype(x.dtype)))

    return init, loss


def _batches(n, seed=0):
    rng = np.random.default_rng(seed)
    for _ in range(n):
        x = rng.normal(size=(16, 6)).astype(np.float32)
        yield {"x": x, "y": x[:, :1] - 0.5 * x[:, 1:2]}


@pytest.mark.parametrize("params_dtype", [jnp.float32, jnp.bfloat16], ids=["f32", "bf16"])
def test_walkthrough_meta_step_compiles_once(params_dtype):
    """The notes' meta-training loop, verbatim in structure: jitted meta_loss_fn,

    jit(value_and_grad(meta_loss_fn)), outer Adam updated outside jit.
    """
    task_init, task_loss = _tiny_task(params_dtype)
    lopt = lopt_base.LearnableAdam()
    counter = TraceCounter()

    @jax.jit
    @counter.wrap
    def meta_loss_fn(theta, key, batch, meta_loss):
        opt = lopt.opt_fn(theta)
        key, key1 = jax.random.split(key)
        params = task_init(key1)
        opt_state = opt.init(params)
        for _ in range(4):
            key, key1 = jax.random.split(key)
            loss, grads = jax.value_and_grad(task_loss)(opt_state.params, key1, batch)
            meta_loss += loss
            opt_state = opt.update(opt_state, grads, loss)
        assert opt.get_params(opt_state)["w0"].dtype == params_dtype
        return meta_loss.astype(jnp.float32)

    theta_opt = opt_base.Adam(1e-2)
    key = jax.random.PRNGKey(0)
    key, key1 = jax.random.split(key)
    theta_opt_state = theta_opt.init(lopt.init(key1))
    meta_value_and_grad = jax.jit(jax.value_and_grad(meta_loss_fn))
    meta_losses = []
    for batch in _batches(6):
        key, key1 = jax.random.split(key)
        meta_loss = jnp.asarray(0, dtype=jnp.int32)
        ml, meta_grads = meta_value_and_grad(theta_opt_state.params, key1, batch, meta_loss)
        theta_opt_state = theta_opt.update(theta_opt_state, meta_grads, ml)
        meta_losses.append(float(ml))
    counter.assert_count(1, "meta_loss_fn")
    theta = theta_opt.get_params(theta_opt_state)
    assert all(v.dtype == jnp.float32 and not v.weak_type for v in theta.values())
    assert np.all(np.isfinite(meta_losses))


@pytest.mark.parametrize("params_dtype", [jnp.float32, jnp.bfloat16], ids=["f32", "bf16"])
def test_jitted_meta_step_with_scan_unroll_compiles_once(params_dtype):
    """The whole meta-step (scan unroll, meta-gradient, outer Adam) as one jitted program."""
    task_init, task_loss = _tiny_task(params_dtype)
    lopt = lopt_base.LearnableAdam(initial_lr=1e-2)
    theta_opt = opt_base.Adam(1e-2)
    counter = TraceCounter()

    def meta_loss_fn(theta, key, batches):
        opt = lopt.opt_fn(theta)
        key, key1 = jax.random.split(key)
        opt_state = opt.init(task_init(key1))

        def body(carry, batch):
            opt_state, key = carry
            key, key1 = jax.random.split(key)
            loss, grads = jax.value_and_grad(task_loss)(opt.get_params(opt_state), key1, batch)
            return (opt.update(opt_state, grads, loss), key), loss

        _, losses = jax.lax.scan(body, (opt_state, key), batches)
        return jnp.mean(losses.astype(jnp.float32))

    @jax.jit
    @counter.wrap
    def meta_step(theta_opt_state, key, batches):
        theta = theta_opt.get_params(theta_opt_state)
        meta_loss, meta_grads = jax.value_and_grad(meta_loss_fn)(theta, key, batches)
        return theta_opt.update(theta_opt_state, meta_grads, meta_loss), meta_loss, meta_grads

    key = jax.random.PRNGKey(1)
    theta_opt_state = theta_opt.init(lopt.init(key))
    batches = list(_batches(5 * 4, seed=1))
    for i in range(5):
        key, key1 = jax.random.split(key)
        stacked = jax.tree_util.tree_map(lambda *b: np.stack(b), *batches[4 * i : 4 * i + 4])
        theta_opt_state, meta_loss, meta_grads = meta_step(theta_opt_state, key1, stacked)
        assert np.isfinite(float(meta_loss))
        assert all(np.all(np.isfinite(g)) for g in jax.tree_util.tree_leaves(meta_grads))
    counter.assert_count(1, "meta_step")
    theta = theta_opt.get_params(theta_opt_state)
    assert all(v.dtype == jnp.float32 for v in theta.values())
