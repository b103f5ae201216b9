"""The per-element features the per-parameter MLPs read from the accumulators.

AdafacMLPLOpt (and MLPNomLOpt), HyperV2 (VeLO) and Celo2 feed their MLPs the same
feature groups, computed from the statistics of
:mod:`~learnopt.learned_optimizers.blocks.accumulators` (one array per decay): the momenta,
the second moments, ``m / sqrt(v)``, ``rsqrt(v)``, ``g / sqrt(v)`` and the
Adafactor-preconditioned gradient (:func:`element_features`), and the factored row and
column statistics (:func:`factored_features`). Each group is a list of columns, which
:func:`~learnopt.learned_optimizers.blocks.per_element.mlp` reads with ``feature_axis=0``;
:func:`lift_scalar` broadcasts a per-tensor value to such a column.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import jax
import jax.numpy as jnp

from learnopt.learned_optimizers.blocks.accumulators import (
    _FACTORED_FEATURE_EPS,
    FactoredAccum,
    PerDecay,
    _row_col_scale,
    factored_dims,
    floored_rsqrt,
    per_decay_pairs,
)

__all__ = ["lift_scalar", "ElementFeatures", "element_features", "factored_features"]


def lift_scalar(
    p: jax.Array,
    g: jax.Array,
    m: PerDecay,
    rms: PerDecay,
    fac_g: PerDecay,
    acc: FactoredAccum,
) -> tuple[jax.Array, jax.Array, list, list, list, FactoredAccum]:
    """A scalar tensor's inputs as those of a tensor of shape ``[1]``; others unchanged.

    The features normalize over the tensor's axes, so a scalar needs one.

    Args:
      p, g: the parameter and its gradient.
      m, rms, fac_g: momenta, second moments, preconditioned gradient (one array per
        decay).
      acc: factored second moments (one array per decay).

    Returns:
      ``(p, g, m, rms, fac_g, acc)``, reshaped if ``p`` is a scalar.
    """
    if p.shape:
        return p, g, m, rms, fac_g, acc

    def lift(xs):
        return [x.reshape(1) for x in xs]

    return (
        p.reshape(1),
        g.reshape(1),
        lift(m),
        lift(rms),
        lift(fac_g),
        acc.replace(v_diag=lift(acc.v_diag)),
    )


class ElementFeatures(NamedTuple):
    """Per-element feature groups, each a list of ``width`` arrays of shape ``p.shape``.

    ``rsqrt_rms`` is ``1 / sqrt(rms + rms_eps)`` (see :func:`element_features`).
    """

    g: list  #: the gradient
    clipped_g: list  #: ``clip(g, -0.1, 0.1)``
    p: list  #: the parameter
    m: list  #: the momenta
    rms: list  #: the second moments
    m_rsqrt_rms: list  #: ``m / sqrt(rms + rms_eps)``
    rsqrt_rms: list  #: ``1 / sqrt(rms + rms_eps)``
    fac_g: list  #: the Adafactor-preconditioned gradient
    g_rsqrt_rms: list  #: ``g / sqrt(rms + rms_eps)``


def element_features(
    p: jax.Array,
    g: jax.Array,
    m: PerDecay,
    rms: PerDecay,
    fac_g: PerDecay,
    *,
    rms_eps: float,
) -> ElementFeatures:
    """The per-element feature groups the architectures choose from (not normalized).

    Args:
      p, g: the parameter and its gradient (rank >= 1, see :func:`lift_scalar`).
      m, rms, fac_g: momenta, second moments and preconditioned gradient (one array per
        decay).
      rms_eps: added to ``rms`` under the square root; it differs between architectures
        (each caller says which reference it follows).

    Returns:
      The groups as an :class:`ElementFeatures`.
    """
    rsqrt = [jax.lax.rsqrt(v + jnp.asarray(rms_eps, v.dtype)) for v in rms]
    return ElementFeatures(
        g=[g],
        clipped_g=[jnp.clip(g, -0.1, 0.1)],
        p=[p],
        m=list(m),
        rms=list(rms),
        m_rsqrt_rms=[a * b for a, b in per_decay_pairs(m, rsqrt)],
        rsqrt_rms=rsqrt,
        fac_g=list(fac_g),
        g_rsqrt_rms=[g * r for r in rsqrt],
    )


def factored_features(
    acc: FactoredAccum,
    m: PerDecay,
    shape: Sequence[int],
    *,
    mom_eps: float = 0.0,
    broadcast: bool = True,
) -> list[list[jax.Array]]:
    """The five Adafactor feature groups of the library's adafactor MLP optimizers.

    Factored tensors: the row and column accumulators broadcast to the tensor,
    ``rsqrt(row + 1e-8)``, ``rsqrt(col + 1e-8)`` and the momentum preconditioned by the
    factored second moment. Other tensors (the library's "RMSProp-like" case): ``v``,
    ``v``, ``rsqrt(v + 1e-8)`` twice and ``m / sqrt(v + mom_eps)``.

    Args:
      acc: the tensor's factored second moments (one array per decay; scalars lifted to
        ``[1]``).
      m: the momenta, with as many decays as ``acc``.
      shape: the tensor's shape (``(1,)`` for a scalar).
      mom_eps: added to ``v`` in the non-factored ``m / sqrt(v + mom_eps)``; 0 floors
        ``v`` at 1e-20 instead (:func:`floored_rsqrt`). It differs between
        architectures (each caller says which reference it follows).
      broadcast: if False, the row and column groups (and their rsqrt) of a factored
        tensor are left as the row and column statistics, shaped to broadcast against
        the tensor (a 1 on the axis they average over), which
        :func:`~learnopt.learned_optimizers.blocks.per_element.mlp` reads as their broadcast:
        their normalization statistics and first-layer terms then cost a few hundred
        values each instead of the whole tensor.

    Returns:
      ``[row, col, rsqrt_row, rsqrt_col, mom]``, each a list of one array of ``shape``
      (or, with ``broadcast=False``, broadcastable to it) per decay.
    """
    dims = factored_dims(shape)
    if dims is None:
        v = list(acc.v_diag)
        r = [jax.lax.rsqrt(x + jnp.asarray(_FACTORED_FEATURE_EPS, x.dtype)) for x in v]
        if mom_eps:
            eps = jnp.asarray(mom_eps, v[0].dtype)
            mom = [a * jax.lax.rsqrt(b + eps) for a, b in per_decay_pairs(m, v)]
        else:
            mom = [a * floored_rsqrt(b) for a, b in per_decay_pairs(m, v)]
        return [v, v, r, r, mom]
    d1, d0 = dims
    shape = tuple(shape)
    row = [jnp.expand_dims(x, d0) for x in acc.v_row]
    col = [jnp.expand_dims(x, d1) for x in acc.v_col]
    if broadcast:
        row = [jnp.broadcast_to(x, shape) for x in row]
        col = [jnp.broadcast_to(x, shape) for x in col]
    eps = jnp.asarray(_FACTORED_FEATURE_EPS, row[0].dtype)
    mom = _row_col_scale(m, acc.v_row, acc.v_col, dims, row[0].dtype)
    rsqrt_row = [jax.lax.rsqrt(x + eps) for x in row]
    rsqrt_col = [jax.lax.rsqrt(x + eps) for x in col]
    return [row, col, rsqrt_row, rsqrt_col, mom]
