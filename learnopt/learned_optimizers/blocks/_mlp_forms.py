"""The forms of :mod:`~learnopt.learned_optimizers.blocks.per_element`'s MLP, one function each.

:func:`~learnopt.learned_optimizers.blocks.per_element.mlp` chooses among them (its module
docstring says what each form does and when it wins); they all compute the same
function: ``_reference`` (features concatenated, matrix products), ``_elementwise``
(the layers unrolled over the feature columns, differentiated through ``_stacked``),
``_blocked`` (matrix products on blocks of :data:`BLOCK` rows) and ``_fused`` (the
compiled CPU kernel of :mod:`~learnopt.learned_optimizers.blocks.fused_kernel`, differentiated
through ``_blocked``), with the column normalization they share.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from learnopt.learned_optimizers.blocks import fused_kernel

#: Rows per block of the ``"blocked"`` form (16k rows of 32 floats: 2 MB per layer).
BLOCK = 16384

Layer = tuple[jax.Array, jax.Array]


class MeanSquare(NamedTuple):
    """A normalization-statistics column given by its value, not by the data to reduce.

    In :func:`mlp`'s ``stat_groups`` (with ``feature_axis=0``), in a column's place: the
    column's mean square over ``norm_axes`` (a scalar, or an array of the tensor's rank
    with 1 on those axes), computed by the caller where it has a cheaper way than a pass
    over the column (the Adafactor-preconditioned gradient:
    :func:`~learnopt.learned_optimizers.blocks.accumulators.preconditioned_grad_mean_squares`).

    Attributes:
      value: the mean square, in the compute dtype.
    """

    value: jax.Array


class Step(NamedTuple):
    """What :func:`mlp_step` returns.

    Attributes:
      params: the updated parameters, of the tensor's shape, in the compute dtype.
      means: with ``mean_outputs_from=2``, the other outputs' element means; else None.
      sums: with ``summary``, ``[4]``: the sums over the elements of ``|delta|``,
        ``|direction|``, ``magnitude`` and ``|magnitude|``; else None.
    """

    params: jax.Array
    means: jax.Array | None
    sums: jax.Array | None


def _dtype_of(groups: Sequence[Any]) -> Any:
    first = groups[0]
    while isinstance(first, (list, tuple)):
        first = first[0]
    return first.dtype


def _fused_applies(widths, n_out, groups, activation, mean_outputs_from) -> bool:
    """Whether :mod:`fused_kernel` computes this MLP (shape, dtype, backend, activation)."""
    per_element_outputs = n_out if mean_outputs_from is None else mean_outputs_from
    return activation is jax.nn.relu and fused_kernel.supports(
        widths, per_element_outputs, _dtype_of(groups)
    )


def _fused(layers, groups: list[jax.Array], shape, mean_from=None, norm_eps=None, step=None):
    """The MLP on the rows of ``concat(groups, axis=1)`` (each ``[N, F_g]``) by the fused
    kernel: one array of ``shape`` per output (as :func:`_blocked` with ``mean_from``);
    with ``norm_eps``, each column first divided by its root mean square over the rows;
    with ``step``, :func:`mlp_step`'s :class:`Step` by the kernel's epilogue."""
    if step is not None:
        p = jnp.reshape(step.params, (-1,))
        new_p, means, sums = _fused_step_rows(
            mean_from, norm_eps, step.exp_mult, step.summary, layers, groups, p, step.mult
        )
        return Step(new_p.reshape(shape), means, sums)
    out = _fused_rows(mean_from, norm_eps, layers, groups)
    if mean_from is None:
        return [out[k].reshape(shape) for k in range(out.shape[0])]
    out, mean_out = out
    return [*(out[k].reshape(shape) for k in range(mean_from)), mean_out]


@functools.partial(jax.custom_jvp, nondiff_argnums=(0, 1))
def _fused_rows(mean_from, norm_eps, layers, groups):
    """``[K, N]`` outputs of the fused kernel (with ``mean_from``: the first ``mean_from``
    of them, and the others' means over the rows); differentiated as :func:`_blocked`."""
    if mean_from is None:
        return fused_kernel.fused_mlp(layers, groups, norm_eps=norm_eps)
    (w2, b2), n = layers[-1], groups[0].shape[0]
    out, h_sum = fused_kernel.fused_mlp(
        [*layers[:-1], (w2[:, :mean_from], b2[:mean_from])],
        groups,
        hidden_sum=True,
        norm_eps=norm_eps,
    )
    return out, (h_sum / n) @ w2[:, mean_from:] + b2[mean_from:]


@_fused_rows.defjvp
def _fused_rows_jvp(mean_from, norm_eps, primals, tangents):
    def blocked(ls, gs):
        outs = _blocked_rows(mean_from, norm_eps, ls, gs)
        if mean_from is None:
            return jnp.stack(outs)
        return jnp.stack(outs[:mean_from]), outs[mean_from]

    _, out_tangent = jax.jvp(blocked, primals, tangents)
    return _fused_rows(mean_from, norm_eps, *primals), out_tangent


def _blocked_rows(mean_from, norm_eps, layers, groups) -> list[jax.Array]:
    """What the fused kernel computes on the rows of ``groups``, by the blocked products
    (the kernel's derivative): with ``norm_eps``, the columns' scales folded into ``w0``."""
    if norm_eps is not None:
        (w0, b0), eps = layers[0], jnp.asarray(norm_eps, groups[0].dtype)
        layers = [(w0 * _scales(groups, (0,), eps)[:, None], b0), *layers[1:]]
    rows = jnp.concatenate(groups, axis=1)
    return _blocked(layers, rows, (rows.shape[0],), jax.nn.relu, mean_from)


def _blocked_step(mean_from, norm_eps, exp_mult, summary, layers, groups, p, mult):
    """:func:`_fused_step_rows` computed with the blocked products (its derivative)."""
    outs = _blocked_rows(mean_from, norm_eps, layers, groups)
    new_p, sums = _step(p, outs[0], outs[1], mult, exp_mult, summary)
    return new_p, (outs[2] if mean_from is not None else None), sums


@functools.partial(jax.custom_jvp, nondiff_argnums=(0, 1, 2, 3))
def _fused_step_rows(mean_from, norm_eps, exp_mult, summary, layers, groups, p, mult):
    """``(new_p [N], means or None, step sums or None)`` by the fused kernel's update
    epilogue; differentiated as :func:`_blocked_step`."""
    if mean_from is None:
        new_p, _, sums = fused_kernel.fused_mlp_step(
            layers, groups, p, mult, exp_mult, norm_eps=norm_eps, step_sums=summary
        )
        return new_p, None, sums
    (w2, b2), n = layers[-1], p.shape[0]
    new_p, h_sum, sums = fused_kernel.fused_mlp_step(
        [*layers[:-1], (w2[:, :mean_from], b2[:mean_from])],
        groups,
        p,
        mult,
        exp_mult,
        hidden_sum=True,
        norm_eps=norm_eps,
        step_sums=summary,
    )
    return new_p, (h_sum / n) @ w2[:, mean_from:] + b2[mean_from:], sums


@_fused_step_rows.defjvp
def _fused_step_rows_jvp(mean_from, norm_eps, exp_mult, summary, primals, tangents):
    def blocked(*args):
        return _blocked_step(mean_from, norm_eps, exp_mult, summary, *args)

    _, out_tangent = jax.jvp(blocked, primals, tangents)
    return _fused_step_rows(mean_from, norm_eps, exp_mult, summary, *primals), out_tangent


def _step(p, direction, magnitude, mult, exp_mult, summary):
    """``p - delta`` with ``delta = direction * exp(magnitude * exp_mult) * mult``, and with
    ``summary`` the sums of ``|delta|``, ``|direction|``, ``magnitude``, ``|magnitude|``."""
    delta = direction * jnp.exp(magnitude * exp_mult) * mult
    new_p = p - delta
    if not summary:
        return new_p, None
    parts = (jnp.abs(delta), jnp.abs(direction), magnitude, jnp.abs(magnitude))
    return new_p, jnp.stack([jnp.sum(x) for x in parts])


def _columns(groups: Sequence[Any], first: bool = False) -> list[jax.Array]:
    """The feature columns of ``groups`` in order (features on axis 0, or sequences of
    columns, if ``first``)."""
    if first:
        return [g[j] for g in groups for j in range(len(g))]
    return [g[..., j] for g in groups for j in range(g.shape[-1])]


def _mean_square(stat: Any, axes: tuple[int, ...], keepdims: bool) -> jax.Array:
    """``mean(stat^2)`` over ``axes``, or the value of a :class:`MeanSquare`."""
    if isinstance(stat, MeanSquare):
        return stat.value
    return jnp.mean(jnp.square(stat), axis=axes, keepdims=keepdims)


def _scales(groups: Sequence[Any], axes: tuple[int, ...], eps: jax.Array) -> jax.Array:
    """``rsqrt(eps + mean(x^2))`` of every feature column over the whole tensor, ``[F]``."""
    ms = [jnp.reshape(_mean_square(g, axes, keepdims=False), (-1,)) for g in groups]
    return jax.lax.rsqrt(jnp.concatenate(ms) + eps)


def _normalized(columns: list, stats: list, axes: tuple[int, ...], eps: jax.Array) -> list:
    """Each column times ``rsqrt(eps + mean(stat^2))`` (mean over ``axes``).

    One reduction per column: XLA fuses sibling reductions over the same inputs into one
    pass (measured: stacking the squares and reducing once materializes ``[N, F]`` and
    costs 5x more).
    """
    return [
        c * jax.lax.rsqrt(_mean_square(s, axes, keepdims=True) + eps)
        for c, s in zip(columns, stats, strict=True)
    ]


def _reference(layers, groups, shape, tensor_inputs, norm_axes, norm_eps, activation):
    x = jnp.concatenate(list(groups), axis=-1)
    if norm_axes is not None:
        mean_sq = jnp.mean(jnp.square(x), axis=tuple(norm_axes), keepdims=True)
        x = x * jax.lax.rsqrt(mean_sq + jnp.asarray(norm_eps, x.dtype))
    if tensor_inputs is not None:
        t = tensor_inputs.astype(x.dtype)
        x = jnp.concatenate([x, jnp.broadcast_to(t, (*shape, t.shape[0]))], axis=-1)
    for i, (w, b) in enumerate(layers):
        x = x @ w + b
        if i < len(layers) - 1:
            x = activation(x)
    return [x[..., j] for j in range(x.shape[-1])]


def _elementwise(layers, columns: list[jax.Array], activation, mean_from, shape) -> list[jax.Array]:
    """Each layer as multiply-adds over columns: ``h_j = sum_i x_i w[i, j] + b[j]``."""

    def layer(xs, w, b, units):
        outs = []
        for j in units:
            acc = xs[0] * w[0, j]
            for k in range(1, len(xs)):
                acc = acc + xs[k] * w[k, j]
            outs.append(acc + b[j])
        return outs

    xs = _first_layer(columns, *layers[0], shape)
    if len(layers) == 1:
        if mean_from is None:
            return xs
        return [*xs[:mean_from], jnp.stack([jnp.mean(h) for h in xs[mean_from:]])]
    xs = [activation(h) for h in xs]
    for w, b in layers[1:-1]:
        xs = [activation(h) for h in layer(xs, w, b, range(w.shape[1]))]
    w, b = layers[-1]
    if mean_from is None:
        return layer(xs, w, b, range(w.shape[1]))
    mean_h = jnp.stack([jnp.mean(h) for h in xs])
    return [*layer(xs, w, b, range(mean_from)), mean_h @ w[:, mean_from:] + b[mean_from:]]


def _first_layer(columns: list[jax.Array], w, b, shape) -> list[jax.Array]:
    """``sum_i x_i w[i, j] + b[j]`` for every unit ``j``, each of ``shape``.

    Columns smaller than ``shape`` (broadcastable to it: a row or column statistic) are
    summed per unit at their own shape first, one partial sum per distinct column shape,
    which is then added to the per-element sum by broadcasting: once per row instead of
    once per element.
    """

    def dot(ks, j):
        acc = columns[ks[0]] * w[ks[0], j]
        for k in ks[1:]:
            acc = acc + columns[k] * w[k, j]
        return acc

    full = [k for k, c in enumerate(columns) if c.shape == shape]
    small: dict[tuple, list[int]] = {}
    for k, c in enumerate(columns):
        if c.shape != shape:
            small.setdefault(c.shape, []).append(k)
    units = range(w.shape[1])
    # Written to memory (a few hundred values each) rather than fused into the
    # per-element loop, where XLA would recompute them for every element.
    partial = jax.lax.optimization_barrier([[dot(ks, j) for j in units] for ks in small.values()])
    outs = []
    for j in units:
        terms = ([dot(full, j)] if full else []) + [part[j] for part in partial]
        acc = terms[0]
        for t in terms[1:]:
            acc = acc + t
        outs.append(jnp.broadcast_to(acc + b[j], shape))
    return outs


@functools.partial(jax.custom_jvp, nondiff_argnums=(0, 1, 2))
def _elementwise_differentiable(activation, mean_from, shape, layers, columns):
    """:func:`_elementwise`, differentiated as the stacked matrix-product form.

    Unrolled multiply-adds are the fastest forward pass, but their derivative is a graph
    of ``width**2`` small fused kernels per layer that XLA:CPU compiles slowly and, for
    the meta-gradient of an unroll, with many GB of memory. The same function's
    derivative through the stacked ``[N, F] @ [F, H]`` form is compact; the values agree
    to float32 rounding, and so do the derivatives (``tests/test_per_element.py``).
    """
    return _elementwise(layers, columns, activation, mean_from, shape)


@_elementwise_differentiable.defjvp
def _elementwise_jvp(activation, mean_from, shape, primals, tangents):
    layers, columns = primals
    out = _elementwise(layers, columns, activation, mean_from, shape)
    _, out_tangent = jax.jvp(
        lambda ls, cs: _stacked(ls, cs, activation, mean_from, shape), primals, tangents
    )
    return out, out_tangent


def _stacked(layers, columns: list[jax.Array], activation, mean_from, shape) -> list[jax.Array]:
    """:func:`_elementwise`'s outputs, computed as :func:`_blocked` matrix products."""
    x = jnp.stack([jnp.reshape(jnp.broadcast_to(c, shape), (-1,)) for c in columns], axis=-1)
    return _blocked(layers, x, shape, activation, mean_from)


def _blocked(layers, x: jax.Array, shape, activation, mean_from=None) -> list[jax.Array]:
    """The MLP on the rows of ``x`` ``[N, F]``, in blocks of :data:`BLOCK` rows."""
    n = x.shape[0]
    w_last, b_last = layers[-1]
    k = w_last.shape[1] if mean_from is None else mean_from

    def block(xb, valid):
        h = _matmuls(layers[:-1], xb, activation, last=False)
        out = h @ w_last[:, :k] + b_last[:k]
        return out, jnp.sum(jnp.where(valid[:, None], h, 0), axis=0)

    if n <= BLOCK:
        out, h_sum = block(x, jnp.ones((n,), bool))
    else:
        blocks = -(-n // BLOCK)
        x = jnp.pad(x, ((0, blocks * BLOCK - n), (0, 0))).reshape(blocks, BLOCK, -1)
        valid = (jnp.arange(blocks * BLOCK) < n).reshape(blocks, BLOCK)
        out, h_sums = jax.lax.map(lambda a: block(*a), (x, valid))
        out, h_sum = out.reshape(blocks * BLOCK, -1)[:n], jnp.sum(h_sums, axis=0)
    outs = [out[:, j].reshape(shape) for j in range(k)]
    if mean_from is None:
        return outs
    return [*outs, (h_sum / n) @ w_last[:, mean_from:] + b_last[mean_from:]]


def _matmuls(layers: list[Layer], x: jax.Array, activation, last: bool = True) -> jax.Array:
    """``x`` through ``layers``, the activation between them (and after the last one
    unless ``last``)."""
    for i, (w, b) in enumerate(layers):
        x = x @ w + b
        if i < len(layers) - 1 or not last:
            x = activation(x)
    return x
