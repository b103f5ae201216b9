"""HyperV2's settings, one frozen dataclass: sizes, decays and feature switches.

:class:`~learnopt.learned_optimizers.hyper_v2.HyperV2` (VeLO) takes them as
``HyperV2(config, **settings)``, the library's keyword arguments; a variant changes a
few with :func:`dataclasses.replace` (:class:`~learnopt.learned_optimizers.celo.Celo`'s
``default_config``) instead of restating the signature.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

__all__ = ["HyperV2Config"]


@dataclasses.dataclass(frozen=True)
class HyperV2Config:
    """HyperV2's settings: sizes, decays, feature switches (one field per constructor
    argument of learned_optimization's ``HyperV2``).

    Variants change a few with :func:`dataclasses.replace` (Celo's ``default_config``);
    ``HyperV2(config, **settings)`` replaces more.

    Attributes:
      lstm_hidden_size: width of the per-tensor LSTM.
      ff_hidden_size: hidden width of the per-parameter MLP.
      ff_hidden_layers: hidden layers of the per-parameter MLP.
      initial_momentum_decays, initial_rms_decays, initial_adafactor_decays: decays of
        the accumulators.
      param_inits: number of MLPs in the bank the LSTM mixes.
      mix_layers: share information across tensors before the LSTM.
      exp_mult: scale of the magnitude output inside the exponential.
      step_mult: scale of the step.
      validation_mode: value of the extra LSTM input with ``with_validation_feature_dim``.
      with_validation_feature_dim: add that input.
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
      use_bugged_next_lstm_state: never advance the LSTM state (old checkpoints).
      use_bugged_loss_features: the loss features of the released checkpoints.
      precondition_output: divide steps by ``sqrt(rms + 1e-6)``.
      reparam_decay: unused (kept for the library's signature).
      rnn_state_decay: shrink the LSTM state by this fraction every step.
      summarize_each_layer, summarize_all_control: accepted; learnopt writes no summaries.
      constant_loss: feed a constant loss of 1 (probing).
      clip_param_scale_amount: cap the parameter RMS used in steps at this times
        ``sqrt(size)``.
      default_num_steps: learnopt only: the run length assumed when ``opt.init`` gets no
        ``num_steps`` (it sets the fraction-of-training features).
      tau_features: learnopt option: the generated MLPs also read the fraction of
        training done (module docstring).

    Raises:
      ValueError: a size or ``default_num_steps`` is < 1, or a decay list is empty or
        has a value outside ``[0, 1)``.
    """

    lstm_hidden_size: int = 128
    ff_hidden_size: int = 4
    ff_hidden_layers: int = 2
    initial_momentum_decays: Sequence[float] = (0.9, 0.99, 0.999)
    initial_rms_decays: Sequence[float] = (0.999,)
    initial_adafactor_decays: Sequence[float] = (0.9, 0.99, 0.999)
    param_inits: int = 64
    mix_layers: bool = True
    exp_mult: float = 0.001
    step_mult: float = 0.001
    validation_mode: bool = False
    with_validation_feature_dim: bool = False
    with_g: bool = True
    with_m: bool = True
    with_m_feat: bool = True
    with_rms: bool = True
    with_rms_feat: bool = True
    with_rms_norm_g: bool = True
    with_rsqrt_rms: bool = True
    with_p: bool = True
    with_fac_norm_g: bool = True
    with_fac_rms: bool = True
    with_fac_rsqrt: bool = True
    with_grad_clip_feat: bool = True
    with_fac_mom_mult: bool = True
    with_rms_only_norm_g: bool = True
    adafactor_accumulator: bool = True
    param_scale_mult: bool = True
    use_bugged_next_lstm_state: bool = False
    use_bugged_loss_features: bool = True
    precondition_output: bool = False
    reparam_decay: float = 10.0
    rnn_state_decay: float = 0.0
    summarize_each_layer: bool = False
    summarize_all_control: bool = False
    constant_loss: bool = False
    clip_param_scale_amount: float | None = None
    default_num_steps: int = 10_000
    tau_features: bool = False

    def __post_init__(self):
        for name in ("lstm_hidden_size", "ff_hidden_size", "param_inits", "default_num_steps"):
            if int(getattr(self, name)) < 1:
                raise ValueError(f"HyperV2: {name} must be >= 1, got {getattr(self, name)}")
        for name in ("initial_momentum_decays", "initial_rms_decays", "initial_adafactor_decays"):
            decays = tuple(getattr(self, name))
            if not decays or not all(0.0 <= float(b) < 1.0 for b in decays):
                # A decay of 1 freezes its accumulator at zero: features that never move.
                raise ValueError(f"HyperV2: {name} must be values in [0, 1), got {decays}")
        normal = dict(
            lstm_hidden_size=int(self.lstm_hidden_size),
            ff_hidden_size=int(self.ff_hidden_size),
            ff_hidden_layers=int(self.ff_hidden_layers),
            initial_momentum_decays=tuple(self.initial_momentum_decays),
            initial_rms_decays=tuple(self.initial_rms_decays),
            initial_adafactor_decays=tuple(self.initial_adafactor_decays),
            param_inits=int(self.param_inits),
            default_num_steps=int(self.default_num_steps),
            tau_features=bool(self.tau_features),
        )
        for name, value in normal.items():
            object.__setattr__(self, name, value)
