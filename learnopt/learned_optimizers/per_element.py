"""A small MLP applied to every parameter element, in the form that runs fastest.

Every per-parameter learned optimizer (MLPLOpt, AdafacMLPLOpt, MLPNomLOpt, Celo2, the
MLPs HyperV2 generates, RNNMLPLOpt) computes, for each element of a tensor, a few dozen
features, normalizes each feature by its root mean square over the tensor, appends
per-tensor inputs (time features, an LSTM's output) and runs a small MLP. Written the
obvious way (features concatenated into ``[*shape, F]``, then ``x @ w``) the feature
matrix and every hidden layer are materialized in memory, and XLA:CPU runs the skinny
products at a few GFLOP/s: 50-200x the cost of an Adam step on a 932k-parameter model.

:func:`mlp` computes the same function in one of three forms:

* ``"reference"``: that obvious form, kept as the reference the others are tested
  against (``tests/test_per_element.py``);
* ``"elementwise"``: the layers unrolled into multiply-adds over the feature columns
  (each a tensor-shaped array), so XLA fuses the whole MLP into one loop over the
  elements and nothing per-hidden-unit reaches memory. The normalizers are per-feature
  scales folded into the first layer's rows (``w0[f] / rms_f``; applied to the columns
  when only some axes are normalized); per-tensor inputs are folded into the first
  layer's bias (``b0 + t @ w0[F:]``, computed once per tensor), and columns that are
  constant along an axis (Adafactor row and column statistics, given unbroadcast) into
  per-row and per-column partial sums of the first layer. Its derivative is taken through
  the stacked matrix-product form (a custom JVP: the same function, and a compact
  derivative where the unrolled one made XLA:CPU's compiler run out of memory). Wins on
  large tensors for narrow MLPs; its program grows with ``width**2``;
* ``"blocked"``: the scaled columns stacked ``[N, F]`` and the MLP run as matrix
  products on blocks of :data:`BLOCK` rows (``lax.map``), so each block's hidden
  layers stay in cache instead of going to memory;
* ``"fused"``: the feature groups' rows through
  :mod:`~learnopt.learned_optimizers.fused_kernel`'s compiled CPU kernel (two hidden
  layers of 32, ReLU, float32), the hidden units kept in registers, the normalization
  over the whole tensor computed in the kernel, and with :func:`mlp_step` the update
  written by it; its derivative is the blocked form's (a custom JVP).

``form="auto"`` picks by :func:`choose_form`, and takes ``"fused"`` over ``"blocked"``
for tensors of at least :data:`FUSED_MIN_SIZE` elements where the kernel computes the
MLP and is available (measured, see ``docs/benchmarks.md``:
``benchmarks/bench_lopt_cost.py`` for deployment, ``benchmarks/bench_pes_forms.py`` for
meta-training). All forms agree to float32 rounding (summation order differs).
"""

from __future__ import annotations

import functools
import inspect
import math
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from learnopt.learned_optimizers import fused_kernel

__all__ = [
    "mlp",
    "mlp_step",
    "Step",
    "MeanSquare",
    "twice",
    "choose_form",
    "FORMS",
    "BLOCK",
    "ELEMENTWISE_MAX_WIDTH",
    "ELEMENTWISE_MIN_SIZE",
    "FUSED_MIN_SIZE",
]

FORMS = ("auto", "reference", "elementwise", "blocked", "fused")
#: Rows per block of the ``"blocked"`` form (16k rows of 32 floats: 2 MB per layer).
BLOCK = 16384
#: The widest hidden layer the ``"elementwise"`` form is chosen for (``"auto"``).
ELEMENTWISE_MAX_WIDTH = 16
#: The smallest tensor the ``"elementwise"`` form is chosen for (``"auto"``).
ELEMENTWISE_MIN_SIZE = BLOCK
#: The smallest tensor ``"auto"`` takes the ``"fused"`` kernel for (where it applies).
FUSED_MIN_SIZE = BLOCK

Layer = tuple[jax.Array, jax.Array]


