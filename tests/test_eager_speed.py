"""Eager optimizer calls run as cached jitted programs: the jitted results, one compile.

The notes call ``theta_opt.update(...)`` from Python every meta-step. These tests pin
what makes that fast *and* safe (see ``learnopt.optimizers._eager``): once warmed up
(``UPDATE_WARMUP`` op-by-op calls), results are bit-identical to the same call under
``jit``; a configuration compiles once; arrays are program inputs (optimizers rebuilt
from new ``theta`` share a program); Python hyperparameters are part of the key
(changing one takes effect); and calls that could go stale (callables passed in,
untraceable code, opted-out classes) run op by op. Speed itself is measured by
``benchmarks/bench_eager.py``.
"""

from __future__ import annotations

from typing import Any

import flax.struct
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from learnopt.learned_optimizers import base as lopt_base
from learnopt.optimizers import _eager
from learnopt.optimizers import base as opt_base
from learnopt.testing import TraceCounter, count_compiles


def _theta():
    return lopt_base.LearnableAdam().init(jax.random.PRNGKey(0))


def _grads(tree, i):
    return jax.tree_util.tree_map(lambda x: jnp.full_like(x, 0.1 * (i + 1) - 0.25), tree)


def _bits(tree):
    return [np.asarray(x).tobytes() for x in jax.tree_util.tree_leaves(tree)]


WARMUP = _eager.UPDATE_WARMUP


@pytest.fixture(autouse=True)
def _fresh_eager_cache():
    """Each test starts with an empty program cache: the cache is per process, and a test
    that ran earlier in the same worker may have compiled the same configuration."""
    opt_base.clear_eager_cache()
    yield


def test_eager_update_is_bit_identical_to_jitted_update_and_compiles_once():
    opt = opt_base.Adam(1e-2)
    jitted = jax.jit(lambda s, g, loss: opt.update(s, g, loss))
    state = opt.init(_theta())
    with count_compiles() as names:
        for i in range(WARMUP + 6):
            grads, loss = _grads(_theta(), i), jnp.float32(i)
            eager = opt.update(state, grads, loss)
            if i >= WARMUP:  # compiled from here on: the jitted program's bits
                assert _bits(eager) == _bits(jitted(state, grads, loss)), i
            state = eager
    assert names.count("Adam_update") == 1, names
    assert int(state.iteration) == WARMUP + 6


def test_learned_optimizers_rebuilt_from_new_theta_share_one_program():
    """``lopt.opt_fn(theta)`` builds Adam from arrays: they are inputs, not constants."""
    lopt = lopt_base.LearnableAdam()
    params = {"w": jnp.linspace(-1.0, 1.0, 6).reshape(2, 3)}
    grads, loss = {"w": jnp.full((2, 3), 0.3)}, jnp.float32(1.0)
    names = ("learning_rate", "beta1", "beta2", "epsilon", "one_minus_beta1", "one_minus_beta2")
    reference = jax.jit(lambda hp, s: opt_base.Adam(**hp).update(s, grads, loss))
    with count_compiles() as compiled:
        for i in range(WARMUP + 3):  # a new theta, and a new optimizer, every call
            theta = jax.tree_util.tree_map(lambda x, i=i: x * (1 + 0.1 * i), lopt.init(None))
            opt = lopt.opt_fn(theta)
            state = opt.init(params)
            eager = opt.update(state, grads, loss)
            if i >= WARMUP:
                hyperparams = {n: getattr(opt, n) for n in names}
                assert _bits(eager) == _bits(reference(hyperparams, state)), i
    assert compiled.count("Adam_update") == 1, compiled


