"""Meta-training: gradient estimators, the worker computation and the learner.

A :class:`GradientEstimator` turns a truncated step into a meta-gradient estimate.
:func:`gradient_worker_compute` averages the estimates of several estimators for the
current ``theta`` (a worker's job); :class:`GradientLearner` applies averaged estimates
with an outer optimizer on ``theta``, clipping them and skipping non-finite ones (the
central learner's job). :class:`SingleMachineGradientLearner` does both, and one call of
its :meth:`~SingleMachineGradientLearner.update` is **one XLA program** (every
estimator's unrolls, the estimates and the outer update) that compiles once; only the
batches are fetched on the host and passed in.

Two calling conventions, one implementation:

* learnopt's (traced): ``init_worker_state(theta, key, outer_state=None)``,
  ``get_datas()`` on the host, and ``compute_gradient_estimate(theta, key, state, datas,
  outer_state=None)``, called inside the learner's jitted program.
* the notes' library's (host): ``init_worker_state(worker_weights, key)`` and
  ``compute_gradient_estimate(worker_weights, key, state, with_summary=False)`` with a
  :class:`WorkerWeights`; the estimator fetches its own batches and runs its traced
  estimate, jitted once per estimator. :func:`gradient_worker_compute` and
  :class:`GradientLearner` run the library's distributed-style loop on the same code.

An estimator written in the library's convention (``compute_gradient_estimate`` with a
``with_summary`` argument) runs too: the learner then calls it on the host.
"""

from __future__ import annotations

import functools
import inspect
import os
from collections.abc import Callable, Sequence
from typing import Any

import flax.struct
import jax
import jax.numpy as jnp
import optax

from learnopt import _validate, checkpoints, distributed
from learnopt.canonical import settle_dtypes
from learnopt.learned_optimizers import base as lopt_base
from learnopt.optimizers import base as opt_base
from learnopt.tree_utils import tree_all_finite, tree_cast_like, tree_norm

PyTree = Any
MetaParams = Any

__all__ = [
    "OuterState",
    "WorkerWeights",
    "AggregatedGradient",
    "WorkerComputeOut",
    "GradientEstimatorState",
    "UnrollInfo",
    "GradientEstimatorOut",
    "ParameterCheckpoint",
    "OptCheckpoint",
    "GradientEstimator",
    "GradientLearnerState",
    "GradientLearner",
    "gradient_worker_compute",
    "SingleMachineState",
    "SingleMachineGradientLearner",
]


# ------------------------------------------------------------------------------ records


@flax.struct.dataclass
class OuterState:
    """What an estimator knows of outer training: the outer iteration (int32)."""

    outer_iteration: jax.Array


@flax.struct.dataclass
class WorkerWeights:
    """What a worker needs from the learner: ``theta``, its model state, the outer state."""

    theta: MetaParams
    theta_model_state: PyTree
    outer_state: OuterState


@flax.struct.dataclass
class AggregatedGradient:
    """A worker's averaged estimate, sent to the learner."""

    theta_grads: MetaParams
    theta_model_state: PyTree
    mean_loss: jax.Array


@flax.struct.dataclass
class WorkerComputeOut:
    """What :func:`gradient_worker_compute` returns."""

    to_put: AggregatedGradient
    unroll_states: Any
    metrics: dict
    event_info: Any


@flax.struct.dataclass
class GradientEstimatorState:
    """Base of estimator states (an empty state for estimators that keep none)."""


@flax.struct.dataclass
class UnrollInfo:
    """The positive unroll of an estimate: losses and steps ``[K, P]``, ``is_done`` ``[P]``.

    ``task_param`` is the population's task samples at the end of the unroll (``[P, ...]``;
    the library records it per step).
    """

    loss: jax.Array
    iteration: jax.Array
    task_param: PyTree
    is_done: jax.Array


@flax.struct.dataclass
class GradientEstimatorOut:
    """One estimate: the mean meta-loss, the gradient, the next state, unroll details."""

    mean_loss: jax.Array
    grad: MetaParams
    unroll_state: PyTree
    unroll_info: UnrollInfo | None = None


@flax.struct.dataclass
class ParameterCheckpoint:
    """A ``theta`` written to disk for using the learned optimizer (library layout)."""

    params: MetaParams
    gen_id: str
    step: int


@flax.struct.dataclass
class OptCheckpoint:
    """The learner's state written to disk for continuing outer training (library layout)."""

    gradient_learner_state: Any
    elapsed_time: Any
    total_inner_steps: int


# --------------------------------------------------------------------------- estimators


@functools.lru_cache(maxsize=256)
def _params_of(fn: Callable) -> tuple[frozenset, bool]:
    params = inspect.signature(fn).parameters
    var_kw = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
    return frozenset(params), var_kw


def _accepts(fn: Callable, name: str) -> bool:
    fn = getattr(fn, "__func__", fn)
    names, var_kw = _params_of(fn)
    return name in names or var_kw


def _library_style(fn: Callable) -> bool:
    """Whether ``compute_gradient_estimate`` is written in the library's convention."""
    names, _ = _params_of(fn)
    return "with_summary" in names or "worker_weights" in names


