"""A learned optimizer that applies one small MLP to every parameter.

The model of Metz et al., "Practical tradeoffs between memory, compute, and
performance in learned optimizers" (2022, arXiv:2203.11860), in the small per-parameter
form also used in learned_optimization's ``mlp_lopt`` (after Metz et al., 2019,
"Understanding and correcting pathologies in the training of learned optimizers",
arXiv:1810.10180).

For every parameter tensor ``p`` with gradient ``g`` the optimizer keeps momentum
accumulators ``m_k <- b_k m_k + (1 - b_k) g`` at several decays ``b_k`` and a second
moment ``v <- b_v v + (1 - b_v) g^2``. Each element gets the features

    [p, g, m_1..m_K, g / sqrt(v + eps), m_1 / sqrt(v + eps) .. m_K / sqrt(v + eps)]

each divided by its root mean square over the tensor, followed by a "tanh embedding"
of the step count ``tanh(t / s - 1)`` for timescales ``s`` from 1 to 1e5. An MLP shared
by all elements maps the features to a direction ``d`` and a magnitude ``a``:

    p <- p - step_mult * d * exp(exp_mult * a)

``theta`` is a plain dict of strongly typed float32 arrays, ``w0, b0, w1, b1, ...``
(the last layer has two outputs). All arithmetic runs in float32 (float64 for
float64 params), accumulators are kept in that dtype and the new params are cast
back to their own dtype, so bfloat16/float16 params and mixed precision work. Every
square root has a positive epsilon under it, so meta-gradients stay finite when
gradients are exactly zero.

Example::

    lopt = mlp_lopt.MLPLOpt()
    theta = lopt.init(jax.random.PRNGKey(0))
    opt = lopt.opt_fn(theta)
    state = opt.init(params)
    state = opt.update(state, grads, loss)
"""

from __future__ import annotations

from typing import Any

import flax.struct
import jax
import jax.numpy as jnp
import numpy as np

from learnopt.canonical import leaf_compute_dtype
from learnopt.learned_optimizers import base as lopt_base
from learnopt.optimizers import base as opt_base
from learnopt.tree_utils import tree_map_multi

PyTree = Any

__all__ = [
    "MLPLOpt",
    "MLPLOptOptimizer",
    "MLPLOptState",
    "MOMENTUM_DECAYS",
    "TIMESCALES",
    "tanh_embedding",
]

# Decays of the momentum accumulators (one feature each, raw and rms-scaled).
MOMENTUM_DECAYS = (0.1, 0.5, 0.9, 0.99, 0.999)
# Decay of the second-moment accumulator used by the rms-scaled features.
RMS_DECAY = 0.999
# Timescales (in steps) of the tanh embedding of the iteration.
TIMESCALES = (1, 3, 10, 30, 100, 300, 1000, 3000, 10000, 30000, 100000)

# Inside sqrt(v + eps) of the rms-scaled features (gradients ~1e-4 are still resolved).
_RMS_EPS = 1e-8
# Inside the per-tensor root mean square that normalizes each feature.
_NORM_EPS = 1e-5
# Per-element features before the time embedding: p, g, momentums, g and momentums / rms.
_NUM_ELEMENT_FEATURES = 2 + 2 * len(MOMENTUM_DECAYS) + 1
_SUMMARY_KEYS = ("avg_step_size", "direction_mean_abs", "magnitude_mean", "magnitude_mean_abs")


@flax.struct.dataclass
class MLPLOptState:
    """State of :class:`MLPLOptOptimizer`.

    Attributes:
      params: the parameters being optimized, in their own dtypes.
      model_state: the task's non-trainable state (or ``None``).
      iteration: number of updates applied, int32.
      momentums: per param, ``p.shape + (len(MOMENTUM_DECAYS),)`` moving averages of g.
      rms: per param, the moving average of ``g^2`` (decay ``RMS_DECAY``).
      summary: with ``compute_summary``, float32 statistics of the last step
        (``avg_step_size``, ``direction_mean_abs``, ``magnitude_mean``,
        ``magnitude_mean_abs``); otherwise an empty dict.
    """

    params: PyTree
    model_state: PyTree
    iteration: jax.Array
    momentums: PyTree
    rms: PyTree
    summary: dict[str, jax.Array]


