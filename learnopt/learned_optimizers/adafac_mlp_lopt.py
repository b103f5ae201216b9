"""AdafacMLPLOpt: a per-parameter MLP fed momentum, RMS and Adafactor-style features.

The "small_fc_lopt" family of Metz et al., "Practical tradeoffs between memory,
compute, and performance in learned optimizers" (2022, arXiv:2203.11860), as
learned_optimization's ``adafac_mlp_lopt.AdafacMLPLOpt`` defines it: same
constructor, features, maths and ``theta`` layout.

Accumulators per tensor (decays learnable, see below): momenta ``m`` (default decays
0.9, 0.99, 0.999), second moments ``rms`` (0.999) and factored second moments (0.9,
0.99, 0.999; Shazeer & Stern, 2018, arXiv:1804.04235) that also give the
Adafactor-preconditioned gradient ``fac_g``. Per element, the feature groups

    g, p, m, rms, m / sqrt(rms + 1e-6), 1 / sqrt(rms + 1e-6), fac_g,
    row, col, 1 / sqrt(row + 1e-8), 1 / sqrt(col + 1e-8), m * fac_rsqrt

(for tensors of rank < 2 the factored groups are ``v, v, 1 / sqrt(v + 1e-8)`` twice
and ``m / sqrt(v)``) are concatenated (28 with the defaults), normalized by their root
mean square over the tensor, joined by the 11 ``tanh(t / s - 1)`` time features and
fed to an MLP (ReLU) with outputs ``(d, a)``:

    p <- p - step_mult * d * exp(exp_mult * a)

``theta = {"momentum_decays": [3], "rms_decays": [1], "adafactor_decays": [3],
"nn": {"~": {"w0": [39, hidden], "b0", ..., "w{L}": [hidden, 2], "b{L}"}}}``. A decay
is ``1 - (1 - b0) * exp(10 * theta_decay)`` (``theta_decay`` starts at 0).

learnopt differences: ``num_steps`` at ``init`` is optional (the library raises
without it; it is stored but unused); the non-factored ``m / sqrt(v)`` floors ``v`` at
1e-20 so meta-gradients stay finite for exactly-zero gradients; arithmetic in
float32 (float64 for float64 params); the scalar-math code path
(``concat_weights=False``) computes the same function with matmuls.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import flax.struct
import jax
import jax.numpy as jnp
import numpy as np

from learnopt.canonical import leaf_compute_dtype
from learnopt.learned_optimizers import base as lopt_base
from learnopt.learned_optimizers import common
from learnopt.tree_utils import tree_map_multi

PyTree = Any

__all__ = ["AdafacMLPLOpt", "AdafacMLPLOptState", "adafac_features", "num_adafac_features"]


@flax.struct.dataclass
class AdafacMLPLOptState:
    """State of the adafactor MLP optimizers (:class:`AdafacMLPLOpt`, ``MLPNomLOpt``).

    Attributes:
      params, model_state, iteration: as in every learnopt state.
      mom_rolling: momenta ``mom_rolling.m`` (per param ``p.shape + (num_mom,)``).
      rms_rolling: second moments ``rms_rolling.rms``.
      fac_rolling_features: factored second moments (fields are trees like params).
      num_steps: the inner-run length given to ``init`` (int32; -1 if not given).
    """

    params: PyTree
    model_state: PyTree
    iteration: jax.Array
    num_steps: jax.Array
    mom_rolling: common.MomAccumulator
    rms_rolling: common.RMSAccumulator
    fac_rolling_features: common.FactoredAccum


def _bcast(a: int, b: int) -> int:
    return int(np.broadcast_shapes((a,), (b,))[0])


def num_adafac_features(num_mom: int, num_rms: int, num_fac: int) -> int:
    """Number of normalized per-element features of :func:`adafac_features`."""
    return (
        2 + num_mom + num_rms + _bcast(num_mom, num_rms) + num_rms + num_fac
        + 4 * num_fac + _bcast(num_mom, num_fac)
    )  # fmt: skip


def adafac_features(
    p: jax.Array,
    g: jax.Array,
    m: jax.Array,
    rms: jax.Array,
    fac_g: jax.Array,
    acc: common.FactoredAccum,
    mom_eps: float = 0.0,
) -> list[jax.Array]:
    """The feature groups of the module docstring for one tensor (scalars as ``[1]``).

    Every group has shape ``shape + (n,)`` with ``shape = p.shape or (1,)``.
    ``mom_eps`` is added to ``v`` in the non-factored ``m / sqrt(v)`` (0 floors ``v``).
    """
    shape = p.shape or (1,)
    if not p.shape:
        p, g = p.reshape(1), g.reshape(1)
        m, rms, fac_g = m.reshape(1, -1), rms.reshape(1, -1), fac_g.reshape(1, -1)
        acc = acc.replace(v_diag=acc.v_diag.reshape(1, -1))
    rsqrt = jax.lax.rsqrt(rms + jnp.asarray(1e-6, rms.dtype))
    groups = [g[..., None], p[..., None], m, rms, m * rsqrt, rsqrt, fac_g]
    return groups + common.factored_features(acc, m, shape, mom_eps=mom_eps)


def adafac_decays(lopt: Any, theta: dict) -> tuple[jax.Array, jax.Array, jax.Array]:
    """The momentum, rms and adafactor decays: initial decays moved by theta's offsets."""

    def one(initial: Sequence[float], offset: jax.Array) -> jax.Array:
        return common.param_to_decay(common.decay_to_param(initial) + offset)

    return (
        one(lopt.initial_momentum_decays, theta["momentum_decays"]),
        one(lopt.initial_rms_decays, theta["rms_decays"]),
        one(lopt.initial_adafactor_decays, theta["adafactor_decays"]),
    )