def is_host_style(estimator: Any) -> bool:
    """An estimator written in the library's convention (run on the host, not traced)."""
    return bool(getattr(type(estimator), "_library_convention", False))


def _outer_kw(fn: Callable, outer_state: Any) -> dict:
    return {"outer_state": outer_state} if _accepts(fn, "outer_state") else {}


def _as_outer_state(outer_state: Any) -> OuterState:
    it = getattr(outer_state, "outer_iteration", outer_state)
    return OuterState(outer_iteration=jnp.asarray(0 if it is None else it, jnp.int32))


def _library_metrics(metrics: dict) -> dict:
    """learnopt metric names as the library's ``aggregation||name`` keys."""
    return {k if "||" in k else f"mean||{k}": v for k, v in metrics.items()}


def _first_arg(args: tuple, kwargs: dict) -> Any:
    if args:
        return args[0]
    return kwargs.get("worker_weights", kwargs.get("theta"))


def _wrap_init(fn: Callable) -> Callable:
    @functools.wraps(fn)
    def init_worker_state(self, *args, **kwargs):
        if isinstance(_first_arg(args, kwargs), WorkerWeights):
            return self._library_init(fn, *args, **kwargs)
        return fn(self, *args, **kwargs)

    init_worker_state._learnopt_dispatch = True
    return init_worker_state


def _wrap_estimate(fn: Callable) -> Callable:
    @functools.wraps(fn)
    def compute_gradient_estimate(self, *args, **kwargs):
        if isinstance(_first_arg(args, kwargs), WorkerWeights):
            return self._library_estimate(fn, *args, **kwargs)
        return fn(self, *args, **kwargs)

    compute_gradient_estimate._learnopt_dispatch = True
    return compute_gradient_estimate


class GradientEstimator:
    """Base class of meta-gradient estimators.

    Subclasses implement three methods:

    * ``init_worker_state(theta, key, outer_state=None) -> state``: traced; the
      estimator's state (its inner runs, PES accumulators, ...).
    * ``get_datas() -> datas``: on the host; the batches one estimate needs (numpy,
      stacked ``[trunc_length, num_tasks, batch, ...]``, or ``None`` for data-free tasks).
    * ``compute_gradient_estimate(theta, key, state, datas, outer_state=None) ->
      (GradientEstimatorOut, metrics)``: traced; one estimate of ``d meta-loss / d theta``
      (``grad`` shaped like ``theta``), the mean meta-loss, the next state, and a dict of
      scalar metrics. ``outer_state`` (an :class:`OuterState`) may be left out of the
      signature by estimators that do not need it.

    The same two methods also take the library's convention: called with a
    :class:`WorkerWeights` first, ``init_worker_state(worker_weights, key)`` and
    ``compute_gradient_estimate(worker_weights, key, state, with_summary=False,
    datas_list=None)`` fetch the batches on the host (``datas_list``: what
    :meth:`get_datas` returned) and run the traced estimate, jitted once per estimator.
    Metrics then use the library's ``"mean||name"`` keys.
    """

    truncated_step: Any = None
    _library_convention = False

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        estimate = cls.__dict__.get("compute_gradient_estimate")
        if estimate is not None and _library_style(estimate):
            cls._library_convention = True  # written against the library: run on the host
            return
        for name, wrap in (
            ("init_worker_state", _wrap_init),
            ("compute_gradient_estimate", _wrap_estimate),
        ):
            fn = cls.__dict__.get(name)
            if fn is not None and not getattr(fn, "_learnopt_dispatch", False):
                setattr(cls, name, wrap(fn))

    @property
    def task_family(self):
        """The task family of the estimates (settable, as in the library)."""
        family = self.__dict__.get("_task_family")
        if family is None and self.truncated_step is not None:
            family = self.truncated_step.task_family
        return family

    @task_family.setter
    def task_family(self, family) -> None:
        self.__dict__["_task_family"] = family

    @property
    def name(self) -> str:
        return type(self).__name__

    def task_name(self) -> str:
        if self.truncated_step is not None and hasattr(self.truncated_step, "task_name"):
            return self.truncated_step.task_name()
        family = self.task_family
        return family.name if family is not None else "unnamed_task"

    def cfg_name(self) -> str:
        if self.truncated_step is not None and hasattr(self.truncated_step, "cfg_name"):
            return self.truncated_step.cfg_name()
        return "default"

    def init_worker_state(self, theta: MetaParams, key: jax.Array, outer_state: Any = None):
        """The estimator's state for ``theta`` (traced). See the class docstring."""
        raise NotImplementedError

    def get_datas(self) -> PyTree:
        """Host-side batches for one estimate. See the class docstring."""
        raise NotImplementedError

    def compute_gradient_estimate(
        self,
        theta: MetaParams,
        key: jax.Array,
        state: PyTree,
        datas: PyTree,
        outer_state: Any = None,
    ) -> tuple[GradientEstimatorOut, dict[str, jax.Array]]:
        """One meta-gradient estimate (traced). See the class docstring."""
        raise NotImplementedError

    # --------------------------------------------- the library's convention (host side)
    def _jitted(self, name: str, make: Callable[[], Callable]) -> Callable:
        cache = self.__dict__.setdefault("_library_jits", {})
        if name not in cache:
            cache[name] = make()
        return cache[name]

    def _traced_estimate(self, fn: Callable) -> Callable:
        def estimate(theta, key, state, datas, outer_state):
            return fn(self, theta, key, state, datas, **_outer_kw(fn, outer_state))

        estimate.__name__ = f"{type(self).__name__}_estimate"
        return estimate

    def _library_init(self, fn: Callable, worker_weights: WorkerWeights, key: jax.Array):
        weights = worker_weights
        outer_state = _as_outer_state(weights.outer_state)

        def init(theta, key, outer_state):
            return fn(self, theta, key, **_outer_kw(fn, outer_state))

        state = self._jitted("init", lambda: jax.jit(init))(weights.theta, key, outer_state)
        estimate = type(self).compute_gradient_estimate
        raw = getattr(estimate, "__wrapped__", None)
        if raw is None:
            return state
        # Settle the state to the dtypes the estimate produces: it then compiles once.
        datas = jax.tree_util.tree_map(
            lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype), self.get_datas()
        )
        step = self._traced_estimate(raw)
        return settle_dtypes(
            lambda s, th, k, d, o: step(th, k, s, d, o)[0].unroll_state,
            state,
            weights.theta,
            key,
            datas,
            outer_state,
            what=f"{self.name} state",
        )

    def _library_estimate(
        self,
        fn: Callable,
        worker_weights: WorkerWeights,
        key: jax.Array,
        state: PyTree,
        with_summary: bool = False,
        datas_list: PyTree = None,
    ) -> tuple[GradientEstimatorOut, dict[str, jax.Array]]:
        del with_summary  # learnopt's metrics are cheap scalars, computed every time
        weights = worker_weights
        datas = self.get_datas() if datas_list is None else datas_list
        estimate = self._jitted("estimate", lambda: jax.jit(self._traced_estimate(fn)))
        out, metrics = estimate(
            weights.theta, key, state, datas, _as_outer_state(weights.outer_state)
        )
        return out, _library_metrics(metrics)


