"""Learning-rate schedules: ``schedule(step, max_steps) -> learning rate``.

learned_optimization's schedules, by name and arguments. Unlike optax schedules
(``count -> value``) they may depend on the planned length of training
``max_steps`` (``Optimizer.init(..., num_steps=...)`` stores it), which is what lets
one hyperparameter setting (a row of :mod:`~learnopt.optimizers.opt_list`) describe
runs of any length. Every schedule is a traceable function of ``step`` and
``max_steps`` (Python numbers or arrays) and of its hyperparameters, which may be
traced too (``OptList`` under ``vmap`` over its index); they return float32.

The schedules that do not use ``max_steps`` work as optax schedules as they are
(``optax.scale_by_schedule(ExponentialDecay(1e-2, 1e-3))``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

__all__ = [
    "ScalarSchedule",
    "CosineLearningRateSchedule",
    "LinearRampupSqrtDecay",
    "PiecewiseLinear",
    "ExponentialDecay",
]


def _f32(x: Any) -> jax.Array:
    return jnp.asarray(x, dtype=jnp.float32)


class ScalarSchedule:
    """Base class of schedules: ``__call__(step, max_steps=None) -> scalar``.

    Subclasses keep their hyperparameters as attributes; optimizers that hold a
    schedule are described attribute by attribute by the eager-call cache (see
    :mod:`learnopt.optimizers._eager`), so two equal schedules share compiled code.
    """

    _eager_hyperparams = True

    def __call__(self, step: Any, max_steps: Any = None) -> jax.Array:
        """The value at ``step`` (0-based) of a run of ``max_steps`` steps.

        Args:
          step: the step, 0-based (a Python number or an int/float array, traced or not).
          max_steps: the planned length of the run, for schedules that depend on it;
            None when unknown.

        Returns:
          The learning rate, a float32 scalar (or an array shaped like ``step``).
        """
        raise NotImplementedError

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in vars(self).items())
        return f"{type(self).__name__}({args})"


class CosineLearningRateSchedule(ScalarSchedule):
    """Linear warmup, a constant phase, then cosine decay (Loshchilov & Hutter, arXiv:1608.03983).

    With ``T = max_steps`` and ``s = min(step, T)``:

    * warmup: while ``s < T * max(warmup_fraction, constant_fraction)`` the value is
      ``learning_rate * s / (T * max(warmup_fraction, constant_fraction))`` (as in
      learned_optimization and the opt_list code whose hyperparameters
      :mod:`~learnopt.optimizers.opt_list` ships, the ramp lasts at least the constant
      phase; with ``warmup_fraction == 0`` there is no warmup);
    * afterwards, from ``c = T * constant_fraction`` on, a half cosine from
      ``learning_rate`` down to ``min_learning_rate_mult * learning_rate`` at ``T``:
      ``lr_min + (lr - lr_min) * (1 + cos(pi * (s - c) / (T - c))) / 2``.

    Args:
      learning_rate: the peak value.
      min_learning_rate_mult: the final value as a fraction of the peak.
      constant_fraction: fraction of training before the decay starts.
      warmup_fraction: fraction of training spent warming up (see above).
    """

    def __init__(
        self,
        learning_rate: float,
        min_learning_rate_mult: float = 0.0,
        constant_fraction: float = 0.5,
        warmup_fraction: float = 0.01,
    ):
        self.learning_rate = learning_rate
        self.min_learning_rate_mult = min_learning_rate_mult
        self.constant_fraction = constant_fraction
        self.warmup_fraction = warmup_fraction

    def __call__(self, step: Any, max_steps: Any = None) -> jax.Array:
        """The warmup / constant / cosine value at ``step`` (class docstring).

        Args:
          step: the step, 0-based; steps past ``max_steps`` get the final value.
          max_steps: the planned length of the run ``T`` (required).

        Returns:
          The learning rate, float32.

        Raises:
          ValueError: ``max_steps`` is None.
        """
        if max_steps is None:
            raise ValueError(
                "CosineLearningRateSchedule needs max_steps (pass num_steps= to the "
                "optimizer's init)"
            )
        lr = _f32(self.learning_rate)
        total = _f32(max_steps)
        s = jnp.minimum(_f32(step), total)
        const = total * _f32(self.constant_fraction)
        lr_min = _f32(self.min_learning_rate_mult) * lr
        span = total - const
        angle = jnp.where(
            span > 0, (jnp.maximum(s, const) - const) / jnp.where(span > 0, span, 1), 0
        )
        decayed = (lr - lr_min) * (jnp.cos(angle * np.pi) / 2 + 0.5) + lr_min

        warmup = self.warmup_fraction
        if isinstance(warmup, float | int) and warmup <= 0:
            return decayed
        warm_steps = total * jnp.maximum(_f32(warmup), _f32(self.constant_fraction))
        warming = (warm_steps > s) & (_f32(warmup) > 0)
        ramp = s / jnp.where(warm_steps > 0, warm_steps, 1) * lr
        return jnp.where(warming, ramp, decayed)


class LinearRampupSqrtDecay(ScalarSchedule):
    """``peak_lr * min(t / warmup_steps, sqrt(warmup_steps / t))`` with ``t = max(step, 1)``.

    Linear warmup to ``peak_lr`` at ``warmup_steps``, then inverse-square-root decay
    (Vaswani et al., 2017, arXiv:1706.03762).

    Args:
      peak_lr: the value at ``warmup_steps``.
      warmup_steps: length of the warmup.
    """

    def __init__(self, peak_lr: float = 1e-3, warmup_steps: int = 1000):
        self.peak_lr = peak_lr
        self.warmup_steps = warmup_steps

    def __call__(self, step: Any, max_steps: Any = None) -> jax.Array:
        """``peak_lr * min(t / warmup_steps, sqrt(warmup_steps / t))``, ``t = max(step, 1)``.

        As :meth:`ScalarSchedule.__call__`; ``max_steps`` is unused.
        """
        t = jnp.maximum(_f32(step), 1.0)
        warm = _f32(self.warmup_steps)
        return _f32(self.peak_lr) * jnp.minimum(t / warm, jnp.sqrt(warm / t))


class PiecewiseLinear(ScalarSchedule):
    """Linear interpolation through ``(times[i], vals[i])``, constant outside ``times``.

    Args:
      times: increasing steps.
      vals: the values at ``times`` (same length).
    """

    def __init__(self, times: Sequence[float], vals: Sequence[float]):
        if len(times) != len(vals):
            raise ValueError(
                f"PiecewiseLinear needs as many vals as times, got {len(times)} times and "
                f"{len(vals)} vals"
            )
        if len(times) == 0:
            raise ValueError("PiecewiseLinear needs at least one (time, value) pair")
        self.times = tuple(float(t) for t in times)
        self.vals = tuple(float(v) for v in vals)

    def __call__(self, step: Any, max_steps: Any = None) -> jax.Array:
        """The interpolated value at ``step`` (``jnp.interp``).

        As :meth:`ScalarSchedule.__call__`; ``max_steps`` is unused.
        """
        return jnp.interp(_f32(step), _f32(self.times), _f32(self.vals))


class ExponentialDecay(ScalarSchedule):
    """``base_lr * (1 - decay_amount) ** step``.

    Args:
      base_lr: the value at step 0.
      decay_amount: the fraction lost per step.
    """

    def __init__(self, base_lr: float, decay_amount: float):
        self.base_lr = base_lr
        self.decay_amount = decay_amount

    def __call__(self, step: Any, max_steps: Any = None) -> jax.Array:
        """``base_lr * (1 - decay_amount) ** step``.

        As :meth:`ScalarSchedule.__call__`; ``max_steps`` is unused.
        """
        return _f32(self.base_lr) * (1 - _f32(self.decay_amount)) ** _f32(step)
