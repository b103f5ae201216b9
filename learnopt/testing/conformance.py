"""Every optimizer learnopt ships, by name, and the dtype conformance check they all pass.

:func:`conformance_optimizers` lists, as ``name -> constructor``, the built-in
optimizers (``opt_base.registered_optimizers()``), every registered learned optimizer
at its initial ``theta`` (``"lopt:LearnableAdam"``) and every entry of the optax zoo
through :class:`~learnopt.optimizers.optax_adapter.OptaxOptimizer` (``"optax:lbfgs_zoom"``).
:func:`check_conformance` runs one of them in one of :data:`DTYPE_CASES` on a tiny
least-squares problem and reports what the conformance tests assert: a jitted step
traced once over its calls, the same inside ``lax.scan``, params that keep their
dtype, a finite state. Registering an optimizer (or adding a zoo line) adds it to
``tests/test_conformance.py`` and to the table of ``docs/dtypes.md``.

>>> from learnopt.testing import conformance
>>> result = conformance.check_conformance(
...     conformance.conformance_optimizers()["Adam"], "bf16"
... )
>>> result.step_traces, result.params_dtype_ok, result.finite
(1, True, True)
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
from collections.abc import Callable, Iterator
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from learnopt.learned_optimizers import base as lopt_base
from learnopt.optimizers import base as opt_base
from learnopt.optimizers import optax_zoo
from learnopt.testing import TraceCounter

PyTree = Any

__all__ = [
    "DTYPE_CASES",
    "dtype_case",
    "conformance_optimizers",
    "tiny_problem",
    "check_conformance",
    "ConformanceResult",
]

# name -> (params dtype, grads dtype). "bf16/f32" is mixed precision with bf16 params
# and f32 grads; "f32/bf16" the other way round. "f64" needs jax_enable_x64, which
# :func:`dtype_case` turns on for the duration of the case only.
DTYPE_CASES: dict[str, tuple[str, str]] = {
    "f32": ("float32", "float32"),
    "bf16": ("bfloat16", "bfloat16"),
    "f16": ("float16", "float16"),
    "f64": ("float64", "float64"),
    "bf16/f32": ("bfloat16", "float32"),
    "f32/bf16": ("float32", "bfloat16"),
}


@contextlib.contextmanager
def dtype_case(case: str) -> Iterator[tuple[np.dtype, np.dtype]]:
    """Yields ``(params_dtype, grads_dtype)`` of ``case``, with x64 enabled iff it needs it.

    ``jax.enable_x64`` is a context manager here, so float64 cases never leak 64-bit
    defaults into code that runs after them.

    Args:
      case: a key of :data:`DTYPE_CASES` (``"f32"``, ``"bf16/f32"``, ...).

    Yields:
      ``(params_dtype, grads_dtype)`` as numpy dtypes.
    """
    param_name, grad_name = DTYPE_CASES[case]
    x64 = "float64" in (param_name, grad_name)
    with jax.enable_x64(x64):
        yield jnp.dtype(param_name), jnp.dtype(grad_name)


def _builtin(name: str) -> opt_base.Optimizer:
    return opt_base.get_optimizer(name)


def _learned(name: str) -> opt_base.Optimizer:
    lopt = lopt_base.get_learned_optimizer(name)
    return lopt.opt_fn(lopt.init(jax.random.PRNGKey(0)))


def _optax(name: str) -> opt_base.Optimizer:
    return opt_base.OptaxOptimizer(optax_zoo.get_optax(name), name=name)


def conformance_optimizers() -> dict[str, Callable[[], opt_base.Optimizer]]:
    """``name -> zero-argument constructor`` of every optimizer under conformance test.

    Names are the built-in optimizer names (``"Adam"``), ``"lopt:<name>"`` for the
    learned optimizers at their initial ``theta`` and ``"optax:<zoo name>"`` for the
    optax zoo wrapped in :class:`~learnopt.optimizers.base.OptaxOptimizer`.

    Returns:
      A dict from name to a zero-argument callable that builds the optimizer.
    """
    out: dict[str, Callable[[], opt_base.Optimizer]] = {}
    for name in opt_base.registered_optimizers():
        out[name] = functools.partial(_builtin, name)
    for name in lopt_base.registered_learned_optimizers():
        out[f"lopt:{name}"] = functools.partial(_learned, name)
    for name in optax_zoo.optax_names():
        out[f"optax:{name}"] = functools.partial(_optax, name)
    return out


def tiny_problem(
    params_dtype: Any, seed: int = 0
) -> tuple[dict[str, jax.Array], Callable[[PyTree], jax.Array]]:
    """Params ``{"w": [3, 2], "b": [2]}`` and a least-squares loss computed in their dtype.

    Args:
      params_dtype: the dtype of the params.
      seed: the numpy seed of the data and the initial params.

    Returns:
      ``(params, loss_fn)``; ``loss_fn(params)`` is a scalar in the params' dtype.
    """
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(4, 3)).astype(np.float32)
    y = rng.normal(size=(4, 2)).astype(np.float32)
    params = {
        "w": jnp.asarray(0.5 * rng.normal(size=(3, 2)), params_dtype),
        "b": jnp.zeros((2,), params_dtype),
    }

    def loss_fn(p: PyTree) -> jax.Array:
        dtype = p["w"].dtype
        return jnp.mean(jnp.square(jnp.asarray(x, dtype) @ p["w"] + p["b"] - jnp.asarray(y, dtype)))

    return params, loss_fn


@dataclasses.dataclass
class ConformanceResult:
    """What :func:`check_conformance` measured for one optimizer in one dtype case.

    Attributes:
      step_traces: traces of the jitted step over ``num_calls`` calls (want 1).
      scan_traces: traces of a jitted ``lax.scan`` of steps over two calls (want 1);
        the scan is traced (``jax.eval_shape``), not compiled: ``lax.scan`` checks that
        the carry keeps its types, and the second call reuses the first trace only if
        the output's types equal the input's.
      params_dtype_ok: whether the params kept their dtype (after the calls and the scan).
      finite: whether every float leaf of the step calls' final state and every loss is
        finite.
      first_loss: the loss of the first jitted step's call.
      last_loss: the loss of the last one.
      skips_nonfinite: whether a step given one NaN gradient element returned the state
        it was given, unchanged (:attr:`~learnopt.optimizers.base.Optimizer.skip_nonfinite`).
    """

    step_traces: int  # traces of the jitted step over ``num_calls`` calls (want 1)
    scan_traces: int  # traces of a jitted lax.scan of steps over two traced calls (want 1)
    params_dtype_ok: bool  # params kept their dtype (after the calls and the scan)
    finite: bool  # every float leaf of the step calls' final state and losses is finite
    first_loss: float
    last_loss: float
    skips_nonfinite: bool = True  # a NaN gradient element left the state unchanged

    @property
    def ok(self) -> bool:
        """Whether every check passed (one trace each, dtypes kept, everything finite,
        a non-finite step skipped)."""
        return (
            self.step_traces == 1
            and self.scan_traces == 1
            and self.params_dtype_ok
            and self.finite
            and self.skips_nonfinite
        )


def _all_finite(tree: PyTree) -> bool:
    """Whether every float leaf is finite (checked in numpy: no eager XLA programs)."""
    leaves = [
        x
        for x in jax.tree_util.tree_leaves(tree)
        if hasattr(x, "dtype") and jnp.issubdtype(x.dtype, jnp.inexact)
    ]
    return all(np.isfinite(np.asarray(x).astype(np.float64)).all() for x in leaves)


def _same_values(a: PyTree, b: PyTree) -> bool:
    """Whether two states hold the same structure and bit-identical leaves (keys by data)."""

    def data(x: Any) -> np.ndarray:
        if hasattr(x, "dtype") and jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key):
            x = jax.random.key_data(x)
        return np.asarray(x)

    la, lb = jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b)
    same_tree = jax.tree_util.tree_structure(a) == jax.tree_util.tree_structure(b)
    return same_tree and all(
        np.array_equal(data(x), data(y), equal_nan=True) for x, y in zip(la, lb, strict=True)
    )


def _poison_first(grads: PyTree, bad: jax.Array) -> PyTree:
    """``grads`` with its first element NaN where ``bad`` (a boolean scalar) is true."""
    leaves, treedef = jax.tree_util.tree_flatten(grads)
    first = leaves[0]
    at = (0,) * first.ndim
    leaves[0] = first.at[at].set(jnp.where(bad, jnp.nan, first[at]).astype(first.dtype))
    return jax.tree_util.tree_unflatten(treedef, leaves)


def _abstract(x: Any) -> jax.ShapeDtypeStruct:
    """``x``'s shape, dtype and weak type (what a trace is keyed on)."""
    return jax.ShapeDtypeStruct(jnp.shape(x), x.dtype, weak_type=getattr(x, "weak_type", False))