def _estimate(est: GradientEstimator, theta, key, state, datas, outer_state):
    fn = est.compute_gradient_estimate
    return fn(theta, key, state, datas, **_outer_kw(fn, outer_state))


def _init_states(estimators: Sequence[GradientEstimator], theta, key, outer_state) -> tuple:
    keys = jax.random.split(key, len(estimators))
    out = []
    for est, k in zip(estimators, keys, strict=True):
        fn = est.init_worker_state
        out.append(fn(theta, k, **_outer_kw(fn, outer_state)))
    return tuple(out)


def _prefix(estimators: Sequence[GradientEstimator], i: int) -> str:
    est = estimators[i]
    return f"{i}_{est.name}" if len(estimators) > 1 else est.name


def _combine(estimators, outs, est_metrics) -> tuple[MetaParams, jax.Array, jax.Array, dict]:
    """Mean gradient and loss of several estimates, whether they are finite, and metrics."""
    n = len(outs)
    grad = jax.tree_util.tree_map(lambda *g: sum(g) / n, *[o.grad for o in outs])
    mean_loss = sum(jnp.asarray(o.mean_loss, jnp.float32) for o in outs) / n
    finite = tree_all_finite(grad) & jnp.isfinite(mean_loss)
    metrics = {}
    for i, (out, m) in enumerate(zip(outs, est_metrics, strict=True)):
        prefix = _prefix(estimators, i)
        for k, v in m.items():
            if "||" in k:
                agg, name = k.split("||", 1)
                metrics[f"{agg}||{prefix}/{name}"] = v
            else:
                metrics[f"{prefix}/{k}"] = v
        metrics[f"{prefix}/meta_loss"] = out.mean_loss
    return grad, mean_loss, finite, metrics


def _worker_compute(
    estimators: tuple, weights: WorkerWeights, states: tuple, key: jax.Array, datas: tuple
) -> tuple[AggregatedGradient, tuple, dict]:
    """Every estimator's estimate for ``weights``, averaged (traced).

    If the average is not finite (an inner run diverged), the estimators' states restart
    from ``init_worker_state`` instead of carrying NaNs into the next estimate.
    """
    theta, outer_state = weights.theta, weights.outer_state
    n = len(estimators)
    keys = jax.random.split(jax.random.fold_in(key, outer_state.outer_iteration), n + 1)
    outs, est_metrics = [], []
    for i, (est, st, d) in enumerate(zip(estimators, states, datas, strict=True)):
        out, m = _estimate(est, theta, keys[i], st, d, outer_state)
        outs.append(out)
        est_metrics.append(m)
    grad, mean_loss, finite, metrics = _combine(estimators, outs, est_metrics)
    new_states = tuple(o.unroll_state for o in outs)
    new_states = jax.lax.cond(
        finite,
        lambda: new_states,
        lambda: tree_cast_like(_init_states(estimators, theta, keys[n], outer_state), new_states),
    )
    to_put = AggregatedGradient(
        theta_grads=grad, theta_model_state=weights.theta_model_state, mean_loss=mean_loss
    )
    return to_put, new_states, metrics