class MeanSquare(NamedTuple):
    """A normalization-statistics column given by its value, not by the data to reduce.

    In :func:`mlp`'s ``stat_groups`` (with ``feature_axis=0``), in a column's place: the
    column's mean square over ``norm_axes`` (a scalar, or an array of the tensor's rank
    with 1 on those axes), computed by the caller where it has a cheaper way than a pass
    over the column (the Adafactor-preconditioned gradient:
    :func:`~learnopt.learned_optimizers.accumulators.preconditioned_grad_mean_squares`).

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


class _StepArgs(NamedTuple):
    params: jax.Array
    mult: jax.Array
    exp_mult: float
    summary: bool


def mlp_step(
    layers: Sequence[Layer],
    groups: Sequence[jax.Array],
    shape: tuple[int, ...],
    params: jax.Array,
    *,
    step_mult: float | jax.Array,
    exp_mult: float,
    summary: bool = False,
    **mlp_kwargs: Any,
) -> Step:
    """``params - step_mult * d * exp(exp_mult * a)``, ``(d, a)`` :func:`mlp`'s two
    per-element outputs: the update rule of MLPLOpt and RNNMLPLOpt (Metz et al., 2019,
    arXiv:1810.10180; 2020, arXiv:2009.11243).

    In the ``"fused"`` form the kernel writes the new parameters in place of ``d`` and
    ``a`` (one result instead of two, and no second pass over them); in the others it is
    :func:`mlp` followed by the same arithmetic. The same function either way (a custom
    JVP: derivatives through the blocked form).

    Args:
      layers: as :func:`mlp`; two per-element outputs (``mean_outputs_from=2``, or two
        outputs in all).
      groups: the feature groups, as :func:`mlp` takes them.
      shape: the element shape (the tensor's; ``(1,)`` for scalars).
      params: the tensor's parameters (``shape``), in the compute dtype.
      step_mult: the step's scale (a float, or a traced scalar).
      exp_mult: the magnitude's scale inside the exponential (a float).
      summary: also return the step statistics' sums (:class:`Step`).
      **mlp_kwargs: :func:`mlp`'s keyword arguments (``tensor_inputs``, ``norm_axes``,
        ``mean_outputs_from``, ``form``, ...).

    Returns:
      A :class:`Step`.
    """
    mean_from = mlp_kwargs.get("mean_outputs_from")
    n_out = int(layers[-1][0].shape[1])
    if (n_out if mean_from is None else mean_from) != 2:
        raise ValueError(
            "mlp_step reads a direction and a magnitude: it needs 2 per-element outputs, got "
            f"{n_out} outputs with mean_outputs_from={mean_from}"
        )
    dtype = _dtype_of(groups)
    params = jnp.asarray(params).astype(dtype)
    mult = jnp.asarray(step_mult, dtype)
    unknown = set(mlp_kwargs) - set(_MLP_KEYWORDS)
    if unknown:
        raise TypeError(f"mlp_step got unexpected keyword arguments {sorted(unknown)}")
    args = _StepArgs(params, mult, float(exp_mult), bool(summary))
    out = _mlp(layers, groups, shape, **{**_MLP_KEYWORDS, **mlp_kwargs}, step=args)
    if isinstance(out, Step):
        return out
    new_p, sums = _step(params, out[0], out[1], mult, float(exp_mult), summary)
    return Step(new_p, out[2] if mean_from is not None else None, sums)


def choose_form(widths: Sequence[int], size: int) -> str:
    """The form ``"auto"`` takes for an MLP with these hidden widths on ``size`` elements.

    Measured on XLA:CPU (``benchmarks/bench_lopt_cost.py``, ``bench_pes_forms.py``):
    unrolled multiply-adds win on large tensors up to width 16 (fused, nothing
    materialized); wider layers compile slowly unrolled and run fastest as blocked
    matrix products, and so do small tensors (meta-training's tasks, where the unrolled
    form's many small kernels made PES 1.6x slower).

    Args:
      widths: the hidden layers' widths.
      size: the number of elements (of one tensor, as the update sees it: under ``vmap``
        the unbatched size).

    Returns:
      ``"elementwise"`` or ``"blocked"``; :func:`mlp` then takes ``"fused"`` over
      ``"blocked"`` for tensors of at least :data:`FUSED_MIN_SIZE` elements where the
      kernel computes the MLP (dtype, outputs, backend) and is available.
    """
    narrow = max(widths, default=0) <= ELEMENTWISE_MAX_WIDTH
    return "elementwise" if narrow and size >= ELEMENTWISE_MIN_SIZE else "blocked"


def mlp(
    layers: Sequence[Layer],
    groups: Sequence[jax.Array],
    shape: tuple[int, ...],
    *,
    tensor_inputs: jax.Array | None = None,
    stat_groups: Sequence[jax.Array] | None = None,
    norm_axes: Sequence[int] | None = None,
    norm_eps: float = 1e-5,
    activation: Callable[[jax.Array], jax.Array] = jax.nn.relu,
    mean_outputs_from: int | None = None,
    form: str = "auto",
    feature_axis: int = -1,
) -> list[jax.Array]:
    """``MLP([normalize(concat(groups)), tensor_inputs])`` for every element of a tensor.

    With ``x_f`` the feature columns of ``groups`` (in order) and ``t`` the per-tensor
    inputs: ``x_f <- x_f / sqrt(norm_eps + mean(x_f^2))`` (mean over ``norm_axes``, if
    given), ``h_1 = act([x, t] @ w_0 + b_0)``, ..., ``out = h_L @ w_L + b_L``.

    Args:
      layers: ``[(w_0, b_0), ..., (w_L, b_L)]``; ``w_0`` has one row per feature column,
        then one per entry of ``tensor_inputs``.
      groups: feature groups, each ``[*shape, width]`` (with ``feature_axis=0``:
        ``[width, *shape]``, or a sequence of ``width`` arrays of ``shape``), in the
        compute dtype. With ``feature_axis=0`` a column may also be an array that
        broadcasts to ``shape`` (a 1 on the axes it is constant along: an Adafactor row
        or column statistic): it means its broadcast, and the ``"elementwise"`` form
        computes its first-layer terms once per row or column instead of per element.
      shape: the element shape (the tensor's shape; ``(1,)`` for scalars).
      tensor_inputs: per-tensor inputs ``[T]`` (the same for every element), or None.
      stat_groups: the same groups computed a second time, for the normalization
        statistics only (see :func:`twice`); default ``groups``. (A broadcastable
        column's mean square is that of its broadcast: it is read unbroadcast.) With
        ``feature_axis=0`` a column here may also be a :class:`MeanSquare`.
      norm_axes: the axes of ``shape`` to normalize each feature over (None: no
        normalization).
      norm_eps: added to the mean square.
      activation: between layers, not after the last.
      mean_outputs_from: outputs from this index on are only needed averaged over the
        elements (RNNMLPLOpt's messages to its LSTM): they are computed as the mean of the
        last hidden layer times their weights (the same, by linearity), not per element.
      form: one of :data:`FORMS`.
      feature_axis: where each group holds its features: -1 (last axis) or 0 (first
        axis, or a sequence of columns: the one-array-per-decay features of
        :mod:`~learnopt.learned_optimizers.accumulators`, whose columns the
        normalization statistics then read as whole arrays, without copies).

    Returns:
      One array of shape ``shape`` per output unit; with ``mean_outputs_from=k``, the
      first ``k`` of them and then one vector of the other outputs' element means.
    """
    return _mlp(
        layers,
        groups,
        shape,
        tensor_inputs=tensor_inputs,
        stat_groups=stat_groups,
        norm_axes=norm_axes,
        norm_eps=norm_eps,
        activation=activation,
        mean_outputs_from=mean_outputs_from,
        form=form,
        feature_axis=feature_axis,
        step=None,
    )


#: :func:`mlp`'s keyword arguments and their defaults (what :func:`mlp_step` passes on).
_MLP_KEYWORDS = {
    name: p.default
    for name, p in inspect.signature(mlp).parameters.items()
    if p.kind is inspect.Parameter.KEYWORD_ONLY
}


def _mlp(
    layers,
    groups,
    shape,
    *,
    tensor_inputs,
    stat_groups,
    norm_axes,
    norm_eps,
    activation,
    mean_outputs_from,
    form,
    feature_axis,
    step,
):
    """:func:`mlp`; with ``step`` (a :class:`_StepArgs`), the fused forms return
    :func:`mlp_step`'s :class:`Step` (the kernel's epilogue) instead of the outputs."""
    if form not in FORMS:
        raise ValueError(f"form must be one of {FORMS}, got {form!r}")
    if feature_axis not in (0, -1):
        raise ValueError(f"feature_axis must be 0 or -1, got {feature_axis!r}")
    stats = groups if stat_groups is None else stat_groups
    columns = stat_columns = None
    widths = [int(w.shape[1]) for w, _ in layers[:-1]]
    n_out = int(layers[-1][0].shape[1])
    if form == "auto":
        size = math.prod(shape)
        form = choose_form(widths, size)
        if (
            form == "blocked"
            and size >= FUSED_MIN_SIZE
            and _fused_applies(widths, n_out, groups, activation, mean_outputs_from)
            and fused_kernel.available()
        ):
            form = "fused"
    elif form == "fused":
        if not _fused_applies(widths, n_out, groups, activation, mean_outputs_from):
            raise ValueError(
                "form='fused' computes two ReLU hidden layers of "
                f"{fused_kernel.WIDTH} units, 1-{fused_kernel.MAX_OUTPUTS} per-element "
                "outputs (before mean_outputs_from), float32, on the CPU backend; got widths "
                f"{widths}, {n_out} outputs, mean_outputs_from={mean_outputs_from}, dtype "
                f"{_dtype_of(groups)}, backend {jax.default_backend()!r}"
            )
        if not fused_kernel.available():
            raise RuntimeError(
                f"form='fused': the kernel is not available ({fused_kernel.unavailable_reason()})"
            )
    if feature_axis == 0:
        # Features first: the columns as they are (broadcast to the tensor's shape for the
        # forms that stack them), and as width-1 groups of the last-axis form.
        columns, stat_columns = _columns(groups, first=True), _columns(stats, first=True)
        if form != "elementwise":
            columns = [jnp.broadcast_to(c, shape) for c in columns]
        groups = [c[..., None] for c in columns]
        stats = [c if isinstance(c, MeanSquare) else c[..., None] for c in stat_columns]
    dtype = groups[0].dtype
    layers = [(w.astype(dtype), b.astype(dtype)) for w, b in layers]
    if form == "reference":
        outs = _reference(layers, groups, shape, tensor_inputs, norm_axes, norm_eps, activation)
        if mean_outputs_from is None:
            return outs
        k = mean_outputs_from
        return [*outs[:k], jnp.stack([jnp.mean(o) for o in outs[k:]])]
    eps = jnp.asarray(norm_eps, dtype)
    nf = sum(int(g.shape[-1]) for g in groups)
    w0, b0 = layers[0]
    if tensor_inputs is not None:
        b0 = b0 + tensor_inputs.astype(dtype) @ w0[nf:]
    w0 = w0[:nf]
    whole = norm_axes is not None and sorted(norm_axes) == list(range(len(shape)))
    if form == "fused" and whole and stat_groups is None:
        # The kernel computes the columns' mean squares itself (one pass over its inputs,
        # which then come from cache), instead of a reduction per column here.
        rows = [g.reshape(-1, g.shape[-1]) for g in groups]
        layers = [(w0, b0), *layers[1:]]
        return _fused(layers, rows, shape, mean_outputs_from, float(norm_eps), step)
    if form in ("blocked", "fused") and whole:
        # One scale per feature column: folded into the first layer's rows, so the
        # stacked features need no normalized copy.
        w0 = w0 * _scales(stats, tuple(norm_axes), eps)[:, None]
        layers = [(w0, b0), *layers[1:]]
        if form == "fused":
            rows = [g.reshape(-1, g.shape[-1]) for g in groups]
            return _fused(layers, rows, shape, mean_outputs_from, step=step)
        x = jnp.concatenate(list(groups), axis=-1).reshape(-1, nf)
        return _blocked(layers, x, shape, activation, mean_outputs_from)
    if columns is None:
        columns, stat_columns = _columns(groups), _columns(stats)
    if form == "elementwise" and whole:
        w0 = w0 * _scales(stats, tuple(norm_axes), eps)[:, None]
    elif norm_axes is not None:
        columns = _normalized(columns, stat_columns, tuple(norm_axes), eps)
    layers = [(w0, b0), *layers[1:]]
    if form == "elementwise":
        return _elementwise_differentiable(
            activation, mean_outputs_from, tuple(shape), layers, columns
        )
    if form == "fused":
        rows = [jnp.reshape(c, (-1, 1)) for c in columns]
        return _fused(layers, rows, shape, mean_outputs_from, step=step)
    x = jnp.stack([jnp.reshape(c, (-1,)) for c in columns], axis=-1)
    return _blocked(layers, x, shape, activation, mean_outputs_from)


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


def twice(
    features: Callable[..., list[jax.Array]],
    *inputs: Any,
    stat_features: Callable[..., list[jax.Array]] | None = None,
) -> tuple[list, list]:
    """``features(*inputs)`` for the MLP, and again for its normalization statistics.

    The second copy reads its inputs through ``lax.optimization_barrier``, so XLA cannot
    merge the two: the statistics' pass recomputes the features from the accumulators
    (fused into its reductions) and so does the MLP's pass, instead of the features being
    written to memory between the two passes (measured: several times fewer bytes).

    Args:
      features: ``inputs -> feature groups``.
      *inputs: its arguments (arrays or pytrees of arrays).
      stat_features: the statistics' pass, if not ``features``: columns with the same
        mean square over the normalized axes (see :func:`mlp`'s ``stat_groups``).

    Returns:
      ``(groups, stat_groups)`` for :func:`mlp`.
    """
    stat_features = features if stat_features is None else stat_features
    return features(*inputs), stat_features(*jax.lax.optimization_barrier(inputs))


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
