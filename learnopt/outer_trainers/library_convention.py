"""The notes' library's calling convention, on top of learnopt's one implementation.

learnopt's estimators are traced (:mod:`learnopt.outer_trainers.gradient_estimator`):
``init_worker_state(theta, key, outer_state)`` and ``compute_gradient_estimate(theta,
key, state, datas, outer_state)`` run inside the learner's one jitted program, with the
batches fetched on the host by ``get_datas()``. The library (google/learned_optimization)
calls estimators on the host instead, and splits outer training into workers and a
central learner. Everything it needs is here, built on the same code:

* every estimator's two traced methods also take the library's call, with a
  :class:`WorkerWeights` first: ``init_worker_state(worker_weights, key)`` and
  ``compute_gradient_estimate(worker_weights, key, state, with_summary=False,
  datas_list=None)`` fetch the batches on the host (``datas_list``: what ``get_datas()``
  returned) and run the traced method, jitted once per estimator; metrics then use the
  library's ``"mean||name"`` keys;
* an estimator *written* in the library's convention (a ``compute_gradient_estimate``
  with ``with_summary`` or ``worker_weights``) is marked host-style
  (:func:`is_host_style`): the learners call it on the host;
* :func:`gradient_worker_compute` (a worker's job, one jitted program) and
  :class:`GradientLearner` (the central learner's job) run the library's
  distributed-style loop; :class:`WorkerWeights`, :class:`AggregatedGradient`,
  :class:`WorkerComputeOut`, :class:`ParameterCheckpoint` and :class:`OptCheckpoint` are
  its records.

:mod:`learnopt.outer_trainers.gradient_learner`, the library's module path, re-exports
all of it.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Sequence
from typing import Any

import flax.struct
import jax
import jax.numpy as jnp

from learnopt.canonical import settle_dtypes
from learnopt.outer_trainers.gradient_estimator import (
    GradientEstimator,
    GradientEstimatorOut,
    OuterState,
    add_subclass_hook,
    is_host_style,
    outer_kwargs,
    parameter_names,
)
from learnopt.outer_trainers.outer_update import (
    GradientLearner,
    GradientLearnerState,
    OptCheckpoint,
)
from learnopt.outer_trainers.worker import (
    AggregatedGradient,
    WorkerWeights,
    host_worker_compute,
    library_metrics,
    worker_compute,
)

PyTree = Any
MetaParams = Any

__all__ = [
    "OuterState",
    "WorkerWeights",
    "AggregatedGradient",
    "WorkerComputeOut",
    "ParameterCheckpoint",
    "OptCheckpoint",
    "GradientLearnerState",
    "GradientLearner",
    "gradient_worker_compute",
    "is_host_style",
]


# ------------------------------------------------------------------------------ records


@flax.struct.dataclass
class WorkerComputeOut:
    """What :func:`gradient_worker_compute` returns.

    Attributes:
      to_put: the averaged estimate for :meth:`GradientLearner.update`.
      unroll_states: the estimators' next states, which stay with the worker.
      metrics: the estimators' metrics (empty unless asked for).
      event_info: the library's per-event details (always empty here).
    """

    to_put: AggregatedGradient
    unroll_states: Any
    metrics: dict
    event_info: Any


@flax.struct.dataclass
class ParameterCheckpoint:
    """A ``theta`` written to disk for using the learned optimizer (library layout).

    Attributes:
      params: the meta-parameters ``theta``.
      gen_id: the library's identifier of the theta's generation.
      step: the outer step the theta was taken at.
    """

    params: MetaParams
    gen_id: str
    step: int


def _as_outer_state(outer_state: Any) -> OuterState:
    it = getattr(outer_state, "outer_iteration", outer_state)
    return OuterState(outer_iteration=jnp.asarray(0 if it is None else it, jnp.int32))


# ------------------------------------------------- estimators called the library's way


def _library_style(fn: Callable) -> bool:
    """Whether ``compute_gradient_estimate`` is written in the library's convention."""
    names = parameter_names(fn)
    return "with_summary" in names or "worker_weights" in names


def _jitted(est: GradientEstimator, name: str, make: Callable[[], Callable]) -> Callable:
    cache = est.__dict__.setdefault("_library_jits", {})
    if name not in cache:
        cache[name] = make()
    return cache[name]


def _traced_estimate(est: GradientEstimator, fn: Callable) -> Callable:
    def estimate(theta, key, state, datas, outer_state):
        return fn(est, theta, key, state, datas, **outer_kwargs(fn, outer_state))

    estimate.__name__ = f"{type(est).__name__}_estimate"
    return estimate


def _library_init(
    est: GradientEstimator, fn: Callable, worker_weights: WorkerWeights, key: jax.Array
):
    """``init_worker_state(worker_weights, key)`` on the traced ``fn``, jitted once."""
    weights = worker_weights
    outer_state = _as_outer_state(weights.outer_state)

    def init(theta, key, outer_state):
        return fn(est, theta, key, **outer_kwargs(fn, outer_state))

    state = _jitted(est, "init", lambda: jax.jit(init))(weights.theta, key, outer_state)
    estimate = type(est).compute_gradient_estimate
    raw = getattr(estimate, "__wrapped__", None)
    if raw is None:
        return state
    # Settle the state to the dtypes the estimate produces: it then compiles once.
    datas = jax.tree_util.tree_map(
        lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype), est.get_datas()
    )
    step = _traced_estimate(est, raw)
    return settle_dtypes(
        lambda s, th, k, d, o: step(th, k, s, d, o)[0].unroll_state,
        state,
        weights.theta,
        key,
        datas,
        outer_state,
        what=f"{est.name} state",
    )