@functools.lru_cache(maxsize=32)
def _worker_program(estimators: tuple) -> Callable:
    def _gradient_worker_compute(weights, states, key, datas):
        return _worker_compute(estimators, weights, states, key, datas)

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
    with jax.default_device(device) if device is not None else _nullcontext():
        if any(is_host_style(e) for e in estimators):
            to_put, states, metrics = _host_worker_compute(
                estimators, weights, states, key, datas, with_metrics
            )
        else:
            if datas is None:
                datas = tuple(est.get_datas() for est in estimators)
            to_put, states, metrics = _worker_program(estimators)(
                weights, states, key, tuple(datas)
            )
    metrics = _library_metrics(metrics) if with_metrics else {}
    return WorkerComputeOut(
        to_put=to_put, unroll_states=list(states), metrics=metrics, event_info=[]
    )


class _nullcontext:
    def __enter__(self):
        return None

    def __exit__(self, *exc):
        return False


def _host_worker_compute(estimators, weights, states, key, datas, with_metrics):
    """:func:`_worker_compute` for lists with library-convention estimators (on the host)."""
    n = len(estimators)
    keys = jax.random.split(jax.random.fold_in(key, weights.outer_state.outer_iteration), n + 1)
    outs, est_metrics = [], []
    for i, (est, st) in enumerate(zip(estimators, states, strict=True)):
        kwargs = {"with_summary": with_metrics}
        if datas is not None:
            kwargs["datas_list"] = datas[i]
        out, m = est.compute_gradient_estimate(weights, keys[i], st, **kwargs)
        outs.append(out)
        est_metrics.append(m)
    grad, mean_loss, finite, metrics = _combine(estimators, outs, est_metrics)
    new_states = [o.unroll_state for o in outs]
    if not bool(finite):
        k_init = jax.random.split(keys[n], n)
        new_states = [
            e.init_worker_state(weights, k) for e, k in zip(estimators, k_init, strict=True)
        ]
    to_put = AggregatedGradient(
        theta_grads=grad, theta_model_state=weights.theta_model_state, mean_loss=mean_loss
    )
    return to_put, new_states, metrics


# ------------------------------------------------------------------------------ learner


@flax.struct.dataclass
class GradientLearnerState:
    """The learner's state: the outer optimizer's state on ``theta`` and two counters."""

    theta_opt_state: PyTree
    outer_iteration: jax.Array  # int32: outer steps taken (applied or skipped)
    num_nonfinite: jax.Array  # int32: estimates skipped because they were not finite


def _as_optimizer(theta_opt: Any) -> opt_base.Optimizer:
    if isinstance(theta_opt, opt_base.Optimizer):
        return theta_opt
    if isinstance(theta_opt, optax.GradientTransformation):
        return opt_base.OptaxOptimizer(theta_opt)
    raise TypeError(
        "theta_opt must be a learnopt Optimizer (e.g. opt_base.Adam(1e-3)) or an optax "
        f"GradientTransformation, got {type(theta_opt).__name__}"
    )


def _check_path(name: str, path: Any) -> None:
    if path is not None and not os.path.isfile(path):
        raise FileNotFoundError(f"{name}: no checkpoint file at {path}")


def _load_initial_theta(path: Any, lopt: lopt_base.LearnedOptimizer, theta: MetaParams):
    """``theta`` read from ``path``, with the structure and dtypes of ``theta``.

    The file is a :class:`ParameterCheckpoint` (``checkpoints.save_state``), a library
    checkpoint or a ``checkpoints.save_theta`` file; see
    :func:`learnopt.learned_optimizers.convert.theta_from_library`.
    """
    from learnopt.learned_optimizers import convert

    return tree_cast_like(convert.load_library_theta(path, lopt), theta)