def _rms_normalize(x: jax.Array, num_axes: int) -> jax.Array:
    """Divides each feature (last axis) by its root mean square over the first axes."""
    axes = tuple(range(num_axes))
    mean_sq = jnp.mean(jnp.square(x), axis=axes, keepdims=True)
    return x * jax.lax.rsqrt(mean_sq + _NORM_EPS)


def tanh_embedding(iteration: jax.Array, dtype: Any = jnp.float32) -> jax.Array:
    """``tanh(t / s - 1)`` for each timescale ``s`` in :data:`TIMESCALES`: shape ``[11]``."""
    t = jnp.asarray(iteration).astype(dtype)
    return jnp.tanh(t / jnp.asarray(TIMESCALES, dtype) - 1)


def _mlp(theta: dict[str, jax.Array], x: jax.Array, num_layers: int) -> jax.Array:
    """The per-element MLP (ReLU hidden layers) on the last axis of ``x``."""
    for i in range(num_layers):
        w = theta[f"w{i}"].astype(x.dtype)
        b = theta[f"b{i}"].astype(x.dtype)
        x = x @ w + b
        if i < num_layers - 1:
            x = jax.nn.relu(x)
    return x


class MLPLOptOptimizer(opt_base.Optimizer):
    """The optimizer :meth:`MLPLOpt.opt_fn` returns: the MLP update with a fixed ``theta``."""

    def __init__(self, theta: dict[str, jax.Array], lopt: MLPLOpt):
        self.theta = theta
        self.lopt = lopt

    def init(self, params, model_state=None, num_steps=None, key=None):
        def zeros(p, extra=()):
            return jnp.zeros(np.shape(p) + extra, leaf_compute_dtype(p.dtype))

        k = len(MOMENTUM_DECAYS)
        summary = {}
        if self.lopt.compute_summary:
            summary = {name: jnp.zeros((), jnp.float32) for name in _SUMMARY_KEYS}
        return MLPLOptState(
            params=params,
            model_state=model_state,
            iteration=jnp.zeros((), jnp.int32),
            momentums=jax.tree_util.tree_map(lambda p: zeros(p, (k,)), params),
            rms=jax.tree_util.tree_map(zeros, params),
            summary=summary,
        )

    def update(self, opt_state, grads, loss=None, model_state=None, key=None, **kwargs):
        lopt = self.lopt
        num_layers = lopt.hidden_layers + 1
        iteration = opt_state.iteration

        def step(p, m, v, g):
            cd = m.dtype
            g = g.astype(cd)
            pc = p.astype(cd)
            decays = jnp.asarray(MOMENTUM_DECAYS, cd)
            m = decays * m + (1 - decays) * g[..., None]
            v = RMS_DECAY * v + (1 - RMS_DECAY) * jnp.square(g)
            inv_rms = jax.lax.rsqrt(v + _RMS_EPS)[..., None]
            element = jnp.concatenate(
                [pc[..., None], g[..., None], m, g[..., None] * inv_rms, m * inv_rms], axis=-1
            )
            element = _rms_normalize(element, p.ndim)
            time = jnp.broadcast_to(tanh_embedding(iteration, cd), p.shape + (len(TIMESCALES),))
            out = _mlp(self.theta, jnp.concatenate([element, time], axis=-1), num_layers)
            direction, magnitude = out[..., 0], out[..., 1]
            delta = lopt.step_mult * direction * jnp.exp(lopt.exp_mult * magnitude)
            new_p = (pc - delta).astype(p.dtype)
            stats = ()
            if lopt.compute_summary:
                parts = [jnp.abs(delta), jnp.abs(direction), magnitude, jnp.abs(magnitude)]
                stats = jnp.stack([jnp.sum(x).astype(jnp.float32) for x in parts])
            return new_p, m, v, stats

        params, momentums, rms, stats = tree_map_multi(
            step, opt_state.params, opt_state.momentums, opt_state.rms, grads
        )
        summary = {}
        if lopt.compute_summary:
            count = sum(int(np.size(p)) for p in jax.tree_util.tree_leaves(params))
            total = sum(jax.tree_util.tree_leaves(stats), jnp.zeros((4,), jnp.float32))
            summary = dict(zip(_SUMMARY_KEYS, total / max(count, 1), strict=True))
        return MLPLOptState(
            params=params,
            model_state=model_state if model_state is not None else opt_state.model_state,
            iteration=iteration + 1,
            momentums=momentums,
            rms=rms,
            summary=summary,
        )

    @property
    def name(self) -> str:
        return "MLPLOpt"

    def __repr__(self) -> str:
        return f"MLPLOptOptimizer({self.lopt!r})"


