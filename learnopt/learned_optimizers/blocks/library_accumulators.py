"""learned_optimization's gradient accumulators, with its names, layout and semantics.

Research code written on the notes' library (Celo's release, muLO's optimizers) builds
its learned optimizers from ``learned_optimizers.common``'s accumulators; learnopt's
``common`` re-exports these so that such code runs with the import prefix changed.
learnopt's own architectures use :mod:`~learnopt.learned_optimizers.blocks.accumulators`
(one array per decay; the maths is the same). Here, as in the library:

* :func:`rolling_mom` / :func:`rolling_rms`: an ``(init, update)`` pair over a tree:
  ``m <- b m + (1 - b) g`` and ``v <- b v + (1 - b) g^2`` (``b`` clipped to [0, 1]
  for the second moment), with a step counter ``t``;
* :func:`vec_rolling_mom` / :func:`vec_rolling_rms` / :func:`vec_factored_rolling`: the
  same for an array of decays at once, the decays on a new **last** axis of every
  state leaf (``[*p.shape, num_decays]``);
* :func:`factored_rolling`: Adafactor's factored second moments (Shazeer & Stern,
  2018, arXiv:1804.04235) of ``g^2 + epsilon``: for a tensor of rank >= 2, running
  means over each of its two largest axes (:func:`factored_dims`), else the full
  running ``g^2``; ``update`` also returns the preconditioned gradient
  ``g * rsqrt(v_row / mean(v_row)) * rsqrt(v_col)`` (or ``g * rsqrt(v + 1e-9)``).
  The statistics are float32 whatever the gradient's dtype, as in the library.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import flax.struct
import jax
import jax.numpy as jnp
import numpy as np

# The library's helpers, the same in learnopt's own accumulators.
from learnopt.learned_optimizers.blocks.accumulators import factored_dims, safe_rsqrt

PyTree = Any

__all__ = [
    "InitUpdate",
    "MomAccumulator",
    "RMSAccumulator",
    "FactoredAccum",
    "rolling_mom",
    "rolling_rms",
    "vec_rolling_mom",
    "vec_rolling_rms",
    "factored_rolling",
    "vec_factored_rolling",
    "factored_dims",
    "safe_rsqrt",
]


class MomAccumulator(NamedTuple):
    """The state of :func:`rolling_mom`.

    Attributes:
      m: the momenta, a tree like the params.
      t: the number of updates so far (int32).
    """

    m: PyTree
    t: jax.Array


class RMSAccumulator(NamedTuple):
    """The state of :func:`rolling_rms`.

    Attributes:
      rms: the second moments, a tree like the params.
      t: the number of updates so far (int32).
    """

    rms: PyTree
    t: jax.Array


class InitUpdate(NamedTuple):
    """An accumulator.

    Attributes:
      init: ``init(params) -> state``.
      update: ``update(state, grads) -> state`` (``factored_rolling``: ``-> (state,
        preconditioned grads)``).
    """

    init: Callable[..., Any]
    update: Callable[..., Any]


@flax.struct.dataclass
class FactoredAccum:
    """The state of :func:`factored_rolling`, one entry per tensor.

    Attributes:
      v_col: the column statistic (the mean of ``g^2`` over the second largest axis) of
        tensors of rank >= 2; empty for the others.
      v_row: the row statistic (over the largest axis); empty for rank < 2.
      v_diag: the full statistic of tensors of rank < 2; empty for the others.
    """

    v_col: PyTree
    v_row: PyTree
    v_diag: PyTree


def _running_average(state_cls: type, decay: Any, of: Callable[[Any], Any]) -> InitUpdate:
    """``x <- decay x + (1 - decay) of(g)`` of every leaf, in ``state_cls(x, t)``."""

    def init(params: PyTree) -> Any:
        return state_cls(jax.tree_util.tree_map(jnp.zeros_like, params), jnp.zeros((), jnp.int32))

    def update(state: Any, grads: PyTree) -> Any:
        x, t = state
        x = jax.tree_util.tree_map(lambda a, g: decay * a + (1 - decay) * of(g), x, grads)
        return state_cls(x, t + 1)

    return InitUpdate(init, update)


def rolling_mom(decay: Any) -> InitUpdate:
    """Momentum ``m <- decay m + (1 - decay) g`` of every leaf.

    Args:
      decay: the decay (a number or a scalar array).

    Returns:
      ``(init, update)``: ``init(params) -> MomAccumulator`` (zeros, ``t = 0``),
      ``update(state, grads) -> MomAccumulator``.
    """
    return _running_average(MomAccumulator, decay, lambda g: g)


def rolling_rms(decay: Any) -> InitUpdate:
    """Second moment ``v <- b v + (1 - b) g^2`` of every leaf, ``b = clip(decay, 0, 1)``.

    Args:
      decay: the decay (a number or a scalar array).

    Returns:
      ``(init, update)``: ``init(params) -> RMSAccumulator``,
      ``update(state, grads) -> RMSAccumulator``.
    """
    return _running_average(RMSAccumulator, jnp.clip(decay, 0.0, 1.0), jnp.square)


def _over_decays(make: Callable[[Any], InitUpdate], decays: Any) -> InitUpdate:
    """``make``'s accumulator for every decay of ``decays``, stacked on a last axis."""
    decays = jnp.asarray(decays)

    def init(params: PyTree) -> Any:
        return jax.vmap(lambda d: make(d).init(params), out_axes=-1)(decays)

    def update(state: Any, grads: PyTree) -> Any:
        return jax.vmap(lambda s, d: make(d).update(s, grads), in_axes=-1, out_axes=-1)(
            state, decays
        )

    return InitUpdate(init, update)


