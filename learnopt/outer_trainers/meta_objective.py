r"""Meta-objectives: which steps of an inner run the meta-loss counts, and on what scale.

By default the meta-loss of a ``K``-step truncation is the mean of its steps' meta-losses,
so over an inner run of ``T`` steps every step counts alike and, with ``T = 1000``, the end
of training is 2% of the objective. The options here (arguments of
:class:`~learnopt.outer_trainers.lopt_truncated_step.VectorizedLOptTruncatedStep`, used by
every estimator) change that; their defaults keep the mean.

**Weighting** (``meta_loss_weighting``). The meta-loss ``L_t`` of inner step ``t``
(0-based; the step of the params it was taken at before that step's update, see
``meta_loss_split``) of a run of length ``T`` gets the weight ``w(t, T)``, normalized so
that its mean over the run's ``T`` steps is 1:

* ``None`` / ``"uniform"``: ``w = 1`` (the default; the notes' library's meta-loss);
* ``"last_window"``: the end of the run, ``w = T / W`` for ``t >= T - W`` and ``0``
  before; ``W`` is ``meta_loss_window`` steps (an int) or ``round(window * T)`` for a
  fraction ``window`` in ``(0, 1]``, clipped to ``[1, T]``;
* ``"late"``: later steps count more, ``w = (p + 1) ((t + 1/2) / T) ** p`` with
  ``p = meta_loss_power`` (1: linear in ``t / T``). The mean over ``t < T`` is exactly 1
  for ``p`` in {0, 1} (midpoint rule) and ``1 - 1 / (4 T^2)`` for ``p = 2``.

.. math::

   w(t, T) =
   \begin{cases}
   1 & \text{uniform (the default)}, \\[2pt]
   \dfrac{T}{W}\ \text{ if } t \ge T - W, \text{ else } 0 & \text{last window}, \\[8pt]
   (p + 1) \left(\dfrac{t + 1/2}{T}\right)^{p} & \text{late}.
   \end{cases}

The meta-loss of a truncation of steps ``t_1 .. t_K`` is ``(1/K) sum_k w(t_k, T) L_{t_k}``
(:func:`learnopt.outer_trainers.common.reduce_loss`). Summed over the ``T / K``
truncations of a run it is ``(T / K) J_w`` with ``J_w = sum_t w_t L_t / sum_t w_t`` the
weighted mean over the run (``sum_t w_t = T``), so the truncated estimators (PES and
NRES without bias; TES and TBPTT with theirs) follow the gradient of ``J_w`` at the same
scale as that of the plain mean by default, and a full-run estimator's ``"avg"`` meta-loss
is ``J_w`` itself. With ``"last_window"`` the truncations before the window have
meta-loss 0 and give a zero estimate (PES still accumulates their perturbations: the
window's loss depends on theta's effect on every earlier step). Steps past ``T`` (the
first, staggered runs end at the end of the truncation in which they reach ``T``) keep
the formula: they belong to the end of their run.

.. math::

   L_{\text{trunc}} = \frac{1}{K} \sum_{k=1}^{K} w(t_k, T)\, L_{t_k},
   \qquad
   \sum_{\text{truncations}} L_{\text{trunc}} = \frac{T}{K}\, J_w,
   \qquad
   J_w = \frac{\sum_{t<T} w(t, T)\, L_t}{\sum_{t<T} w(t, T)}

**Transform** (``meta_loss_transform``), applied to each step's meta-loss value ``v``
(the task's ``normalizer(loss)``, or the aux entry of ``meta_loss_with_aux_key``) before
the weighting:

* ``None``: ``v`` (the default);
* ``"log"``: ``log(max(v, LOG_FLOOR))`` of the *raw* loss (non-finite values as
  :data:`LOG_CEIL`), not of ``normalizer(loss)``: the log is scale-free by itself, and
  normalizers that shift the loss (the library's parametric classifiers map ``l`` to
  ``(l - log(C / 5)) * 10 / log(C)``, negative below ``log 2`` for 10 classes) would
  floor every step of a well-trained run at ``log(LOG_FLOOR)``, where it has no
  gradient. For positive losses (the aux entry of ``meta_loss_with_aux_key`` is
  taken as it is). Since ``d log v = dv / v``, each task's
  meta-gradient is relative to its own loss: tasks whose losses differ by a constant
  factor weigh alike (the factor adds a constant, which has no gradient and cancels in
  the ES differences ``L+ - L-``). The log of the loss relative to its value at
  initialization differs from it by a per-run constant, so it gives the same
  meta-gradients and is not a separate option.

The weights are computed inside the jitted step from each run's traced inner step and
length, so one compiled program serves every position and run length.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

__all__ = [
    "WEIGHTINGS",
    "TRANSFORMS",
    "LOG_FLOOR",
    "LOG_CEIL",
    "finite_loss",
    "check_weighting",
    "check_transform",
    "step_weight",
    "transform",
]

#: Values of ``meta_loss_weighting`` (``None`` and ``"uniform"`` are the same).
WEIGHTINGS = (None, "uniform", "last_window", "late")
#: Values of ``meta_loss_transform``.
TRANSFORMS = (None, "log")
#: The smallest meta-loss value ``"log"`` takes the log of (clipped normalizers reach 0).
LOG_FLOOR = 1e-8
#: The value ``"log"`` takes for a non-finite loss (and the largest it takes the log of).
LOG_CEIL = 1e6


def check_weighting(
    weighting: str | None, window: Any, power: Any
) -> tuple[str | None, int | float | None, float]:
    """Validates a weighting and its parameters.

    Args:
      weighting: one of :data:`WEIGHTINGS`.
      window: for ``"last_window"``, the window as a number of steps (an int ``>= 1``) or
        as a fraction of the run (a float in ``(0, 1]``); None otherwise.
      power: for ``"late"``, the exponent ``p >= 0``.

    Returns:
      ``(weighting, window, power)``, with ``"uniform"`` as None.

    Raises:
      ValueError: an unknown weighting, a missing or bad window, a bad power, or a window
        given to another weighting.
    """
    if weighting not in WEIGHTINGS:
        raise ValueError(f"meta_loss_weighting must be one of {WEIGHTINGS}, got {weighting!r}")
    weighting = None if weighting == "uniform" else weighting
    if weighting == "last_window":
        if window is None:
            raise ValueError(
                "meta_loss_weighting='last_window' needs meta_loss_window: a number of steps "
                "(an int >= 1) or a fraction of the run in (0, 1] (0.1: the last 10%)"
            )
        if isinstance(window, bool) or not isinstance(window, int | float):
            raise TypeError(f"meta_loss_window must be an int or a float, got {window!r}")
        if isinstance(window, int) and window < 1:
            raise ValueError(f"meta_loss_window must be >= 1 steps, got {window}")
        if isinstance(window, float) and not 0.0 < window <= 1.0:
            raise ValueError(
                f"meta_loss_window must be a fraction of the run in (0, 1] (or an int number "
                f"of steps), got {window}"
            )
    elif window is not None:
        raise ValueError(
            f"meta_loss_window applies to meta_loss_weighting='last_window', not {weighting!r}"
        )
    if isinstance(power, bool) or not isinstance(power, int | float) or not power >= 0:
        raise ValueError(f"meta_loss_power must be a number >= 0, got {power!r}")
    return weighting, window, float(power)


def check_transform(name: str | None) -> str | None:
    """Validates a transform.

    Args:
      name: one of :data:`TRANSFORMS`.

    Returns:
      ``name``.

    Raises:
      ValueError: an unknown transform.
    """
    if name not in TRANSFORMS:
        raise ValueError(f"meta_loss_transform must be one of {TRANSFORMS}, got {name!r}")
    return name


def step_weight(
    weighting: str | None,
    inner_step: jax.Array,
    length: jax.Array,
    window: int | float | None = None,
    power: float = 1.0,
) -> jax.Array:
    """The weight ``w(t, T)`` of the meta-loss of inner step ``t`` of a run of length ``T``.

    See the module doc for the formulas; their mean over ``t < T`` is 1.

    Args:
      weighting: a weighting validated by :func:`check_weighting` (not None).
      inner_step: int32 ``t`` (any shape; traced).
      length: int32 ``T``, broadcastable with ``inner_step`` (traced).
      window: the ``"last_window"`` window (steps, or a fraction of ``T``).
      power: the ``"late"`` exponent.

    Returns:
      float32 weights shaped like ``inner_step``.
    """
    t = jnp.asarray(inner_step, jnp.float32)
    n = jnp.maximum(jnp.asarray(length, jnp.float32), 1.0)
    if weighting == "last_window":
        if isinstance(window, float):
            w = jnp.round(window * n)
        else:
            w = jnp.asarray(window, jnp.float32)
        w = jnp.clip(w, 1.0, n)
        return jnp.where(t >= n - w, n / w, 0.0).astype(jnp.float32)
    if weighting == "late":
        return ((power + 1.0) * ((t + 0.5) / n) ** power).astype(jnp.float32)
    raise ValueError(f"step_weight: no weights for meta_loss_weighting={weighting!r}")


def finite_loss(loss: jax.Array) -> jax.Array:
    """A raw loss made finite for the ``"log"`` transform (NaN and +-inf as ``LOG_CEIL``).

    Args:
      loss: the inner losses.

    Returns:
      float32 losses in ``(-inf, LOG_CEIL]``: non-finite values replaced by ``LOG_CEIL``
      and larger ones clipped to it.
    """
    loss = jnp.asarray(loss, jnp.float32)
    return jnp.minimum(jnp.where(jnp.isfinite(loss), loss, LOG_CEIL), LOG_CEIL)


def transform(name: str | None, value: jax.Array) -> jax.Array:
    """A step's meta-loss value on the scale of ``meta_loss_transform``.

    Args:
      name: a transform of :data:`TRANSFORMS`.
      value: the meta-loss values (float32).

    Returns:
      ``value`` (None) or ``log(max(value, LOG_FLOOR))`` (``"log"``), float32.
    """
    if name is None:
        return value
    return jnp.log(jnp.maximum(value, LOG_FLOOR)).astype(jnp.float32)
