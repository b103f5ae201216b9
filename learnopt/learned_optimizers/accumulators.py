"""Gradient accumulators of the per-parameter learned optimizers, and the features they give.

AdafacMLPLOpt (and MLPNomLOpt), HyperV2 (VeLO) and Celo2 keep the same three running
statistics of every parameter tensor, each vectorized over a leading "decays" axis (one
slice per decay ``b_k``, stored ``[num_decays, *p.shape]``):

* momenta ``m_k <- b_k m_k + (1 - b_k) g`` (:class:`MomAccumulator`);
* second moments ``v_k <- b_k v_k + (1 - b_k) g^2`` (:class:`RMSAccumulator`);
* Adafactor-style factored second moments (Shazeer & Stern, 2018, arXiv:1804.04235;
  :class:`FactoredAccum`): for a tensor of rank >= 2, the running means of
  ``g^2 + 1e-30`` over each of its two largest axes (a "row" and a "column" statistic),
  for other tensors the full running ``g^2 + 1e-30``. They also give the
  Adafactor-preconditioned gradient ``fac_g``.

Their per-parameter MLPs read the same per-element features from these statistics
(:func:`element_features`, :func:`factored_features`). This module holds that plumbing
once: zero accumulators (:func:`init_accumulators`), the update of one tensor
(:func:`update_accumulators`), the walk over the parameter tree (:func:`update_tree`), the
learnable-decay reparameterization and the features. Arithmetic is in the tensor's
compute dtype (float32 for float32/bfloat16/float16 params, float64 for float64 params).

Layout: decays first. The library stores each accumulator decays-last
(``[*p.shape, num_decays]``); the maths is the same either way, but on XLA:CPU a
per-decay slice of a decays-last array is strided, and the per-feature normalization
statistics of the MLPs (one reduction per feature column) then copy every column to
memory before reducing it (``docs/benchmarks.md``). Decays first, each slice is a
contiguous tensor-shaped block. The feature groups (:func:`element_features`,
:func:`factored_features`) follow the same layout, ``[width, *shape]``, which
:func:`~learnopt.learned_optimizers.per_element.mlp` reads with ``feature_axis=0``. Only
the inner optimizer state is laid out this way; theta is the library's.
MLPLOpt and RNNMLPLOpt keep their decays-last momenta (:func:`momentum_update` and
:func:`rms_update` take the decays' axis).

The constants the architectures share are fixed here (they are those of
learned_optimization's ``common.py`` and of its optimizers); the ones that differ between
architectures are arguments (``rms_eps``, ``mom_eps``), and each call site says which
reference its value follows.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import flax.struct
import jax
import jax.numpy as jnp
import numpy as np

from learnopt.canonical import leaf_compute_dtype
from learnopt.tree_utils import tree_map_multi

PyTree = Any

__all__ = [
    "MomAccumulator",
    "RMSAccumulator",
    "FactoredAccum",
    "Decays",
    "ElementFeatures",
    "safe_rsqrt",
    "floored_rsqrt",
    "factored_dims",
    "decay_to_param",
    "param_to_decay",
    "constant_decays",
    "momentum_update",
    "rms_update",
    "factored_init",
    "factored_tree_init",
    "factored_update",
    "init_accumulators",
    "update_accumulators",
    "accumulator_grads",
    "update_tree",
    "lift_scalar",
    "element_features",
    "factored_features",
]

# Floor of safe_rsqrt and the offset of the factored row mean (learned_optimization's
# common.py; every architecture here uses them).
_RSQRT_FLOOR = 1e-9
# Added to g^2 before it enters the factored statistics (learned_optimization's
# factored_rolling epsilon; every architecture here uses it).
_FACTORED_EPS = 1e-30
# In rsqrt(row + eps) and rsqrt(col + eps), the factored features (the same in
# learned_optimization's adafac_mlp_lopt and hyper_v2 and in the Celo2 release).
_FACTORED_FEATURE_EPS = 1e-8
# |x| below which m / sqrt(v) uses this floor for v: its derivative (v^-1.5) stays
# finite in float32 (the library's 1e-30 floor overflows to inf when a gradient is 0).
_V_FLOOR = 1e-20


# ------------------------------------------------------------------------------ helpers


def safe_rsqrt(x: jax.Array) -> jax.Array:
    """``1 / sqrt(max(x, 1e-9))`` (the library's ``safe_rsqrt``).

    Args:
      x: any array.

    Returns:
      The floored reciprocal square root, in ``x``'s dtype.
    """
    return jax.lax.rsqrt(jnp.maximum(x, jnp.asarray(_RSQRT_FLOOR, x.dtype)))


def floored_rsqrt(v: jax.Array) -> jax.Array:
    """``v^-1/2`` for ``v >= 0`` with ``v`` floored at 1e-20.

    Used where the library computes ``m * v**-0.5`` with ``v`` as small as 1e-30
    (exactly-zero gradients): there the forward value is ``0 * 1e15`` but the
    derivative ``v^-1.5`` overflows, so meta-gradients would be NaN. The floor changes
    the feature only for gradients whose running RMS is below 1e-10.

    Args:
      v: a second-moment statistic (non-negative).

    Returns:
      ``rsqrt(max(v, 1e-20))`` in ``v``'s dtype.
    """
    return jax.lax.rsqrt(jnp.maximum(v, jnp.asarray(_V_FLOOR, v.dtype)))


def factored_dims(shape: Sequence[int]) -> tuple[int, int] | None:
    """The two largest axes ``(second largest, largest)`` of a tensor of rank >= 2.

    Ties are ordered as ``numpy.argsort`` orders them (as in the library).

    Args:
      shape: the tensor's shape.

    Returns:
      ``(d1, d0)``: the axis the column statistic averages over and the one the row
      statistic averages over; None for tensors of rank < 2 (not factored).
    """
    if len(shape) < 2:
        return None
    order = np.argsort(np.asarray(shape))
    return int(order[-2]), int(order[-1])


# ------------------------------------------------------------------------------- decays


class Decays(NamedTuple):
    """The decays of the three accumulators, one 1-D array each (in the decays axis' order).

    Attributes:
      mom: decays of the momentum accumulators, shape ``[num_mom_decays]`` (e.g. 0.9, 0.99,
        0.999).
      rms: decays of the second-moment accumulators, shape ``[num_rms_decays]``.
      fac: decays of the Adafactor factored accumulators, shape ``[num_fac_decays]``.
    """

    mom: jax.Array
    rms: jax.Array
    fac: jax.Array


def decay_to_param(decay: Any, reparam: float = 10.0) -> jax.Array:
    """``log(1 - decay) / reparam``: the unconstrained form the library learns offsets in.

    Args:
      decay: decays in [0, 1).
      reparam: the scale of the reparameterization (the library's 10).

    Returns:
      The unconstrained parameters, float32.
    """
    return jnp.log(1 - jnp.asarray(decay, jnp.float32)) / reparam


def param_to_decay(x: jax.Array, reparam: float = 10.0) -> jax.Array:
    """Inverse of :func:`decay_to_param`: ``1 - exp(reparam * x)``.

    Args:
      x: unconstrained parameters.
      reparam: the scale of the reparameterization.

    Returns:
      The decays.
    """
    return 1 - jnp.exp(x * reparam)


def constant_decays(mom: Sequence[float], rms: Sequence[float], fac: Sequence[float]) -> Decays:
    """Fixed (not learned) decays as float32 arrays.

    Args:
      mom: decays of the momenta.
      rms: decays of the second moments.
      fac: decays of the factored second moments.

    Returns:
      The three as a :class:`Decays`.
    """
    return Decays(*(jnp.asarray(np.asarray(d, np.float32)) for d in (mom, rms, fac)))


# ------------------------------------------------------------------------- accumulators


@flax.struct.dataclass
class MomAccumulator:
    """Momentum accumulators ``m`` (library name).

    Attributes:
      m: the momenta, a tree like the params. Built by :func:`init_accumulators`, each
        leaf is ``(num_decays,) + p.shape``, slice ``m[i]`` the exponential moving average
        of the gradient with decay ``i`` (MLPLOpt and RNNMLPLOpt keep theirs decays-last,
        ``p.shape + (num_decays,)``).
    """

    m: PyTree


@flax.struct.dataclass
class RMSAccumulator:
    """Second-moment accumulators ``rms`` (library name).

    Attributes:
      rms: the second moments, a tree like the params, laid out like
        :attr:`MomAccumulator.m`; slice ``i`` the exponential moving average of ``g**2``
        with decay ``i``.
    """

    rms: PyTree


@flax.struct.dataclass
class FactoredAccum:
    """Adafactor-style second moments of one tensor, one slice per decay (first axis).

    For a tensor of rank >= 2 with factored axes ``(d1, d0) = factored_dims(shape)``:
    ``v_row`` is the running mean of ``g^2`` over axis ``d0`` (a leading decays axis,
    then the shape without ``d0``), ``v_col`` the mean over ``d1``; ``v_diag`` is empty.
    For rank < 2, ``v_diag`` holds the full running ``g^2`` and the others are empty.
    The fields may also be trees like the params (see :func:`factored_tree_init`).

    Attributes:
      v_row: running mean of ``g**2`` over axis ``d0``, after a leading decays axis
        (empty for rank < 2).
      v_col: running mean of ``g**2`` over axis ``d1``, after a leading decays axis
        (empty for rank < 2).
      v_diag: for rank < 2, the running ``g**2`` itself, ``(num_decays,) + shape``; empty
        otherwise.
    """

    v_row: jax.Array
    v_col: jax.Array
    v_diag: jax.Array


def _along(decays: jax.Array, axis: int, ndim: int) -> jax.Array:
    """``decays [K]`` shaped to broadcast along ``axis`` of an ``ndim``-dimensional array."""
    shape = [1] * ndim
    shape[axis] = -1
    return decays.reshape(shape)


def momentum_update(m: jax.Array, g: jax.Array, decays: jax.Array, *, axis: int = -1) -> jax.Array:
    """``m_k <- b_k m_k + (1 - b_k) g`` for the decays on ``m``'s axis ``axis``.

    Args:
      m: momenta, ``g.shape + (num_decays,)`` (``axis=-1``) or ``(num_decays,) + g.shape``
        (``axis=0``, the layout of :func:`init_accumulators`).
      g: the gradient.
      decays: ``[num_decays]``.
      axis: the decays' axis of ``m``: -1 or 0.

    Returns:
      The new momenta.
    """
    decays = _along(decays.astype(m.dtype), axis, m.ndim)
    return decays * m + (1 - decays) * jnp.expand_dims(g, axis)


def rms_update(v: jax.Array, g: jax.Array, decays: jax.Array, *, axis: int = -1) -> jax.Array:
    """``v_k <- b_k v_k + (1 - b_k) g^2`` with ``b_k`` clipped to [0, 1].

    Args:
      v: second moments, laid out as the momenta of :func:`momentum_update`.
      g: the gradient.
      decays: ``[num_decays]``.
      axis: the decays' axis of ``v``: -1 or 0.

    Returns:
      The new second moments.
    """
    decays = _along(jnp.clip(decays.astype(v.dtype), 0, 1), axis, v.ndim)
    return decays * v + (1 - decays) * jnp.expand_dims(jnp.square(g), axis)


def factored_init(shape: Sequence[int], num_decays: int, dtype: Any) -> FactoredAccum:
    """Zero factored accumulators for one tensor.

    Args:
      shape: the tensor's shape.
      num_decays: the number of decays.
      dtype: the accumulators' dtype.

    Returns:
      A :class:`FactoredAccum` of arrays, decays first (the unused fields have shape
      ``[num_decays, 0]``).
    """
    empty = jnp.zeros((num_decays, 0), dtype)
    dims = factored_dims(shape)
    if dims is None:
        return FactoredAccum(empty, empty, jnp.zeros((num_decays, *shape), dtype))
    d1, d0 = dims
    row = jnp.zeros((num_decays, *np.delete(shape, d0)), dtype)
    col = jnp.zeros((num_decays, *np.delete(shape, d1)), dtype)
    return FactoredAccum(row, col, empty)


def factored_tree_init(params: PyTree, num_decays: int) -> FactoredAccum:
    """Zero factored accumulators for every tensor of ``params`` (the library's layout).

    Args:
      params: the parameters.
      num_decays: the number of decays.

    Returns:
      A :class:`FactoredAccum` whose three fields are trees like ``params``, in each
      tensor's compute dtype.
    """
    leaves, treedef = jax.tree_util.tree_flatten(params)
    accs = [factored_init(np.shape(p), num_decays, leaf_compute_dtype(p.dtype)) for p in leaves]
    return FactoredAccum(
        v_row=treedef.unflatten([a.v_row for a in accs]),
        v_col=treedef.unflatten([a.v_col for a in accs]),
        v_diag=treedef.unflatten([a.v_diag for a in accs]),
    )


def _row_col_scale(
    x: jax.Array, v_row: jax.Array, v_col: jax.Array, dims: tuple[int, int], dtype: Any
) -> jax.Array:
    """``x * rsqrt(v_row / mean_{d1}(v_row)) * rsqrt(v_col)``, both rsqrt floored at 1e-9.

    The factored preconditioner, broadcast over the tensor (``x`` has a leading decays
    axis, then the tensor's shape; so do ``v_row`` and ``v_col``, without ``d0`` and
    ``d1``); ``dtype`` is the accumulators' dtype (that of the offsets).
    """
    d1, d0 = dims
    reduced_d1 = d1 - 1 if d1 > d0 else d1
    row_col_mean = jnp.mean(v_row, axis=1 + reduced_d1, keepdims=True)
    row_factor = safe_rsqrt(v_row / (row_col_mean + jnp.asarray(_RSQRT_FLOOR, dtype)))
    col_factor = safe_rsqrt(v_col)
    return x * jnp.expand_dims(row_factor, 1 + d0) * jnp.expand_dims(col_factor, 1 + d1)


def factored_update(
    acc: FactoredAccum, g: jax.Array, decays: jax.Array, epsilon: float = _FACTORED_EPS
) -> tuple[FactoredAccum, jax.Array]:
    """Updates one tensor's factored accumulators and preconditions its gradient.

    With ``g2 = g^2 + epsilon`` and ``b`` clipped to [0, 1]:
    factored tensors keep ``v_row <- b v_row + (1 - b) mean_{d0}(g2)`` and
    ``v_col <- b v_col + (1 - b) mean_{d1}(g2)`` and precondition
    ``g * rsqrt(v_row / mean_{d1}(v_row)) * rsqrt(v_col)`` (both rsqrt floored at 1e-9);
    other tensors keep ``v <- b v + (1 - b) g2`` and return ``g * rsqrt(v + 1e-9)``.

    Args:
      acc: the tensor's accumulators (arrays, see :func:`factored_init`).
      g: the gradient.
      decays: ``[num_decays]``.
      epsilon: added to ``g^2``.

    Returns:
      ``(new accumulators, fac_g)`` with ``fac_g`` of shape ``(num_decays,) + g.shape``.
    """
    dtype = acc.v_row.dtype
    decays = jnp.clip(decays.astype(dtype), 0, 1)
    g2 = jnp.square(g) + jnp.asarray(epsilon, dtype)
    dims = factored_dims(g.shape)
    if dims is None:
        b = _along(decays, 0, 1 + g.ndim)
        v = b * acc.v_diag + (1 - b) * g2[None]
        fac_g = g[None] * safe_rsqrt(v + jnp.asarray(_RSQRT_FLOOR, dtype))
        return acc.replace(v_diag=v), fac_g
    d1, d0 = dims
    b = _along(decays, 0, g.ndim)
    v_row = b * acc.v_row + (1 - b) * jnp.mean(g2, axis=d0)[None]
    v_col = b * acc.v_col + (1 - b) * jnp.mean(g2, axis=d1)[None]
    fac_g = _row_col_scale(g[None], v_row, v_col, dims, dtype)
    return acc.replace(v_row=v_row, v_col=v_col), fac_g


def init_accumulators(
    params: PyTree, num_mom: int, num_rms: int, num_fac: int
) -> tuple[MomAccumulator, RMSAccumulator, FactoredAccum]:
    """Zero accumulators for every tensor of ``params``, in each tensor's compute dtype.

    Args:
      params: the parameters.
      num_mom: the number of momentum decays.
      num_rms: the number of second-moment decays.
      num_fac: the number of factored second-moment decays.

    Returns:
      ``(momenta, second moments, factored second moments)``, each field a tree like
      ``params`` whose leaves have a leading decays axis (``(k,) + p.shape``).
    """

    def zeros(k):
        return jax.tree_util.tree_map(
            lambda p: jnp.zeros((k, *np.shape(p)), leaf_compute_dtype(p.dtype)), params
        )

    return (
        MomAccumulator(m=zeros(num_mom)),
        RMSAccumulator(rms=zeros(num_rms)),
        factored_tree_init(params, num_fac),
    )


def update_accumulators(
    m: jax.Array, v: jax.Array, acc: FactoredAccum, g: jax.Array, decays: Decays
) -> tuple[jax.Array, jax.Array, FactoredAccum, jax.Array]:
    """One step of the three accumulators of one tensor.

    Args:
      m: momenta, ``(len(decays.mom),) + g.shape``.
      v: second moments, ``(len(decays.rms),) + g.shape``.
      acc: factored second moments (arrays).
      g: the gradient, in the accumulators' dtype.
      decays: the three decays.

    Returns:
      ``(m, v, acc, fac_g)``: the new accumulators and the Adafactor-preconditioned
      gradient (see :func:`factored_update`).
    """
    m = momentum_update(m, g, decays.mom, axis=0)
    v = rms_update(v, g, decays.rms, axis=0)
    acc, fac_g = factored_update(acc, g, decays.fac)
    return m, v, acc, fac_g


def accumulator_grads(grads: PyTree, mom: MomAccumulator, clip: float | None = None) -> PyTree:
    """Every gradient cast to its accumulators' dtype, optionally clipped.

    Args:
      grads: the gradients (a tree like the params).
      mom: the momenta (their dtypes are the accumulators' dtypes).
      clip: if given, gradients are clipped to ``[-clip, clip]`` after the cast.

    Returns:
      The gradients, a tree like ``grads``.
    """

    def one(g, m):
        g = g.astype(m.dtype)
        return g if clip is None else jnp.clip(g, -clip, clip)

    return jax.tree_util.tree_map(one, grads, mom.m)


TensorStep = Callable[..., jax.Array]


def update_tree(
    tensor_step: TensorStep,
    params: PyTree,
    grads: PyTree,
    mom: MomAccumulator,
    rms: RMSAccumulator,
    fac: FactoredAccum,
    decays: Decays,
    *extra: PyTree,
) -> tuple[PyTree, MomAccumulator, RMSAccumulator, FactoredAccum]:
    """Updates the accumulators of every tensor, then steps each tensor with them.

    For each tensor, :func:`update_accumulators` runs first and
    ``tensor_step(p, g, m, v, fac_g, acc, *extra_leaves)`` then returns the new ``p``
    (cast back to ``p``'s dtype here). Gradients are used as given (see
    :func:`accumulator_grads` to cast or clip them first).

    Args:
      tensor_step: the architecture's per-tensor update.
      params: the parameters.
      grads: the gradients, a tree like ``params``.
      mom: momenta.
      rms: second moments.
      fac: factored second moments (fields are trees like ``params``).
      decays: the three decays.
      *extra: more trees like ``params`` whose leaves are passed on to ``tensor_step``.

    Returns:
      ``(params, mom, rms, fac)``, all updated.
    """

    def one(p, g, m, v, v_row, v_col, v_diag, *rest):
        m, v, acc, fac_g = update_accumulators(m, v, FactoredAccum(v_row, v_col, v_diag), g, decays)
        new_p = tensor_step(p, g, m, v, fac_g, acc, *rest)
        return new_p.astype(p.dtype), m, v, acc.v_row, acc.v_col, acc.v_diag

    params, m, v, v_row, v_col, v_diag = tree_map_multi(
        one, params, grads, mom.m, rms.rms, fac.v_row, fac.v_col, fac.v_diag, *extra
    )
    return (
        params,
        MomAccumulator(m=m),
        RMSAccumulator(rms=v),
        FactoredAccum(v_row=v_row, v_col=v_col, v_diag=v_diag),
    )


# ----------------------------------------------------------------------------- features


def lift_scalar(
    p: jax.Array,
    g: jax.Array,
    m: jax.Array,
    rms: jax.Array,
    fac_g: jax.Array,
    acc: FactoredAccum,
) -> tuple[jax.Array, jax.Array, jax.Array, jax.Array, jax.Array, FactoredAccum]:
    """A scalar tensor's inputs as those of a tensor of shape ``[1]``; others unchanged.

    The features normalize over the tensor's axes, so a scalar needs one.

    Args:
      p, g: the parameter and its gradient.
      m, rms, fac_g: momenta, second moments, preconditioned gradient (decays first).
      acc: factored second moments (arrays).

    Returns:
      ``(p, g, m, rms, fac_g, acc)``, reshaped if ``p`` is a scalar.
    """
    if p.shape:
        return p, g, m, rms, fac_g, acc
    return (
        p.reshape(1),
        g.reshape(1),
        m.reshape(-1, 1),
        rms.reshape(-1, 1),
        fac_g.reshape(-1, 1),
        acc.replace(v_diag=acc.v_diag.reshape(-1, 1)),
    )


class ElementFeatures(NamedTuple):
    """Per-element feature groups, each of shape ``(width,) + p.shape`` (decays first).

    ``rsqrt_rms`` is ``1 / sqrt(rms + rms_eps)`` (see :func:`element_features`).
    """

    g: jax.Array  #: the gradient
    clipped_g: jax.Array  #: ``clip(g, -0.1, 0.1)``
    p: jax.Array  #: the parameter
    m: jax.Array  #: the momenta
    rms: jax.Array  #: the second moments
    m_rsqrt_rms: jax.Array  #: ``m / sqrt(rms + rms_eps)``
    rsqrt_rms: jax.Array  #: ``1 / sqrt(rms + rms_eps)``
    fac_g: jax.Array  #: the Adafactor-preconditioned gradient
    g_rsqrt_rms: jax.Array  #: ``g / sqrt(rms + rms_eps)``


def element_features(
    p: jax.Array,
    g: jax.Array,
    m: jax.Array,
    rms: jax.Array,
    fac_g: jax.Array,
    *,
    rms_eps: float,
) -> ElementFeatures:
    """The per-element feature groups the architectures choose from (not normalized).

    Args:
      p, g: the parameter and its gradient (rank >= 1, see :func:`lift_scalar`).
      m, rms, fac_g: momenta, second moments and preconditioned gradient (decays first).
      rms_eps: added to ``rms`` under the square root; it differs between architectures
        (each caller says which reference it follows).

    Returns:
      The groups as an :class:`ElementFeatures`.
    """
    rsqrt = jax.lax.rsqrt(rms + jnp.asarray(rms_eps, rms.dtype))
    return ElementFeatures(
        g=g[None],
        clipped_g=jnp.clip(g, -0.1, 0.1)[None],
        p=p[None],
        m=m,
        rms=rms,
        m_rsqrt_rms=m * rsqrt,
        rsqrt_rms=rsqrt,
        fac_g=fac_g,
        g_rsqrt_rms=g[None] * rsqrt,
    )


def factored_features(
    acc: FactoredAccum, m: jax.Array, shape: Sequence[int], *, mom_eps: float = 0.0
) -> list[jax.Array]:
    """The five Adafactor feature groups of the library's adafactor MLP optimizers.

    Factored tensors: the row and column accumulators broadcast to the tensor,
    ``rsqrt(row + 1e-8)``, ``rsqrt(col + 1e-8)`` and the momentum preconditioned by the
    factored second moment. Other tensors (the library's "RMSProp-like" case): ``v``,
    ``v``, ``rsqrt(v + 1e-8)`` twice and ``m / sqrt(v + mom_eps)``.

    Args:
      acc: the tensor's factored second moments (arrays; scalars lifted to ``[1]``).
      m: the momenta, with as many decays as ``acc``.
      shape: the tensor's shape (``(1,)`` for a scalar).
      mom_eps: added to ``v`` in the non-factored ``m / sqrt(v + mom_eps)``; 0 floors
        ``v`` at 1e-20 instead (:func:`floored_rsqrt`). It differs between
        architectures (each caller says which reference it follows).

    Returns:
      ``[row, col, rsqrt_row, rsqrt_col, mom]``, each ``(num_decays,) + shape``.
    """
    dims = factored_dims(shape)
    if dims is None:
        v = acc.v_diag
        r = jax.lax.rsqrt(v + jnp.asarray(_FACTORED_FEATURE_EPS, v.dtype))
        if mom_eps:
            mom = m * jax.lax.rsqrt(v + jnp.asarray(mom_eps, v.dtype))
        else:
            mom = m * floored_rsqrt(v)
        return [v, v, r, r, mom]
    d1, d0 = dims
    full = (acc.v_row.shape[0], *shape)
    row = jnp.broadcast_to(jnp.expand_dims(acc.v_row, 1 + d0), full)
    col = jnp.broadcast_to(jnp.expand_dims(acc.v_col, 1 + d1), full)
    eps = jnp.asarray(_FACTORED_FEATURE_EPS, row.dtype)
    mom = _row_col_scale(m, acc.v_row, acc.v_col, dims, row.dtype)
    return [row, col, jax.lax.rsqrt(row + eps), jax.lax.rsqrt(col + eps), mom]