def _same_dtypes(a: PyTree, b: PyTree) -> bool:
    return [x.dtype for x in jax.tree_util.tree_leaves(a)] == [
        x.dtype for x in jax.tree_util.tree_leaves(b)
    ]


def check_conformance(
    make_opt: Callable[[], opt_base.Optimizer],
    case: str,
    *,
    num_calls: int = 10,
    scan_length: int = 5,
    compiler_options: dict[str, Any] | None = None,
) -> ConformanceResult:
    """Runs the conformance checks of one optimizer in one dtype case.

    A jitted step (value-and-grad of the tiny problem, grads cast to the case's grads
    dtype, ``opt.update``) is called ``num_calls`` times on its own output; then a
    jitted ``lax.scan`` of the same step is traced twice (``jax.eval_shape``: one
    compiled program per case, the step's), on the initial state's types and on its
    own output's. Both are counted with :class:`~learnopt.testing.TraceCounter`.
    The step passes ``value_fn`` (for line searches) to :class:`OptaxOptimizer`.
    ``compiler_options`` go to XLA (the tests lower the backend optimization level
    to compile faster; tracing, and so the counts, do not depend on them).

    Args:
      make_opt: a zero-argument constructor (a value of :func:`conformance_optimizers`).
      case: a key of :data:`DTYPE_CASES`.
      num_calls: calls of the jitted step.
      scan_length: steps in each (traced) call of the jitted scan.
      compiler_options: XLA compiler options for the step's program, or None.

    Returns:
      A :class:`ConformanceResult` (``.ok`` when every check passed).
    """
    with dtype_case(case) as (params_dtype, grads_dtype):
        opt = make_opt()
        params, loss_fn = tiny_problem(params_dtype)
        extra = {"value_fn": loss_fn} if isinstance(opt, opt_base.OptaxOptimizer) else {}
        state0 = opt.init(params, num_steps=100)  # schedules (NAdamW, OptList) need it

        step_counter, scan_counter = TraceCounter(), TraceCounter()

        jit = functools.partial(jax.jit, compiler_options=compiler_options)

        def step_fn(state, bad=False):
            loss, grads = jax.value_and_grad(loss_fn)(opt.get_params(state))
            grads = jax.tree_util.tree_map(lambda g: g.astype(grads_dtype), grads)
            grads = _poison_first(grads, jnp.asarray(bad))
            return opt.update(state, grads, loss, **extra), loss

        step = jit(step_counter.wrap(step_fn))
        fine = jnp.asarray(False)

        @jit
        @scan_counter.wrap
        def scan(state):
            return jax.lax.scan(lambda s, _: step_fn(s), state, None, length=scan_length)

        state, losses = state0, []
        for _ in range(num_calls):
            state, loss = step(state, fine)
            losses.append(loss)
        skipped, _ = step(state, jnp.asarray(True))  # one NaN gradient element
        # The scan is traced, not compiled (the step's program above already ran every
        # operation): lax.scan checks that the carry keeps its types, and the second
        # call, on the first one's output types, must reuse the first trace.
        scanned, _ = jax.eval_shape(scan, jax.tree_util.tree_map(_abstract, state0))
        scanned, _ = jax.eval_shape(scan, scanned)

        losses = np.asarray([np.float64(np.asarray(x)) for x in losses])
        return ConformanceResult(
            step_traces=step_counter.count,
            scan_traces=scan_counter.count,
            params_dtype_ok=_same_dtypes(opt.get_params(state), params)
            and _same_dtypes(opt.get_params(scanned), params),
            finite=_all_finite((state, losses)),
            first_loss=float(losses[0]),
            last_loss=float(losses[-1]),
            skips_nonfinite=_same_values(skipped, state),
        )
