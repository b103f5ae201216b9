"""Shampoo with grafting, the notes' library's ``optimizers.shampoo.Shampoo``.

Shampoo (Gupta, Koren & Singer, 2018, arXiv:1802.09568) preconditions the gradient ``G``
of a rank-``k`` parameter block with one statistic per dimension,
``S_i <- beta2 S_i + (1 - beta2) G_(i) G_(i)^T`` (``G_(i)``: ``G`` with dimension ``i``
first, the others flattened; ``S_i`` starts at ``matrix_epsilon * I``), and steps along

    P(G) = G x_1 (S_1 + r_1 I)^(-1/p) ... x_k (S_k + r_k I)^(-1/p),    p = 2k

(``x_i``: multiplication along dimension ``i``; ``r_i = matrix_epsilon * max eig(S_i)``).
As in the distributed implementation that the library wraps (Anil et al., 2020,
arXiv:2002.09018), the step is *grafted*: ``P(G)`` is rescaled to the norm of a simpler
optimizer's update ``D`` (``graft_type``: SGD ``D = G``, AdaGrad, RMSProp, ...), and
before ``start_preconditioning_step`` the grafted optimizer runs alone. Both updates get
``weight_decay * param`` and heavy-ball momentum ``beta1`` (Nesterov by default)::

    U = |D| / (|P(G)| + 1e-16) * P(G) + wd * p   (D + wd * p before preconditioning)
    m <- beta1 m + w U;  step = w U + beta1 m (nesterov) or m;  p <- p - lr * step

with ``w = 1 - beta1`` if ``moving_average_for_momentum`` else 1. Large dimensions are cut
into blocks of ``block_size``; with ``best_effort_shape_interpretation``, adjacent small
dimensions are merged first (a ``[3, 4, 5]`` kernel with block size 32 is ``[12, 5]``).
Parameters with a dimension over ``skip_preconditioning_dim_size_gt`` and scalars use the
grafted update only.

learnopt computes the inverse roots with an eigendecomposition (the distributed
implementation uses a coupled Newton iteration: the same matrix up to its tolerance) and
keeps the previous preconditioner when the new one is not finite or its residual
``max|P^p (S + rI) - I|`` exceeds ``inverse_failure_threshold``. All statistics are
float32 (float64 for float64 params); ``best_effort_memory_usage_reduction`` is accepted
and ignored.
"""

from __future__ import annotations

import enum
import itertools
import math
from collections.abc import Callable
from typing import Any

import flax.struct
import jax
import jax.numpy as jnp
import numpy as np

from learnopt import _validate
from learnopt.optimizers.common import (
    OptimizerState,
    PyTree,
    accumulator,
    arith_dtype,
    hp,
    next_state,
)
from learnopt.optimizers.interface import OPTIMIZERS, Optimizer

__all__ = ["GraftingType", "Shampoo", "ShampooState", "block_layout"]


class GraftingType(enum.IntEnum):
    """The optimizer whose update norm Shampoo's step takes (the library's names)."""

    SGD = 1
    ADAGRAD = 2
    RMSPROP = 3
    RMSPROP_NORMALIZED = 4
    SQRT_N = 5
    ADAGRAD_NORMALIZED = 6


@flax.struct.dataclass
class ShampooState(OptimizerState):
    """State of :class:`Shampoo`.

    The fields of :class:`~learnopt.optimizers.common.OptimizerState`, then:

    Attributes:
      diagonal_statistics: the grafted optimizer's accumulators (AdaGrad / RMSProp),
        shaped like the params.
      statistics: per parameter leaf, per block, per dimension: ``S_i``.
      preconditioners: likewise: ``(S_i + r_i I)^(-1/p)``.
      diagonal_momentum: momentum of the grafted update, shaped like the params.
      momentum: momentum of the Shampoo update, shaped like the params.
    """

    diagonal_statistics: PyTree
    statistics: tuple
    preconditioners: tuple
    diagonal_momentum: PyTree
    momentum: PyTree


def block_layout(
    shape: tuple[int, ...], block_size: int, merge_small_dims: bool, skip_gt: int
) -> tuple[tuple[int, ...], tuple[tuple[tuple[int, int], ...], ...]] | None:
    """How a parameter of ``shape`` is reshaped and cut into blocks.

    Args:
      shape: the parameter's shape.
      block_size: the largest block side.
      merge_small_dims: merge adjacent dimensions while their product fits a block, and
        drop dimensions of size 1 (``best_effort_shape_interpretation``).
      skip_gt: no preconditioning if a dimension (after merging) is larger.

    Returns:
      ``(shape, blocks)``: the reshaped shape and, per block, its ``(start, stop)`` on
      each dimension; None if the parameter is not preconditioned.
    """
    dims = [int(d) for d in shape]
    if merge_small_dims:
        merged: list[int] = []
        for d in dims:
            if d == 1:
                continue
            if merged and merged[-1] * d <= block_size:
                merged[-1] *= d
            else:
                merged.append(d)
        dims = merged
    if not dims or any(d > skip_gt for d in dims):
        return None
    spans = [tuple((s, min(s + block_size, d)) for s in range(0, d, block_size)) for d in dims]
    return tuple(dims), tuple(itertools.product(*spans))


