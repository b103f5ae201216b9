"""Gradient accumulators of the per-parameter learned optimizers, and the features they give.

AdafacMLPLOpt (and MLPNomLOpt), HyperV2 (VeLO) and Celo2 keep the same three running
statistics of every parameter tensor, one array per decay ``b_k``:

* momenta ``m_k <- b_k m_k + (1 - b_k) g`` (:class:`MomAccumulator`);
* second moments ``v_k <- b_k v_k + (1 - b_k) g^2`` (:class:`RMSAccumulator`);
* Adafactor-style factored second moments (Shazeer & Stern, 2018, arXiv:1804.04235;
  :class:`FactoredAccum`): for a tensor of rank >= 2, the running means of
  ``g^2 + 1e-30`` over each of its two largest axes (a "row" and a "column" statistic),
  for other tensors the full running ``g^2 + 1e-30``. They also give the
  Adafactor-preconditioned gradient ``fac_g``.

Their per-parameter MLPs read the same per-element features from these statistics
(:mod:`~learnopt.learned_optimizers.blocks.element_features`). This module holds the
plumbing once: zero accumulators (:func:`init_accumulators`), the update of one tensor
(:func:`update_accumulators`), the walk over the parameter tree (:func:`update_tree`) and
the learnable-decay reparameterization. Arithmetic is in the tensor's
compute dtype (float32 for float32/bfloat16/float16 params, float64 for float64 params).

Layout: one array per decay. The library stores each accumulator as one decays-last
array (``[*p.shape, num_decays]``); the maths is the same either way, but XLA:CPU's
reductions (YNNPACK fusions) take no slice of an array as input, so the per-feature
normalization statistics of the MLPs (one reduction per feature column) copied every
per-decay column to memory before reducing it, strided or not (``docs/benchmarks.md``).
Here the state holds, at each parameter's place in the tree, a tuple of ``num_decays``
arrays of the parameter's shape (:func:`init_accumulators`), and every per-tensor
function takes and returns such per-decay sequences; the feature groups are lists of
columns, which
:func:`~learnopt.learned_optimizers.blocks.per_element.mlp` reads with ``feature_axis=0``. So
every statistic reads whole arrays, and nothing is stacked. Only the inner optimizer
state is laid out this way; theta is the library's. MLPLOpt and RNNMLPLOpt keep their
decays-last momenta (:func:`momentum_update`, :func:`rms_update`).

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
    "preconditioned_grad",
    "preconditioned_grad_mean_squares",
    "init_accumulators",
    "update_accumulators",
    "per_decay_pairs",
    "accumulator_grads",
    "update_tree",
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

#: One tensor's accumulator of several decays: one array of the tensor's shape per decay.
PerDecay = Sequence[jax.Array]


@flax.struct.dataclass
class MomAccumulator:
    """Momentum accumulators ``m`` (library name).

    Attributes:
      m: the momenta, a tree like the params. Built by :func:`init_accumulators`, each
        parameter's entry is a tuple of ``num_decays`` arrays of its shape, ``m[i]`` the
        exponential moving average of the gradient with decay ``i`` (MLPLOpt and
        RNNMLPLOpt keep theirs as one decays-last array, ``p.shape + (num_decays,)``).
    """

    m: PyTree


@flax.struct.dataclass
class RMSAccumulator:
    """Second-moment accumulators ``rms`` (library name).

    Attributes:
      rms: the second moments, a tree like the params, laid out like
        :attr:`MomAccumulator.m`; ``rms[i]`` the exponential moving average of ``g**2``
        with decay ``i``.
    """

    rms: PyTree


@flax.struct.dataclass
class FactoredAccum:
    """Adafactor-style second moments of one tensor, one array per decay.

    For a tensor of rank >= 2 with factored axes ``(d1, d0) = factored_dims(shape)``:
    ``v_row[i]`` is the running mean of ``g^2`` over axis ``d0`` (the shape without
    ``d0``), ``v_col[i]`` the mean over ``d1``; ``v_diag`` holds empty arrays. For rank
    < 2, ``v_diag[i]`` holds the full running ``g^2`` and the others are empty. The
    fields may also be trees like the params (see :func:`factored_tree_init`).

    Attributes:
      v_row: per decay, the running mean of ``g**2`` over axis ``d0`` (empty for rank < 2).
      v_col: per decay, the running mean of ``g**2`` over axis ``d1`` (empty for rank < 2).
      v_diag: per decay, for rank < 2, the running ``g**2`` itself; empty otherwise.
    """

    v_row: Any
    v_col: Any
    v_diag: Any


def momentum_update(m: jax.Array, g: jax.Array, decays: jax.Array) -> jax.Array:
    """``m_k <- b_k m_k + (1 - b_k) g`` for the decays on ``m``'s trailing axis.

    The decays-last form (MLPLOpt, RNNMLPLOpt); :func:`update_accumulators` is the
    one-array-per-decay form.

    Args:
      m: momenta, ``g.shape + (num_decays,)``.
      g: the gradient.
      decays: ``[num_decays]``.

    Returns:
      The new momenta.
    """
    decays = decays.astype(m.dtype)
    return decays * m + (1 - decays) * g[..., None]


def rms_update(v: jax.Array, g: jax.Array, decays: jax.Array) -> jax.Array:
    """``v_k <- b_k v_k + (1 - b_k) g^2`` with ``b_k`` clipped to [0, 1] (decays last).

    Args:
      v: second moments, ``g.shape + (num_decays,)``.
      g: the gradient.
      decays: ``[num_decays]``.

    Returns:
      The new second moments.
    """
    decays = jnp.clip(decays.astype(v.dtype), 0, 1)
    return decays * v + (1 - decays) * jnp.square(g)[..., None]


def _decayed(x: PerDecay, new: jax.Array, decays: jax.Array) -> tuple[jax.Array, ...]:
    """``x_k <- b_k x_k + (1 - b_k) new`` for each decay ``b_k`` of ``decays [K]``."""
    return tuple(decays[k] * x[k] + (1 - decays[k]) * new for k in range(len(x)))


def per_decay_pairs(a: Sequence[Any], b: Sequence[Any]) -> list[tuple[Any, Any]]:
    """The entries of two per-decay sequences paired as numpy broadcasts their lengths.

    What ``x[..., None] * y`` over decays-last arrays of ``[1]`` or ``[K]`` decays pairs,
    for the one-array-per-decay layout.

    Args:
      a: one entry per decay (length 1 or K).
      b: likewise (length 1 or K).

    Returns:
      ``K`` pairs ``(a_k, b_k)``, a length-1 side repeated.
    """
    n = int(np.broadcast_shapes((len(a),), (len(b),))[0])
    return [(a[k if len(a) > 1 else 0], b[k if len(b) > 1 else 0]) for k in range(n)]


def factored_init(shape: Sequence[int], num_decays: int, dtype: Any) -> FactoredAccum:
    """Zero factored accumulators for one tensor, one array per decay.

    Args:
      shape: the tensor's shape.
      num_decays: the number of decays.
      dtype: the accumulators' dtype.

    Returns:
      A :class:`FactoredAccum` of tuples of ``num_decays`` arrays (the unused fields hold
      arrays of shape ``[0]``).
    """

    def zeros(s):
        return tuple(jnp.zeros(tuple(s), dtype) for _ in range(num_decays))

    dims = factored_dims(shape)
    if dims is None:
        return FactoredAccum(zeros((0,)), zeros((0,)), zeros(shape))
    d1, d0 = dims
    return FactoredAccum(zeros(np.delete(shape, d0)), zeros(np.delete(shape, d1)), zeros((0,)))


def factored_tree_init(params: PyTree, num_decays: int) -> FactoredAccum:
    """Zero factored accumulators for every tensor of ``params``.

    Args:
      params: the parameters.
      num_decays: the number of decays.

    Returns:
      A :class:`FactoredAccum` whose three fields are trees like ``params`` (a tuple of
      ``num_decays`` arrays at each parameter's place), in each tensor's compute dtype.
    """
    leaves, treedef = jax.tree_util.tree_flatten(params)
    accs = [factored_init(np.shape(p), num_decays, leaf_compute_dtype(p.dtype)) for p in leaves]
    return FactoredAccum(
        v_row=treedef.unflatten([a.v_row for a in accs]),
        v_col=treedef.unflatten([a.v_col for a in accs]),
        v_diag=treedef.unflatten([a.v_diag for a in accs]),
    )


def _row_col_scale(
    x: PerDecay, v_row: PerDecay, v_col: PerDecay, dims: tuple[int, int], dtype: Any
) -> list[jax.Array]:
    """``x * rsqrt(v_row / mean_{d1}(v_row)) * rsqrt(v_col)``, both rsqrt floored at 1e-9.

    The factored preconditioner broadcast over the tensor, per decay (``x`` has one
    tensor-shaped entry per decay, or one for all); ``dtype`` is the accumulators' dtype.
    """
    d1, d0 = dims
    factors = _factors(FactoredAccum(v_row, v_col, ()), dims, dtype)
    return [
        xk * jnp.expand_dims(row, d0) * jnp.expand_dims(col, d1)
        for xk, (row, col) in per_decay_pairs(x, factors)
    ]


def _factors(acc: FactoredAccum, dims: tuple[int, int], dtype: Any) -> list[tuple]:
    """Per decay, ``(rsqrt(v_row / mean_{d1}(v_row)), rsqrt(v_col))``, both floored at
    1e-9 (:func:`safe_rsqrt`), before their broadcast over the tensor."""
    d1, d0 = dims
    reduced_d1 = d1 - 1 if d1 > d0 else d1
    floor = jnp.asarray(_RSQRT_FLOOR, dtype)
    return [
        (safe_rsqrt(row / (jnp.mean(row, axis=reduced_d1, keepdims=True) + floor)), safe_rsqrt(col))
        for row, col in zip(acc.v_row, acc.v_col, strict=True)
    ]


def preconditioned_grad(acc: FactoredAccum, g: jax.Array) -> list[jax.Array]:
    """The Adafactor-preconditioned gradient ``fac_g`` (see :func:`factored_update`), again.

    Args:
      acc: the tensor's updated factored second moments (one array per decay).
      g: the gradient, in the accumulators' dtype.

    Returns:
      One array of ``g``'s shape per decay.
    """
    dims = factored_dims(g.shape)
    if dims is None:
        floor = jnp.asarray(_RSQRT_FLOOR, g.dtype)
        return [g * safe_rsqrt(v + floor) for v in acc.v_diag]
    return _row_col_scale([g], acc.v_row, acc.v_col, dims, g.dtype)


def preconditioned_grad_mean_squares(acc: FactoredAccum, g: jax.Array) -> jax.Array:
    """``mean(fac_g_k^2)`` over the tensor for every decay ``k``, without ``fac_g``.

    For a factored tensor ``fac_g = g * row_factor * col_factor``, so the mean square is
    ``sum(g^2 * row_factor^2 * col_factor^2) / n``: one contraction of ``g^2`` with the
    factors of every decay (a matrix product), instead of one pass over each ``fac_g_k``.

    Args:
      acc: the tensor's updated factored second moments (one array per decay).
      g: the gradient, in the accumulators' dtype.

    Returns:
      ``[num_decays]``.
    """
    dims = factored_dims(g.shape)
    if dims is None:
        return jnp.stack([jnp.mean(jnp.square(x)) for x in preconditioned_grad(acc, g)])
    d1, d0 = dims
    letters = "abcdefghijklmnopqrstuvwxyz"[: g.ndim]
    rows = "".join(c for i, c in enumerate(letters) if i != d0)
    cols = "".join(c for i, c in enumerate(letters) if i != d1)
    factors = _factors(acc, dims, g.dtype)
    r2 = jnp.stack([jnp.square(r) for r, _ in factors])
    c2 = jnp.stack([jnp.square(c) for _, c in factors])
    total = jnp.einsum(f"{letters},K{rows},K{cols}->K", jnp.square(g), r2, c2)
    return total / g.size


def factored_update(
    acc: FactoredAccum, g: jax.Array, decays: jax.Array, epsilon: float = _FACTORED_EPS
) -> tuple[FactoredAccum, list[jax.Array]]:
    """Updates one tensor's factored accumulators and preconditions its gradient.

    With ``g2 = g^2 + epsilon`` and ``b`` clipped to [0, 1], for each decay:
    factored tensors keep ``v_row <- b v_row + (1 - b) mean_{d0}(g2)`` and
    ``v_col <- b v_col + (1 - b) mean_{d1}(g2)`` and precondition
    ``g * rsqrt(v_row / mean_{d1}(v_row)) * rsqrt(v_col)`` (both rsqrt floored at 1e-9);
    other tensors keep ``v <- b v + (1 - b) g2`` and return ``g * rsqrt(v + 1e-9)``.

    Args:
      acc: the tensor's accumulators (one array per decay, see :func:`factored_init`).
      g: the gradient.
      decays: ``[num_decays]``.
      epsilon: added to ``g^2``.

    Returns:
      ``(new accumulators, fac_g)`` with ``fac_g`` one array of ``g``'s shape per decay.
    """
    dtype = g.dtype
    decays = jnp.clip(decays.astype(dtype), 0, 1)
    g2 = jnp.square(g) + jnp.asarray(epsilon, dtype)
    dims = factored_dims(g.shape)
    if dims is None:
        acc = acc.replace(v_diag=_decayed(acc.v_diag, g2, decays))
    else:
        d1, d0 = dims
        v_row = _decayed(acc.v_row, jnp.mean(g2, axis=d0), decays)
        v_col = _decayed(acc.v_col, jnp.mean(g2, axis=d1), decays)
        acc = acc.replace(v_row=v_row, v_col=v_col)
    return acc, preconditioned_grad(acc, g)


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
      ``params`` holding, at each parameter's place, a tuple of one array per decay.
    """

    def zeros(k):
        return jax.tree_util.tree_map(
            lambda p: tuple(jnp.zeros(np.shape(p), leaf_compute_dtype(p.dtype)) for _ in range(k)),
            params,
        )

    return (
        MomAccumulator(m=zeros(num_mom)),
        RMSAccumulator(rms=zeros(num_rms)),
        factored_tree_init(params, num_fac),
    )


def update_accumulators(
    m: PerDecay, v: PerDecay, acc: FactoredAccum, g: jax.Array, decays: Decays
) -> tuple[tuple, tuple, FactoredAccum, list[jax.Array]]:
    """One step of the three accumulators of one tensor (one array per decay).

    ``m_k <- b_k m_k + (1 - b_k) g``, ``v_k <- b_k v_k + (1 - b_k) g^2`` (``b_k`` clipped
    to [0, 1]) and :func:`factored_update`.

    Args:
      m: momenta, one array of ``g``'s shape per entry of ``decays.mom``.
      v: second moments, one per entry of ``decays.rms``.
      acc: factored second moments (one array per decay).
      g: the gradient, in the accumulators' dtype.
      decays: the three decays.

    Returns:
      ``(m, v, acc, fac_g)``: the new accumulators and the Adafactor-preconditioned
      gradient (see :func:`factored_update`).
    """
    m = _decayed(m, g, decays.mom.astype(g.dtype))
    v = _decayed(v, jnp.square(g), jnp.clip(decays.rms.astype(g.dtype), 0, 1))
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
        g = g.astype(jax.tree_util.tree_leaves(m)[0].dtype)
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
    (cast back to ``p``'s dtype here); ``m``, ``v``, ``fac_g`` and ``acc``'s fields are
    per-decay sequences of arrays. Gradients are used as given (see
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
        stored = (tuple(x) for x in (m, v, acc.v_row, acc.v_col, acc.v_diag))
        return new_p.astype(p.dtype), *stored

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
