r"""Celo: a learned MLP update rule scaled by a learned LSTM schedule.

Moudgil, Knyazev, Lajoie & Belilovsky, "Celo: Training versatile learned optimizers on
a compute diet" (2025, arXiv:2501.12670). Not in learned_optimization; written for
learnopt from the paper and the authors' public release (github.com/amoudgl/celo at
66d976116f39da286951f0c5e0a18eee8d1fd66b, ``celo/optimizers/celo.py``, configured by
``celo/factory.py`` as ``celo_phase1`` and ``celo``; facts only: equations, defaults,
theta names, the frozen keys of each phase).

Celo keeps VeLO's accumulators, loss features and per-parameter MLP
(:class:`~learnopt.learned_optimizers.hyper_v2.HyperV2`, whose code it reuses) and
replaces the hypernetwork by a scheduler:

1. The per-tensor LSTM reads only **18 inputs**: the 9 features ``tanh(10 (tau - s))``
   of the fraction of training done ``tau = t / T`` for ``s`` in (0.03, 0.1, 0.2, 0.4,
   0.6, 0.8, 0.9, 1.0, 1.1), then the 9 loss features (VeLO's, over timescales up to
   ``T``). ``T`` is the ``num_steps`` given to ``opt.init`` (meta-training passes each
   inner run's length); ``t`` is the step count before the update.
2. Its heads give mixing coefficients ``c = softmax(rnn_to_controls(h))`` over
   ``param_inits`` MLPs (weights ``mean_i c_i W_i``, no factor 100; with the paper's
   ``param_inits=1`` the one MLP itself) and a step-size multiplier
   ``lr_mult = 0.1 exp(step_size(h))``.
3. The MLP (ReLU, 2 x 4, VeLO's 14 feature groups, each normalized by its RMS over the
   tensor) gives a direction ``d`` and a magnitude ``a`` per element:

       step = step_mult * d * exp(exp_mult * a) * sqrt(mean(p^2) + 1e-9)
       p <- p - lr_mult * step   (train_phase 2)
       p <- p - step             (train_phase 1: the scheduler does not act)

In symbols, with ``h`` the LSTM output, ``K = param_inits``, ``lambda_s = step_mult`` and
``lambda_e = exp_mult``:

.. math::

   c = \operatorname{softmax}(W_c h + b_c), \qquad
   \lambda_p = 0.1 \exp(w_s^\top h + b_s), \qquad
   W_p = \frac{1}{K}\sum_{i=1}^{K} c_i\, W^{(i)}

   \Delta = \lambda_s\, d\, \exp(\lambda_e\, a)\, \sqrt{\operatorname{mean}(p^2) + 10^{-9}},
   \qquad
   p \leftarrow \begin{cases} p - \lambda_p\, \Delta & \text{phase 2}, \\
   p - \Delta & \text{phase 1}. \end{cases}

Meta-training has two phases (the paper's section 3; the release's ``--train_partial``):
phase 1 trains the update rule (``ff_mod_stack``) with the scheduler frozen, phase 2
starts from phase 1's theta and trains the scheduler (``lstm_init_state``,
``rnn_params``) with the update rule frozen. :meth:`Celo.get_frozen_param_keys` names
the frozen keys, for ``SingleMachineGradientLearner(..., frozen_keys=...)``.

``theta``: HyperV2's layout with 18 LSTM inputs: ``{"ff_mod_stack": {"~": {"w0__0", ...,
"w0__13", "b0", "w1", "b1", "w2", "b2"}}, "lstm_init_state": LSTMState, "rnn_params":
{"linear", "linear_1", "linear_2", "rnn/linear", "rnn_to_controls", "step_size"}}``
(``ff_mod_stack`` leaves have a leading axis of ``param_inits``; "linear" is unused,
as in the release). Both phases have the same layout, so phase 1's theta starts phase 2.

learnopt differences (as HyperV2's): ``num_steps`` defaults to ``default_num_steps``
when ``init`` gets none; no PRNG key is needed; no summaries; arithmetic in float32
(float64 for float64 params).
"""