class GradientLearner:
    """The central learner: applies averaged meta-gradients to ``theta``.

    ``update`` averages the :class:`AggregatedGradient` s it is given, clips the mean to
    ``max_grad_norm``, and applies it with ``theta_opt`` only if it, its loss, the new
    ``theta`` and the new outer-optimizer state are all finite; a skipped step is counted
    in ``num_nonfinite`` and leaves ``theta`` and the outer optimizer's state unchanged.
    Metrics per step: ``finite`` (the estimate was finite), ``skipped`` (the step was not
    applied), ``update_norm`` (the norm of the change of ``theta``; 0 when skipped).

    Args:
      lopt: the learned optimizer.
      theta_opt: outer optimizer on ``theta`` (a learnopt Optimizer or optax transform).
      init_theta_from_path: start from the ``theta`` in this file (a
        :class:`ParameterCheckpoint` written with ``checkpoints.save_state``, or a
        ``checkpoints.save_theta`` file) instead of ``lopt.init``.
      init_outer_state_from_path: start from the learner state in this file (an
        :class:`OptCheckpoint` written with ``checkpoints.save_state``): ``theta``, the
        outer optimizer's state (e.g. Adam's moments and step) and the counters.
      num_steps: number of outer steps (passed to ``theta_opt.init`` for schedules).
      max_grad_norm: clip the averaged meta-gradient to this global norm.
    """

    def __init__(
        self,
        lopt: lopt_base.LearnedOptimizer,
        theta_opt: Any,
        init_theta_from_path: str | os.PathLike | None = None,
        init_outer_state_from_path: str | os.PathLike | None = None,
        num_steps: int | None = None,
        max_grad_norm: float | None = None,
    ):
        _validate.optional_positive_float("max_grad_norm", max_grad_norm)
        if num_steps is not None:
            _validate.positive_int("num_steps", num_steps)
        _check_path("init_theta_from_path", init_theta_from_path)
        _check_path("init_outer_state_from_path", init_outer_state_from_path)
        self._lopt = lopt
        self._theta_opt = _as_optimizer(theta_opt)
        self.init_theta_from_path = init_theta_from_path
        self.init_outer_state_from_path = init_outer_state_from_path
        self.num_steps = num_steps
        self.max_grad_norm = max_grad_norm
        self._update_jit = jax.jit(self._apply)

    @property
    def learned_optimizer(self) -> lopt_base.LearnedOptimizer:
        return self._lopt

    @property
    def theta_opt(self) -> opt_base.Optimizer:
        return self._theta_opt

    def get_meta_params(self, state: GradientLearnerState) -> MetaParams:
        """``theta``."""
        return self._theta_opt.get_params(state.theta_opt_state)

    get_lopt_params = get_meta_params

    def get_meta_model_state(self, state: GradientLearnerState) -> PyTree:
        return self._theta_opt.get_state(state.theta_opt_state)

    get_lopt_model_state = get_meta_model_state

    def get_state_for_worker(self, state: GradientLearnerState) -> WorkerWeights:
        """What workers need: ``theta``, its model state and the outer iteration."""
        return WorkerWeights(
            theta=self.get_meta_params(state),
            theta_model_state=self.get_meta_model_state(state),
            outer_state=OuterState(outer_iteration=state.outer_iteration),
        )

    def _fresh_state(self, key: jax.Array) -> GradientLearnerState:
        theta = jax.jit(self._lopt.init)(key)
        if self.init_theta_from_path is not None:
            theta = _load_initial_theta(self.init_theta_from_path, self._lopt, theta)
        theta_opt_state = jax.jit(
            functools.partial(self._theta_opt.init, num_steps=self.num_steps)
        )(theta)
        state = GradientLearnerState(
            theta_opt_state=theta_opt_state,
            outer_iteration=jnp.zeros((), jnp.int32),
            num_nonfinite=jnp.zeros((), jnp.int32),
        )
        if self.init_outer_state_from_path is not None:
            target = OptCheckpoint(
                gradient_learner_state=state, elapsed_time=0.0, total_inner_steps=0
            )
            state = checkpoints.load_state(
                self.init_outer_state_from_path, target
            ).gradient_learner_state
        return state

    def init(self, key: jax.Array) -> GradientLearnerState:
        """The initial state: ``theta`` (from ``lopt.init(key)`` or a file) and its optimizer.

        The state is settled to the dtypes :meth:`update` produces (it compiles once).
        """
        state = self._fresh_state(key)
        grads = AggregatedGradient(
            theta_grads=jax.tree_util.tree_map(
                lambda x: jax.ShapeDtypeStruct(jnp.shape(x), jnp.result_type(x)),
                self.get_meta_params(state),
            ),
            theta_model_state=None,
            mean_loss=jax.ShapeDtypeStruct((), jnp.float32),
        )
        return settle_dtypes(
            lambda s, g, k: self._apply(s, [g], k)[0],
            state,
            grads,
            key,
            what="gradient learner state",
        )

    def _apply(
        self, state: GradientLearnerState, grads_list: Sequence[AggregatedGradient], key: jax.Array
    ) -> tuple[GradientLearnerState, dict[str, jax.Array]]:
        """Averages, clips and (if finite) applies ``grads_list`` (traced)."""
        n = len(grads_list)
        grad = jax.tree_util.tree_map(
            lambda *g: sum(jnp.asarray(x) for x in g) / n, *[g.theta_grads for g in grads_list]
        )
        losses = [jnp.asarray(g.mean_loss, jnp.float32) for g in grads_list]
        mean_loss = sum(losses) / n
        grad_norm = tree_norm(grad)
        if self.max_grad_norm is not None:
            scale = jnp.minimum(1.0, self.max_grad_norm / (grad_norm + 1e-12))
            grad = jax.tree_util.tree_map(lambda g: (g * scale).astype(g.dtype), grad)
        finite = tree_all_finite(grad) & jnp.isfinite(mean_loss)
        model_states = [g.theta_model_state for g in grads_list]
        kwargs = {}
        if jax.tree_util.tree_leaves(model_states):
            kwargs["model_state"] = jax.tree_util.tree_map(lambda *m: sum(m) / n, *model_states)
        applied = self._theta_opt.update(
            state.theta_opt_state, grad, loss=mean_loss, key=key, **kwargs
        )
        # Applied only if the estimate *and* the resulting theta and outer state are finite
        # (a finite but huge step can still overflow theta or the optimizer's moments).
        ok = finite & _all_finite_floats(applied)
        theta_opt_state = jax.tree_util.tree_map(
            lambda a, b: jnp.where(ok, a, b), applied, state.theta_opt_state
        )
        num_nonfinite = state.num_nonfinite + (~ok).astype(jnp.int32)
        old_theta = self._theta_opt.get_params(state.theta_opt_state)
        new_theta = self._theta_opt.get_params(theta_opt_state)
        update_norm = tree_norm(
            jax.tree_util.tree_map(
                lambda a, b: jnp.asarray(a, jnp.float32) - jnp.asarray(b, jnp.float32),
                new_theta,
                old_theta,
            )
        )
        new_state = GradientLearnerState(
            theta_opt_state=theta_opt_state,
            outer_iteration=state.outer_iteration + 1,
            num_nonfinite=num_nonfinite,
        )
        metrics = {
            "meta_loss": mean_loss,
            "best_of_mean_loss": jnp.min(jnp.stack(losses)),
            "grad_norm": grad_norm,
            "finite": finite,
            "skipped": ~ok,
            "num_nonfinite": num_nonfinite,
            "update_norm": update_norm,
        }
        metrics.update(_scalar_theta_metrics(self._theta_opt.get_params(theta_opt_state)))
        return new_state, metrics

    def update(
        self,
        state: GradientLearnerState,
        grads_list: Sequence[AggregatedGradient],
        with_metrics: bool = False,
        key: jax.Array | None = None,
    ) -> tuple[GradientLearnerState, dict[str, jax.Array]]:
        """One outer step with the mean of ``grads_list``: returns ``(state, metrics)``.

        One jitted program (compiled once per number of gradients); metrics are cheap
        scalars computed every time (``with_metrics`` is accepted for compatibility).
        """
        del with_metrics
        if not grads_list:
            raise ValueError("GradientLearner.update needs at least one AggregatedGradient")
        if key is None:
            key = jax.random.fold_in(jax.random.PRNGKey(0), state.outer_iteration)
        return self._update_jit(state, list(grads_list), key)