def vec_rolling_mom(decays: Any) -> InitUpdate:
    """:func:`rolling_mom` for each of ``decays``, the decays on every leaf's last axis.

    Args:
      decays: a 1-D array of decays.

    Returns:
      ``(init, update)`` over ``MomAccumulator`` trees of ``[*p.shape, len(decays)]``.
    """
    return _over_decays(rolling_mom, decays)


def vec_rolling_rms(decays: Any) -> InitUpdate:
    """:func:`rolling_rms` for each of ``decays``, the decays on every leaf's last axis.

    Args:
      decays: a 1-D array of decays.

    Returns:
      ``(init, update)`` over ``RMSAccumulator`` trees of ``[*p.shape, len(decays)]``.
    """
    return _over_decays(rolling_rms, decays)


def _empty() -> jax.Array:
    return jnp.zeros((0,), jnp.float32)


def factored_rolling(decay_rate: Any, epsilon: float = 1e-30) -> InitUpdate:
    """Adafactor-style factored second moments of every leaf (see the module docstring).

    Args:
      decay_rate: the decay (clipped to [0, 1]).
      epsilon: added to ``g^2`` before it is accumulated.

    Returns:
      ``(init, update)``: ``init(params) -> FactoredAccum``;
      ``update(state, grads) -> (FactoredAccum, preconditioned grads)``.
    """

    def init_one(p: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array]:
        dims = factored_dims(p.shape)
        if dims is None:
            return _empty(), _empty(), jnp.zeros(p.shape, jnp.float32)
        d1, d0 = dims  # the row statistic drops axis d0, the column statistic axis d1
        row = jnp.zeros(np.delete(np.asarray(p.shape), d0), jnp.float32)
        col = jnp.zeros(np.delete(np.asarray(p.shape), d1), jnp.float32)
        return col, row, _empty()

    def init(params: PyTree) -> FactoredAccum:
        leaves, treedef = jax.tree_util.tree_flatten(params)
        cols, rows, diags = (
            zip(*(init_one(p) for p in leaves), strict=True) if leaves else ((),) * 3
        )
        return FactoredAccum(
            v_col=jax.tree_util.tree_unflatten(treedef, list(cols)),
            v_row=jax.tree_util.tree_unflatten(treedef, list(rows)),
            v_diag=jax.tree_util.tree_unflatten(treedef, list(diags)),
        )

    def update_one(col, row, diag, g):
        b = jnp.clip(decay_rate, 0.0, 1.0)
        sq = g * g + epsilon
        dims = factored_dims(g.shape)
        if dims is None:
            diag = b * diag + (1 - b) * sq
            return col, row, diag, g * safe_rsqrt(diag + 1e-9)
        d1, d0 = dims
        row = b * row + (1 - b) * jnp.mean(sq, axis=d0)
        col = b * col + (1 - b) * jnp.mean(sq, axis=d1)
        # Axis d1 of the row statistic, once axis d0 is gone.
        row_axis = d1 - 1 if d1 > d0 else d1
        row_scale = safe_rsqrt(row / (jnp.mean(row, axis=row_axis, keepdims=True) + 1e-9))
        col_scale = safe_rsqrt(col)
        out = g * jnp.expand_dims(row_scale, d0) * jnp.expand_dims(col_scale, d1)
        return col, row, diag, out

    def update(state: FactoredAccum, grads: PyTree) -> tuple[FactoredAccum, PyTree]:
        grad_leaves, treedef = jax.tree_util.tree_flatten(grads)
        parts = [
            jax.tree_util.tree_leaves(state.v_col),
            jax.tree_util.tree_leaves(state.v_row),
            jax.tree_util.tree_leaves(state.v_diag),
        ]
        if any(len(p) != len(grad_leaves) for p in parts):
            raise ValueError(
                "factored_rolling.update: the state and the gradients have different "
                f"numbers of tensors ({[len(p) for p in parts]} vs {len(grad_leaves)})"
            )
        new = [update_one(c, r, d, g) for c, r, d, g in zip(*parts, grad_leaves, strict=True)]
        cols, rows, diags, outs = zip(*new, strict=True) if new else ((),) * 4

        def tree(xs):
            return jax.tree_util.tree_unflatten(treedef, list(xs))

        return FactoredAccum(v_col=tree(cols), v_row=tree(rows), v_diag=tree(diags)), tree(outs)

    return InitUpdate(init, update)


def vec_factored_rolling(decays: Any) -> InitUpdate:
    """:func:`factored_rolling` for each of ``decays``, on every state leaf's last axis.

    Args:
      decays: a 1-D array of decays.

    Returns:
      ``(init, update)``; ``update`` returns the state and the preconditioned gradients,
      each with the decays on a last axis.
    """
    return _over_decays(factored_rolling, decays)