def adafac_init(lopt: Any, params: PyTree, model_state: PyTree, num_steps: Any):
    """Zero accumulators for the adafactor MLP optimizers."""

    def zeros(k):
        return jax.tree_util.tree_map(
            lambda p: jnp.zeros((*np.shape(p), k), leaf_compute_dtype(p.dtype)), params
        )

    return AdafacMLPLOptState(
        params=params,
        model_state=model_state,
        iteration=jnp.zeros((), jnp.int32),
        num_steps=jnp.asarray(-1 if num_steps is None else num_steps, jnp.int32),
        mom_rolling=common.MomAccumulator(m=zeros(len(lopt.initial_momentum_decays))),
        rms_rolling=common.RMSAccumulator(rms=zeros(len(lopt.initial_rms_decays))),
        fac_rolling_features=common.factored_tree_init(params, len(lopt.initial_adafactor_decays)),
    )


def adafac_update(opt_state, grads, model_state, theta, lopt, tensor_step):
    """Updates the accumulators and applies ``tensor_step(p, groups, time) -> new p``."""
    mom_d, rms_d, fac_d = adafac_decays(lopt, theta)
    time = common.tanh_embedding(opt_state.iteration, jnp.float32)
    acc = opt_state.fac_rolling_features

    def one(p, g, m, v, v_row, v_col, v_diag):
        cd = m.dtype
        g = g.astype(cd)
        m = common.momentum_update(m, g, mom_d)
        v = common.rms_update(v, g, rms_d)
        fac, fac_g = common.factored_update(common.FactoredAccum(v_row, v_col, v_diag), g, fac_d)
        groups = adafac_features(p.astype(cd), g, m, v, fac_g, fac, lopt.mom_eps)
        new_p = tensor_step(p.astype(cd), groups, time.astype(cd)).astype(p.dtype)
        return new_p, m, v, fac.v_row, fac.v_col, fac.v_diag

    params, m, v, v_row, v_col, v_diag = tree_map_multi(
        one,
        opt_state.params,
        grads,
        opt_state.mom_rolling.m,
        opt_state.rms_rolling.rms,
        acc.v_row,
        acc.v_col,
        acc.v_diag,
    )
    return AdafacMLPLOptState(
        params=params,
        model_state=model_state if model_state is not None else opt_state.model_state,
        iteration=opt_state.iteration + 1,
        num_steps=opt_state.num_steps,
        mom_rolling=common.MomAccumulator(m=m),
        rms_rolling=common.RMSAccumulator(rms=v),
        fac_rolling_features=common.FactoredAccum(v_row=v_row, v_col=v_col, v_diag=v_diag),
    )


def mlp_forward(nn: dict, groups: list[jax.Array], time: jax.Array, p_shape: tuple) -> jax.Array:
    """Concatenate, normalize over the tensor, append time features, run ``nn["~"]``."""
    shape = p_shape or (1,)
    x = jnp.concatenate(groups, axis=-1)
    x = common.second_moment_normalizer(x, axis=tuple(range(len(shape))))
    x = jnp.concatenate([x, jnp.broadcast_to(time, (*shape, time.shape[0]))], axis=-1)
    layers = nn["~"]
    n = len(layers) // 2
    for i in range(n):
        x = x @ layers[f"w{i}"].astype(x.dtype) + layers[f"b{i}"].astype(x.dtype)
        if i < n - 1:
            x = jax.nn.relu(x)
    return x