# ----------------------------------------------------------------------- single machine


@flax.struct.dataclass
class SingleMachineState:
    """The learner's state and every estimator's state."""

    gradient_learner_state: GradientLearnerState
    gradient_estimator_states: tuple

    @property
    def theta_opt_state(self) -> PyTree:
        return self.gradient_learner_state.theta_opt_state

    @property
    def outer_iteration(self) -> jax.Array:
        return self.gradient_learner_state.outer_iteration

    @property
    def num_nonfinite(self) -> jax.Array:
        return self.gradient_learner_state.num_nonfinite


class SingleMachineGradientLearner:
    """Meta-trains ``learned_opt`` with the averaged estimates of ``gradient_estimators``.

    :meth:`update` is :func:`gradient_worker_compute` followed by
    :meth:`GradientLearner.update`, fused into one jitted program.

    Args:
      learned_opt: the learned optimizer.
      gradient_estimators: one or more estimators (e.g. one per task family).
      theta_opt: outer optimizer on ``theta`` (a learnopt Optimizer or optax transform).
      num_steps: number of outer steps (passed to ``theta_opt.init`` for schedules).
      max_grad_norm: clip the averaged meta-gradient to this global norm.
      mesh: a one-axis ``jax.sharding.Mesh``: every estimator's population of inner
        runs (and its batches) is split over the mesh's devices, theta and the outer
        state are replicated. ``num_tasks`` must be a multiple of the mesh size. The
        result is the same as on one device (up to float summation order). A mesh over
        the devices of several processes (``learnopt.distributed.population_mesh()``
        after ``learnopt.distributed.initialize``) makes one run of all of them: each
        process draws only its own rows of the batches and holds only its shards.
        Antithetic estimators are fastest sharded with ``stack_antithetic_samples=False``
        (each device keeps its own +/- pairs; stacked, the population is resharded at
        every step).
      init_theta_from_path, init_outer_state_from_path: see :class:`GradientLearner`.
    """

    def __init__(
        self,
        learned_opt: lopt_base.LearnedOptimizer,
        gradient_estimators: Sequence[GradientEstimator],
        theta_opt: Any,
        num_steps: int | None = None,
        max_grad_norm: float | None = None,
        mesh: jax.sharding.Mesh | None = None,
        init_theta_from_path: str | os.PathLike | None = None,
        init_outer_state_from_path: str | os.PathLike | None = None,
    ):
        if isinstance(gradient_estimators, GradientEstimator):
            gradient_estimators = [gradient_estimators]
        if not gradient_estimators:
            raise ValueError("SingleMachineGradientLearner needs at least one gradient estimator")
        self.gradient_learner = GradientLearner(
            learned_opt,
            theta_opt,
            init_theta_from_path=init_theta_from_path,
            init_outer_state_from_path=init_outer_state_from_path,
            num_steps=num_steps,
            max_grad_norm=max_grad_norm,
        )
        self.gradient_estimators = tuple(gradient_estimators)
        self.mesh = mesh
        self._on_host = any(is_host_style(e) for e in self.gradient_estimators)
        self._multiprocess = False
        self._data_sharding = None
        if mesh is not None:
            if self._on_host:
                raise ValueError(
                    "mesh needs estimators in learnopt's traced convention; "
                    f"{[e.name for e in self.gradient_estimators if is_host_style(e)]} "
                    "run on the host"
                )
            _check_mesh(mesh, self.gradient_estimators)
            self._multiprocess = distributed.spans_processes(mesh)
            if self._multiprocess:  # each process draws the batch rows of its own tasks
                for est in self.gradient_estimators:
                    ts = est.truncated_step
                    ts.local_rows = distributed.local_rows(mesh, ts.num_tasks)
        self._update_jit = jax.jit(self._update)

    @property
    def lopt(self) -> lopt_base.LearnedOptimizer:
        return self.gradient_learner.learned_optimizer

    @property
    def theta_opt(self) -> opt_base.Optimizer:
        return self.gradient_learner.theta_opt

    @property
    def num_steps(self) -> int | None:
        return self.gradient_learner.num_steps

    @property
    def max_grad_norm(self) -> float | None:
        return self.gradient_learner.max_grad_norm

    # ----------------------------------------------------------------------------- init
    def init(self, key: jax.Array) -> SingleMachineState:
        """The initial state: the learner's (``theta``, outer optimizer) and the estimators'.

        The state is settled to the dtypes that :meth:`update` produces, so the jitted
        update compiles exactly once.
        """
        _validate.prng_key("key", key)
        k_learner, k_est = jax.random.split(key)
        learner_state = self.gradient_learner.init(k_learner)
        weights = self.gradient_learner.get_state_for_worker(learner_state)
        if self._on_host:
            keys = jax.random.split(k_est, len(self.gradient_estimators))
            est_states = tuple(
                e.init_worker_state(weights, k)
                for e, k in zip(self.gradient_estimators, keys, strict=True)
            )
            return SingleMachineState(learner_state, est_states)
        init = functools.partial(_init_states, self.gradient_estimators)
        if self.mesh is None:
            est_states = jax.jit(init)(weights.theta, k_est, weights.outer_state)
        else:  # created sharded: no device ever holds a whole population
            replicated = self._replicated()
            learner_state, k_est = jax.device_put((learner_state, k_est), replicated)
            weights = self.gradient_learner.get_state_for_worker(learner_state)
            args = (weights.theta, k_est, weights.outer_state)
            shardings = self._est_shardings(jax.eval_shape(init, *args))
            est_states = jax.jit(init, out_shardings=shardings)(*args)
        state = SingleMachineState(learner_state, est_states)
        datas = self._abstract_datas()
        if self.mesh is not None:
            state = self._shard(state, datas)
        return settle_dtypes(
            lambda s, k, d: self._update(s, k, d)[0],
            state,
            key,
            datas,
            what="meta-training state",
        )

    def _replicated(self) -> jax.sharding.NamedSharding:
        return jax.sharding.NamedSharding(self.mesh, jax.sharding.PartitionSpec())

    def _by_population(self, tree: PyTree, est: GradientEstimator, dim: int) -> PyTree:
        """Shardings of ``tree``: axis ``dim`` split over the mesh where its size is the
        estimator's population, replicated elsewhere."""
        n = est.truncated_step.num_tasks
        spec = jax.sharding.PartitionSpec(*((None,) * dim + (self.mesh.axis_names[0],)))
        split = jax.sharding.NamedSharding(self.mesh, spec)
        replicated = self._replicated()
        return jax.tree_util.tree_map(
            lambda x: split if x.ndim > dim and x.shape[dim] == n else replicated, tree
        )

    def _est_shardings(self, est_states: tuple) -> tuple:
        return tuple(
            self._by_population(st, est, 0)
            for st, est in zip(est_states, self.gradient_estimators, strict=True)
        )

    def _shard(self, state: SingleMachineState, datas: tuple) -> SingleMachineState:
        """Places ``state`` on the mesh and compiles the update for those shardings."""
        replicated = self._replicated()
        state_sharding = SingleMachineState(
            gradient_learner_state=jax.tree_util.tree_map(
                lambda _: replicated, state.gradient_learner_state
            ),
            gradient_estimator_states=self._est_shardings(state.gradient_estimator_states),
        )
        data_sharding = tuple(
            self._by_population(d, est, 1)
            for d, est in zip(datas, self.gradient_estimators, strict=True)
        )
        self._data_sharding = data_sharding
        self._update_jit = jax.jit(
            self._update,
            in_shardings=(state_sharding, replicated, data_sharding),
            out_shardings=(state_sharding, replicated, replicated),
        )
        return jax.device_put(state, state_sharding)

    def _abstract_datas(self) -> tuple:
        """Shapes and dtypes of one step's batches (of the whole population)."""
        datas = tuple(est.get_datas() for est in self.gradient_estimators)
        if self._multiprocess:  # this process drew its rows: axis 1 of population leaves
            return tuple(
                jax.tree_util.tree_map(
                    lambda x, est=est: jax.ShapeDtypeStruct(_global_shape(x, est), x.dtype), d
                )
                for d, est in zip(datas, self.gradient_estimators, strict=True)
            )
        return jax.tree_util.tree_map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype), datas)

    def _global_datas(self, datas: tuple) -> tuple:
        """This process's batch rows as global arrays of the whole population's batches."""

        def put(x, sharding, est):
            if sharding.is_fully_replicated:
                return x  # the same on every process
            return jax.make_array_from_process_local_data(sharding, x, _global_shape(x, est))

        return tuple(
            jax.tree_util.tree_map(lambda x, s, est=est: put(x, s, est), d, sh)
            for d, sh, est in zip(datas, self._data_sharding, self.gradient_estimators, strict=True)
        )

    # --------------------------------------------------------------------------- update
    def get_meta_params(self, state: SingleMachineState) -> MetaParams:
        """``theta``."""
        return self.gradient_learner.get_meta_params(state.gradient_learner_state)

    get_lopt_params = get_meta_params
    get_theta = get_meta_params

    def _update(
        self, state: SingleMachineState, key: jax.Array, datas: tuple
    ) -> tuple[SingleMachineState, jax.Array, dict[str, jax.Array]]:
        k_worker, k_learner = jax.random.split(key)
        weights = self.gradient_learner.get_state_for_worker(state.gradient_learner_state)
        to_put, est_states, metrics = _worker_compute(
            self.gradient_estimators, weights, state.gradient_estimator_states, k_worker, datas
        )
        learner_state, learner_metrics = self.gradient_learner._apply(
            state.gradient_learner_state, [to_put], k_learner
        )
        metrics.update(learner_metrics)
        return SingleMachineState(learner_state, est_states), to_put.mean_loss, metrics

    def get_datas(self) -> tuple:
        """Host-side batches for one outer step of every estimator."""
        return tuple(est.get_datas() for est in self.gradient_estimators)

    def update(
        self, state: SingleMachineState, key: jax.Array, with_metrics: bool = False
    ) -> tuple[SingleMachineState, jax.Array, dict[str, jax.Array]]:
        """One outer step: returns ``(state, meta_loss, metrics)``.

        Metrics are cheap scalars computed inside the same program on every step, so
        ``with_metrics`` (kept for compatibility) never triggers a recompilation.
        """
        _validate.prng_key("key", key)
        if not self._on_host:
            datas = self.get_datas()
            if self._multiprocess:
                datas = self._global_datas(datas)
            return self._update_jit(state, key, datas)
        k_worker, k_learner = jax.random.split(key)
        weights = self.gradient_learner.get_state_for_worker(state.gradient_learner_state)
        out = gradient_worker_compute(
            weights,
            self.gradient_estimators,
            state.gradient_estimator_states,
            k_worker,
            with_metrics=with_metrics,
        )
        learner_state, metrics = self.gradient_learner.update(
            state.gradient_learner_state, [out.to_put], key=k_learner
        )
        metrics = {**out.metrics, **metrics}
        new_state = SingleMachineState(learner_state, tuple(out.unroll_states))
        return new_state, out.to_put.mean_loss, metrics