from __future__ import annotations

from collections.abc import Sequence

import jax
import jax.numpy as jnp

from learnopt.learned_optimizers import base as lopt_base
from learnopt.learned_optimizers import hyper_v2

__all__ = ["Celo", "TRAIN_PHASES"]

#: The meta-training phases and the theta keys each one freezes (the release's
#: ``Celo.get_frozen_param_keys``).
TRAIN_PHASES: dict[int, tuple[str, ...]] = {
    1: ("lstm_init_state", "rnn_params"),
    2: ("ff_mod_stack",),
}


class Celo(hyper_v2.HyperV2):
    """Celo (Moudgil et al., 2025, arXiv:2501.12670): an MLP rule under an LSTM schedule.

    See the module docstring for the maths. The defaults are the paper's Celo (the
    release's ``celo`` and ``celo_phase1`` configurations: LSTM 64, one MLP); the
    release's class itself defaults to ``lstm_hidden_size=128, param_inits=64,
    train_phase=1``.

    Args:
      lstm_hidden_size: width of the per-tensor LSTM scheduler.
      ff_hidden_size: hidden width of the per-parameter MLP.
      ff_hidden_layers: hidden layers of the per-parameter MLP.
      initial_momentum_decays, initial_rms_decays, initial_adafactor_decays: decays of
        the accumulators.
      param_inits: number of MLPs the scheduler's softmax mixes (1: no mixing).
      mix_layers: share information across tensors before the LSTM.
      exp_mult: scale of the magnitude output inside the exponential.
      step_mult: scale of the step.
      train_phase: 1, the update rule alone (``lr_mult`` not applied; meta-train
        ``ff_mod_stack``), or 2, the rule scaled by the scheduler's ``lr_mult`` (the
        optimizer that is meta-tested; meta-train the scheduler).
      validation_mode: value of the extra LSTM input with ``with_validation_feature_dim``.
      with_validation_feature_dim: add that input (a 19th).
      with_g: feed the gradient ``g`` (one input).
      with_m: keep the momentum inputs (with ``with_m_feat``; off drops them).
      with_m_feat: feed the momenta ``m``, one input per momentum decay (needs ``with_m``).
      with_rms: keep the second-moment inputs (with ``with_rms_feat``; off drops them).
      with_rms_feat: feed the second moments ``rms``, one input per rms decay (needs
        ``with_rms``).
      with_rms_norm_g: feed ``m / sqrt(rms + 1e-6)``, one input per momentum decay
        (broadcast against the rms decays).
      with_rsqrt_rms: feed ``1 / sqrt(rms + 1e-6)``, one input per rms decay.
      with_p: feed the parameter value.
      with_fac_norm_g: feed the Adafactor-preconditioned gradient, one input per factored
        decay.
      with_fac_rms: feed the factored row and column second moments broadcast to the
        tensor, two inputs per factored decay (only with ``adafactor_accumulator``).
      with_fac_rsqrt: feed ``rsqrt`` of those row and column moments, two inputs per
        factored decay (only with ``adafactor_accumulator``).
      with_grad_clip_feat: feed the clipped gradient ``clip(g, -0.1, 0.1)``.
      with_fac_mom_mult: feed the momenta preconditioned by the factored second moments,
        one input per momentum decay (only with ``adafactor_accumulator``).
      with_rms_only_norm_g: feed ``g / sqrt(rms + 1e-6)``, one input per rms decay.
      adafactor_accumulator: use the factored feature groups.
      param_scale_mult: multiply steps by the tensor's parameter RMS.
      precondition_output: divide steps by ``sqrt(rms + 1e-6)``.
      reparam_decay: unused (kept for the release's signature).
      rnn_state_decay: shrink the LSTM state by this fraction every step.
      summarize_each_layer, summarize_all_control: accepted; learnopt writes no summaries.
      constant_loss: feed a constant loss of 1 (probing).
      clip_param_scale_amount: cap the parameter RMS used in steps at this times
        ``sqrt(size)``.
      default_num_steps: learnopt only: the run length ``T`` assumed when ``opt.init``
        gets no ``num_steps``.

    Raises:
      ValueError: ``train_phase`` is not 1 or 2, or a size is < 1.
    """

    mix_scale = 1.0

    def __init__(
        self,
        lstm_hidden_size: int = 64,
        ff_hidden_size: int = 4,
        ff_hidden_layers: int = 2,
        initial_momentum_decays: Sequence[float] = (0.9, 0.99, 0.999),
        initial_rms_decays: Sequence[float] = (0.999,),
        initial_adafactor_decays: Sequence[float] = (0.9, 0.99, 0.999),
        param_inits: int = 1,
        mix_layers: bool = True,
        exp_mult: float = 0.001,
        step_mult: float = 0.001,
        train_phase: int = 2,
        validation_mode: bool = False,
        with_validation_feature_dim: bool = False,
        with_g: bool = True,
        with_m: bool = True,
        with_m_feat: bool = True,
        with_rms: bool = True,
        with_rms_feat: bool = True,
        with_rms_norm_g: bool = True,
        with_rsqrt_rms: bool = True,
        with_p: bool = True,
        with_fac_norm_g: bool = True,
        with_fac_rms: bool = True,
        with_fac_rsqrt: bool = True,
        with_grad_clip_feat: bool = True,
        with_fac_mom_mult: bool = True,
        with_rms_only_norm_g: bool = True,
        adafactor_accumulator: bool = True,
        param_scale_mult: bool = True,
        precondition_output: bool = False,
        reparam_decay: float = 10.0,
        rnn_state_decay: float = 0.0,
        summarize_each_layer: bool = False,
        summarize_all_control: bool = False,
        constant_loss: bool = False,
        clip_param_scale_amount: float | None = None,
        default_num_steps: int = 10_000,
    ):
        if isinstance(train_phase, bool) or train_phase not in TRAIN_PHASES:
            raise ValueError(f"Celo: train_phase must be 1 or 2, got {train_phase!r}")
        for arg, value in (
            ("lstm_hidden_size", lstm_hidden_size),
            ("ff_hidden_size", ff_hidden_size),
            ("param_inits", param_inits),
            ("default_num_steps", default_num_steps),
        ):
            if int(value) < 1:
                raise ValueError(f"Celo: {arg} must be >= 1, got {value}")
        super().__init__(
            lstm_hidden_size=lstm_hidden_size,
            ff_hidden_size=ff_hidden_size,
            ff_hidden_layers=ff_hidden_layers,
            initial_momentum_decays=initial_momentum_decays,
            initial_rms_decays=initial_rms_decays,
            initial_adafactor_decays=initial_adafactor_decays,
            param_inits=param_inits,
            mix_layers=mix_layers,
            exp_mult=exp_mult,
            step_mult=step_mult,
            validation_mode=validation_mode,
            with_validation_feature_dim=with_validation_feature_dim,
            with_g=with_g,
            with_m=with_m,
            with_m_feat=with_m_feat,
            with_rms=with_rms,
            with_rms_feat=with_rms_feat,
            with_rms_norm_g=with_rms_norm_g,
            with_rsqrt_rms=with_rsqrt_rms,
            with_p=with_p,
            with_fac_norm_g=with_fac_norm_g,
            with_fac_rms=with_fac_rms,
            with_fac_rsqrt=with_fac_rsqrt,
            with_grad_clip_feat=with_grad_clip_feat,
            with_fac_mom_mult=with_fac_mom_mult,
            with_rms_only_norm_g=with_rms_only_norm_g,
            adafactor_accumulator=adafactor_accumulator,
            param_scale_mult=param_scale_mult,
            # Celo's release advances the LSTM state and sizes the loss timescales by T.
            use_bugged_next_lstm_state=False,
            use_bugged_loss_features=False,
            precondition_output=precondition_output,
            reparam_decay=reparam_decay,
            rnn_state_decay=rnn_state_decay,
            summarize_each_layer=summarize_each_layer,
            summarize_all_control=summarize_all_control,
            constant_loss=constant_loss,
            clip_param_scale_amount=clip_param_scale_amount,
            default_num_steps=default_num_steps,
            tau_features=False,
        )
        self.train_phase = int(train_phase)

    def get_frozen_param_keys(self, train_phase: int | None = None) -> tuple[str, ...]:
        """The theta keys that stay fixed while meta-training ``train_phase``.

        Phase 1 trains the update rule with the scheduler frozen; phase 2 the scheduler
        with the update rule frozen (the release's ``get_frozen_param_keys``).

        Args:
          train_phase: 1 or 2 (default: this optimizer's ``train_phase``).

        Returns:
          ``("lstm_init_state", "rnn_params")`` for phase 1, ``("ff_mod_stack",)`` for
          phase 2; pass them as ``frozen_keys`` to the learner.

        Raises:
          ValueError: ``train_phase`` is not 1 or 2.
        """
        phase = self.train_phase if train_phase is None else train_phase
        if isinstance(phase, bool) or phase not in TRAIN_PHASES:
            raise ValueError(f"train_phase must be 1 or 2, got {phase!r}")
        return TRAIN_PHASES[phase]

    def freeze_groups(self) -> dict[str, tuple[str, ...]]:
        """The two meta-training phases: ``phase1`` (the update rule trains, the schedule
        is frozen) and ``phase2`` (the reverse), as :data:`TRAIN_PHASES` names them.

        Returns:
          ``{"phase1": ("lstm_init_state", "rnn_params"), "phase2": ("ff_mod_stack",)}``.
        """
        return {f"phase{p}": keys for p, keys in TRAIN_PHASES.items()}

    def lstm_features_for_tensor(self, p, m, rms, fraction_trained, loss_features) -> jax.Array:
        """The scheduler's 18 inputs: 9 features of ``tau``, then the 9 loss features.

        The same for every tensor (they read neither ``p`` nor its accumulators).

        Args:
          p: the parameter (unused).
          m: its momenta, one array per decay (only their dtype is used).
          rms: its second moments (unused).
          fraction_trained: ``tau = iteration / num_steps``.
          loss_features: the 9 features of
            :func:`~learnopt.learned_optimizers.hyper_v2.loss_buffer_features`.

        Returns:
          ``[tanh(10 (tau - s)) for s in timescales] + loss_features`` (plus the
          validation input if enabled), in ``m``'s dtype.
        """
        del p, rms
        dtype = m[0].dtype
        timescales = jnp.asarray(hyper_v2._FRACTION_TIMESCALES, jnp.float32)
        fraction = jnp.tanh((fraction_trained - timescales) * 10)
        values = [fraction.astype(dtype), jnp.reshape(loss_features, (-1,)).astype(dtype)]
        if self.with_validation_feature_dim:
            values.append(jnp.full((1,), float(self.validation_mode), dtype))
        return jnp.concatenate(values)

    @property
    def rnn_input_features(self) -> int:
        """The number of scheduler inputs per tensor (18; 19 with the validation input)."""
        n = len(hyper_v2._FRACTION_TIMESCALES) + hyper_v2._NUM_LOSS_TIMESCALES - 1
        return n + int(self.with_validation_feature_dim)

    def rnn_forward(self, params, x, state):
        """The scheduler on ``x [tensors, 18]``: softmax controls and the step multiplier.

        Args:
          params: ``theta["rnn_params"]``.
          x: the scheduler inputs of every tensor.
          state: the LSTM state, ``[tensors, lstm_hidden_size]`` each.

        Returns:
          ``(softmax(controls) [tensors, param_inits], lr_mult [tensors], next state)``,
          where ``lr_mult = 0.1 exp(step_size(h))`` in phase 2 and 1 in phase 1 (the
          LSTM state still advances).
        """
        controls, step_size, state = super().rnn_forward(params, x, state)
        controls = jax.nn.softmax(controls, axis=-1)
        if self.train_phase > 1:
            lr_mult = 0.1 * jnp.exp(step_size)
        else:
            lr_mult = jnp.ones_like(step_size)
        return controls, lr_mult, state


lopt_base.register_learned_optimizer("Celo", Celo)
