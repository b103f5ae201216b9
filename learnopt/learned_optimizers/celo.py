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

import dataclasses
from typing import Any, ClassVar

import jax
import jax.numpy as jnp

from learnopt.learned_optimizers import base as lopt_base
from learnopt.learned_optimizers import hyper_v2
from learnopt.learned_optimizers.blocks import loss_timescales

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
      config: the settings, a :class:`~learnopt.learned_optimizers.hyper_v2.HyperV2Config`
        (default: :attr:`default_config`, HyperV2's with Celo's three changes: LSTM 64,
        one MLP, the loss timescales sized by ``T``).
      train_phase: 1, the update rule alone (``lr_mult`` not applied; meta-train
        ``ff_mod_stack``), or 2, the rule scaled by the scheduler's ``lr_mult`` (the
        optimizer that is meta-tested; meta-train the scheduler).
      **settings: fields of ``HyperV2Config`` to change, by name (the release's keyword
        arguments: ``Celo(lstm_hidden_size=128, param_inits=64)``).

    Raises:
      ValueError: ``train_phase`` is not 1 or 2, or a size is < 1.
      TypeError: a setting names no field of ``HyperV2Config``.
    """

    mix_scale = 1.0

    #: HyperV2's settings with the paper's Celo sizes; the release sizes the loss
    #: timescales by ``T`` (and advances the LSTM state, as HyperV2 does by default).
    default_config: ClassVar[hyper_v2.HyperV2Config] = dataclasses.replace(
        hyper_v2.HyperV2Config(),
        lstm_hidden_size=64,
        param_inits=1,
        use_bugged_loss_features=False,
    )

    def __init__(
        self,
        config: hyper_v2.HyperV2Config | None = None,
        train_phase: int = 2,
        **settings: Any,
    ):
        if isinstance(train_phase, bool) or train_phase not in TRAIN_PHASES:
            raise ValueError(f"Celo: train_phase must be 1 or 2, got {train_phase!r}")
        super().__init__(config, **settings)
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
            :func:`~learnopt.learned_optimizers.blocks.loss_timescales.loss_buffer_features`.

        Returns:
          ``[tanh(10 (tau - s)) for s in timescales] + loss_features`` (plus the
          validation input if enabled), in ``m``'s dtype.
        """
        del p, rms
        dtype = m[0].dtype
        timescales = jnp.asarray(loss_timescales._FRACTION_TIMESCALES, jnp.float32)
        fraction = jnp.tanh((fraction_trained - timescales) * 10)
        values = [fraction.astype(dtype), jnp.reshape(loss_features, (-1,)).astype(dtype)]
        if self.with_validation_feature_dim:
            values.append(jnp.full((1,), float(self.validation_mode), dtype))
        return jnp.concatenate(values)

    @property
    def rnn_input_features(self) -> int:
        """The number of scheduler inputs per tensor (18; 19 with the validation input)."""
        n = len(loss_timescales._FRACTION_TIMESCALES) + loss_timescales._NUM_LOSS_TIMESCALES - 1
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