def _global_shape(x: Any, est: GradientEstimator) -> tuple[int, ...]:
    """The global shape of a leaf of this process's batch rows (``[steps, rows, ...]``)."""
    start, stop = est.truncated_step.local_rows
    shape = tuple(x.shape)
    if len(shape) > 1 and shape[1] == stop - start:
        return (shape[0], est.truncated_step.num_tasks, *shape[2:])
    return shape


def _check_mesh(mesh: jax.sharding.Mesh, estimators: tuple) -> None:
    if len(mesh.axis_names) != 1:
        raise ValueError(f"mesh must have one axis (the population), got {mesh.axis_names}")
    for est in estimators:
        n = est.truncated_step.num_tasks
        if n % mesh.size:
            raise ValueError(
                f"{est.name}: num_tasks={n} is not a multiple of the {mesh.size} devices "
                "of the mesh"
            )


def _all_finite_floats(tree: PyTree) -> jax.Array:
    """Whether every floating-point leaf of ``tree`` is finite (integer leaves are)."""
    leaves = [
        jnp.all(jnp.isfinite(x))
        for x in jax.tree_util.tree_leaves(tree)
        if jnp.issubdtype(jnp.result_type(x), jnp.inexact)
    ]
    return jnp.all(jnp.stack(leaves)) if leaves else jnp.asarray(True)


def _scalar_theta_metrics(theta: PyTree) -> dict[str, jax.Array]:
    """Scalar leaves of theta as metrics; ``log_lr`` also exponentiated."""
    out = {}
    if not isinstance(theta, dict):
        return out
    for name, value in theta.items():
        if hasattr(value, "shape") and value.shape == ():
            out[f"theta/{name}"] = value
            if name == "log_lr":
                out["learning_rate"] = jnp.exp(value)
    return out