def test_python_hyperparameters_are_part_of_the_key():
    params, grads = {"a": jnp.zeros(())}, {"a": jnp.float32(1.0)}
    opt = opt_base.SGD(0.1)
    state = opt.init(params)
    for _ in range(WARMUP + 2):  # compiled with lr 0.1
        state = opt.update(state, grads)
    np.testing.assert_allclose(opt.get_params(state)["a"], -0.1 * (WARMUP + 2), rtol=1e-5)
    before = opt.get_params(state)["a"]
    opt.learning_rate = 0.25  # a changed attribute is a new configuration, not the old program
    state = opt.update(state, grads)
    np.testing.assert_allclose(opt.get_params(state)["a"], before - 0.25, rtol=1e-6)
    other = opt_base.SGD(0.5)  # and so is another value in another instance
    np.testing.assert_allclose(other.get_params(other.update(other.init(params), grads))["a"], -0.5)


@flax.struct.dataclass
class _MomentumState:
    params: Any
    model_state: Any
    iteration: jnp.ndarray
    momentums: Any


class _NotesMomentum(opt_base.Optimizer):
    """The notes' MomentumOptimizer (tree_map form)."""

    def __init__(self, lr=1e-3, momentum=0.9):
        super().__init__()
        self._lr = lr
        self._momentum = momentum

    def init(self, params, model_state=None, **kwargs):
        return _MomentumState(
            params=params,
            model_state=model_state,
            momentums=jax.tree_util.tree_map(jnp.zeros_like, params),
            iteration=jnp.asarray(0, dtype=jnp.int32),
        )

    def update(self, opt_state, grads, loss, model_state=None, **kwargs):
        m = jax.tree_util.tree_map(
            lambda m, g: m * self._momentum + g * (1 - self._momentum), opt_state.momentums, grads
        )
        p = jax.tree_util.tree_map(lambda p, m: p - self._lr * m, opt_state.params, m)
        return _MomentumState(
            params=p, momentums=m, iteration=opt_state.iteration + 1, model_state=model_state
        )


def test_notes_style_subclass_runs_eagerly_with_the_jitted_results():
    opt = _NotesMomentum(lr=0.5)
    jitted = jax.jit(lambda s, g: opt.update(s, g, 1.0))
    state = opt.init({"a": 1.0, "b": 2.0})
    for i in range(WARMUP + 3):
        grads = {"a": jnp.float32(-1.0 + i), "b": jnp.float32(1.0)}
        eager = opt.update(state, grads, 1.0)
        if i >= WARMUP:
            assert _bits(eager) == _bits(jitted(state, grads)), i
        state = eager
    assert state.params["a"].dtype == jnp.float32


def test_calls_inside_jit_are_traced_as_usual_and_never_cached():
    opt = opt_base.Adam(1e-2)
    counter = TraceCounter()

    @jax.jit
    @counter.wrap
    def step(state, grads):
        return opt.update(state, grads, jnp.float32(0.5))

    state = opt.init(_theta())
    before = opt_base.eager_cache_info()
    for i in range(5):
        state = step(state, _grads(_theta(), i))
    counter.assert_count(1)
    after = opt_base.eager_cache_info()
    assert (after.hits, after.compiles) == (before.hits, before.compiles)


class _ScaledSGD(opt_base.Optimizer):
    """SGD whose step is scaled by a callable passed to each update."""

    def init(self, params, model_state=None, num_steps=None, key=None):
        return opt_base.SGDState(params, model_state, jnp.zeros((), jnp.int32))

    def update(self, opt_state, grads, loss=None, model_state=None, scale_fn=None, **kwargs):
        s = scale_fn() if scale_fn is not None else 1.0
        params = jax.tree_util.tree_map(lambda p, g: p - s * g, opt_state.params, grads)
        return opt_base.SGDState(params, opt_state.model_state, opt_state.iteration + 1)