class MLPLOpt(lopt_base.LearnedOptimizer):
    """Per-parameter MLP learned optimizer (Metz et al., 2022, arXiv:2203.11860).

    ``p <- p - step_mult * direction * exp(exp_mult * magnitude)`` where
    ``(direction, magnitude)`` is the output of an MLP applied to every parameter
    element's normalized features (see the module docstring).

    Args:
      exp_mult: scale of the magnitude output inside the exponential.
      step_mult: scale of the step; at a fresh ``theta`` steps are of this order.
      hidden_size: width of each hidden layer.
      hidden_layers: number of hidden (ReLU) layers.
      compute_summary: if true, states carry step statistics in ``state.summary``.
    """

    def __init__(
        self,
        exp_mult: float = 0.001,
        step_mult: float = 0.001,
        hidden_size: int = 4,
        hidden_layers: int = 2,
        compute_summary: bool = False,
    ):
        self.exp_mult = exp_mult
        self.step_mult = step_mult
        self.hidden_size = hidden_size
        self.hidden_layers = hidden_layers
        self.compute_summary = compute_summary

    @property
    def name(self) -> str:
        return "MLPLOpt"

    @property
    def num_features(self) -> int:
        """Inputs of the MLP per parameter element."""
        return _NUM_ELEMENT_FEATURES + len(TIMESCALES)

    def _layer_sizes(self) -> list[int]:
        return [self.num_features] + [self.hidden_size] * self.hidden_layers + [2]

    def init(self, key: jax.Array) -> dict[str, jax.Array]:
        """Weights ~ truncated normal with std ``1/sqrt(fan_in)``; zero biases; float32."""
        sizes = self._layer_sizes()
        keys = jax.random.split(key, len(sizes) - 1)
        theta = {}
        for i, (fan_in, fan_out) in enumerate(zip(sizes[:-1], sizes[1:], strict=True)):
            # Dividing by 0.88 restores unit variance after truncation at 2 std.
            w = jax.random.truncated_normal(keys[i], -2.0, 2.0, (fan_in, fan_out), jnp.float32)
            theta[f"w{i}"] = w * jnp.float32(1 / (0.87962566 * np.sqrt(fan_in)))
            theta[f"b{i}"] = jnp.zeros((fan_out,), jnp.float32)
        return theta

    def opt_fn(self, theta: dict[str, jax.Array], is_training: bool = False) -> MLPLOptOptimizer:
        sizes = self._layer_sizes()
        expected = {
            name: shape
            for i, (a, b) in enumerate(zip(sizes[:-1], sizes[1:], strict=True))
            for name, shape in ((f"w{i}", (a, b)), (f"b{i}", (b,)))
        }
        got = {k: tuple(np.shape(v)) for k, v in theta.items()} if isinstance(theta, dict) else {}
        if got != expected:
            raise ValueError(
                f"{self!r}: theta does not match the MLP's layer sizes; expected {expected}, "
                f"got {got or type(theta).__name__}"
            )
        return MLPLOptOptimizer(theta, self)

    def __repr__(self) -> str:
        return (
            f"MLPLOpt(exp_mult={self.exp_mult}, step_mult={self.step_mult}, "
            f"hidden_size={self.hidden_size}, hidden_layers={self.hidden_layers}, "
            f"compute_summary={self.compute_summary})"
        )


lopt_base.register_learned_optimizer("MLPLOpt", MLPLOpt)
