r"""HyperV2: VeLO's architecture, a per-tensor LSTM that generates a per-parameter MLP.

The learned optimizer of Metz et al., "VeLO: Training versatile learned optimizers by
scaling up" (2022, arXiv:2211.09760), as learned_optimization's
``research/general_lopt/hyper_v2.HyperV2`` defines it: same constructor, maths and
``theta`` layout (VeLO itself is ``HyperV2(lstm_hidden_size=512, param_inits=256,
...)`` with meta-trained weights).

Each step:

1. Loss features: running means of the loss at 10 timescales (clipped to twice the
   running maximum) give 9 features in [-1, 1] comparing each mean with its running
   minimum. (``use_bugged_loss_features``, the library's default and what the released
   checkpoints were trained with, uses 10 identical timescales, which makes these
   features 0 or -1.)
2. Gradients are clipped to [-1000, 1000].
3. A per-tensor LSTM reads 30 features per tensor computed from the accumulators of
   the *previous* step, all scaled by ``1 / rms(p)``: 9 ``tanh(10 (t / T - s))``
   features of the fraction of training done, the 9 loss features, log-magnitudes of
   the mean second moment, of the variance of each momentum and of the (library-
   quirky) spread of the second moment around the mean momentum, and the one-hot rank
   of the tensor. With ``mix_layers`` the features first pass a linear layer plus the
   max over tensors of a ReLU layer (information shared across tensors).
4. From the LSTM output, per tensor: ``param_inits`` mixing coefficients ``c`` and a
   step-size multiplier ``lr_mult``. The tensor's MLP weights are
   ``100 * mean_i c_i W_i`` over a bank of ``param_inits`` MLPs (``ff_mod_stack``).
5. The accumulators are updated (momenta 0.9, 0.99, 0.999; second moment 0.999;
   factored second moments 0.9, 0.99, 0.999) and that MLP (ReLU, 2 x 4, 3 outputs)
   reads 14 feature groups per element (``g``, ``clip(g, +-0.1)``, ``p``, ``m``, ``rms``,
   ``m / sqrt(rms)``, ``1 / sqrt(rms)``, Adafactor ``fac_g``, ``g / sqrt(rms)``, and the
   factored row/column statistics), each normalized by its RMS over the tensor:

       p <- p - lr_mult * step_mult * d * exp(exp_mult * a) * sqrt(mean(p^2) + 1e-9)

In symbols, with ``K = param_inits``, ``W^(i)`` the bank's MLPs, ``lambda_p = lr_mult``,
``lambda_s = step_mult`` and ``lambda_e = exp_mult``:

.. math::

   W_p = \frac{100}{K} \sum_{i=1}^{K} c_i\, W^{(i)}

   p \leftarrow p - \lambda_p\, \lambda_s\, d\, \exp(\lambda_e\, a)\,
   \sqrt{\operatorname{mean}(p^2) + 10^{-9}}

``theta = {"lstm_init_state": LSTMState([1, H], [1, H]), "rnn_params": {"linear",
"linear_1", "linear_2", "rnn/linear", "rnn_to_controls", "step_size"}, "ff_mod_stack":
{"~": {"w0__0", ..., "w0__13", "b0", "w1", "b1", "w2", "b2"}}}`` (each ``ff_mod_stack``
leaf has a leading axis of ``param_inits``; "linear" exists but is unused, as in the
library). The update needs the loss: ``opt.update(state, grads, loss=loss)``.

learnopt option (off by default): the LSTM already reads ``tau = t / T``; with
``tau_features=True`` the generated per-parameter MLPs read it too, as the 7 per-tensor
inputs of :func:`~learnopt.learned_optimizers.blocks.progress.tau_embedding` (Celo,
arXiv:2501.12670), through an extra bank leaf ``ff_mod_stack/~/w0__tau``
``[param_inits, 7, ff_hidden_size]``; registered as ``HyperV2_tau``.

learnopt differences: ``num_steps`` at ``init`` defaults to ``default_num_steps`` when
not given (the library requires it); the non-factored ``m / sqrt(v)`` floors ``v`` at
1e-20 so meta-gradients stay finite for exactly-zero gradients; no PRNG key is needed
(the library's update splits one but nothing uses randomness); summaries are not
written; arithmetic in float32 (float64 for float64 params).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, ClassVar

import flax.struct
import jax
import jax.numpy as jnp
import numpy as np

from learnopt import _validate
from learnopt.canonical import compute_dtype, leaf_compute_dtype
from learnopt.learned_optimizers import base as lopt_base
from learnopt.learned_optimizers import common
from learnopt.learned_optimizers.blocks import accumulators, element_features, per_element, progress
from learnopt.learned_optimizers.blocks.loss_timescales import (
    _FRACTION_TIMESCALES,
    _NUM_LOSS_TIMESCALES,
    LossBufferState,
    loss_buffer_features,
    loss_buffer_init,
    loss_buffer_update,
)
from learnopt.learned_optimizers.hyper_v2_config import HyperV2Config

PyTree = Any

__all__ = [
    "HyperV2",
    "HyperV2Config",
    "HyperV2State",
    "LossBufferState",
    "HyperV2Tau",
    "loss_buffer_init",
    "loss_buffer_update",
    "loss_buffer_features",
]


@flax.struct.dataclass
class HyperV2State:
    """State of the HyperV2 optimizer (field names as in the library's ``State``).

    Attributes:
      params, model_state, iteration: as in every learnopt state.
      num_steps: the inner-run length given to ``init``, int32.
      mom_rolling: the momentum accumulators, one array per decay (the library's are one
        decays-last array, see :mod:`~learnopt.learned_optimizers.blocks.accumulators`).
      rms_rolling: the second-moment accumulators, likewise.
      fac_rolling: the Adafactor-style factored second moments.
      lstm_hidden_state: the per-tensor LSTM state, ``[num_tensors, hidden]`` arrays.
      loss_buffer: the running loss statistics (:class:`LossBufferState`).
    """

    params: PyTree
    model_state: PyTree
    iteration: jax.Array
    num_steps: jax.Array
    mom_rolling: accumulators.MomAccumulator
    rms_rolling: accumulators.RMSAccumulator
    fac_rolling: accumulators.FactoredAccum
    lstm_hidden_state: common.LSTMState
    loss_buffer: LossBufferState


def _clip_log_abs(v: jax.Array, scale: float = 1.0) -> jax.Array:
    return jnp.clip(jnp.log(1e-8 + jnp.abs(v * scale)), -5, 5) * 0.5


def _bcast(a: int, b: int) -> int:
    return int(np.broadcast_shapes((a,), (b,))[0])


def _mixed_weights(
    stack: dict, controls: jax.Array, param_inits: int, scale: float = 100.0
) -> Callable[[int, Any], dict]:
    """Every tensor's MLP weights ``scale * mean_i c_i W_i`` from the bank ``stack``.

    One matmul mixes the whole bank for all tensors at once; the function returned gives
    tensor ``i``'s weights in dtype ``cd``.
    """
    bank_leaves, bank_def = jax.tree_util.tree_flatten(stack)
    k = param_inits
    bank = jnp.concatenate([w.reshape(k, -1) for w in bank_leaves], axis=1)
    mixed = (scale / k) * (controls.astype(jnp.float32) @ bank)  # [tensors, total]
    offsets = np.cumsum([0] + [int(np.prod(w.shape[1:])) for w in bank_leaves])

    def weights_of(i: int, cd: Any) -> dict:
        parts = [
            mixed[i, a:b].reshape(w.shape[1:]).astype(cd)
            for w, a, b in zip(bank_leaves, offsets[:-1], offsets[1:], strict=True)
        ]
        return bank_def.unflatten(parts)

    return weights_of


class _HyperV2Optimizer(common.ThetaOptimizer):
    """The optimizer :meth:`HyperV2.opt_fn` returns."""

    def init(self, params, model_state=None, num_steps=None, key=None):
        """Zero accumulators, the LSTM's initial state per tensor, the loss buffer.

        Args and returns as in :meth:`~learnopt.optimizers.interface.Optimizer.init`; here:

        - ``num_steps``: the inner-run length (``lopt.default_num_steps`` if None); it sets
          the fraction-of-training features.
        """
        lopt = self.lopt
        num_steps = _validate.run_length("num_steps", num_steps)
        if num_steps is None:
            num_steps = lopt.default_num_steps
        n = len(jax.tree_util.tree_leaves(params))
        init_state = common.as_lstm_state(self.theta["lstm_init_state"])
        mom, rms, fac = accumulators.init_accumulators(
            params,
            len(lopt.initial_momentum_decays),
            len(lopt.initial_rms_decays),
            len(lopt.initial_adafactor_decays),
        )
        buffer_steps = 10 if lopt.use_bugged_loss_features else num_steps
        return HyperV2State(
            params=params,
            model_state=model_state,
            iteration=jnp.zeros((), jnp.int32),
            num_steps=jnp.asarray(num_steps, jnp.int32),
            mom_rolling=mom,
            rms_rolling=rms,
            fac_rolling=fac,
            lstm_hidden_state=jax.tree_util.tree_map(lambda x: jnp.tile(x, (n, 1)), init_state),
            loss_buffer=loss_buffer_init(buffer_steps),
        )

    def update(self, opt_state, grads, loss=None, model_state=None, key=None, **kwargs):
        """One step (see the module docstring): loss buffer, LSTM, then the generated MLPs.

        Args and returns as in :meth:`~learnopt.optimizers.interface.Optimizer.update`; here:

        - ``loss``: the training loss (required unless ``constant_loss``).
        """
        lopt, theta, s = self.lopt, self.theta, opt_state
        if lopt.constant_loss:
            loss = jnp.ones((), jnp.float32)
        if loss is None:
            raise ValueError("HyperV2.update needs the training loss: update(..., loss=loss)")
        dtype = compute_dtype(s.params)
        loss_buffer = loss_buffer_update(s.loss_buffer, jnp.asarray(loss).astype(jnp.float32))
        loss_features = loss_buffer_features(loss_buffer)
        # Clipped in each gradient's own compute dtype, before the accumulators see them.
        grads = jax.tree_util.tree_map(
            lambda g: jnp.clip(g.astype(leaf_compute_dtype(g.dtype)), -1000.0, 1000.0), grads
        )
        fraction = s.iteration.astype(jnp.float32) / s.num_steps.astype(jnp.float32)

        treedef = jax.tree_util.tree_structure(s.params)
        leaves = treedef.flatten_up_to
        rnn_inputs = jnp.stack(
            [
                lopt.lstm_features_for_tensor(p, m, v, fraction, loss_features).astype(dtype)
                for p, m, v in zip(
                    leaves(s.params),
                    leaves(s.mom_rolling.m),
                    leaves(s.rms_rolling.rms),
                    strict=True,
                )
            ]
        )
        controls, lr_mult, next_lstm = lopt.rnn_forward(
            common.cast_tree(theta["rnn_params"], dtype), rnn_inputs, s.lstm_hidden_state
        )
        lstm_state = s.lstm_hidden_state if lopt.use_bugged_next_lstm_state else next_lstm
        if lopt.rnn_state_decay > 0.0:
            lstm_state = jax.tree_util.tree_map(
                lambda x: x * (1.0 - lopt.rnn_state_decay), lstm_state
            )

        decays = lopt.decays()
        weights_of = _mixed_weights(
            theta["ff_mod_stack"]["~"], controls, lopt.param_inits, lopt.mix_scale
        )
        tau = None
        if lopt.tau_features:
            tau = progress.tau_embedding(s.iteration, s.num_steps, jnp.float32)

        def step(p, g, m, v, fac_g, fac, i):
            cd = g.dtype  # the accumulators' dtype (grads are cast to it)
            weights = weights_of(i, cd)
            tau_cd = None if tau is None else tau.astype(cd)
            return lopt.ff_step(
                weights, lr_mult[i].astype(cd), p.astype(cd), g, m, v, fac_g, fac, tau=tau_cd
            )

        index = treedef.unflatten(list(range(treedef.num_leaves)))
        params, mom, rms, fac = accumulators.update_tree(
            step, s.params, grads, s.mom_rolling, s.rms_rolling, s.fac_rolling, decays, index
        )
        return common.next_state(
            s,
            params,
            model_state,
            mom_rolling=mom,
            rms_rolling=rms,
            fac_rolling=fac,
            lstm_hidden_state=lstm_state,
            loss_buffer=loss_buffer,
        )


class HyperV2(lopt_base.LearnedOptimizer):
    """VeLO's hypernetwork learned optimizer (Metz et al., 2022, arXiv:2211.09760).

    learned_optimization's ``HyperV2``; see the module docstring. The ``with_*`` flags
    switch the per-parameter MLP's feature groups on and off (ablations); the theta
    layout depends on them (one ``w0__i`` per enabled group).

    Args:
      config: the settings (default: the class's :attr:`default_config`).
      **settings: fields of :class:`HyperV2Config` to change, by name (the library's
        keyword arguments: ``HyperV2(lstm_hidden_size=512, param_inits=256)``).

    Raises:
      TypeError: a setting names no field of :class:`HyperV2Config`.
    """

    #: How the per-element MLP is evaluated (:data:`per_element.FORMS`; the same function
    #: in every form). Not a constructor argument: the library's constructor is kept.
    mlp_form = "auto"
    #: The factor of the bank mixing ``mix_scale * mean_i c_i W_i`` (VeLO's 100; Celo: 1).
    mix_scale = 100.0

    #: The settings a constructor call starts from; a variant (Celo) replaces a few.
    default_config: ClassVar[HyperV2Config] = HyperV2Config()

    def __init__(self, config: HyperV2Config | None = None, **settings: Any):
        self.config = lopt_base.settings_from(type(self), config, settings)
        for field in dataclasses.fields(self.config):
            setattr(self, field.name, getattr(self.config, field.name))

    # ------------------------------------------------------------------------- pieces
    def decays(self) -> accumulators.Decays:
        """The (fixed) momentum, second-moment and factored decays.

        Returns:
          The three decays as float32 arrays.
        """
        return accumulators.constant_decays(
            self.initial_momentum_decays,
            self.initial_rms_decays,
            self.initial_adafactor_decays,
        )

    def _group_widths(self) -> list[int]:
        """Widths of the enabled per-parameter feature groups, in input order."""
        nm = len(self.initial_momentum_decays)
        nr = len(self.initial_rms_decays)
        nf = len(self.initial_adafactor_decays)
        widths = []
        widths += [1] if self.with_g else []
        widths += [1] if self.with_grad_clip_feat else []
        widths += [1] if self.with_p else []
        widths += [nm] if self.with_m and self.with_m_feat else []
        widths += [nr] if self.with_rms and self.with_rms_feat else []
        widths += [_bcast(nm, nr)] if self.with_rms_norm_g else []
        widths += [nr] if self.with_rsqrt_rms else []
        widths += [nf] if self.with_fac_norm_g else []
        widths += [nr] if self.with_rms_only_norm_g else []
        if self.adafactor_accumulator:
            widths += [nf, nf] if self.with_fac_rms else []
            widths += [nf, nf] if self.with_fac_rsqrt else []
            widths += [_bcast(nm, nf)] if self.with_fac_mom_mult else []
        return widths

    def _groups(self, p, g, m, rms, fac_g, acc) -> list[jax.Array]:
        """The enabled feature groups of one tensor (scalars as ``[1]``)."""
        shape = p.shape or (1,)
        p, g, m, rms, fac_g, acc = element_features.lift_scalar(p, g, m, rms, fac_g, acc)
        # rms_eps 1e-6: learned_optimization's hyper_v2, rsqrt(rms + 1e-6).
        f = element_features.element_features(p, g, m, rms, fac_g, rms_eps=1e-6)
        out = []
        out += [f.g] if self.with_g else []
        out += [f.clipped_g] if self.with_grad_clip_feat else []
        out += [f.p] if self.with_p else []
        out += [f.m] if self.with_m and self.with_m_feat else []
        out += [f.rms] if self.with_rms and self.with_rms_feat else []
        out += [f.m_rsqrt_rms] if self.with_rms_norm_g else []
        out += [f.rsqrt_rms] if self.with_rsqrt_rms else []
        out += [f.fac_g] if self.with_fac_norm_g else []
        out += [f.g_rsqrt_rms] if self.with_rms_only_norm_g else []
        if self.adafactor_accumulator:
            # mom_eps 0: learned_optimization's hyper_v2 computes m * v**-0.5 for tensors
            # of rank < 2; 0 floors v at 1e-20 instead (accumulators.floored_rsqrt).
            row, col, rrow, rcol, mom = element_features.factored_features(
                acc, m, shape, mom_eps=0.0
            )
            out += [row, col] if self.with_fac_rms else []
            out += [rrow, rcol] if self.with_fac_rsqrt else []
            out += [mom] if self.with_fac_mom_mult else []
        return out

    def ff_step(self, weights, lr_mult, p, g, m, rms, fac_g, acc, tau=None) -> jax.Array:
        """The per-parameter MLP step for one tensor with generated ``weights``.

        Args:
          weights: this tensor's MLP (``100 * mean_i c_i W_i`` of the bank), compute dtype.
          lr_mult: the LSTM's step-size multiplier for this tensor.
          p, g: the parameter and its clipped gradient, in the compute dtype.
          m, rms, fac_g: the updated momenta, second moments and preconditioned gradient
            (one array per decay).
          acc: the tensor's updated factored second moments.
          tau: with ``tau_features``, the 7 fraction-of-training features (per-tensor
            inputs, read by ``weights["w0__tau"]``); None otherwise.

        Returns:
          The new parameter, shape ``p.shape``, in the compute dtype.
        """
        groups, stat_groups = per_element.twice(self._groups, p, g, m, rms, fac_g, acc)
        shape = p.shape or (1,)
        # Each feature column is normalized over the tensor; the first layer's w0__i are
        # stacked in the groups' order.
        w0_parts = [weights[f"w0__{i}"] for i in range(len(groups))]
        if tau is not None:
            w0_parts.append(weights["w0__tau"])
        w0 = jnp.concatenate(w0_parts, axis=0)
        layers = [(w0, weights["b0"])]
        layers += [
            (weights[f"w{i}"], weights[f"b{i}"]) for i in range(1, self.ff_hidden_layers + 1)
        ]
        direction, magnitude = per_element.mlp(
            layers,
            groups,
            shape,
            tensor_inputs=tau,
            stat_groups=stat_groups,
            norm_axes=tuple(range(len(shape))),
            form=self.mlp_form,
            feature_axis=0,
        )[:2]
        pe = p.reshape(shape)
        mag = jnp.exp(magnitude * self.exp_mult)
        if self.param_scale_mult:
            scale = jnp.sqrt(jnp.mean(jnp.square(pe)) + jnp.asarray(1e-9, pe.dtype))
            if self.clip_param_scale_amount is not None:
                cap = self.clip_param_scale_amount * np.sqrt(np.prod(shape))
                scale = jnp.minimum(scale, jnp.asarray(cap, scale.dtype))
            step = direction * (scale * mag) * self.step_mult
        else:
            step = direction * mag * self.step_mult
        step = lr_mult * step
        if self.precondition_output:
            last_rms = rms[-1].reshape(shape)  # the slowest decay's second moment
            step = step * jax.lax.rsqrt(last_rms + jnp.asarray(1e-6, last_rms.dtype))
        return p - step.reshape(p.shape)

    def lstm_features_for_tensor(self, p, m, rms, fraction_trained, loss_features) -> jax.Array:
        """The LSTM inputs of one tensor (30 with the defaults), in the library's order.

        Args:
          p: the parameter.
          m, rms: its momenta and second moments (of the previous step), one array per
            decay (or arrays with the decays first).
          fraction_trained: ``iteration / num_steps``.
          loss_features: the 9 features of :func:`loss_buffer_features`.

        Returns:
          The features ``[rnn_input_features]``, in ``m``'s dtype.
        """
        dtype = m[0].dtype
        p = p.astype(dtype)
        norm_mult = jax.lax.rsqrt(jnp.maximum(jnp.asarray(1e-9, dtype), jnp.mean(p**2)))
        # The library scales m and rms by norm_mult first; the statistics of the scaled
        # accumulators are those of the raw ones times norm_mult (means) and norm_mult^2
        # (variances), the same to float32 rounding, without writing scaled copies of
        # the accumulators to memory (measured: a third of HyperV2's step). One array
        # per decay, each statistic reduces a whole array: XLA:CPU reduces those faster
        # than the strided columns of the library's decays-last layout (measured: a
        # fifth of the step; docs/benchmarks.md).
        ms, rmss = list(m), list(rms)
        mean_m = [jnp.mean(x) for x in ms]
        mean_rms = jnp.stack([jnp.mean(x) for x in rmss]) * norm_mult
        sq = jnp.square(norm_mult)
        var_m = (
            jnp.stack([jnp.mean(jnp.square(x - mu)) for x, mu in zip(ms, mean_m, strict=True)]) * sq
        )
        # The library's rms - mean_m broadcasts the rms decays against the momentum ones.
        pairs = accumulators.per_decay_pairs(rmss, mean_m)
        var_rms = jnp.stack([jnp.mean(jnp.square(x - mu)) for x, mu in pairs]) * sq
        n_rank = int(np.sum(np.asarray(p.shape) > 1))
        timescales = jnp.asarray(_FRACTION_TIMESCALES, jnp.float32)
        feats = {
            "fraction_left": jnp.tanh((fraction_trained - timescales) * 10),
            "loss_features": loss_features,
            "mean_rms": _clip_log_abs(mean_rms, 10.0),
            "rank": jax.nn.one_hot(n_rank, 5, dtype=jnp.float32),
            "var_m": _clip_log_abs(var_m, 10.0),
            "var_rms": _clip_log_abs(var_rms, 10.0),
        }
        values = [jnp.reshape(feats[k], (-1,)).astype(dtype) for k in sorted(feats)]
        if self.with_validation_feature_dim:
            values.append(jnp.full((1,), float(self.validation_mode), dtype))
        return jnp.concatenate(values)

    @property
    def rnn_input_features(self) -> int:
        """The number of LSTM inputs per tensor (30 with the defaults)."""
        nm, nr = len(self.initial_momentum_decays), len(self.initial_rms_decays)
        n = len(_FRACTION_TIMESCALES) + (_NUM_LOSS_TIMESCALES - 1) + nr + 5 + nm + _bcast(nr, nm)
        return n + int(self.with_validation_feature_dim)

    def rnn_forward(self, params, x, state):
        """Mixing layers, LSTM, and the control / step-size heads on ``x [tensors, F]``.

        Args:
          params: ``theta["rnn_params"]``.
          x: the LSTM inputs of every tensor, ``[tensors, rnn_input_features]``.
          state: the LSTM state, ``[tensors, lstm_hidden_size]`` each.

        Returns:
          ``(controls [tensors, param_inits], lr_mult [tensors], next LSTM state)``.
        """
        if self.mix_layers:
            mix = jax.nn.relu(common.linear_apply(params["linear_1"], x))
            x = common.linear_apply(params["linear_2"], x) + jnp.max(mix, axis=0, keepdims=True)
        out, state = common.lstm_apply(params["rnn/linear"], x, state)
        controls = common.linear_apply(params["rnn_to_controls"], out)
        lr_mult = common.linear_apply(params["step_size"], out)[:, 0]
        return controls, lr_mult, state

    # ------------------------------------------------------------------ learned optimizer
    def init(self, key: jax.Array) -> dict:
        """A random theta in the library's Haiku layout (see the module docstring).

        Args and returns as in :meth:`~learnopt.learned_optimizers.base.LearnedOptimizer.init`.
        """
        widths = self._group_widths()
        fan_in = sum(widths)
        h, k = self.ff_hidden_size, self.param_inits
        # The bank of param_inits MLPs: every leaf has a leading axis of param_inits.
        stack = {
            f"w0__{i}": common.Normal((k, w, h), 1 / np.sqrt(fan_in)) for i, w in enumerate(widths)
        }
        if self.tau_features:
            stack["w0__tau"] = common.Normal((k, progress.NUM_TAU_FEATURES, h), 1 / np.sqrt(fan_in))
        stack["b0"] = np.zeros((k, h), np.float32)
        sizes = [h] * self.ff_hidden_layers + [3]
        for i in range(1, len(sizes)):
            stack[f"w{i}"] = common.Normal((k, sizes[i - 1], sizes[i]), 1 / np.sqrt(sizes[i - 1]))
            stack[f"b{i}"] = np.zeros((k, sizes[i]), np.float32)
        f, hl = self.rnn_input_features, self.lstm_hidden_size
        rnn = {}
        if self.mix_layers:
            rnn["linear"] = common.linear_spec(f, hl)
            rnn["linear_1"] = common.linear_spec(f, hl)
            rnn["linear_2"] = common.linear_spec(f, hl)
        rnn["rnn/linear"] = common.lstm_spec(hl if self.mix_layers else f, hl)
        rnn["rnn_to_controls"] = common.linear_spec(hl, self.param_inits)
        rnn["step_size"] = common.linear_spec(hl, 1)
        spec = {
            "ff_mod_stack": {"~": stack},
            "lstm_init_state": common.lstm_initial_state(hl),
            "rnn_params": rnn,
        }
        return common.draw(key, spec)

    #: What :meth:`opt_fn` builds from a checked theta.
    optimizer_class = _HyperV2Optimizer


#: HyperV2 whose generated MLPs also read the fraction of training (``tau_features=True``).
HyperV2Tau = lopt_base.register_learned_optimizer("HyperV2", HyperV2, tau="HyperV2_tau")