def test_callables_passed_to_a_call_run_op_by_op_so_they_never_go_stale():
    """``value_fn``-style arguments may read Python state that changes between calls."""
    opt = _ScaledSGD()
    current = {"scale": 1.0}
    scale_fn = lambda: current["scale"]  # noqa: E731  (the same object every call)
    state = opt.init({"a": jnp.zeros(())})
    before = opt_base.eager_cache_info()
    for scale in (1.0, 2.0, 3.0):
        current["scale"] = scale
        state = opt.update(state, {"a": jnp.float32(1.0)}, scale_fn=scale_fn)
    np.testing.assert_allclose(opt.get_params(state)["a"], -6.0)
    after = opt_base.eager_cache_info()
    assert after.plain - before.plain == 3 and after.compiles == before.compiles


class _Verbose(opt_base.SGD):
    """An update that, when asked, reads a value in Python: that cannot be traced."""

    log: list = []

    def update(self, opt_state, grads, loss=None, model_state=None, verbose=False, **kwargs):
        if verbose:
            type(self).log.append(float(loss))
        return super().update(opt_state, grads, loss, model_state=model_state)


def test_untraceable_updates_fall_back_to_the_plain_path_once_and_for_all():
    opt = _Verbose(0.1)
    state = opt.init({"a": jnp.zeros(())})
    before = opt_base.eager_cache_info()
    losses = [float(i) for i in range(WARMUP + 3)]
    for loss in losses:
        state = opt.update(state, {"a": jnp.float32(1.0)}, jnp.float32(loss), verbose=True)
    np.testing.assert_allclose(opt.get_params(state)["a"], -0.1 * len(losses), rtol=1e-5)
    assert _Verbose.log == losses
    after = opt_base.eager_cache_info()
    assert after.failures - before.failures == 1  # traced once, then remembered


class _CountingSGD(opt_base.SGD):
    eager_jit = False  # its update has a side effect

    calls = 0

    def update(self, opt_state, grads, loss=None, model_state=None, key=None, **kwargs):
        type(self).calls += 1
        return super().update(opt_state, grads, loss, model_state=model_state)


def test_classes_can_opt_out_of_eager_programs():
    opt = _CountingSGD(0.1)
    state = opt.init({"a": jnp.zeros(())})
    _CountingSGD.calls = 0  # init ran update abstractly to settle the state's dtypes
    for _ in range(3):
        state = opt.update(state, {"a": jnp.float32(1.0)})
    assert _CountingSGD.calls == 3
    np.testing.assert_allclose(opt.get_params(state)["a"], -0.3, rtol=1e-6)


def test_init_compiles_only_when_a_configuration_is_initialized_again():
    opt = opt_base.RMSProp(0.05, momentum=0.5)
    params = {"w": jnp.ones((3, 3)), "b": jnp.zeros(3)}
    with count_compiles() as names:
        first = opt.init(params)
        second = opt.init(params)
        third = opt.init(params)
    assert names.count("RMSProp_init") == 1, names
    assert _bits(first) == _bits(second) == _bits(third)


def test_one_off_configurations_never_compile():
    """A new optax transform per call is a new key each time: it stays op by op."""
    params, grads = {"a": jnp.ones(())}, {"a": jnp.float32(1.0)}
    before = opt_base.eager_cache_info()
    for _ in range(WARMUP + 4):
        opt = opt_base.OptaxOptimizer(optax.sgd(0.5))
        state = opt.update(opt.init(params), grads)
        np.testing.assert_allclose(opt.get_params(state)["a"], 0.5)
    assert opt_base.eager_cache_info().compiles == before.compiles


def test_keys_of_either_kind_are_program_inputs():
    opt = opt_base.GraftedOptimizer(opt_base.SGD(0.1), opt_base.Adam(0.1))
    for make_key in (jax.random.PRNGKey, jax.random.key):
        state = opt.init({"w": jnp.ones(2)})
        for i in range(WARMUP + 2):
            state = opt.update(state, {"w": jnp.full(2, 0.5)}, key=make_key(i))
        assert np.all(np.isfinite(np.asarray(opt.get_params(state)["w"])))
        assert int(state.iteration) == WARMUP + 2
