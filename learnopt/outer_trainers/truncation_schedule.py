"""Truncation schedules: how many inner steps an inner training run lasts.

Vocabulary (the same across ``learnopt.outer_trainers``): a schedule gives the **length of
an inner training run** (``total_length`` of :class:`ConstantTruncationSchedule`); a
truncated gradient estimator advances the runs by ``trunc_length`` steps per estimate.

A schedule samples the length of each new inner run with ``sample_length(key,
outer_state)``, which is traceable and may depend on the outer iteration
(``outer_state.outer_iteration``, see :class:`ScheduledTruncationSchedule`). In
learnopt a run ends, and is re-initialized, at the end of the truncation in which it
reaches its length, so lengths are effectively rounded up to a multiple of
``trunc_length``.

The notes' library drives schedules through ``init(key, outer_state)`` and
``next_state(state, step, key, outer_state)``; both are provided on top of
``sample_length`` for code that calls them directly.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import flax.struct
import jax
import jax.numpy as jnp
import numpy as np

from learnopt import _validate

__all__ = [
    "TruncationSchedule",
    "ConstantTruncationState",
    "ConstantTruncationSchedule",
    "LogUniformLengthSchedule",
    "NeverEndingTruncationSchedule",
    "ScheduledTruncationSchedule",
    "outer_iteration",
]

_NEVER = int(np.iinfo(np.int32).max)

#: A length given as a function of the outer iteration (the library's ``ScalarSchedule``).
LengthSchedule = Callable[..., Any]


@flax.struct.dataclass
class ConstantTruncationState:
    """The state of a schedule for one run: its length (int32).

    Attributes:
      length: int32 scalar, the run's length in inner steps.
    """

    length: jax.Array


def outer_iteration(outer_state: Any) -> jax.Array:
    """``outer_state.outer_iteration`` as an int32 scalar (0 when ``outer_state`` is None).

    Args:
      outer_state: an ``OuterState``, an outer iteration, or None.

    Returns:
      An int32 scalar.
    """
    if outer_state is None:
        return jnp.zeros((), jnp.int32)
    return jnp.asarray(getattr(outer_state, "outer_iteration", outer_state), jnp.int32)


def _value(schedule: Any, step: jax.Array, max_steps: int | None = None) -> jax.Array:
    """A length: an int, or a schedule called on the outer iteration."""
    if not callable(schedule):
        return jnp.asarray(schedule, jnp.float32)
    if max_steps is None:
        return jnp.asarray(schedule(step), jnp.float32)
    return jnp.asarray(schedule(step, max_steps=max_steps), jnp.float32)


class TruncationSchedule:
    """Base class: ``sample_length(key, outer_state=None) -> int32`` scalar.

    Subclasses implement :meth:`sample_length` (traceable) and :attr:`max_length`.
    """

    def sample_length(self, key: jax.Array, outer_state: Any = None) -> jax.Array:
        """The length of a new inner run (int32 scalar; traceable).

        Args:
          key: randomness for this run's length.
          outer_state: anything with an ``outer_iteration`` (``gradient_learner.OuterState``)
            or None (outer iteration 0).

        Returns:
          An int32 scalar.
        """
        raise NotImplementedError

    @property
    def max_length(self) -> int | None:
        """A static upper bound on the sampled lengths (an int), or None if there is none.

        The truncated estimators check that their ``trunc_length`` fits in it, and the
        full-run ones compile a horizon of that many steps.
        """
        raise NotImplementedError

    # The library's interface, on top of sample_length.
    def init(self, key: jax.Array, outer_state: Any = None) -> ConstantTruncationState:
        """The state of a new run (library interface).

        Args:
          key: randomness of the run's length.
          outer_state: an ``OuterState`` (or an outer iteration, or None: iteration 0),
            for schedules that depend on the outer iteration.

        Returns:
          ``ConstantTruncationState(length)``.
        """
        return ConstantTruncationState(length=self.sample_length(key, outer_state))

    def next_state(
        self, state: ConstantTruncationState, step: Any, key: jax.Array, outer_state: Any = None
    ) -> tuple[ConstantTruncationState, jax.Array]:
        """The state after ``step`` inner steps (library interface).

        Args:
          state: the run's state (from :meth:`init`).
          step: the inner steps the run has taken.
          key: randomness of a new length.
          outer_state: an ``OuterState`` (or an outer iteration, or None: iteration 0),
            for schedules that depend on the outer iteration.

        Returns:
          ``(state, is_done)``: a finished run (``step >= length``) gets a new length.
        """
        is_done = jnp.asarray(step) >= state.length
        fresh = self.init(key, outer_state)
        return jax.tree_util.tree_map(lambda a, b: jnp.where(is_done, a, b), fresh, state), is_done


class ConstantTruncationSchedule(TruncationSchedule):
    """Every inner run lasts ``total_length`` steps.

    Args:
      total_length: the length of every inner run (>= 1).
    """

    def __init__(self, total_length: int):
        _validate.positive_int("total_length", total_length)
        self.total_length = int(total_length)

    def sample_length(self, key: jax.Array, outer_state: Any = None) -> jax.Array:
        """``total_length``.

        Args and returns as in :meth:`TruncationSchedule.sample_length`.
        """
        return jnp.asarray(self.total_length, jnp.int32)

    @property
    def max_length(self) -> int:
        """``total_length``."""
        return self.total_length

    def __repr__(self) -> str:
        return f"ConstantTruncationSchedule({self.total_length})"


class LogUniformLengthSchedule(TruncationSchedule):
    """Lengths log-uniform in ``[min_length, max_length]`` (more short runs than long).

    Either bound may be a schedule of the outer iteration (a callable ``f(step)``, as the
    library's ``ScalarSchedule``); then :attr:`max_length` is None (no static bound).

    Args:
      min_length: the shortest length (>= 1), or a schedule ``f(outer_iteration)``.
      max_length: the longest length (>= ``min_length``), or a schedule.
    """

    def __init__(self, min_length: int | LengthSchedule, max_length: int | LengthSchedule):
        if not callable(min_length) and not callable(max_length):
            if not 1 <= min_length <= max_length:
                raise ValueError(
                    f"need 1 <= min_length <= max_length, got {min_length}, {max_length}"
                )
            min_length, max_length = int(min_length), int(max_length)
        self.min_length = min_length
        self._max_length = max_length

    def sample_length(self, key: jax.Array, outer_state: Any = None) -> jax.Array:
        """A length log-uniform in ``[min_length, max_length]``, rounded.

        Args and returns as in :meth:`TruncationSchedule.sample_length`.
        """
        step = outer_iteration(outer_state)
        lo = _value(self.min_length, step)
        hi = _value(self._max_length, step)
        u = jax.random.uniform(key, (), jnp.float32, jnp.log(lo), jnp.log(hi))
        return jnp.clip(jnp.round(jnp.exp(u)), lo, hi).astype(jnp.int32)

    @property
    def max_length(self) -> int | None:
        """The upper bound ``max_length``, or None when it is a schedule."""
        return None if callable(self._max_length) else self._max_length

    def __repr__(self) -> str:
        return f"LogUniformLengthSchedule({self.min_length}, {self._max_length})"


class NeverEndingTruncationSchedule(TruncationSchedule):
    """Inner runs never end (online problems; the inner step of FullES / FullGrad)."""

    def sample_length(self, key: jax.Array, outer_state: Any = None) -> jax.Array:
        """The largest int32 (a run never reaches it).

        Args and returns as in :meth:`TruncationSchedule.sample_length`.
        """
        return jnp.asarray(_NEVER, jnp.int32)

    @property
    def max_length(self) -> int:
        """The largest int32 (not a bound that a full-run estimator can compile)."""
        return _NEVER

    def __repr__(self) -> str:
        return "NeverEndingTruncationSchedule()"


class ScheduledTruncationSchedule(TruncationSchedule):
    """Length given by a schedule of the outer iteration (e.g. longer runs as training goes).

    ``length = schedule(outer_iteration, max_steps=max_steps)`` (``schedule(outer_iteration)``
    when ``max_steps`` is None), plus ``int(N(0, 1) * std)`` when ``std > 0`` with the
    result kept ``>= min_length``; lengths are truncated to integers and are at least 1.

    Args:
      schedule: a callable of the outer iteration (the library's ``ScalarSchedule``, an
        optax schedule, or any traceable function).
      max_steps: passed to ``schedule`` (the number of outer steps, for schedules that
        need it).
      std: standard deviation of the random shift of the length (0: deterministic).
      min_length: lower bound of the length after the random shift.
      max_length: learnopt's addition: a static upper bound (lengths are clipped to it).
        FullES / FullGrad need one to unroll a variable horizon in one compiled program.
    """

    def __init__(
        self,
        schedule: LengthSchedule,
        max_steps: int | None = None,
        std: float = 0,
        min_length: int = 10,
        max_length: int | None = None,
    ):
        if not callable(schedule):
            raise TypeError(
                f"schedule must be a callable of the outer iteration, got {type(schedule).__name__}"
            )
        if std < 0:
            raise ValueError(f"std must be >= 0, got {std}")
        if int(min_length) < 1:
            raise ValueError(f"min_length must be >= 1, got {min_length}")
        if max_length is not None and int(max_length) < 1:
            raise ValueError(f"max_length must be None or >= 1, got {max_length}")
        self.schedule = schedule
        self.max_steps = max_steps
        self.std = float(std)
        self.min_length = int(min_length)
        self._max_length = None if max_length is None else int(max_length)

    def sample_length(self, key: jax.Array, outer_state: Any = None) -> jax.Array:
        """``schedule(outer_iteration)``, randomly shifted when ``std > 0``, clipped.

        Args and returns as in :meth:`TruncationSchedule.sample_length`.
        """
        length = _value(self.schedule, outer_iteration(outer_state), self.max_steps)
        length = length.astype(jnp.int32)
        if self.std > 0:
            shift = (jax.random.normal(key, (), jnp.float32) * self.std).astype(jnp.int32)
            length = jnp.maximum(length + shift, self.min_length)
        length = jnp.maximum(length, 1)
        if self._max_length is not None:
            length = jnp.minimum(length, self._max_length)
        return length.astype(jnp.int32)

    @property
    def max_length(self) -> int | None:
        """The ``max_length`` given (lengths are clipped to it), or None."""
        return self._max_length

    def __repr__(self) -> str:
        return (
            f"ScheduledTruncationSchedule({self.schedule!r}, max_steps={self.max_steps}, "
            f"std={self.std}, min_length={self.min_length}, max_length={self._max_length})"
        )
