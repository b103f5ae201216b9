r"""RNNMLPLOpt: a per-tensor LSTM that conditions a per-parameter MLP.

The hierarchical learned optimizer of Metz et al., "Tasks, stability, architecture, and
compute: training more effective learned optimizers, and using them to train
themselves" (2020, arXiv:2009.11243), as learned_optimization's
``rnn_mlp_lopt.RNNMLPLOpt`` defines it: same constructor, maths and ``theta`` layout.

Each step, in this order:

1. Loss features: running means/variances of the training loss (decay 0.9) give
   ``clip((loss - mean) / sqrt(var + 1e-8), -5, 5)``, and the same for the (bias-
   corrected) validation loss (decay 0.95; updated by ``update(..., is_valid=True)``).
2. Gradients are clipped elementwise to ``10 x`` a running estimate of their RMS.
3. Momenta and second moments at decays ``(0.5, 0.9, 0.99, 0.999, 0.9999)``.
4. A per-tensor LSTM (hidden 64) reads 52 inputs per tensor: 18 tensor statistics
   (log-magnitudes and signs of means, log variances of ``m``, ``rms`` and ``p``, norms
   of ``p`` and ``g``, rank, log shape, the two loss features), 16 values sent by the
   MLP at the previous step and 18 values averaged over all tensors' LSTM outputs at
   the previous step (a DeepSets-style exchange between tensors).
5. A per-parameter MLP (ReLU, 2 x 32) reads 54 inputs per element: 23 normalized
   (``g, p, log|p|, m, rms, m / sqrt(rms), 1 / sqrt(rms)``), 11 ``sin(t / (s pi))`` time
   features, log #tensors, log norm of ``p``, log #elements and 17 values from the LSTM.
   Outputs ``(d, a, 16 values to the LSTM)``; ``p <- p - step_multiplier * d *
   exp(magnitude_rate * a)``.

In symbols: with ``mu <- 0.9 mu + 0.1 l`` and ``sigma^2 <- 0.9 sigma^2 + 0.1 (mu - l)^2``
the running statistics of the training losses ``l`` (``n`` of them so far), the training
feature ``z`` (the validation one is the same with the bias-corrected running mean of the
validation losses in place of ``l``, normalized by the training statistics) and the step,
with ``lambda_s = step_multiplier`` and ``lambda_e = magnitude_rate``, are

.. math::

   z = \operatorname{clip}\Big(\frac{\ell - c\,\mu}{\sqrt{c\,\sigma^2 + 10^{-8}}}, -5, 5\Big),
   \qquad c = \frac{1}{1 - 0.9^{n} + 10^{-8}}

   p \leftarrow p - \lambda_s\, d\, \exp(\lambda_e\, a)

``theta = {"initial_from_lstm": [18], "initial_from_mlp": [16], "lstm_init_state":
LSTMState([1, 64], [1, 64]), "rnn_params": {"rnn/linear": {"w": [116, 256], "b"}},
"rnn_to_ff_params": {"rnn_to_ff": {"w": [64, 17], "b"}}, "rnn_to_in_params":
{"rnn_to_in": {"w": [64, 18], "b"}}, "ffmod_params": {"mlp/~/linear_i": ...}}``.

The update needs the training loss: ``opt.update(state, grads, loss=loss)``.

learnopt option (off by default): ``tau_features=True`` appends the 7 features of the
fraction of training done ``tau = t / T`` (:mod:`~learnopt.learned_optimizers.blocks.progress`;
``T`` from ``opt.init(params, num_steps=T)``; Celo, arXiv:2501.12670) to the MLP's
per-tensor inputs (first layer ``[61, hidden_size]`` with the defaults); registered as
``RNNMLPLOpt_tau``.

learnopt differences: norms use a square root with a finite derivative at zero (the
library's ``jnp.linalg.norm`` gives NaN meta-gradients for an all-zero tensor);
``is_valid`` may be a Python bool (one branch traced) or an array (``lax.cond``);
arithmetic in float32 (float64 for float64 params).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import flax.struct
import jax
import jax.numpy as jnp
import numpy as np

from learnopt.canonical import compute_dtype, leaf_compute_dtype
from learnopt.learned_optimizers import base as lopt_base
from learnopt.learned_optimizers import common
from learnopt.learned_optimizers.blocks import per_element, progress

PyTree = Any

__all__ = [
    "RNNMLPLOpt",
    "RNNMLPLOptState",
    "LossNormalizerState",
    "DynamicClipState",
    "RNNMLPLOptTau",
]

_TENSOR_FEATURES = 18
_MLP_FEATURES = 37
_TRAIN_DECAY = 0.9
_VALID_DECAY = 0.95


@flax.struct.dataclass
class LossNormalizerState:
    """Running mean and variance of a loss and the number of updates.

    Attributes:
      mean: running (exponential) mean of the loss, a scalar.
      var: running variance of the loss around that mean, a scalar.
      updates: how many losses have been folded in (int32 scalar; sets the bias
        correction ``1 / (1 - decay**updates)``).
    """

    mean: jax.Array
    var: jax.Array
    updates: jax.Array


@flax.struct.dataclass
class DynamicClipState:
    """The gradient clipper's step count (float) and running gradient RMS.

    Attributes:
      iteration: steps taken, as a float scalar (for the bias correction
        ``1 - 0.99**iteration``).
      value: running RMS of the clipped gradients (EMA with decay 0.99); the clip is
        ``10 *`` its bias-corrected value.
    """

    iteration: jax.Array
    value: jax.Array


@flax.struct.dataclass
class RNNMLPLOptState:
    """State of the RNNMLPLOpt optimizer (field names as in the library).

    Attributes:
      params, model_state, iteration: as in every learnopt state.
      mom_rolling: the momenta, one slice per decay (last axis).
      rms_rolling: the second moments, likewise.
      lstm_hidden_state: the per-tensor LSTM state, ``[num_tensors, lstm_hidden_size]``
        arrays.
      from_mlp: per tensor, the values the MLP sent to the LSTM at the previous step
        (``[from_mlp_size]``; ``theta["initial_from_mlp"]`` at first).
      from_lstm: the LSTM outputs averaged over tensors at the previous step
        (``[from_lstm_size]``; ``theta["initial_from_lstm"]`` at first).
      train_loss_accum: the training-loss statistics.
      valid_loss_accum: the validation-loss statistics.
      dynamic_clip: the gradient clipper's state.
      num_steps: with ``tau_features``, the run length ``T`` given to ``init`` (int32);
        otherwise None (no leaf: the library's state).
    """

    params: PyTree
    model_state: PyTree
    iteration: jax.Array
    mom_rolling: common.MomAccumulator
    rms_rolling: common.RMSAccumulator
    lstm_hidden_state: common.LSTMState
    from_mlp: PyTree
    from_lstm: jax.Array
    train_loss_accum: LossNormalizerState
    valid_loss_accum: LossNormalizerState
    dynamic_clip: DynamicClipState
    num_steps: Any = None


def _loss_next(state: LossNormalizerState, loss: jax.Array, decay: float) -> LossNormalizerState:
    mean = decay * state.mean + (1 - decay) * loss
    var = decay * state.var + (1 - decay) * jnp.square(mean - loss)
    return LossNormalizerState(mean=mean, var=var, updates=state.updates + 1)


def _correction(state: LossNormalizerState, decay: float) -> jax.Array:
    """``1 / (1 - decay^t + 1e-8)``; 1 before the first update (the statistics are 0 then).

    (The library's formula gives ``1e8`` at ``t = 0``, which XLA may turn into ``inf``
    when it reassociates ``1 - 1 + 1e-8``; both multiply a zero mean and variance.)
    """
    t = state.updates.astype(state.mean.dtype)
    den = 1 - jnp.asarray(decay, state.mean.dtype) ** t + 1e-8
    return 1.0 / jnp.where(state.updates > 0, den, 1.0)


def _loss_feature(state: LossNormalizerState, loss: jax.Array, decay: float) -> jax.Array:
    c = _correction(state, decay)
    z = (loss - state.mean * c) * jax.lax.rsqrt(state.var * c + 1e-8)
    return jnp.clip(z, -5, 5)


def _clip_log_abs(x: jax.Array) -> jax.Array:
    return jnp.clip(jnp.log(1e-8 + jnp.abs(x)), -5, 5)


def _sin_embedding(iteration: jax.Array, dtype: Any) -> jax.Array:
    t = jnp.asarray(iteration).astype(dtype)
    return jnp.sin(t / (jnp.asarray(common.TIMESCALES, dtype) * np.pi))


class _RNNMLPOptimizer(common.ThetaOptimizer):
    """The optimizer :meth:`RNNMLPLOpt.opt_fn` returns."""

    def init(self, params, model_state=None, num_steps=None, key=None):
        theta, lopt = self.theta, self.lopt
        n = len(jax.tree_util.tree_leaves(params))
        dtype = compute_dtype(params)
        init_state = common.as_lstm_state(theta["lstm_init_state"])
        k = len(lopt.decays)
        zeros = jax.tree_util.tree_map(
            lambda p: jnp.zeros((*np.shape(p), k), leaf_compute_dtype(p.dtype)), params
        )
        loss_state = LossNormalizerState(
            mean=jnp.zeros((), dtype), var=jnp.zeros((), dtype), updates=jnp.zeros((), jnp.int32)
        )
        alpha = 0.99
        return RNNMLPLOptState(
            params=params,
            model_state=model_state,
            iteration=jnp.zeros((), jnp.int32),
            mom_rolling=common.MomAccumulator(m=zeros),
            rms_rolling=common.RMSAccumulator(rms=zeros),
            lstm_hidden_state=jax.tree_util.tree_map(lambda x: jnp.tile(x, (n, 1)), init_state),
            from_mlp=jax.tree_util.tree_map(lambda p: theta["initial_from_mlp"], params),
            from_lstm=theta["initial_from_lstm"],
            train_loss_accum=loss_state,
            valid_loss_accum=loss_state,
            dynamic_clip=DynamicClipState(
                iteration=jnp.ones((), jnp.float32), value=jnp.full((), 1 - alpha, jnp.float32)
            ),
            num_steps=(
                progress.resolve_num_steps(num_steps, lopt.default_num_steps, lopt.name)
                if lopt.tau_features
                else None
            ),
        )

    def update(
        self, opt_state, grads, loss=None, model_state=None, key=None, is_valid=False, **kwargs
    ):
        if loss is None:
            raise ValueError("RNNMLPLOpt.update needs the training loss: update(..., loss=loss)")
        if isinstance(is_valid, bool):
            if is_valid:
                return self._update_valid(opt_state, loss)
            return self._update_train(opt_state, grads, loss, model_state)
        return jax.lax.cond(
            is_valid,
            lambda: self._update_valid(opt_state, loss),
            lambda: self._update_train(opt_state, grads, loss, model_state),
        )

    def _update_valid(self, opt_state, loss):
        """A validation loss only moves the validation-loss statistics."""
        accum = _loss_next(opt_state.valid_loss_accum, loss, _VALID_DECAY)
        return opt_state.replace(iteration=opt_state.iteration + 1, valid_loss_accum=accum)

    def _update_train(self, opt_state, grads, loss, model_state):
        """One training step, in the library's order: loss features, dynamic gradient
        clipping, accumulators, the LSTM over the tensors, then each tensor's MLP step.

        Long (over 80 lines) because each stage feeds the next and the next state is
        assembled from all of them; split, it would pass a dozen intermediates around.
        """
        theta, lopt = self.theta, self.lopt
        s = opt_state
        dtype = compute_dtype(s.params)
        loss = jnp.asarray(loss).astype(dtype)

        train_accum = _loss_next(s.train_loss_accum, loss, _TRAIN_DECAY)
        train_feat = _loss_feature(train_accum, loss, _TRAIN_DECAY)
        valid_loss = s.valid_loss_accum.mean * _correction(s.valid_loss_accum, _VALID_DECAY)
        valid_feat = _loss_feature(train_accum, valid_loss, _TRAIN_DECAY)

        # Dynamic gradient clipping (running RMS of the clipped gradients, alpha 0.99).
        alpha, clip_mult = 0.99, 10.0
        t, snd = s.dynamic_clip.iteration, s.dynamic_clip.value
        clip = (snd / (1 - alpha**t)) * clip_mult
        grads = jax.tree_util.tree_map(
            lambda g: jnp.clip(g.astype(leaf_compute_dtype(g.dtype)), -clip, clip), grads
        )
        leaves = jax.tree_util.tree_leaves(grads)
        avg_sq = sum(jnp.mean(jnp.square(g)).astype(jnp.float32) for g in leaves) / len(leaves)
        new_snd = snd * alpha + jnp.sqrt(1e-8 + avg_sq) * (1 - alpha)
        dynamic_clip = DynamicClipState(iteration=t + 1, value=new_snd)

        decays = jnp.asarray(lopt.decays, jnp.float32)
        ms = jax.tree_util.tree_map(
            lambda m, g: common.momentum_update(m, g.astype(m.dtype), decays),
            s.mom_rolling.m,
            grads,
        )
        rms = jax.tree_util.tree_map(
            lambda v, g: common.rms_update(v, g.astype(v.dtype), decays), s.rms_rolling.rms, grads
        )

        treedef = jax.tree_util.tree_structure(s.params)
        flat = [treedef.flatten_up_to(x) for x in (ms, rms, grads, s.params, s.from_mlp)]
        rnn_inputs = jnp.stack(
            [
                self._tensor_features(m, v, g, p, fm, s.from_lstm, train_feat, valid_feat, dtype)
                for m, v, g, p, fm in zip(*flat, strict=True)
            ]
        )
        lstm_params = common.cast_tree(theta["rnn_params"]["rnn/linear"], dtype)
        lstm_out, lstm_state = common.lstm_apply(lstm_params, rnn_inputs, s.lstm_hidden_state)
        to_in = common.linear_apply(theta["rnn_to_in_params"]["rnn_to_in"], lstm_out)
        new_from_lstm = jnp.mean(to_in, axis=0)
        ff_inputs = common.linear_apply(theta["rnn_to_ff_params"]["rnn_to_ff"], lstm_out)

        num_tensors = len(flat[0])
        tau = None
        if lopt.tau_features:
            tau = progress.tau_embedding(s.iteration, s.num_steps, jnp.float32)
        new_params, new_from_mlp = [], []
        for i, (m, v, g, p) in enumerate(zip(*flat[:4], strict=True)):
            cd = m.dtype
            groups, tensor_inputs = self._mlp_features(
                m, v, g.astype(cd), p.astype(cd), ff_inputs[i].astype(cd), s.iteration, num_tensors
            )
            if tau is not None:
                tensor_inputs = jnp.concatenate([tensor_inputs, tau.astype(cd)])
            mlp = theta["ffmod_params"]
            layers = [
                (mlp[f"mlp/~/linear_{j}"]["w"], mlp[f"mlp/~/linear_{j}"]["b"])
                for j in range(len(mlp))
            ]
            n = groups[0].shape[0]
            out = per_element.mlp_step(
                layers,
                groups,
                (n,),
                p.astype(cd).reshape(-1),
                step_mult=lopt.step_multiplier,
                exp_mult=lopt.magnitude_rate,
                tensor_inputs=tensor_inputs,
                norm_axes=(0,),
                mean_outputs_from=2,
                form=lopt.mlp_form,
            )
            new_params.append(out.params.reshape(p.shape).astype(p.dtype))
            new_from_mlp.append(out.means)

        return common.next_state(
            s,
            treedef.unflatten(new_params),
            model_state,
            mom_rolling=common.MomAccumulator(m=ms),
            rms_rolling=common.RMSAccumulator(rms=rms),
            lstm_hidden_state=lstm_state,
            from_mlp=treedef.unflatten(new_from_mlp),
            from_lstm=new_from_lstm,
            train_loss_accum=train_accum,
            valid_loss_accum=s.valid_loss_accum,
            dynamic_clip=dynamic_clip,
        )

    @staticmethod
    def _tensor_features(ms, rms, g, v, from_mlp, from_lstm, train_feat, valid_feat, dtype):
        """The 52 LSTM inputs of one tensor, in the library's (alphabetical) order."""
        ms, rms, g, v = (x.astype(dtype) for x in (ms, rms, g, v))
        mean_ms, mean_rms, mean_v = jnp.mean(ms), jnp.mean(rms), jnp.mean(v)
        shape = list(v.shape)[:4] + [1] * max(0, 4 - v.ndim)
        log_shape = np.log(np.asarray(shape, np.float64)) - 1.0
        const = lambda x: jnp.asarray(x, dtype)  # noqa: E731
        feats = {
            "from_lstm": from_lstm,
            "from_mlp": from_mlp,
            "g_norm": _clip_log_abs(common.safe_norm(g)),
            "is_scalar": const(1.0 if v.ndim == 0 else -1.0),
            "mean_ms_mag": _clip_log_abs(mean_ms),
            "mean_ms_sign": jnp.sign(mean_ms),
            "mean_rms": _clip_log_abs(mean_rms),
            "mean_sign": jnp.sign(mean_rms),
            "mean_v_mag": _clip_log_abs(mean_v),
            "mean_v_sign": jnp.sign(mean_v),
            "norm_weight": _clip_log_abs(common.safe_norm(v)),
            **{f"shape_{j}": const(log_shape[j]) for j in range(4)},
            "train_loss_feat": train_feat,
            "valid_loss_feat": valid_feat,
            "var_ms": _clip_log_abs(jnp.mean(jnp.square(ms - mean_ms))),
            "var_rms": _clip_log_abs(jnp.mean(jnp.square(rms - mean_rms))),
            "var_v": _clip_log_abs(jnp.mean(jnp.square(v - mean_v))),
        }
        return jnp.concatenate(
            [jnp.reshape(jnp.asarray(feats[k]).astype(dtype), (-1,)) for k in sorted(feats)]
        )

    @staticmethod
    def _mlp_features(m, rms, g, v, ff_inputs, iteration, num_tensors):
        """The MLP's inputs, in the library's order: per-element groups ``[N, w]`` (each
        normalized over the tensor by the MLP) and the per-tensor inputs (54 in all)."""
        cd = m.dtype
        k = m.shape[-1]
        m, rms = m.reshape(-1, k), rms.reshape(-1, k)
        flat_g, flat_v = g.reshape(-1, 1), v.reshape(-1, 1)
        rsqrt = jax.lax.rsqrt(rms + jnp.asarray(1e-6, cd))
        groups = [flat_g, flat_v, jnp.log(jnp.abs(flat_v) + 1e-8), m, rms, m * rsqrt, rsqrt]
        n = flat_g.shape[0]
        tensor_inputs = jnp.concatenate(
            [
                jnp.reshape(jnp.asarray(x, cd), (-1,))
                for x in (
                    _sin_embedding(iteration, cd),
                    np.log(float(num_tensors)) - 1.0,
                    jnp.log(common.safe_norm(flat_v) + 1e-8),
                    np.log(float(n)),
                    ff_inputs,
                )
            ]
        )
        return groups, tensor_inputs


class RNNMLPLOpt(lopt_base.LearnedOptimizer):
    """Per-tensor LSTM + per-parameter MLP learned optimizer (Metz et al., 2020, 2009.11243).

    learned_optimization's ``RNNMLPLOpt``; see the module docstring.

    Args:
      step_multiplier: scale of the step.
      magnitude_rate: scale of the magnitude output inside the exponential.
      hidden_size: hidden width of the per-parameter MLP.
      hidden_layer: number of hidden layers of the MLP.
      from_mlp_size: values the MLP sends to the LSTM.
      from_lstm_size: values the LSTM outputs (averaged over tensors) feed back to it.
      lstm_to_ff: values the LSTM sends to the MLP.
      lstm_hidden_size: width of the LSTM.
      decays: decays of the momentum and second-moment accumulators.
      tau_features: learnopt option: also feed the MLP the fraction of training done
        (module docstring).
      default_num_steps: with ``tau_features``, the run length assumed when
        ``opt.init`` gets no ``num_steps`` (None: ``num_steps`` is required).
    """

    #: How the per-element MLP is evaluated (:data:`per_element.FORMS`; the same function
    #: in every form). Not a constructor argument: the library's constructor is kept.
    mlp_form = "auto"

    def __init__(
        self,
        step_multiplier: float = 0.001,
        magnitude_rate: float = 0.001,
        hidden_size: int = 32,
        hidden_layer: int = 2,
        from_mlp_size: int = 16,
        from_lstm_size: int = 18,
        lstm_to_ff: int = 17,
        lstm_hidden_size: int = 64,
        decays: Sequence[float] = (0.5, 0.9, 0.99, 0.999, 0.9999),
        tau_features: bool = False,
        default_num_steps: int | None = None,
    ):
        lopt_base.keep_arguments(self, locals())
        if len(self.decays) != 5:
            # The feature counts of the library's layout (23 + 14 = 37) assume 5 decays.
            raise ValueError(f"RNNMLPLOpt needs 5 decays (the library's layout), got {decays}")

    def init(self, key: jax.Array) -> dict:
        """Haiku-layout theta (LSTM, projections, MLP, initial exchange vectors).

        Args and returns as in :meth:`~learnopt.learned_optimizers.base.LearnedOptimizer.init`.
        """

        def variance_scaling(n):
            # Haiku's VarianceScaling(): truncated normal, std sqrt(1 / fan_in) / 0.8796.
            return common.Normal((n,), 1.0 / (np.sqrt(n) * 0.87962566103423978))

        rnn_in = _TENSOR_FEATURES + self.from_lstm_size + self.from_mlp_size
        mlp_in = _MLP_FEATURES + self.lstm_to_ff
        if self.tau_features:
            mlp_in += progress.NUM_TAU_FEATURES
        sizes = [mlp_in] + [self.hidden_size] * self.hidden_layer + [2 + self.from_mlp_size]
        h = self.lstm_hidden_size
        spec = {
            "ffmod_params": common.mlp_spec(sizes),
            "initial_from_lstm": variance_scaling(self.from_lstm_size),
            "initial_from_mlp": variance_scaling(self.from_mlp_size),
            "lstm_init_state": common.lstm_initial_state(h),
            "rnn_params": {"rnn/linear": common.lstm_spec(rnn_in, h)},
            "rnn_to_ff_params": {"rnn_to_ff": common.linear_spec(h, self.lstm_to_ff)},
            "rnn_to_in_params": {"rnn_to_in": common.linear_spec(h, self.from_lstm_size)},
        }
        return common.draw(key, spec)

    #: What :meth:`opt_fn` builds from a checked theta.
    optimizer_class = _RNNMLPOptimizer


#: RNNMLPLOpt with the fraction-of-training inputs on (``tau_features=True``).
RNNMLPLOptTau = lopt_base.register_learned_optimizer("RNNMLPLOpt", RNNMLPLOpt, tau="RNNMLPLOpt_tau")
