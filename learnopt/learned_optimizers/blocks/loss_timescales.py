"""VeLO's loss features: running means of the training loss at several timescales.

HyperV2 (VeLO), Celo and Celo-Adam feed their per-tensor LSTM 9 features of the loss:
running means of the loss at 10 timescales (clipped to twice the running maximum),
each compared with its running minimum, in [-1, 1] (:func:`loss_buffer_features`).
The timescales are sized by the run length ``T`` (:func:`loss_buffer_init`), so the
same features mean the same fraction of training in runs of any length.
``_FRACTION_TIMESCALES`` are the points ``s`` of the fraction-of-training features
``tanh(10 (t / T - s))`` the same LSTMs read.
"""

from __future__ import annotations

from typing import Any

import flax.struct
import jax
import jax.numpy as jnp
import numpy as np

__all__ = [
    "LossBufferState",
    "loss_buffer_init",
    "loss_buffer_update",
    "loss_buffer_features",
    "loss_progress",
]

_FRACTION_TIMESCALES = (0.03, 0.1, 0.2, 0.4, 0.6, 0.8, 0.9, 1.0, 1.1)
_NUM_LOSS_TIMESCALES = 10


@flax.struct.dataclass
class LossBufferState:
    """Running means of the loss at several decays, their running minima, a step count.

    Attributes:
      means: the running means of the loss, one per decay, float32.
      iteration: the number of losses added, int32.
      running_min: the running minima of the bias-corrected means, float32.
      decays: the decays ``exp(-1 / h)`` (:func:`loss_buffer_init`), float32.
    """

    means: jax.Array
    iteration: jax.Array
    running_min: jax.Array
    decays: jax.Array


def loss_buffer_init(num_steps: Any) -> LossBufferState:
    """Decays ``exp(-1 / h)`` for 10 half-lives ``h`` log-spaced from 10 to ``num_steps``.

    Args:
      num_steps: the longest half-life (the inner-run length).

    A concrete ``num_steps`` gives the decays computed in float64 and rounded once to
    float32, the same in every call (computed eagerly in float32, the first call of a
    process and the later ones differed in the last bit, which constant losses, whose
    features divide rounding noise by rounding noise, turned into different runs).

    Returns:
      An empty :class:`LossBufferState` (running minima at 1e12).
    """
    try:
        steps = float(num_steps)
    except (TypeError, jax.errors.ConcretizationTypeError):
        steps = None  # traced: computed in the program
    if steps is None:
        halflife = jnp.logspace(1.0, jnp.log10(jnp.asarray(num_steps, jnp.float32)), 10)
        decays = jnp.exp(-1.0 / halflife).astype(jnp.float32)
    else:
        halflife64 = np.logspace(1.0, np.log10(np.float32(steps)), 10)
        decays = jnp.asarray(np.exp(-1.0 / halflife64).astype(np.float32))
    n = _NUM_LOSS_TIMESCALES
    return LossBufferState(
        means=jnp.zeros((n,), jnp.float32),
        iteration=jnp.zeros((), jnp.int32),
        running_min=jnp.full((n,), 999999999999.0, jnp.float32),
        decays=decays,
    )


def loss_buffer_update(state: LossBufferState, loss: jax.Array) -> LossBufferState:
    """Adds a loss (clipped to twice the largest bias-corrected mean so far).

    Args:
      state: the buffer.
      loss: the training loss, float32 scalar.

    Returns:
      The updated buffer.
    """
    d = state.decays
    t = (state.iteration + 1).astype(jnp.float32)
    cor_mean = state.means / (1 - d**t)
    approx_max = jnp.where(state.iteration == 0, loss, jnp.max(cor_mean))
    loss = jnp.minimum(jnp.abs(approx_max) * 2, loss)
    means = state.means * d + loss * (1 - d)
    cor_mean = means / (1 - d**t)
    return LossBufferState(
        means=means,
        iteration=state.iteration + 1,
        running_min=jnp.minimum(state.running_min, cor_mean),
        decays=d,
    )


def loss_buffer_features(state: LossBufferState) -> jax.Array:
    """9 features ``clip((mean_k - min_k) / (mean_{k+1} - min_k) - 1, -1, 1)``; 0 for t <= 2.

    Args:
      state: the buffer.

    Returns:
      The loss features, ``[9]`` float32.
    """
    d = state.decays
    cor_mean = state.means / (1 - d ** state.iteration.astype(jnp.float32))
    approx_max, cor_mean = cor_mean[1:], cor_mean[:-1]
    running_min = state.running_min[:-1]
    den = jnp.maximum(1e-8, approx_max - running_min)
    feature = jnp.clip((cor_mean - running_min) / den - 1.0, -1, 1)
    return jnp.where(state.iteration <= 2, feature * 0, feature)


def loss_progress(state: LossBufferState) -> jax.Array:
    """How far the training loss has fallen, on a scale that tells the regimes apart.

    ``clip(log(mean_short / mean_long) / 10, -1, 0)``: the bias-corrected running mean
    with the shortest half-life (10 steps) over the largest bias-corrected mean (the
    long timescales', which still hold the early losses). A run whose training loss fell
    by 10^4 (a net memorizing its data) reads about -0.9; a language model that went
    from 5.5 to 2.3 nats reads about -0.05. 0 before any loss, and whenever a mean is not
    positive (the ratio of signed losses means nothing).

    Args:
      state: the buffer.

    Returns:
      A float32 scalar in ``[-1, 0]``.
    """
    d = state.decays
    t = jnp.maximum(state.iteration, 1).astype(jnp.float32)
    cor_mean = state.means / (1 - d**t)
    short, longest = cor_mean[0], jnp.max(cor_mean)
    ok = (state.iteration > 0) & (short > 0) & (longest > 0)
    ratio = jnp.where(ok, short / jnp.where(ok, longest, 1.0), 1.0)
    return jnp.clip(jnp.log(ratio) / 10.0, -1.0, 0.0)
