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
  :mod:`~learnopt.learned_optimizers.blocks.fused_kernel`'s compiled CPU kernel (two hidden
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

import inspect
import math
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from learnopt.learned_optimizers.blocks import fused_kernel
from learnopt.learned_optimizers.blocks._mlp_forms import (
    BLOCK,
    Layer,
    MeanSquare,
    Step,
    _blocked,
    _columns,
    _dtype_of,
    _elementwise_differentiable,
    _fused,
    _fused_applies,
    _normalized,
    _reference,
    _scales,
    _step,
)

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
#: The widest hidden layer the ``"elementwise"`` form is chosen for (``"auto"``).
ELEMENTWISE_MAX_WIDTH = 16
#: The smallest tensor the ``"elementwise"`` form is chosen for (``"auto"``).
ELEMENTWISE_MIN_SIZE = BLOCK
#: The smallest tensor ``"auto"`` takes the ``"fused"`` kernel for (where it applies).
FUSED_MIN_SIZE = BLOCK


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
        :mod:`~learnopt.learned_optimizers.blocks.accumulators`, whose columns the
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
    :func:`mlp_step`'s :class:`Step` (the kernel's epilogue) instead of the outputs.

    Long (over 80 lines): the preparation every form shares (normalization statistics,
    per-tensor inputs folded into the bias) and the dispatch to the form, kept together
    so that every form computes from the same prepared inputs."""
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
