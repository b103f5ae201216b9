"""The figures of an evaluation, on numpy curves: windows, smoothing, speed-up, means.

Pure numpy (no JAX), so that plots and reports can use them. All figures are means over
seeds; a run that became non-finite counts as diverged and loses against any finite run.

* ``final_train``: mean train loss over the last ``window`` steps (``window =
  max(1, num_steps // 10)``, 10 % of the run, :func:`windows`);
* ``mean_train``: mean train loss over the whole run (the area under the curve);
* ``final_valid``: the valid loss after the last step;
* **speed-up** of a candidate over a tuned baseline (:func:`speedup`): with ``target``
  the worse of the two ``final_train`` values, ``steps_to_reach(baseline, target) /
  steps_to_reach(candidate, target)`` on the seed-mean curves smoothed by a trailing
  mean of ``window`` steps, each crossing counted at the centre of its window (so the
  smoothing delays neither curve, and the last point of a smoothed curve is exactly
  its ``final_train``; a narrower window would let one batch that is easy for both
  optimizers, which see the same data, decide the crossing for both). When the
  candidate ends lower this is how many times fewer steps it needs to reach the
  baseline's final loss (``> 1``); when it ends higher, the ratio of the steps both
  need to reach the candidate's final loss (usually ``< 1``; ``> 1`` when the candidate
  got there first and then stalled). This is the step-count idea behind the library's
  ``speedup_over_adam`` normalizer, measured against the tuned baseline of this run;
* ``normalized_loss = final_train(candidate) / final_train(tuned baseline)``
  (``< 1`` is better; undefined for a baseline loss ``<= 0``); over a suite its
  :func:`geomean`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import numpy as np

__all__ = [
    "windows",
    "smooth",
    "steps_to_reach",
    "speedup",
    "geomean",
    "finite_or_nan",
    "rank_key",
]


def windows(num_steps: int) -> tuple[int, int]:
    """``(plot_smoothing, window)`` for a run of ``num_steps``.

    ``window = max(1, num_steps // 10)`` defines ``final_train`` and the speed-up (see
    the module docstring); plots smooth train curves over ``max(1, num_steps // 50)``.

    Args:
      num_steps: the length of the runs.

    Returns:
      ``(plot_smoothing, window)``, both ``>= 1``.
    """
    return max(1, num_steps // 50), max(1, num_steps // 10)


def smooth(curve: np.ndarray, window: int) -> np.ndarray:
    """Trailing mean over ``window`` steps (shorter at the start), along the last axis.

    Non-finite values propagate: once a run diverges its smoothed curve stays NaN for
    ``window`` steps (and a diverged run never recovers).

    Args:
      curve: losses, steps along the last axis.
      window: the number of steps averaged (``<= 1``: no smoothing).

    Returns:
      The smoothed curves, float64, of the same shape.
    """
    curve = np.asarray(curve, np.float64)
    if window <= 1:
        return curve
    c = np.cumsum(curve, axis=-1)
    out = np.empty_like(c)
    out[..., :window] = c[..., :window] / np.arange(1, min(window, c.shape[-1]) + 1)
    if c.shape[-1] > window:
        out[..., window:] = (c[..., window:] - c[..., :-window]) / window
    return out


def steps_to_reach(curve: np.ndarray, target: float, window: int = 1) -> float:
    """Steps until the trailing ``window``-mean of ``curve`` first is ``<= target``.

    The crossing at index ``t`` is counted at the centre of the window that ends there,
    ``t + 1 - (min(t + 1, window) - 1) / 2`` steps (``t + 1`` for ``window=1``).

    Args:
      curve: a loss curve ``[steps]``.
      target: the loss to reach.
      window: the trailing mean's width.

    Returns:
      The number of steps, ``inf`` if the curve never gets there.
    """
    return _crossing(smooth(curve, window), target, window)


def _crossing(smoothed: np.ndarray, target: float, window: int) -> float:
    if not math.isfinite(target):
        return math.inf
    hit = np.flatnonzero(smoothed <= target)
    if not hit.size:
        return math.inf
    t = int(hit[0])
    return t + 1 - (min(t + 1, window) - 1) / 2


def speedup(candidate: np.ndarray, baseline: np.ndarray, window: int) -> tuple[float, bool]:
    """Speed-up of ``candidate`` over ``baseline`` (seed-mean train curves ``[steps]``).

    See the module docstring for the definition. A diverged candidate scores 0, a
    diverged baseline against a finite candidate scores inf.

    Args:
      candidate: the candidate's seed-mean train curve.
      baseline: the baseline's, of the same length.
      window: the smoothing window (:func:`windows`).

    Returns:
      ``(speedup, reaches)`` where ``reaches`` says whether the candidate reaches the
      baseline's final loss.
    """
    sc, sb = smooth(candidate, window), smooth(baseline, window)
    fc, fb = float(sc[-1]), float(sb[-1])  # the final losses, in the same arithmetic
    if not math.isfinite(fc):
        return 0.0, False
    if not math.isfinite(fb):
        return math.inf, True
    target = max(fb, fc)
    return _crossing(sb, target, window) / _crossing(sc, target, window), fc <= fb


def finite_or_nan(x: Any) -> float:
    """``x`` as a float, NaN where it is not finite (a diverged run's figure).

    Args:
      x: a number (a numpy scalar included).

    Returns:
      ``float(x)``, or NaN for inf and NaN.
    """
    x = float(x)
    return x if math.isfinite(x) else math.nan


def rank_key(x: float) -> float:
    """A sort key for losses: non-finite values (diverged) rank after every finite one.

    Args:
      x: a loss.

    Returns:
      ``x``, or inf where it is not finite.
    """
    return x if math.isfinite(x) else math.inf


def geomean(values: Iterable[float]) -> float:
    """The geometric mean of the finite positive ``values``.

    Args:
      values: ratios (normalized losses, speed-ups); others are left out.

    Returns:
      The geometric mean, NaN when no value counts.
    """
    vals = [v for v in values if math.isfinite(v) and v > 0]
    return float(math.exp(np.mean(np.log(vals)))) if vals else math.nan
