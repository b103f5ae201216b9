"""Building blocks shared by the learned optimizer architectures.

Everything here works on one parameter tensor at a time, in the tensor's arithmetic
dtype (float32 for float32/bfloat16/float16 params, float64 for float64 params):

* per-tensor feature normalization, time embeddings, a norm with a finite derivative;
* the small networks the architectures are made of, with Haiku's parameter names and
  initializers (the reference library builds them with Haiku), so that a ``theta``
  meta-trained there has the same nested-dict layout here: a linear layer is
  ``{"w": [fan_in, fan_out], "b": [fan_out]}``, an MLP is
  ``{"mlp/~/linear_0": ..., "mlp/~/linear_1": ...}``, an LSTM is ``{"w", "b"}`` acting
  on ``concat([x, h])`` with gates ``i, g, f, o`` and a forget-gate bias of 1;
* theta checks and the base of the optimizers ``opt_fn`` returns.

The gradient accumulators (momenta, second moments, Adafactor-style factored second
moments), their decays and the features read from them live in
:mod:`learnopt.learned_optimizers.blocks.accumulators`; their names stay importable from here.
The library's own accumulator constructors (``rolling_mom``, ``vec_rolling_rms``,
``vec_factored_rolling``, ...), which research code written on it calls, are
:mod:`learnopt.learned_optimizers.blocks.library_accumulators`, re-exported here.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

# Kept importable from here (their home is accumulators.py and element_features.py).
from learnopt.learned_optimizers.blocks.accumulators import (
    FactoredAccum,
    MomAccumulator,
    RMSAccumulator,
    decay_to_param,
    factored_dims,
    factored_init,
    factored_tree_init,
    factored_update,
    floored_rsqrt,
    momentum_update,
    param_to_decay,
    rms_update,
    safe_rsqrt,
)
from learnopt.learned_optimizers.blocks.element_features import factored_features

# learned_optimization's accumulators as its research code calls them (``common.
# vec_rolling_mom(decays).init(params)``...), with the library's layout: decays last.
from learnopt.learned_optimizers.blocks.library_accumulators import (
    factored_rolling,
    rolling_mom,
    rolling_rms,
    vec_factored_rolling,
    vec_rolling_mom,
    vec_rolling_rms,
)
from learnopt.optimizers import base as opt_base
from learnopt.optimizers.common import next_state

PyTree = Any

__all__ = [
    "rolling_mom",
    "rolling_rms",
    "vec_rolling_mom",
    "vec_rolling_rms",
    "factored_rolling",
    "vec_factored_rolling",
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
    "next_state",
    "ThetaOptimizer",
]

#: Timescales (in steps) of the ``tanh(t / s - 1)`` embedding of the iteration.
TIMESCALES = (1, 3, 10, 30, 100, 300, 1000, 3000, 10000, 30000, 100000)


# ------------------------------------------------------------------------------ features


def second_moment_normalizer(
    x: jax.Array, axis: int | Sequence[int], eps: float = 1e-5
) -> jax.Array:
    """``x / sqrt(eps + mean(x^2))`` with the mean over ``axis`` (kept for broadcasting).

    Args:
      x: the features.
      axis: the axes to average over (a tensor's own axes: per-feature normalization).
      eps: added to the mean square (learned_optimization's default 1e-5).

    Returns:
      The normalized features, ``x``'s shape and dtype.
    """
    mean_sq = jnp.mean(jnp.square(x), axis=axis, keepdims=True)
    return x * jax.lax.rsqrt(mean_sq + jnp.asarray(eps, x.dtype))


def tanh_embedding(iteration: jax.Array, dtype: Any = jnp.float32) -> jax.Array:
    """``tanh(t / s - 1)`` for each timescale ``s`` in :data:`TIMESCALES`.

    Args:
      iteration: the step count ``t``.
      dtype: the result's dtype.

    Returns:
      The embedding, shape ``[11]``.
    """
    t = jnp.asarray(iteration).astype(dtype)
    return jnp.tanh(t / jnp.asarray(TIMESCALES, dtype) - 1)


def safe_norm(x: jax.Array) -> jax.Array:
    """Euclidean norm of all elements, with a zero (not NaN) derivative at ``x = 0``.

    Args:
      x: any array.

    Returns:
      The scalar norm.
    """
    return opt_base.safe_sqrt(jnp.sum(jnp.square(x)))


# -------------------------------------------------------------------------------- layers


def truncated_normal(key: jax.Array, shape: Sequence[int], stddev: float) -> jax.Array:
    """``stddev`` times a standard normal truncated to [-2, 2] (Haiku's ``TruncatedNormal``).

    Args:
      key: the PRNG key.
      shape: the shape.
      stddev: the scale.

    Returns:
      A float32 array.
    """
    return jnp.float32(stddev) * jax.random.truncated_normal(
        key, -2.0, 2.0, tuple(shape), jnp.float32
    )


@dataclasses.dataclass(frozen=True)
class Normal:
    """A theta leaf to draw: truncated normal, ``shape`` and std ``stddev`` (see :func:`draw`).

    Attributes:
      shape: the leaf's shape.
      stddev: standard deviation of the truncated normal (truncated at two standard
        deviations, as ``jax.random.truncated_normal(-2, 2)``).
    """

    shape: tuple[int, ...]
    stddev: float


def draw(key: jax.Array, spec: PyTree) -> PyTree:
    """Replaces every :class:`Normal` leaf of ``spec`` by a truncated-normal array.

    All leaves come from one ``jax.random.truncated_normal`` call (one small program to
    compile, however many leaves theta has); other leaves are converted to float32.

    Args:
      key: the PRNG key.
      spec: a tree of :class:`Normal` and array leaves.

    Returns:
      The tree with every leaf a float32 array.
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

    Args:
      fan_in: the input width.
      fan_out: the output width.
      zero_weights: zero weights instead of random ones.

    Returns:
      ``{"w": Normal or zeros, "b": zeros}``, to pass to :func:`draw`.
    """
    if zero_weights:
        w = np.zeros((fan_in, fan_out), np.float32)
    else:
        w = Normal((fan_in, fan_out), 1.0 / math.sqrt(fan_in))
    return {"w": w, "b": np.zeros((fan_out,), np.float32)}


def linear_init(
    key: jax.Array, fan_in: int, fan_out: int, zero_weights: bool = False
) -> dict[str, jax.Array]:
    """:func:`linear_spec`, drawn.

    Args:
      key: the PRNG key.
      fan_in: the input width.
      fan_out: the output width.
      zero_weights: zero weights instead of truncated-normal ones (std
        ``1 / sqrt(fan_in)``).

    Returns:
      ``{"w": [fan_in, fan_out], "b": [fan_out]}``.
    """
    return draw(key, linear_spec(fan_in, fan_out, zero_weights))


def linear_apply(params: dict[str, jax.Array], x: jax.Array) -> jax.Array:
    """``x @ w + b`` in ``x``'s dtype.

    Args:
      params: ``{"w", "b"}``.
      x: the inputs, last axis ``fan_in``.

    Returns:
      The outputs, last axis ``fan_out``.
    """
    return x @ params["w"].astype(x.dtype) + params["b"].astype(x.dtype)


def mlp_spec(sizes: Sequence[int], name: str = "mlp") -> dict[str, dict]:
    """Haiku ``hk.nets.MLP`` parameters for layer sizes ``[in, h1, ..., out]``.

    Keys are ``f"{name}/~/linear_{i}"``, as Haiku names them.

    Args:
      sizes: the layer widths, input first.
      name: the module name (Haiku's default ``"mlp"``).

    Returns:
      One :func:`linear_spec` per layer, to pass to :func:`draw`.
    """
    return {
        f"{name}/~/linear_{i}": linear_spec(fan_in, fan_out)
        for i, (fan_in, fan_out) in enumerate(zip(sizes[:-1], sizes[1:], strict=True))
    }


def mlp_init(key: jax.Array, sizes: Sequence[int], name: str = "mlp") -> dict[str, dict]:
    """:func:`mlp_spec`, drawn.

    Args:
      key: the PRNG key.
      sizes: the layer widths ``[in, h1, ..., out]``, input first.
      name: the module name in the keys (Haiku's default ``"mlp"``).

    Returns:
      ``{f"{name}/~/linear_{i}": {"w", "b"}}``.
    """
    return draw(key, mlp_spec(sizes, name))


def mlp_apply(params: dict[str, dict], x: jax.Array, name: str = "mlp") -> jax.Array:
    """The MLP of :func:`mlp_init`: ReLU between layers, none after the last.

    Args:
      params: the layers of :func:`mlp_init`.
      x: the inputs.
      name: the module name the keys start with.

    Returns:
      The outputs.
    """
    num_layers = len(params)
    for i in range(num_layers):
        x = linear_apply(params[f"{name}/~/linear_{i}"], x)
        if i < num_layers - 1:
            x = jax.nn.relu(x)
    return x


class LSTMState(NamedTuple):
    """LSTM state ``[batch, hidden]`` (Haiku's ``LSTMState``: same fields, same order).

    Attributes:
      hidden: the hidden state ``h``, ``[batch, hidden]``.
      cell: the cell state ``c``, ``[batch, hidden]``.
    """

    hidden: jax.Array
    cell: jax.Array


def lstm_spec(input_size: int, hidden_size: int) -> dict[str, Any]:
    """Weights of :func:`lstm_apply`: one linear layer ``[input + hidden, 4 * hidden]``.

    Args:
      input_size: the input width.
      hidden_size: the state width.

    Returns:
      A :func:`linear_spec`, to pass to :func:`draw`.
    """
    return linear_spec(input_size + hidden_size, 4 * hidden_size)


def lstm_initial_state(hidden_size: int, batch: int = 1) -> LSTMState:
    """Zero state ``[batch, hidden_size]``.

    Args:
      hidden_size: the state width.
      batch: the number of LSTMs run side by side.

    Returns:
      A float32 :class:`LSTMState` of zeros.
    """
    zeros = jnp.zeros((batch, hidden_size), jnp.float32)
    return LSTMState(hidden=zeros, cell=zeros)


def as_lstm_state(x: Any) -> LSTMState:
    """An :class:`LSTMState` from itself or from a dict ``{"hidden", "cell"}``.

    Args:
      x: an :class:`LSTMState`, a mapping with ``hidden`` and ``cell``, or a pair.

    Returns:
      The :class:`LSTMState`.
    """
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
    ``h <- sigmoid(o) tanh(c)``.

    Args:
      params: the weights of :func:`lstm_spec`.
      x: the inputs ``[N, in]``.
      state: the state ``[N, hidden]`` each.

    Returns:
      ``(h, LSTMState(h, c))``, in ``x``'s dtype.
    """
    h, c = state.hidden.astype(x.dtype), state.cell.astype(x.dtype)
    gated = linear_apply(params, jnp.concatenate([x, h], axis=-1))
    i, g, f, o = jnp.split(gated, 4, axis=-1)
    c = jax.nn.sigmoid(f + 1) * c + jax.nn.sigmoid(i) * jnp.tanh(g)
    h = jax.nn.sigmoid(o) * jnp.tanh(c)
    return h, LSTMState(hidden=h, cell=c)


# ------------------------------------------------------------------------------- helpers


def cast_tree(tree: PyTree, dtype: Any) -> PyTree:
    """Every leaf of ``tree`` cast to ``dtype``.

    Args:
      tree: any pytree of arrays or numbers.
      dtype: the target dtype.

    Returns:
      The tree of cast arrays.
    """
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

    Args:
      lopt: the learned optimizer (its ``init`` gives the layout).
      theta: the meta-parameters to check.

    Returns:
      None; raises ValueError naming the missing, unexpected and misshapen leaves.
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
    """Base of the optimizers that ``opt_fn`` returns: holds ``theta`` and its learned optimizer.

    Args:
      theta: the meta-parameters (concrete or traced), read by the subclass's update.
      lopt: the learned optimizer that built it (its hyperparameters: ``step_mult``...).
    """

    #: Learned optimizers normalize features over each tensor's elements: a tensor with
    #: none is refused at ``init``, by name, instead of failing inside the update.
    allows_empty_leaves = False

    def __init__(self, theta: PyTree, lopt: Any):
        self.theta = theta
        self.lopt = lopt

    @property
    def name(self) -> str:
        """The learned optimizer's name."""
        return self.lopt.name

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.lopt!r})"