def _block(x: jax.Array, span: tuple[tuple[int, int], ...]) -> jax.Array:
    return x[tuple(slice(a, b) for a, b in span)]


def _stat(g: jax.Array, i: int, precision: Any) -> jax.Array:
    """``G_(i) G_(i)^T``: the contraction of ``g`` with itself over all axes but ``i``."""
    axes = [a for a in range(g.ndim) if a != i]
    return jnp.tensordot(g, g, axes=(axes, axes), precision=precision)


def _apply(p_mats: tuple, g: jax.Array, precision: Any) -> jax.Array:
    """``g x_1 P_1 ... x_k P_k``."""
    for i, p_mat in enumerate(p_mats):
        g = jnp.moveaxis(jnp.tensordot(p_mat, g, axes=([1], [i]), precision=precision), 0, i)
    return g


class Shampoo(Optimizer):
    """Shampoo with grafting (Gupta et al. 2018, arXiv:1802.09568; see the module doc).

    The library's constructor (it wraps ``distributed_shampoo``); the arguments and
    defaults are its.

    Args:
      learning_rate: step size, or a schedule ``step -> rate``.
      block_size: the largest side of a preconditioned block.
      beta1: momentum.
      beta2: decay of the statistics (1.0: sums, as in AdaGrad).
      diagonal_epsilon: added to the root of the grafted AdaGrad / RMSProp accumulator.
      matrix_epsilon: the statistics' initial value (times I) and the relative ridge.
      weight_decay: ``weight_decay * param`` added to the update before momentum.
      start_preconditioning_step: steps before this use the grafted update only.
      preconditioning_compute_steps: recompute the preconditioners every this many steps.
      statistics_compute_steps: update the statistics every this many steps.
      best_effort_shape_interpretation: merge small adjacent dimensions.
      graft_type: a :class:`GraftingType` or its name (``"SGD"``, ``"ADAGRAD"``, ...).
      nesterov: Nesterov momentum.
      exponent_override: the root ``p`` for every block (0: ``2 * rank``).
      best_effort_memory_usage_reduction: accepted, ignored.
      inverse_failure_threshold: keep the previous preconditioner when the new one's
        residual is larger.
      moving_average_for_momentum: momentum as ``beta1 m + (1 - beta1) U``.
      skip_preconditioning_dim_size_gt: parameters with a larger dimension use the
        grafted update only.
      clip_by_scaled_gradient_norm: clip each gradient to this norm divided by
        ``sqrt(size)`` (the grafted RMSProp's clipping), or None.
      precision: the ``jax.lax.Precision`` of the matrix products.
    """

    def __init__(
        self,
        learning_rate: float | Callable[[jax.Array], jax.Array],
        block_size: int,
        beta1: float = 0.9,
        beta2: float = 0.999,
        diagonal_epsilon: float = 1e-10,
        matrix_epsilon: float = 1e-6,
        weight_decay: float = 0.0,
        start_preconditioning_step: int = 5,
        preconditioning_compute_steps: int = 1,
        statistics_compute_steps: int = 1,
        best_effort_shape_interpretation: bool = True,
        graft_type: GraftingType | str | int = GraftingType.SGD,
        nesterov: bool = True,
        exponent_override: int = 0,
        best_effort_memory_usage_reduction: bool = False,
        inverse_failure_threshold: float = 0.1,
        moving_average_for_momentum: bool = False,
        skip_preconditioning_dim_size_gt: int = 4096,
        clip_by_scaled_gradient_norm: float | None = None,
        precision: Any = jax.lax.Precision.HIGHEST,
    ):
        if not callable(learning_rate):
            _validate.non_negative_float("learning_rate", learning_rate)
        _validate.positive_int("block_size", block_size)
        _validate.unit_interval("beta1", beta1)
        _validate.real("beta2", beta2, low=0.0, high=1.0, low_open=True)
        _validate.non_negative_float("diagonal_epsilon", diagonal_epsilon)
        _validate.non_negative_float("matrix_epsilon", matrix_epsilon)
        _validate.non_negative_float("weight_decay", weight_decay)
        _validate.non_negative_int("start_preconditioning_step", start_preconditioning_step)
        _validate.positive_int("preconditioning_compute_steps", preconditioning_compute_steps)
        _validate.positive_int("statistics_compute_steps", statistics_compute_steps)
        _validate.non_negative_int("exponent_override", exponent_override)
        _validate.positive_int("skip_preconditioning_dim_size_gt", skip_preconditioning_dim_size_gt)
        if clip_by_scaled_gradient_norm is not None:
            _validate.positive_float("clip_by_scaled_gradient_norm", clip_by_scaled_gradient_norm)
        if isinstance(graft_type, str):
            names = [g.name for g in GraftingType]
            if graft_type.upper() not in names:
                raise ValueError(f"graft_type must be one of {names}, got {graft_type!r}")
            graft_type = GraftingType[graft_type.upper()]
        self.graft_type = GraftingType(graft_type)
        self.learning_rate = learning_rate
        self.block_size = int(block_size)
        self.beta1 = beta1
        self.beta2 = beta2
        self.diagonal_epsilon = diagonal_epsilon
        self.matrix_epsilon = matrix_epsilon
        self.weight_decay = weight_decay
        self.start_preconditioning_step = int(start_preconditioning_step)
        self.preconditioning_compute_steps = int(preconditioning_compute_steps)
        self.statistics_compute_steps = int(statistics_compute_steps)
        self.best_effort_shape_interpretation = bool(best_effort_shape_interpretation)
        self.nesterov = bool(nesterov)
        self.exponent_override = int(exponent_override)
        self.best_effort_memory_usage_reduction = best_effort_memory_usage_reduction
        self.inverse_failure_threshold = inverse_failure_threshold
        self.moving_average_for_momentum = bool(moving_average_for_momentum)
        self.skip_preconditioning_dim_size_gt = int(skip_preconditioning_dim_size_gt)
        self.clip_by_scaled_gradient_norm = clip_by_scaled_gradient_norm
        self.precision = precision

    # -------------------------------------------------------------------------- layout
    def _layout(self, p: Any):
        return block_layout(
            np.shape(p),
            self.block_size,
            self.best_effort_shape_interpretation,
            self.skip_preconditioning_dim_size_gt,
        )

    def _leaf_init(self, p: Any) -> tuple[tuple, tuple]:
        layout = self._layout(p)
        if layout is None:
            return (), ()
        dtype = arith_dtype(p)
        _, blocks = layout
        stats = tuple(
            tuple(self.matrix_epsilon * jnp.eye(b - a, dtype=dtype) for a, b in span)
            for span in blocks
        )
        precs = tuple(tuple(jnp.eye(b - a, dtype=dtype) for a, b in span) for span in blocks)
        return stats, precs

    def init(self, params, model_state=None, num_steps=None, key=None):
        """Shampoo's state: ``matrix_epsilon * I`` statistics, identity preconditioners.

        Args and returns as in :meth:`~learnopt.optimizers.interface.Optimizer.init`.
        """
        leaves = jax.tree_util.tree_leaves(params)
        per_leaf = [self._leaf_init(p) for p in leaves]
        return ShampooState.initial(
            params,
            model_state,
            diagonal_statistics=accumulator(params),
            statistics=tuple(s for s, _ in per_leaf),
            preconditioners=tuple(p for _, p in per_leaf),
            diagonal_momentum=accumulator(params),
            momentum=accumulator(params),
        )

    # ------------------------------------------------------------------------ the maths
    def _inverse_root(self, stat: jax.Array, old: jax.Array, exponent: int) -> jax.Array:
        """``(S + r I)^(-1/p)``, ``r = matrix_epsilon * max eig``; ``old`` if it fails."""
        eye = jnp.eye(stat.shape[0], dtype=stat.dtype)
        evals, evecs = jnp.linalg.eigh(stat)
        ridge = hp(self.matrix_epsilon, stat.dtype) * jnp.maximum(jnp.max(evals), 1e-16)
        shifted = jnp.maximum(evals + ridge, ridge)
        root = (evecs * shifted ** (-1.0 / exponent)) @ evecs.T
        power = jnp.linalg.matrix_power(root, exponent)
        residual = jnp.max(jnp.abs(power @ (stat + ridge * eye) - eye))
        ok = jnp.all(jnp.isfinite(root)) & (residual <= self.inverse_failure_threshold)
        return jnp.where(ok, root, old)

    def _graft(self, g: jax.Array, diag: jax.Array) -> tuple[jax.Array, jax.Array]:
        """The grafted optimizer's update of ``g`` and its new accumulator."""
        cd = g.dtype
        kind = self.graft_type
        if kind == GraftingType.SGD:
            return g, diag
        if kind == GraftingType.SQRT_N:
            return jnp.sign(g), diag
        if kind in (GraftingType.RMSPROP_NORMALIZED, GraftingType.ADAGRAD_NORMALIZED):
            g = g / (jnp.linalg.norm(g) + 1e-16)
        if kind in (GraftingType.ADAGRAD, GraftingType.ADAGRAD_NORMALIZED):
            diag = diag + jnp.square(g)
        else:
            b2 = hp(self.beta2, cd)
            w2 = b2 if self.beta2 == 1.0 else 1 - b2
            diag = b2 * diag + w2 * jnp.square(g)
        return g / (jnp.sqrt(diag) + hp(self.diagonal_epsilon, cd)), diag

    def _leaf_update(self, p, g, diag, stats, precs, mom, dmom, step, lr):
        cd = diag.dtype
        g = g.astype(cd)
        if self.clip_by_scaled_gradient_norm is not None:
            scaled_norm = jnp.linalg.norm(g) / math.sqrt(max(g.size, 1))
            clip = hp(self.clip_by_scaled_gradient_norm, cd)
            g = g * jnp.minimum(1.0, clip / jnp.maximum(scaled_norm, 1e-16))
        graft, diag = self._graft(g, diag)
        layout = self._layout(p)
        if layout is None:
            precond = graft
        else:
            shape, blocks = layout
            exponent = self.exponent_override or 2 * len(shape)
            gm = jnp.reshape(g, shape)
            b2 = hp(self.beta2, cd)
            w2 = b2 if self.beta2 == 1.0 else 1 - b2
            do_stats = step % self.statistics_compute_steps == 0
            do_precs = step % self.preconditioning_compute_steps == 0
            new_stats, new_precs, out = [], [], jnp.zeros(shape, cd)
            for span, s_blk, p_blk in zip(blocks, stats, precs, strict=True):
                gb = _block(gm, span)
                s_new = tuple(
                    jnp.where(do_stats, b2 * s + w2 * _stat(gb, i, self.precision), s)
                    for i, s in enumerate(s_blk)
                )
                p_new = tuple(
                    jnp.where(do_precs, self._inverse_root(s, old, exponent), old)
                    for s, old in zip(s_new, p_blk, strict=True)
                )
                idx = tuple(slice(a, b) for a, b in span)
                out = out.at[idx].set(_apply(p_new, gb, self.precision))
                new_stats.append(s_new)
                new_precs.append(p_new)
            stats, precs = tuple(new_stats), tuple(new_precs)
            precond = jnp.reshape(out, np.shape(g))
        scale = jnp.linalg.norm(graft) / (jnp.linalg.norm(precond) + 1e-16)
        pc = p.astype(cd)
        wd = hp(self.weight_decay, cd)
        shampoo_upd = precond * scale + wd * pc
        graft_upd = graft + wd * pc
        b1 = hp(self.beta1, cd)
        w = 1 - b1 if self.moving_average_for_momentum else jnp.ones((), cd)
        mom = b1 * mom + w * shampoo_upd
        dmom = b1 * dmom + w * graft_upd
        run = step >= self.start_preconditioning_step
        upd = jnp.where(run, shampoo_upd, graft_upd)
        direction = jnp.where(run, mom, dmom)
        if self.nesterov:
            direction = w * upd + b1 * direction
        new_p = (pc - lr.astype(cd) * direction).astype(p.dtype)
        return new_p, diag, stats, precs, mom, dmom

    def update(self, opt_state, grads, loss=None, model_state=None, key=None, **kwargs):
        """One Shampoo step (see the module docstring).

        Args and returns as in :meth:`~learnopt.optimizers.interface.Optimizer.update`.
        """
        step = opt_state.iteration
        if callable(self.learning_rate):
            lr = jnp.asarray(self.learning_rate(step), jnp.float32)
        else:
            lr = jnp.asarray(self.learning_rate, jnp.float32)
        p_leaves, treedef = jax.tree_util.tree_flatten(opt_state.params)
        leaves = [
            treedef.flatten_up_to(t)
            for t in (grads, opt_state.diagonal_statistics, opt_state.momentum)
        ]
        dmom_leaves = treedef.flatten_up_to(opt_state.diagonal_momentum)
        outs = [
            self._leaf_update(p, g, d, s, pr, m, dm, step, lr)
            for p, g, d, m, s, pr, dm in zip(
                p_leaves,
                *leaves,
                opt_state.statistics,
                opt_state.preconditioners,
                dmom_leaves,
                strict=True,
            )
        ]
        column = [list(c) for c in zip(*outs, strict=True)] if outs else [[]] * 6
        return next_state(
            opt_state,
            treedef.unflatten(column[0]),
            model_state,
            diagonal_statistics=treedef.unflatten(column[1]),
            statistics=tuple(column[2]),
            preconditioners=tuple(column[3]),
            diagonal_momentum=treedef.unflatten(column[5]),
            momentum=treedef.unflatten(column[4]),
        )

    @property
    def name(self) -> str:
        """``Shampoo``."""
        return "Shampoo"


OPTIMIZERS.register(lambda: Shampoo(1e-3, 128), name="Shampoo")
