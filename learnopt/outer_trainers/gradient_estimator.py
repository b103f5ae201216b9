"""The gradient-estimator protocol (learnopt's traced convention), its records, the registry.

A :class:`GradientEstimator` turns a truncated step (a population of inner training runs)
into an estimate of ``d meta-loss / d theta``. learnopt calls it in two places:

* on the host, ``get_datas()``: the batches of one estimate (numpy);
* inside the learner's one jitted program, ``init_worker_state(theta, key, outer_state)``
  and ``compute_gradient_estimate(theta, key, state, datas, outer_state)``.

Every estimator class registers itself under its class name where it is defined
(``@ESTIMATORS.register``); ``learnopt/outer_trainers/__init__.py`` imports the estimator
modules, so the registry is full whenever this package is imported.

The notes' library calls the same two traced methods in its own convention (a
``WorkerWeights`` first, on the host). That convention lives in
:mod:`learnopt.outer_trainers.library_convention`, which adapts every subclass through
:func:`add_subclass_hook`; this module knows nothing of it.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any

import flax.struct
import jax

from learnopt.registry import Registry

PyTree = Any
MetaParams = Any

__all__ = [
    "OuterState",
    "GradientEstimatorState",
    "UnrollInfo",
    "GradientEstimatorOut",
    "GradientEstimator",
    "ESTIMATORS",
    "add_subclass_hook",
    "is_host_style",
    "outer_kwargs",
    "parameter_names",
]


# ------------------------------------------------------------------------------ records


@flax.struct.dataclass
class OuterState:
    """What an estimator knows of outer training: the outer iteration (int32).

    Attributes:
      outer_iteration: int32 scalar, the outer steps taken so far.
    """

    outer_iteration: jax.Array


@flax.struct.dataclass
class GradientEstimatorState:
    """Base of estimator states (an empty state for estimators that keep none)."""


@flax.struct.dataclass
class UnrollInfo:
    """The positive unroll of an estimate: losses and steps ``[K, P]``, ``is_done`` ``[P]``.

    ``task_param`` is the population's task samples at the end of the unroll (``[P, ...]``;
    the library records it per step).

    Attributes:
      loss: ``[K, P]``, the meta-loss of each of the ``K`` steps of each of the ``P`` runs.
      iteration: int32 ``[K, P]``, the inner step each loss was taken at.
      task_param: ``[P, ...]``, the runs' task samples at the end of the unroll.
      is_done: bool ``[P]``, whether each run ended during the unroll.
    """

    loss: jax.Array
    iteration: jax.Array
    task_param: PyTree
    is_done: jax.Array


@flax.struct.dataclass
class GradientEstimatorOut:
    """One estimate: the mean meta-loss, the gradient, the next state, unroll details.

    Attributes:
      mean_loss: the meta-loss averaged over the population, a scalar.
      grad: the meta-gradient estimate, shaped like ``theta``.
      unroll_state: the estimator's next state.
      unroll_info: the positive unroll's losses and steps, or None.
    """

    mean_loss: jax.Array
    grad: MetaParams
    unroll_state: PyTree
    unroll_info: UnrollInfo | None = None


# ---------------------------------------------------------------- calling the protocol


@functools.lru_cache(maxsize=256)
def _params_of(fn: Callable) -> tuple[frozenset, bool]:
    params = inspect.signature(fn).parameters
    var_kw = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
    return frozenset(params), var_kw


def _accepts(fn: Callable, name: str) -> bool:
    fn = getattr(fn, "__func__", fn)
    names, var_kw = _params_of(fn)
    return name in names or var_kw


def parameter_names(fn: Callable) -> frozenset:
    """The names of ``fn``'s parameters (cached; follows ``functools.wraps``).

    Args:
      fn: a function (not a bound method).

    Returns:
      The parameter names.
    """
    return _params_of(fn)[0]


def outer_kwargs(fn: Callable, outer_state: Any) -> dict:
    """``{"outer_state": outer_state}`` if ``fn`` takes it, else ``{}``.

    Estimators that do not need the outer state may leave it out of their signature.

    Args:
      fn: an estimator's ``init_worker_state`` or ``compute_gradient_estimate``.
      outer_state: the :class:`OuterState` to pass.

    Returns:
      The keyword arguments to call ``fn`` with.
    """
    return {"outer_state": outer_state} if _accepts(fn, "outer_state") else {}


def is_host_style(estimator: Any) -> bool:
    """Whether ``estimator`` is written in the library's convention (run on the host).

    Such estimators are marked when their class is defined (see
    :mod:`learnopt.outer_trainers.library_convention`); the learners then call them on
    the host instead of tracing them.

    Args:
      estimator: a gradient estimator.

    Returns:
      True for a library-style estimator.
    """
    return bool(getattr(type(estimator), "_library_convention", False))


# ----------------------------------------------------------------------- the protocol

_SUBCLASS_HOOKS: list[Callable[[type], None]] = []


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

    The two traced methods also take the notes' library's convention (a ``WorkerWeights``
    first, on the host), and a subclass may be written in that convention; see
    :mod:`learnopt.outer_trainers.library_convention`.
    """

    truncated_step: Any = None
    #: True for a subclass written in the library's convention (set when it is defined).
    _library_convention = False

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        for hook in _SUBCLASS_HOOKS:
            hook(cls)

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
        """The estimator's name in metrics (its class name)."""
        return type(self).__name__

    def task_name(self) -> str:
        """The task's name for metrics (the library's method).

        Returns:
          The truncated step's ``task_name()``, else the task family's name.
        """
        if self.truncated_step is not None and hasattr(self.truncated_step, "task_name"):
            return self.truncated_step.task_name()
        family = self.task_family
        return family.name if family is not None else "unnamed_task"

    def cfg_name(self) -> str:
        """The configuration's name for metrics (the library's method).

        Returns:
          The truncated step's ``cfg_name()``, else ``"default"``.
        """
        if self.truncated_step is not None and hasattr(self.truncated_step, "cfg_name"):
            return self.truncated_step.cfg_name()
        return "default"

    def init_worker_state(self, theta: MetaParams, key: jax.Array, outer_state: Any = None):
        """The estimator's state for ``theta`` (traced; overridden by every estimator).

        Args:
          theta: the meta-parameters.
          key: randomness of the initial state (task samples, staggered starts, ...).
          outer_state: an :class:`OuterState` (may be left out of a subclass's signature).

        Returns:
          The estimator's state (a pytree), passed back to
          :meth:`compute_gradient_estimate`.
        """
        raise NotImplementedError

    def get_datas(self) -> PyTree:
        """The batches of one estimate, fetched on the host (overridden by every estimator).

        Returns:
          numpy batches stacked ``[steps, num_tasks, batch, ...]`` (as the estimator's
          ``compute_gradient_estimate`` takes them), or ``None`` for data-free tasks.
        """
        raise NotImplementedError

    def compute_gradient_estimate(
        self,
        theta: MetaParams,
        key: jax.Array,
        state: PyTree,
        datas: PyTree,
        outer_state: Any = None,
    ) -> tuple[GradientEstimatorOut, dict[str, jax.Array]]:
        """One meta-gradient estimate (traced; overridden by every estimator).

        Args:
          theta: the meta-parameters.
          key: randomness of this estimate.
          state: from :meth:`init_worker_state` or the previous estimate.
          datas: from :meth:`get_datas`.
          outer_state: an :class:`OuterState` (may be left out of a subclass's signature).

        Returns:
          ``(GradientEstimatorOut(mean_loss, grad, unroll_state, unroll_info), metrics)``:
          ``grad`` is shaped like ``theta``, ``unroll_state`` is the next state and
          ``metrics`` a dict of scalars.
        """
        raise NotImplementedError


def _subclasses(cls: type) -> list[type]:
    out = []
    for sub in cls.__subclasses__():
        out += [sub, *_subclasses(sub)]
    return out


def add_subclass_hook(hook: Callable[[type], None]) -> None:
    """Calls ``hook(cls)`` for every subclass of :class:`GradientEstimator`.

    Subclasses defined already get it now, later ones when they are defined, so the
    result does not depend on the order in which modules are imported. The library's
    calling convention (:mod:`learnopt.outer_trainers.library_convention`) is added to
    every estimator this way.

    Args:
      hook: a function of a class that may mark or wrap the class's methods; it must
        look only at the class's own ``__dict__`` and be harmless to call twice.

    Returns:
      None.
    """
    if hook in _SUBCLASS_HOOKS:
        return
    _SUBCLASS_HOOKS.append(hook)
    for cls in _subclasses(GradientEstimator):
        hook(cls)


#: Estimator classes by class name (``"TruncatedPES"``, ...): each class registers itself
#: where it is defined. The command line's short names (``pes``, ...) map onto these in
#: :mod:`learnopt.run.config`.
ESTIMATORS: Registry[GradientEstimator] = Registry("estimator", listing="estimators")