def init_adafac_theta(lopt: Any, key: jax.Array, num_outputs: int) -> dict:
    """Zero decay offsets and the MLP ``{"~": {"w0", "b0", ...}}`` as the library creates it."""
    fan_in = lopt.num_features
    sizes = [fan_in] + [lopt.hidden_size] * lopt.hidden_layers + [num_outputs]
    nn = {}
    for i, (a, b) in enumerate(zip(sizes[:-1], sizes[1:], strict=True)):
        layer = common.linear_spec(a, b)
        nn[f"w{i}"], nn[f"b{i}"] = layer["w"], layer["b"]
    spec = {
        "adafactor_decays": np.zeros((len(lopt.initial_adafactor_decays),), np.float32),
        "momentum_decays": np.zeros((len(lopt.initial_momentum_decays),), np.float32),
        "nn": {"~": nn},
        "rms_decays": np.zeros((len(lopt.initial_rms_decays),), np.float32),
    }
    return common.draw(key, spec)


class _AdafacOptimizer(common.ThetaOptimizer):
    """The optimizer :meth:`AdafacMLPLOpt.opt_fn` returns."""

    def init(self, params, model_state=None, num_steps=None, key=None):
        return adafac_init(self.lopt, params, model_state, num_steps)

    def update(self, opt_state, grads, loss=None, model_state=None, key=None, **kwargs):
        lopt = self.lopt

        def tensor_step(p, groups, time):
            out = mlp_forward(self.theta["nn"], groups, time, p.shape)
            direction, magnitude = out[..., 0], out[..., 1]
            step = direction * jnp.exp(magnitude * lopt.exp_mult) * lopt.step_mult
            return p - step.reshape(p.shape)

        return adafac_update(opt_state, grads, model_state, self.theta, lopt, tensor_step)


class AdafacMLPLOpt(lopt_base.LearnedOptimizer):
    """Per-parameter MLP with Adafactor features (Metz et al., 2022, arXiv:2203.11860).

    learned_optimization's ``AdafacMLPLOpt`` (same arguments and theta layout); see the
    module docstring for the features and the update.

    Args:
      exp_mult: scale of the magnitude output inside the exponential.
      step_mult: scale of the step.
      hidden_size: width of the MLP's hidden layers.
      hidden_layers: number of hidden layers.
      initial_momentum_decays: decays of the momentum accumulators at ``theta = 0``.
      initial_rms_decays: decays of the second-moment accumulators.
      initial_adafactor_decays: decays of the factored accumulators.
      concat_weights: the library's matmul code path (True) or scalar-math path (False);
        both compute the same function here.
      make_separate_weights: the library's one-scalar-per-weight theta layout; not
        supported (raises ValueError).
      split_weights: a variant of the scalar-math path; same function.
    """

    mom_eps = 0.0

    def __init__(
        self,
        exp_mult: float = 0.001,
        step_mult: float = 0.001,
        hidden_size: int = 4,
        hidden_layers: int = 2,
        initial_momentum_decays: Sequence[float] = (0.9, 0.99, 0.999),
        initial_rms_decays: Sequence[float] = (0.999,),
        initial_adafactor_decays: Sequence[float] = (0.9, 0.99, 0.999),
        concat_weights: bool = True,
        make_separate_weights: bool = False,
        split_weights: bool = False,
    ):
        if make_separate_weights and not concat_weights:
            raise ValueError(
                "make_separate_weights=True (one theta scalar per MLP weight) is not "
                "supported by learnopt; use the default matrix layout"
            )
        self.exp_mult = exp_mult
        self.step_mult = step_mult
        self.hidden_size = int(hidden_size)
        self.hidden_layers = int(hidden_layers)
        self.initial_momentum_decays = tuple(initial_momentum_decays)
        self.initial_rms_decays = tuple(initial_rms_decays)
        self.initial_adafactor_decays = tuple(initial_adafactor_decays)
        self.concat_weights = concat_weights
        self.make_separate_weights = make_separate_weights
        self.split_weights = split_weights

    @property
    def num_features(self) -> int:
        """Inputs of the MLP: the normalized feature groups plus 11 time features (39)."""
        return num_adafac_features(
            len(self.initial_momentum_decays),
            len(self.initial_rms_decays),
            len(self.initial_adafactor_decays),
        ) + len(common.TIMESCALES)

    def init(self, key: jax.Array) -> dict:
        return init_adafac_theta(self, key, num_outputs=2)

    def opt_fn(self, theta: dict, is_training: bool = False) -> common.ThetaOptimizer:
        common.check_theta(self, theta)
        return _AdafacOptimizer(theta, self)

    def __repr__(self) -> str:
        return (
            f"AdafacMLPLOpt(exp_mult={self.exp_mult}, step_mult={self.step_mult}, "
            f"hidden_size={self.hidden_size}, hidden_layers={self.hidden_layers})"
        )


lopt_base.register_learned_optimizer("AdafacMLPLOpt", AdafacMLPLOpt)
