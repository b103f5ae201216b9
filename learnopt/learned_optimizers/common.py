"""Building blocks shared by the learned optimizer architectures.

Everything here works on one parameter tensor at a time, in the tensor's arithmetic
dtype (float32 for float32/bfloat16/float16 params, float64 for float64 params):

* gradient accumulators vectorized over a trailing "decays" axis: momentum
  ``m <- b m + (1 - b) g``, second moment ``v <- b v + (1 - b) g^2`` and Adafactor-style
  factored second moments (Shazeer & Stern, 2018, arXiv:1804.04235) whose row/column
  statistics also give an Adafactor-preconditioned gradient;
* per-tensor feature normalization, time embeddings, ``rsqrt`` variants that keep
  meta-gradients finite when gradients are exactly zero;
* the small networks the architectures are made of, with Haiku's parameter names and
  initializers (the reference library builds them with Haiku), so that a ``theta``
  meta-trained there has the same nested-dict layout here: a linear layer is
  ``{"w": [fan_in, fan_out], "b": [fan_out]}``, an MLP is
  ``{"mlp/~/linear_0": ..., "mlp/~/linear_1": ...}``, an LSTM is ``{"w", "b"}`` acting
  on ``concat([x, h])`` with gates ``i, g, f, o`` and a forget-gate bias of 1.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import Any, NamedTuple

import flax.struct
import jax
import jax.numpy as jnp
import numpy as np

from learnopt.canonical import leaf_compute_dtype
from learnopt.optimizers import base as opt_base

PyTree = Any

__all__ = [
    "TIMESCALES",
    "MomAccumulator",
    "RMSAccumulator",
    "FactoredAccum",
    "LSTMState",
    "factored_dims",
    "momentum_update",
    "rms_update",
    "factored_init",
    "factored_update",
    "factored_features",
    "factored_tree_init",
    "as_lstm_state",
    "second_moment_normalizer",
    "tanh_embedding",
    "safe_rsqrt",
    "floored_rsqrt",
    "safe_norm",
    "decay_to_param",
    "param_to_decay",
    "truncated_normal",
    "Normal",
    "draw",
    "linear_spec",
    "linear_init",
    "linear_apply",
    "mlp_spec",
    "mlp_init",
    "mlp_apply",
    "lstm_spec",
    "lstm_initial_state",
    "lstm_apply",
    "cast_tree",
    "check_theta",
    "ThetaOptimizer",
]

#: Timescales (in steps) of the ``tanh(t / s - 1)`` embedding of the iteration.
TIMESCALES = (1, 3, 10, 30, 100, 300, 1000, 3000, 10000, 30000, 100000)
# |x| below which m / sqrt(v) uses this floor for v: its derivative (v^-1.5) stays
# finite in float32 (the library's 1e-30 floor overflows to inf when a gradient is 0).
_V_FLOOR = 1e-20


# ------------------------------------------------------------------------------ features


def factored_dims(shape: Sequence[int]) -> tuple[int, int] | None:
    """The two largest axes ``(second largest, largest)`` of a tensor of rank >= 2, else None.

    Ties are ordered as ``numpy.argsort`` orders them (as in the library).
    """
    if len(shape) < 2:
        return None
    order = np.argsort(np.asarray(shape))
    return int(order[-2]), int(order[-1])


def second_moment_normalizer(
    x: jax.Array, axis: int | Sequence[int], eps: float = 1e-5
) -> jax.Array:
    """``x / sqrt(eps + mean(x^2))`` with the mean over ``axis`` (kept for broadcasting)."""
    mean_sq = jnp.mean(jnp.square(x), axis=axis, keepdims=True)
    return x * jax.lax.rsqrt(mean_sq + jnp.asarray(eps, x.dtype))


def tanh_embedding(iteration: jax.Array, dtype: Any = jnp.float32) -> jax.Array:
    """``tanh(t / s - 1)`` for each timescale ``s`` in :data:`TIMESCALES`: shape ``[11]``."""
    t = jnp.asarray(iteration).astype(dtype)
    return jnp.tanh(t / jnp.asarray(TIMESCALES, dtype) - 1)


def safe_rsqrt(x: jax.Array) -> jax.Array:
    """``1 / sqrt(max(x, 1e-9))`` (the library's ``safe_rsqrt``)."""
    return jax.lax.rsqrt(jnp.maximum(x, jnp.asarray(1e-9, x.dtype)))


def floored_rsqrt(v: jax.Array) -> jax.Array:
    """``v^-1/2`` for ``v >= 0`` with ``v`` floored at 1e-20.

    Used where the library computes ``m * v**-0.5`` with ``v`` as small as 1e-30
    (exactly-zero gradients): there the forward value is ``0 * 1e15`` but the
    derivative ``v^-1.5`` overflows, so meta-gradients would be NaN. The floor changes
    the feature only for gradients whose running RMS is below 1e-10.
    """
    return jax.lax.rsqrt(jnp.maximum(v, jnp.asarray(_V_FLOOR, v.dtype)))


def safe_norm(x: jax.Array) -> jax.Array:
    """Euclidean norm of all elements, with a zero (not NaN) derivative at ``x = 0``."""
    return opt_base.safe_sqrt(jnp.sum(jnp.square(x)))


def decay_to_param(decay: Any, reparam: float = 10.0) -> jax.Array:
    """``log(1 - decay) / reparam``: the unconstrained form the library learns offsets in."""
    return jnp.log(1 - jnp.asarray(decay, jnp.float32)) / reparam


def param_to_decay(x: jax.Array, reparam: float = 10.0) -> jax.Array:
    """Inverse of :func:`decay_to_param`: ``1 - exp(reparam * x)``."""
    return 1 - jnp.exp(x * reparam)


# -------------------------------------------------------------------------- accumulators


def momentum_update(m: jax.Array, g: jax.Array, decays: jax.Array) -> jax.Array:
    """``m_k <- b_k m_k + (1 - b_k) g`` for the decays on ``m``'s trailing axis."""
    decays = decays.astype(m.dtype)
    return decays * m + (1 - decays) * g[..., None]


def rms_update(v: jax.Array, g: jax.Array, decays: jax.Array) -> jax.Array:
    """``v_k <- b_k v_k + (1 - b_k) g^2`` with ``b_k`` clipped to [0, 1]."""
    decays = jnp.clip(decays.astype(v.dtype), 0, 1)
    return decays * v + (1 - decays) * jnp.square(g)[..., None]


@flax.struct.dataclass
class MomAccumulator:
    """Momentum accumulators ``m``: per param, ``p.shape + (num_decays,)`` (library name)."""

    m: PyTree


@flax.struct.dataclass
class RMSAccumulator:
    """Second-moment accumulators ``rms``: per param, ``p.shape + (num_decays,)``."""

    rms: PyTree


@flax.struct.dataclass
class FactoredAccum:
    """Adafactor-style second moments of one tensor, one slice per decay (last axis).

    For a tensor of rank >= 2 with factored axes ``(d1, d0) = factored_dims(shape)``:
    ``v_row`` is the running mean of ``g^2`` over axis ``d0`` (shape without ``d0``,
    plus the decays axis), ``v_col`` the mean over ``d1``; ``v_diag`` is empty. For
    rank < 2, ``v_diag`` holds the full running ``g^2`` and the others are empty.
    """

    v_row: jax.Array
    v_col: jax.Array
    v_diag: jax.Array


def factored_init(shape: Sequence[int], num_decays: int, dtype: Any) -> FactoredAccum:
    """Zero factored accumulators for a tensor of ``shape``."""
    empty = jnp.zeros((0, num_decays), dtype)
    dims = factored_dims(shape)
    if dims is None:
        return FactoredAccum(empty, empty, jnp.zeros((*shape, num_decays), dtype))
    d1, d0 = dims
    row = jnp.zeros((*np.delete(shape, d0), num_decays), dtype)
    col = jnp.zeros((*np.delete(shape, d1), num_decays), dtype)
    return FactoredAccum(row, col, empty)


def factored_tree_init(params: PyTree, num_decays: int) -> FactoredAccum:
    """A :class:`FactoredAccum` whose fields are trees like ``params`` (the library's layout)."""
    leaves, treedef = jax.tree_util.tree_flatten(params)
    accs = [factored_init(np.shape(p), num_decays, leaf_compute_dtype(p.dtype)) for p in leaves]
    return FactoredAccum(
        v_row=treedef.unflatten([a.v_row for a in accs]),
        v_col=treedef.unflatten([a.v_col for a in accs]),
        v_diag=treedef.unflatten([a.v_diag for a in accs]),
    )


def factored_update(
    acc: FactoredAccum, g: jax.Array, decays: jax.Array, epsilon: float = 1e-30
) -> tuple[FactoredAccum, jax.Array]:
    """Updates the factored accumulators; returns them and the preconditioned gradient.

    With ``g2 = g^2 + epsilon`` and ``b`` clipped to [0, 1]:
    factored tensors keep ``v_row <- b v_row + (1 - b) mean_{d0}(g2)`` and
    ``v_col <- b v_col + (1 - b) mean_{d1}(g2)`` and precondition
    ``g * rsqrt(v_row / mean_{d1}(v_row)) * rsqrt(v_col)`` (both rsqrt floored at 1e-9);
    other tensors keep ``v <- b v + (1 - b) g2`` and return ``g * rsqrt(v + 1e-9)``.
    The result has shape ``g.shape + (num_decays,)``.
    """
    dtype = acc.v_row.dtype
    decays = jnp.clip(decays.astype(dtype), 0, 1)
    g2 = jnp.square(g) + jnp.asarray(epsilon, dtype)
    dims = factored_dims(g.shape)
    if dims is None:
        v = decays * acc.v_diag + (1 - decays) * g2[..., None]
        return acc.replace(v_diag=v), g[..., None] * safe_rsqrt(v + jnp.asarray(1e-9, dtype))
    d1, d0 = dims
    v_row = decays * acc.v_row + (1 - decays) * jnp.mean(g2, axis=d0)[..., None]
    v_col = decays * acc.v_col + (1 - decays) * jnp.mean(g2, axis=d1)[..., None]
    reduced_d1 = d1 - 1 if d1 > d0 else d1
    row_col_mean = jnp.mean(v_row, axis=reduced_d1, keepdims=True)
    row_factor = safe_rsqrt(v_row / (row_col_mean + jnp.asarray(1e-9, dtype)))
    col_factor = safe_rsqrt(v_col)
    y = g[..., None] * jnp.expand_dims(row_factor, d0) * jnp.expand_dims(col_factor, d1)
    return acc.replace(v_row=v_row, v_col=v_col), y


def factored_features(
    acc: FactoredAccum, m: jax.Array, shape: Sequence[int], *, mom_eps: float = 0.0
) -> list[jax.Array]:
    """The five Adafactor feature groups of the library's adafactor MLP optimizers.

    Factored tensors: the row and column accumulators broadcast to the tensor,
    ``rsqrt(row + 1e-8)``, ``rsqrt(col + 1e-8)`` and the momentum preconditioned by the
    factored second moment. Other tensors (the library's "RMSProp-like" case): ``v``,
    ``v``, ``rsqrt(v + 1e-8)`` twice and ``m / sqrt(v + mom_eps)``. Each group has
    ``shape + (num_decays,)``; ``m`` has the same number of decays as the accumulator.
    """
    dims = factored_dims(shape)
    if dims is None:
        v = acc.v_diag
        r = jax.lax.rsqrt(v + jnp.asarray(1e-8, v.dtype))
        if mom_eps:
            mom = m * jax.lax.rsqrt(v + jnp.asarray(mom_eps, v.dtype))
        else:
            mom = m * floored_rsqrt(v)
        return [v, v, r, r, mom]
    d1, d0 = dims
    full = tuple(shape) + (acc.v_row.shape[-1],)
    row = jnp.broadcast_to(jnp.expand_dims(acc.v_row, d0), full)
    col = jnp.broadcast_to(jnp.expand_dims(acc.v_col, d1), full)
    eps = jnp.asarray(1e-8, row.dtype)
    reduced_d1 = d1 - 1 if d1 > d0 else d1
    row_col_mean = jnp.mean(acc.v_row, axis=reduced_d1, keepdims=True)
    row_factor = safe_rsqrt(acc.v_row / (row_col_mean + jnp.asarray(1e-9, row.dtype)))
    col_factor = safe_rsqrt(acc.v_col)
    mom = m * jnp.expand_dims(row_factor, d0) * jnp.expand_dims(col_factor, d1)
    return [row, col, jax.lax.rsqrt(row + eps), jax.lax.rsqrt(col + eps), mom]


# -------------------------------------------------------------------------------- layers


def truncated_normal(key: jax.Array, shape: Sequence[int], stddev: float) -> jax.Array:
    """``stddev`` times a standard normal truncated to [-2, 2] (Haiku's ``TruncatedNormal``)."""
    return jnp.float32(stddev) * jax.random.truncated_normal(
        key, -2.0, 2.0, tuple(shape), jnp.float32
    )


@dataclasses.dataclass(frozen=True)
class Normal:
    """A theta leaf to draw: truncated normal, ``shape`` and std ``stddev`` (see :func:`draw`)."""

    shape: tuple[int, ...]
    stddev: float


def draw(key: jax.Array, spec: PyTree) -> PyTree:
    """Replaces every :class:`Normal` leaf of ``spec`` by a truncated-normal array.

    All leaves come from one ``jax.random.truncated_normal`` call (one small program to
    compile, however many leaves theta has); other leaves are converted to float32.
    """
    leaves, treedef = jax.tree_util.tree_flatten(spec)
    sizes = [int(np.prod(x.shape)) for x in leaves if isinstance(x, Normal)]
    z = jax.random.truncated_normal(key, -2.0, 2.0, (sum(sizes),), jnp.float32)
    out, start = [], 0
    for x in leaves:
        if isinstance(x, Normal):
            n = int(np.prod(x.shape))
            out.append(jnp.float32(x.stddev) * z[start : start + n].reshape(x.shape))
            start += n
        else:
            out.append(jnp.asarray(x, jnp.float32))
    return treedef.unflatten(out)


def linear_spec(fan_in: int, fan_out: int, zero_weights: bool = False) -> dict[str, Any]:
    """A linear layer ``{"w": [fan_in, fan_out], "b": [fan_out]}`` as Haiku initializes it.

    Weights ~ truncated normal with std ``1 / sqrt(fan_in)`` (or zeros), zero bias.
    """
    if zero_weights:
        w = np.zeros((fan_in, fan_out), np.float32)
    else:
        w = Normal((fan_in, fan_out), 1.0 / math.sqrt(fan_in))
    return {"w": w, "b": np.zeros((fan_out,), np.float32)}


def linear_init(
    key: jax.Array, fan_in: int, fan_out: int, zero_weights: bool = False
) -> dict[str, jax.Array]:
    """:func:`linear_spec`, drawn."""
    return draw(key, linear_spec(fan_in, fan_out, zero_weights))


def linear_apply(params: dict[str, jax.Array], x: jax.Array) -> jax.Array:
    """``x @ w + b`` in ``x``'s dtype."""
    return x @ params["w"].astype(x.dtype) + params["b"].astype(x.dtype)


def mlp_spec(sizes: Sequence[int], name: str = "mlp") -> dict[str, dict]:
    """Haiku ``hk.nets.MLP`` parameters for layer sizes ``[in, h1, ..., out]``.

    Keys are ``f"{name}/~/linear_{i}"``, as Haiku names them.
    """
    return {
        f"{name}/~/linear_{i}": linear_spec(fan_in, fan_out)
        for i, (fan_in, fan_out) in enumerate(zip(sizes[:-1], sizes[1:], strict=True))
    }


def mlp_init(key: jax.Array, sizes: Sequence[int], name: str = "mlp") -> dict[str, dict]:
    """:func:`mlp_spec`, drawn."""
    return draw(key, mlp_spec(sizes, name))


def mlp_apply(params: dict[str, dict], x: jax.Array, name: str = "mlp") -> jax.Array:
    """The MLP of :func:`mlp_init`: ReLU between layers, none after the last."""
    num_layers = len(params)
    for i in range(num_layers):
        x = linear_apply(params[f"{name}/~/linear_{i}"], x)
        if i < num_layers - 1:
            x = jax.nn.relu(x)
    return x


class LSTMState(NamedTuple):
    """LSTM state ``[batch, hidden]`` (Haiku's ``LSTMState``: same fields, same order)."""

    hidden: jax.Array
    cell: jax.Array


def lstm_spec(input_size: int, hidden_size: int) -> dict[str, Any]:
    """Weights of :func:`lstm_apply`: one linear layer ``[input + hidden, 4 * hidden]``."""
    return linear_spec(input_size + hidden_size, 4 * hidden_size)


def lstm_initial_state(hidden_size: int, batch: int = 1) -> LSTMState:
    """Zero state ``[batch, hidden_size]``."""
    zeros = jnp.zeros((batch, hidden_size), jnp.float32)
    return LSTMState(hidden=zeros, cell=zeros)


def as_lstm_state(x: Any) -> LSTMState:
    """An :class:`LSTMState` from itself or from a dict ``{"hidden", "cell"}``."""
    if isinstance(x, LSTMState):
        return x
    if isinstance(x, dict) or hasattr(x, "keys"):
        return LSTMState(hidden=x["hidden"], cell=x["cell"])
    return LSTMState(*x)


def lstm_apply(
    params: dict[str, jax.Array], x: jax.Array, state: LSTMState
) -> tuple[jax.Array, LSTMState]:
    """One LSTM step (Hochreiter & Schmidhuber, 1997) on a batch ``x [N, in]``.

    ``[i, g, f, o] = [x, h] @ w + b``; ``c <- sigmoid(f + 1) c + sigmoid(i) tanh(g)``;
    ``h <- sigmoid(o) tanh(c)``. Returns ``(h, LSTMState(h, c))``.
    """
    h, c = state.hidden.astype(x.dtype), state.cell.astype(x.dtype)
    gated = linear_apply(params, jnp.concatenate([x, h], axis=-1))
    i, g, f, o = jnp.split(gated, 4, axis=-1)
    c = jax.nn.sigmoid(f + 1) * c + jax.nn.sigmoid(i) * jnp.tanh(g)
    h = jax.nn.sigmoid(o) * jnp.tanh(c)
    return h, LSTMState(hidden=h, cell=c)


# ------------------------------------------------------------------------------- helpers


def cast_tree(tree: PyTree, dtype: Any) -> PyTree:
    """Every leaf of ``tree`` cast to ``dtype``."""
    return jax.tree_util.tree_map(lambda x: jnp.asarray(x).astype(dtype), tree)


def _key_name(entry: Any) -> str:
    for attr in ("key", "name", "idx"):
        if hasattr(entry, attr):
            return str(getattr(entry, attr))
    return str(entry)


def _shapes(tree: PyTree) -> dict[str, tuple]:
    """``"a/b/c" -> shape`` for every leaf (dict keys and namedtuple fields alike)."""
    return {
        "/".join(_key_name(e) for e in path): tuple(np.shape(x))
        for path, x in jax.tree_util.tree_leaves_with_path(tree)
    }


def check_theta(lopt: Any, theta: PyTree) -> None:
    """Raises ValueError if ``theta`` does not have the structure and shapes of ``lopt.init``.

    Leaves are matched by their key path (a dict ``{"hidden", "cell"}`` matches an
    :class:`LSTMState`). The expected layout is computed once per learned optimizer.
    """
    shapes = getattr(lopt, "_theta_layout", None)
    if shapes is None:
        shapes = _shapes(jax.eval_shape(lopt.init, jax.random.PRNGKey(0)))
        lopt._theta_layout = shapes
    got = _shapes(theta)
    if got == shapes:
        return
    missing = sorted(set(shapes) - set(got))
    extra = sorted(set(got) - set(shapes))
    wrong = sorted(k for k in set(shapes) & set(got) if shapes[k] != got[k])
    parts = []
    if missing:
        parts.append(f"missing {missing[:5]}")
    if extra:
        parts.append(f"unexpected {extra[:5]}")
    if wrong:
        parts.append(
            "wrong shapes " + ", ".join(f"{k}: {got[k]} (want {shapes[k]})" for k in wrong[:5])
        )
    raise ValueError(
        f"{lopt!r}: theta does not match this learned optimizer's layout "
        f"({'; '.join(parts)}); build it with lopt.init(key) or load it with a matching "
        "constructor"
    )


class ThetaOptimizer(opt_base.Optimizer):
    """Base of the optimizers that ``opt_fn`` returns: holds ``theta`` and its learned optimizer."""

    def __init__(self, theta: PyTree, lopt: Any):
        self.theta = theta
        self.lopt = lopt

    @property
    def name(self) -> str:
        return self.lopt.name

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.lopt!r})"