def _library_estimate(
    est: GradientEstimator,
    fn: Callable,
    worker_weights: WorkerWeights,
    key: jax.Array,
    state: PyTree,
    with_summary: bool = False,
    datas_list: PyTree = None,
) -> tuple[GradientEstimatorOut, dict[str, jax.Array]]:
    """``compute_gradient_estimate(worker_weights, key, state, ...)`` on the traced ``fn``."""
    del with_summary  # learnopt's metrics are cheap scalars, computed every time
    weights = worker_weights
    datas = est.get_datas() if datas_list is None else datas_list
    estimate = _jitted(est, "estimate", lambda: jax.jit(_traced_estimate(est, fn)))
    out, metrics = estimate(weights.theta, key, state, datas, _as_outer_state(weights.outer_state))
    return out, library_metrics(metrics)


def _first_arg(args: tuple, kwargs: dict) -> Any:
    if args:
        return args[0]
    return kwargs.get("worker_weights", kwargs.get("theta"))


def _dispatching(fn: Callable, library: Callable) -> Callable:
    """``fn``, or ``library(self, fn, ...)`` when called with the library's ``WorkerWeights``."""

    @functools.wraps(fn)
    def method(self, *args, **kwargs):
        if isinstance(_first_arg(args, kwargs), WorkerWeights):
            return library(self, fn, *args, **kwargs)
        return fn(self, *args, **kwargs)

    method._learnopt_dispatch = True
    return method


def _adapt(cls: type) -> None:
    """Marks a library-style estimator class, or lets a traced one take the library's call."""
    estimate = cls.__dict__.get("compute_gradient_estimate")
    if estimate is not None and _library_style(estimate):
        cls._library_convention = True  # written against the library: run on the host
        return
    for name, library in (
        ("init_worker_state", _library_init),
        ("compute_gradient_estimate", _library_estimate),
    ):
        fn = cls.__dict__.get(name)
        if fn is not None and not getattr(fn, "_learnopt_dispatch", False):
            setattr(cls, name, _dispatching(fn, library))


add_subclass_hook(_adapt)


# ------------------------------------------------------------------------------ workers


@functools.lru_cache(maxsize=32)
def _worker_program(estimators: tuple) -> Callable:
    def _gradient_worker_compute(weights, states, key, datas):
        return worker_compute(estimators, weights, states, key, datas)

    return jax.jit(_gradient_worker_compute)


def gradient_worker_compute(
    worker_weights: WorkerWeights,
    gradient_estimators: Sequence[GradientEstimator],
    unroll_states: Sequence[PyTree],
    key: jax.Array,
    with_metrics: bool = False,
    device: Any = None,
    datas: Sequence[PyTree] | None = None,
) -> WorkerComputeOut:
    """A worker's job: every estimator's estimate for ``worker_weights``, averaged.

    The library's function, on learnopt's traced estimates: the batches are fetched on
    the host (or passed as ``datas``, one entry per estimator, as their ``get_datas()``
    return them) and all the estimates run as one jitted program, compiled once per
    tuple of estimators. Estimators written in the library's convention run on the host.

    Args:
      worker_weights: from :meth:`GradientLearner.get_state_for_worker`.
      gradient_estimators: the estimators.
      unroll_states: their states (``init_worker_state(worker_weights, key)``).
      key: randomness of this computation (folded with the outer iteration, so a key
        passed again at the next iteration gives new random numbers).
      with_metrics: return the estimators' metrics (``"mean||<estimator>/<name>"``).
      device: run on this device (default: JAX's default device).
      datas: optional batches, one entry per estimator.

    Returns:
      ``WorkerComputeOut(to_put, unroll_states, metrics, event_info)``: ``to_put`` (an
      :class:`AggregatedGradient`) goes to :meth:`GradientLearner.update`, the next
      ``unroll_states`` stay with the worker. A non-finite average restarts the states.
    """
    estimators = tuple(gradient_estimators)
    states = tuple(unroll_states)
    if not estimators:
        raise ValueError("gradient_worker_compute needs at least one gradient estimator")
    if len(states) != len(estimators):
        raise ValueError(
            f"got {len(states)} unroll_states for {len(estimators)} gradient_estimators"
        )
    if datas is not None and len(datas) != len(estimators):
        raise ValueError(f"got {len(datas)} datas for {len(estimators)} gradient_estimators")
    weights = WorkerWeights(
        theta=worker_weights.theta,
        theta_model_state=worker_weights.theta_model_state,
        outer_state=_as_outer_state(worker_weights.outer_state),
    )
    with jax.default_device(device) if device is not None else contextlib.nullcontext():
        if any(is_host_style(e) for e in estimators):
            to_put, states, metrics = host_worker_compute(
                estimators, weights, states, key, datas, with_metrics
            )
        else:
            if datas is None:
                datas = tuple(est.get_datas() for est in estimators)
            to_put, states, metrics = _worker_program(estimators)(
                weights, states, key, tuple(datas)
            )
    metrics = library_metrics(metrics) if with_metrics else {}
    return WorkerComputeOut(
        to_put=to_put, unroll_states=list(states), metrics=metrics, event_info=[]
    )
