r"""Celo-Adam: Celo's learned LSTM scheduler driving Adam's update.

Moudgil, Knyazev, Lajoie & Belilovsky, "Celo: Training versatile learned optimizers on
a compute diet" (2025, arXiv:2501.12670). The authors' release (github.com/amoudgl/celo
at 66d976116f39da286951f0c5e0a18eee8d1fd66b, ``celo/optimizers/celo_adam.py``,
configured by ``celo/factory.py`` as ``celo_adam``) ships its weights as an AlgoPerf
submission; its AlgoPerf notes report it as the variant that stayed stable on the large
workloads. Written for learnopt from those facts (equations, defaults, theta names).

Celo's scheduler (:class:`~learnopt.learned_optimizers.celo.Celo`) without Celo's
learned update rule: each step,

1. the loss buffer takes the training loss and gives VeLO's 9 loss features over
   timescales up to the run length ``T`` (the ``num_steps`` given to ``opt.init``);
2. every tensor's LSTM reads the same **18 inputs**: ``tanh(10 (tau - s))`` for ``s`` in
   (0.03, 0.1, 0.2, 0.4, 0.6, 0.8, 0.9, 1.0, 1.1), ``tau = t / T`` with ``t`` the step
   count before the update, then the 9 loss features; the mixing layers (``linear_1``
   after a ReLU, max-pooled over tensors, added to ``linear_2``) share information
   across tensors before the LSTM, whose head gives ``lr_mult = 0.1 exp(step_size(h))``
   per tensor;
3. gradients are clipped to [-1000, 1000] and Adam's moments advance
   (``m <- b1 m + (1 - b1) g``, ``v <- b2 v + (1 - b2) g^2``), then

       p <- p - (lr_mult * step_mult) * m_hat / (eps + sqrt(v_hat + 1e-10))

   with ``m_hat = m / (1 - b1^(t+1))`` and ``v_hat = v / (1 - b2^(t+1))``
   (``bias_correction``), ``step_mult = 0.001`` and ``eps = 1e-8``: Adam at 1e-3 times
   the learned multiplier.

In symbols, with ``h`` the LSTM output, ``g_bar = clip(g, -1000, 1000)`` and
``lambda_s = step_mult``:

.. math::

   m \leftarrow \beta_1 m + (1 - \beta_1)\, \bar g, \quad
   v \leftarrow \beta_2 v + (1 - \beta_2)\, \bar g^2, \quad
   p \leftarrow p - \lambda_p\, \lambda_s\, \frac{m / (1 - \beta_1^{t+1})}
   {\epsilon + \sqrt{v / (1 - \beta_2^{t+1}) + 10^{-10}}}

   \lambda_p = 0.1 \exp(w_s^\top h + b_s)

``theta``: ``{"lstm_init_state": LSTMState([1, 64], [1, 64]), "rnn_params": {"linear",
"linear_1", "linear_2", "rnn/linear", "step_size"}}`` (12 arrays, 36,865 values with the
defaults; "linear" is unused, as in the release).

**learnopt's regime head** (``regime_head=True``, not in the release): the scheduler
reads every tensor the same inputs, and takes the same steps whether the training loss
is that of a net memorizing its data or of a language model far from fitting
(``benchmarks/schedule_probe.py``), though the two may want different schedules. With
the head, the log multiplier gets a second readout of the LSTM output,
gated by how far the training loss has fallen (``r`` in ``[-1, 0]``,
:func:`~learnopt.learned_optimizers.blocks.loss_timescales.loss_progress`):

.. math::

   \lambda_p = 0.1 \exp\big(w_s^\top h + b_s + r\,(w_r^\top h + b_r)\big)

``theta["rnn_params"]["regime_step_size"] = {"w": [64, 1], "b": [1]}`` starts at zero, so
at its initial value the optimizer is Celo-Adam step for step
(:func:`~.with_regime_head` extends a Celo-Adam theta, e.g. the released one, that way).
The head only acts where the loss fell by orders of magnitude; the LSTM's inputs are
unchanged.

**learnopt's schedule head** (``schedule_head=True``, not in the release): the released
scheduler's step peaks near ``tau = 0.35`` and decays little and late
(``benchmarks/schedule_probe.py``); on heldout's over-fitting MLPs a hand-set late decay
lowers its final validation loss by 14-18% at 2.4x the training loss
(``benchmarks/schedule_shapes.py``). The head adds a learned function of the fraction
of training alone, a linear readout of the scheduler's 9 ``tanh(10 (tau - s))`` inputs,
to the log multiplier:

.. math::

   \lambda_p = 0.1 \exp\big(w_s^\top h + b_s + w_\tau^\top \phi(\tau) + b_\tau\big)

``theta["rnn_params"]["schedule_step_size"] = {"w": [9, 1], "b": [1]}`` (10 values: a
smooth reshaping of the schedule plus one overall scale) starts at zero, so the
optimizer is Celo-Adam step for step until it is meta-trained (:func:`~.with_schedule_head`).

**learnopt's weight decay** (``weight_decay=lambda``, not in the release): AdamW's
decoupled decay (Loshchilov & Hutter, 2019, arXiv:1711.05101) scaled by the scheduled
step, ``p <- p - lambda_p lambda_s (adam + lambda p)``; with ``weight_decay_by_progress``
the decay is ``lambda * (-r)`` (``r`` the loss progress above: it acts where a net
memorizes its data), and with ``weight_decay_head`` it is multiplied by ``exp(b)``, one
meta-trainable value ``theta["rnn_params"]["weight_decay_scale"]["b"]`` that starts at
zero (:func:`~.with_weight_decay_head`). The default, 0, is the release.
``weight_decay_roles`` limits the decay to tensors of the given roles
(:func:`~learnopt.learned_optimizers.width_aware.tensor_roles`: ``"input"``,
``"hidden"``, ``"output"``, ``"vector"``, read from the shapes), e.g. ``("hidden",
"output")`` (recipe ``celoadam-b2-wd-hidden-output``; on meta-valid's MLPs decay on the
input matrices alone cost more training loss for the same validation gain).

**learnopt's second-moment decay head** (``rms_decay_head=True``, not in the release):
Adam's ``1 - b2`` times ``exp(b)``, ``b = theta["rnn_params"]["rms_decay_scale"]["b"]``
meta-trainable from zero (:func:`~.with_rms_decay_head`), ``1 - b2`` kept in ``[1e-6, 0.5]``.

**learnopt's per-tensor steps** (not in the release): the scheduler gives every tensor
of every task the same multiplier, while tasks want different steps
(``benchmarks/schedule_shapes.py``: 4x the released steps beat tuned warmup-cosine Adam's
training loss on a conv net and hurt MLPs, an auto-encoder and an RNN LM).
``kernel_step_mult=c`` multiplies the steps of tensors of rank >= 4 (convolution
kernels) by ``c``. ``step_adaptation=beta`` multiplies each tensor's step by ``exp(a)``,
``a`` moved every step by ``beta`` times the cosine between the gradient and the
tensor's last Adam direction ``m / (sqrt(v) + eps)`` (the multiplicative, scale-free
form of hypergradient descent on the step size; Baydin et al., 2018, arXiv:1703.04782)
within ``[-bound, bound]`` (``step_adaptation_bound``): steps grow while gradients keep
pointing where the last steps went. ``a`` starts at zero; the defaults are the release.

learnopt differences: the release also advances Adafactor-style accumulators that its
update never reads; learnopt keeps only Adam's moments (the updates are the same).
With several momentum or second-moment decays the release's step reads the last decay's
moments and bias-corrects with the first decay; learnopt keeps only the last decay's
moments and does the same. ``num_steps`` defaults to ``default_num_steps`` when ``init``
gets none; no PRNG key is needed; no summaries; arithmetic in float32 (float64 for
float64 params), bfloat16 params cast back after each step.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import flax.struct
import jax
import jax.numpy as jnp

from learnopt import _validate
from learnopt.canonical import compute_dtype, leaf_compute_dtype
from learnopt.learned_optimizers import base as lopt_base
from learnopt.learned_optimizers import common, width_aware
from learnopt.learned_optimizers.blocks import loss_timescales
from learnopt.learned_optimizers.celo_adam_heads import (
    check_options,
    with_regime_head,
    with_rms_decay_head,
    with_schedule_head,
    with_weight_decay_head,
)

PyTree = Any

# The heads' constructors live in celo_adam_heads; importing them from here still works.
__all__ = ["CeloAdam", "CeloAdamState"]


@flax.struct.dataclass
class CeloAdamState:
    """State of the Celo-Adam optimizer.

    Attributes:
      params, model_state, iteration: as in every learnopt state.
      num_steps: the run length ``T`` given to ``init``, int32.
      m: Adam's first moment (the last momentum decay's), a tree like the params.
      v: Adam's second moment (the last second-moment decay's), a tree like the params.
      lstm_hidden_state: the per-tensor LSTM state, ``[num_tensors, hidden]`` arrays.
      loss_buffer: the running loss statistics.
      log_step_adaptation: the per-tensor log step multipliers of ``step_adaptation``,
        ``[num_tensors]`` float32 (zero, and unused, without it).
      smoothed_loss: the running mean of the training loss that ``loss_smoothing``
        feeds the loss buffer (before its bias correction), float32 (zero, and unused,
        without it).
    """

    params: PyTree
    model_state: PyTree
    iteration: jax.Array
    num_steps: jax.Array
    m: PyTree
    v: PyTree
    lstm_hidden_state: common.LSTMState
    loss_buffer: loss_timescales.LossBufferState
    log_step_adaptation: jax.Array
    smoothed_loss: jax.Array


class _CeloAdamOptimizer(common.ThetaOptimizer):
    """The optimizer :meth:`CeloAdam.opt_fn` returns."""

    def init(self, params, model_state=None, num_steps=None, key=None) -> CeloAdamState:
        """Zero moments, the LSTM's initial state per tensor, an empty loss buffer.

        Args and returns as in :meth:`~learnopt.optimizers.interface.Optimizer.init`; here:

        - ``num_steps``: the run length ``T`` (``lopt.default_num_steps`` if None); it sets
          the fraction-of-training inputs and the loss timescales.
        """
        num_steps = _validate.run_length("num_steps", num_steps)
        if num_steps is None:
            num_steps = self.lopt.default_num_steps
        n = len(jax.tree_util.tree_leaves(params))
        init_state = common.as_lstm_state(self.theta["lstm_init_state"])

        def zeros(p):
            return jnp.zeros(jnp.shape(p), leaf_compute_dtype(p.dtype))

        return CeloAdamState(
            params=params,
            model_state=model_state,
            iteration=jnp.zeros((), jnp.int32),
            num_steps=jnp.asarray(num_steps, jnp.int32),
            m=jax.tree_util.tree_map(zeros, params),
            v=jax.tree_util.tree_map(zeros, params),
            lstm_hidden_state=jax.tree_util.tree_map(lambda x: jnp.tile(x, (n, 1)), init_state),
            loss_buffer=loss_timescales.loss_buffer_init(num_steps),
            log_step_adaptation=jnp.zeros((n,), jnp.float32),
            smoothed_loss=jnp.zeros((), jnp.float32),
        )

    def update(self, opt_state, grads, loss=None, model_state=None, key=None, **kwargs):
        """One step (see the module docstring): loss buffer, scheduler, then Adam.

        Args and returns as in :meth:`~learnopt.optimizers.interface.Optimizer.update`; here:

        - ``loss``: the training loss (required unless ``constant_loss``).

        Raises:
          ValueError: no ``loss`` was given.
        """
        lopt, s = self.lopt, opt_state
        if lopt.constant_loss:
            loss = jnp.ones((), jnp.float32)
        if loss is None:
            raise ValueError("CeloAdam.update needs the training loss: update(..., loss=loss)")
        dtype = compute_dtype(s.params)
        loss_buffer, smoothed_loss = self._buffered_loss(s, loss)
        fraction = s.iteration.astype(jnp.float32) / s.num_steps.astype(jnp.float32)
        inputs = lopt.lstm_features(
            fraction, loss_timescales.loss_buffer_features(loss_buffer), dtype
        )
        treedef = jax.tree_util.tree_structure(s.params)
        rnn_inputs = jnp.tile(inputs[None], (treedef.num_leaves, 1))
        progress = loss_timescales.loss_progress(loss_buffer)
        lr_mult, lstm_state = lopt.rnn_forward(
            common.cast_tree(self.theta["rnn_params"], dtype),
            rnn_inputs,
            s.lstm_hidden_state,
            regime=progress if lopt.regime_head else None,
        )
        lr_mult, adaptation = self._tensor_steps(lr_mult, s, grads)
        if lopt.rnn_state_decay > 0.0:
            keep = 1.0 - lopt.rnn_state_decay
            lstm_state = jax.tree_util.tree_map(lambda x: x * keep, lstm_state)
        b1, b2, correct_m, correct_v = self._decays((s.iteration + 1).astype(jnp.float32))

        decay = self._weight_decay(progress)
        decayed = self._decayed_tensors(s.params)

        def one(p, g, m, v, i):
            cd = m.dtype
            g = jnp.clip(g.astype(cd), -1000.0, 1000.0)
            m = b1.astype(cd) * m + (1 - b1).astype(cd) * g
            v = b2.astype(cd) * v + (1 - b2).astype(cd) * jnp.square(g)
            m_hat, v_hat = m, v
            if lopt.bias_correction:
                m_hat, v_hat = m / correct_m.astype(cd), v / correct_v.astype(cd)
            lr = (lr_mult[i] * lopt.step_mult).astype(cd)
            step = m_hat * (lr / (lopt.initial_epsilon + jnp.sqrt(v_hat + 1e-10)))
            pc = p.astype(cd)
            if lopt.param_scale_mult:
                step = step * jnp.sqrt(jnp.mean(jnp.square(pc)) + 1e-9)
            if decay is not None and decayed[i]:
                step = step + lr * decay.astype(cd) * pc
            return (pc - step).astype(p.dtype), m, v

        index = treedef.unflatten(list(range(treedef.num_leaves)))
        out = jax.tree_util.tree_map(one, s.params, grads, s.m, s.v, index)
        params, m, v = (
            jax.tree_util.tree_map(lambda o, k=k: o[k], out, is_leaf=lambda x: isinstance(x, tuple))
            for k in range(3)
        )
        return common.next_state(
            s,
            params,
            model_state,
            m=m,
            v=v,
            lstm_hidden_state=lstm_state,
            loss_buffer=loss_buffer,
            log_step_adaptation=adaptation,
            smoothed_loss=smoothed_loss,
        )

    def _decays(self, t: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array, jax.Array]:
        """Adam's decays ``b1``, ``b2`` and bias corrections ``1 - b^t`` at step ``t``.

        The decays are float32 arrays, as in the release's accumulators: ``1 - b`` is then
        computed in float32 (``1 - float32(0.999)`` differs from 0.001 by 1.3e-5 relative).
        With ``rms_decay_head`` both second-moment decays (the moments' and the
        correction's) become ``1 - clip((1 - b) exp(head), 1e-6, 0.5)``, exactly ``b`` at
        a zero head.
        """
        lopt = self.lopt
        b1 = jnp.asarray(lopt.initial_momentum_decays[-1], jnp.float32)
        b2 = jnp.asarray(lopt.initial_rms_decays[-1], jnp.float32)
        b2_first = jnp.asarray(lopt.initial_rms_decays[0], jnp.float32)
        if lopt.rms_decay_head:
            head = jnp.asarray(self.theta["rnn_params"]["rms_decay_scale"]["b"], jnp.float32)
            scale = jnp.exp(head[0])
            b2, b2_first = (1 - jnp.clip((1 - b) * scale, 1e-6, 0.5) for b in (b2, b2_first))
        correct_m = 1 - lopt.initial_momentum_decays[0] ** t
        return b1, b2, correct_m, 1 - b2_first**t

    def _buffered_loss(
        self, opt_state: CeloAdamState, loss: Any
    ) -> tuple[loss_timescales.LossBufferState, jax.Array]:
        """The loss buffer with this step's loss added; the running mean of ``loss_smoothing``.

        With ``loss_smoothing = k`` the buffer gets the bias-corrected running mean
        ``e / (1 - k^(t+1))``, ``e <- k e + (1 - k) loss``, instead of the minibatch loss.
        """
        loss = jnp.asarray(loss).astype(jnp.float32)
        smoothed = opt_state.smoothed_loss
        k = self.lopt.loss_smoothing
        if k > 0.0:
            smoothed = k * smoothed + (1 - k) * loss
            t = (opt_state.iteration + 1).astype(jnp.float32)
            loss = smoothed / (1 - jnp.float32(k) ** t)
        return loss_timescales.loss_buffer_update(opt_state.loss_buffer, loss), smoothed

    def _tensor_steps(
        self, lr_mult: jax.Array, opt_state: CeloAdamState, grads: PyTree
    ) -> tuple[jax.Array, jax.Array]:
        """``lr_mult`` times the kernel and adapted multipliers; the latter's logs.

        Tensors of rank >= 4 take ``kernel_step_mult`` times the scheduled step. With
        ``step_adaptation``:

        ``a <- clip(a + beta cos(g, u), -bound, bound)`` per tensor, ``u = m / (sqrt(v) +
        eps)`` the direction of the last step (Adam's bias corrections scale it, not its
        direction) and ``g`` this step's gradient: the multiplicative form of
        hypergradient descent on the step size (Baydin et al., 2018, arXiv:1703.04782),
        on the cosine so that it is scale-free; the logs stay zero without it.
        """
        lopt, a = self.lopt, opt_state.log_step_adaptation
        if lopt.kernel_step_mult != 1.0:
            ranks = [jnp.ndim(p) for p in jax.tree_util.tree_leaves(opt_state.params)]
            mults = [lopt.kernel_step_mult if r >= 4 else 1.0 for r in ranks]
            lr_mult = lr_mult * jnp.asarray(mults, lr_mult.dtype)
        if lopt.step_adaptation <= 0.0:
            return lr_mult, a

        def cosine(g, m, v):
            g = g.astype(jnp.float32)
            u = m.astype(jnp.float32) / (jnp.sqrt(v.astype(jnp.float32)) + lopt.initial_epsilon)
            norms = jnp.sqrt(jnp.sum(jnp.square(g)) * jnp.sum(jnp.square(u)))
            return jnp.sum(g * u) / jnp.maximum(norms, 1e-30)

        cos = jnp.stack(
            jax.tree_util.tree_leaves(
                jax.tree_util.tree_map(cosine, grads, opt_state.m, opt_state.v)
            )
        )
        bound = lopt.step_adaptation_bound
        a = jnp.clip(a + lopt.step_adaptation * cos, -bound, bound)
        return lr_mult * jnp.exp(a).astype(lr_mult.dtype), a

    def _decayed_tensors(self, params: PyTree) -> list[bool]:
        """Per tensor (in leaf order): whether weight decay acts on it (its role's in
        ``weight_decay_roles``; every tensor without them). Read from shapes at trace time."""
        roles = self.lopt.weight_decay_roles
        if roles is None:
            return [True] * len(jax.tree_util.tree_leaves(params))
        kinds = jax.tree_util.tree_leaves(width_aware.tensor_roles(params))
        return [kind in roles for kind in kinds]

    def _weight_decay(self, progress: jax.Array) -> jax.Array | None:
        """The decay ``lambda`` of this step (float32), or None without weight decay."""
        lopt = self.lopt
        if lopt.weight_decay <= 0.0:
            return None
        decay = jnp.asarray(lopt.weight_decay, jnp.float32)
        if lopt.weight_decay_head:
            head = self.theta["rnn_params"]["weight_decay_scale"]["b"]
            decay = decay * jnp.exp(jnp.asarray(head, jnp.float32)[0])
        if lopt.weight_decay_by_progress:
            decay = decay * -progress
        return decay


class CeloAdam(lopt_base.LearnedOptimizer):
    """Celo-Adam (Moudgil et al., 2025, arXiv:2501.12670): Adam under Celo's learned schedule.

    See the module docstring for the maths. The defaults are the release's ``celo_adam``
    configuration, which its published weights (``learnopt.pretrained.load("CeloAdam")``)
    were meta-trained with.

    Args:
      lstm_hidden_size: width of the per-tensor LSTM scheduler.
      initial_momentum_decays: Adam's ``b1`` (the last one is used; the first one
        bias-corrects, as in the release).
      initial_rms_decays: Adam's ``b2`` (likewise).
      initial_epsilon: Adam's ``eps``.
      mix_layers: share information across tensors before the LSTM.
      step_mult: the base learning rate the scheduler multiplies.
      bias_correction: divide the moments by ``1 - b^(t+1)`` (the release's ``mom_decay``).
      param_scale_mult: multiply steps by the tensor's parameter RMS.
      rnn_state_decay: shrink the LSTM state by this fraction every step.
      validation_mode: value of the extra LSTM input with ``with_validation_feature_dim``.
      with_validation_feature_dim: add that input (a 19th).
      constant_loss: feed a constant loss of 1 (probing).
      default_num_steps: learnopt only: the run length ``T`` assumed when ``opt.init``
        gets no ``num_steps``.
      schedule_head: learnopt only: add the schedule head (module docstring), which
        starts at zero (the optimizer is then Celo-Adam step for step).
      regime_head: learnopt only: add the regime head (module docstring), which starts
        at zero (Celo-Adam's steps).
      weight_decay: learnopt only: decoupled weight decay ``lambda`` (AdamW's, scaled by
        the scheduled step: ``p <- p - lr (adam + lambda p)``); 0 (the release) adds
        nothing.
      weight_decay_by_progress: learnopt only: multiply ``lambda`` by ``-r``, how far
        the training loss has fallen (in ``[0, 1]``), so that decay acts on runs that
        memorize their data and hardly on those far from fitting.
      weight_decay_head: learnopt only: multiply ``lambda`` by ``exp(b)``, ``b`` a
        meta-trainable scalar ``theta["rnn_params"]["weight_decay_scale"]["b"]`` that
        starts at zero.
      weight_decay_roles: learnopt only: decay only the tensors of these roles
        (``"input"``, ``"hidden"``, ``"output"``, ``"vector"``, as
        :func:`~learnopt.learned_optimizers.width_aware.tensor_roles` reads them from
        the shapes); None (the default) decays every tensor.
      step_adaptation: learnopt only: the rate ``beta`` of the per-tensor hypergradient
        step multiplier (module docstring); 0 (the release) adapts nothing.
      step_adaptation_bound: learnopt only: the multiplier stays within
        ``[exp(-bound), exp(bound)]``.
      kernel_step_mult: learnopt only: the steps of tensors of rank >= 4 (2-D
        convolution kernels, whose weights are shared across positions) are this many
        times the scheduled step; 1 (the release) changes nothing.
      rms_decay_head: learnopt only: multiply Adam's ``1 - b2`` by ``exp(b)``, ``b`` a
        meta-trainable scalar ``theta["rnn_params"]["rms_decay_scale"]["b"]`` that
        starts at zero (the release's ``b2``).
      loss_smoothing: learnopt only: the scheduler's loss features read a running mean
        of the training loss with this decay ``k`` (bias-corrected, as Adam's moments)
        instead of each minibatch's loss; 0 (the release) smooths nothing. Minibatch
        losses that vary widely from batch to batch (language models on mixed text)
        otherwise read as a loss rising above its minimum, and the scheduler cuts the
        step.

    Raises:
      ValueError: a size is < 1, a decay list is empty, ``weight_decay``,
        ``step_adaptation`` or ``step_adaptation_bound`` is negative or infinite,
        ``kernel_step_mult`` is not positive, ``loss_smoothing`` or a momentum or
        second-moment decay is not in ``[0, 1)``, a weight-decay option is given
        without ``weight_decay``, or ``weight_decay_roles`` is empty or names an unknown
        role.
    """

    def __init__(
        self,
        lstm_hidden_size: int = 64,
        initial_momentum_decays: Sequence[float] = (0.9,),
        initial_rms_decays: Sequence[float] = (0.999,),
        initial_epsilon: float = 1e-8,
        mix_layers: bool = True,
        step_mult: float = 0.001,
        bias_correction: bool = True,
        param_scale_mult: bool = False,
        rnn_state_decay: float = 0.0,
        validation_mode: bool = False,
        with_validation_feature_dim: bool = False,
        constant_loss: bool = False,
        default_num_steps: int = 10_000,
        regime_head: bool = False,
        schedule_head: bool = False,
        weight_decay: float = 0.0,
        weight_decay_by_progress: bool = False,
        weight_decay_head: bool = False,
        weight_decay_roles: Sequence[str] | None = None,
        step_adaptation: float = 0.0,
        step_adaptation_bound: float = 2.0,
        kernel_step_mult: float = 1.0,
        loss_smoothing: float = 0.0,
        rms_decay_head: bool = False,
    ):
        weight_decay_roles = check_options(locals())
        lopt_base.keep_arguments(self, locals())

    @property
    def rnn_input_features(self) -> int:
        """The scheduler's inputs per tensor (18; 19 with the validation input)."""
        n = len(loss_timescales._FRACTION_TIMESCALES) + loss_timescales._NUM_LOSS_TIMESCALES - 1
        return n + int(self.with_validation_feature_dim)

    def lstm_features(self, fraction_trained: Any, loss_features: Any, dtype: Any) -> jax.Array:
        """The scheduler's inputs, the same for every tensor.

        Args:
          fraction_trained: ``tau = iteration / num_steps``.
          loss_features: the 9 loss features.
          dtype: the compute dtype.

        Returns:
          ``[tanh(10 (tau - s)) for s in timescales] + loss_features`` (plus the
          validation input if enabled).
        """
        timescales = jnp.asarray(loss_timescales._FRACTION_TIMESCALES, jnp.float32)
        values = [
            jnp.tanh((fraction_trained - timescales) * 10).astype(dtype),
            jnp.reshape(loss_features, (-1,)).astype(dtype),
        ]
        if self.with_validation_feature_dim:
            values.append(jnp.full((1,), float(self.validation_mode), dtype))
        return jnp.concatenate(values)

    def rnn_forward(self, params: dict, x: jax.Array, state: common.LSTMState, regime: Any = None):
        """Mixing layers, the LSTM and the step-size head on ``x [tensors, 18]``.

        Args:
          params: ``theta["rnn_params"]``.
          x: the scheduler inputs of every tensor.
          state: the LSTM state, ``[tensors, lstm_hidden_size]`` each.
          regime: the loss progress ``r`` that gates the regime head (``regime_head``
            only; None otherwise).

        Returns:
          ``(lr_mult [tensors], next state)`` with ``lr_mult = 0.1 exp(step_size(h))``
          (``+ r regime_step_size(h)`` inside the exponential with the regime head,
          ``+ schedule_step_size(x[:, :9])``, the fraction-of-training inputs, with the
          schedule head).
        """
        tau_inputs = x[:, : len(loss_timescales._FRACTION_TIMESCALES)]
        if self.mix_layers:
            mix = jax.nn.relu(common.linear_apply(params["linear_1"], x))
            x = common.linear_apply(params["linear_2"], x) + jnp.max(mix, axis=0, keepdims=True)
        out, state = common.lstm_apply(params["rnn/linear"], x, state)
        log_mult = common.linear_apply(params["step_size"], out)[:, 0]
        if self.regime_head:
            gate = jnp.asarray(regime).astype(out.dtype)
            log_mult = log_mult + gate * common.linear_apply(params["regime_step_size"], out)[:, 0]
        if self.schedule_head:
            schedule = common.linear_apply(params["schedule_step_size"], tau_inputs)
            log_mult = log_mult + schedule[:, 0]
        return 0.1 * jnp.exp(log_mult), state

    def init(self, key: jax.Array) -> dict:
        """A random theta in the release's Haiku layout (see the module docstring).

        Args and returns as in :meth:`~learnopt.learned_optimizers.base.LearnedOptimizer.init`.
        """
        f, h = self.rnn_input_features, self.lstm_hidden_size
        rnn = {}
        if self.mix_layers:
            for name in ("linear", "linear_1", "linear_2"):
                rnn[name] = common.linear_spec(f, h)
        rnn["rnn/linear"] = common.lstm_spec(h if self.mix_layers else f, h)
        rnn["step_size"] = common.linear_spec(h, 1)
        if self.regime_head:
            rnn["regime_step_size"] = common.linear_spec(h, 1, zero_weights=True)
        if self.schedule_head:
            num_tau = len(loss_timescales._FRACTION_TIMESCALES)
            rnn["schedule_step_size"] = common.linear_spec(num_tau, 1, zero_weights=True)
        if self.weight_decay_head:
            rnn["weight_decay_scale"] = {"b": jnp.zeros((1,), jnp.float32)}
        if self.rms_decay_head:
            rnn["rms_decay_scale"] = {"b": jnp.zeros((1,), jnp.float32)}
        spec = {"lstm_init_state": common.lstm_initial_state(h), "rnn_params": rnn}
        return common.draw(key, spec)

    def extend_theta(self, theta: Any) -> Any:
        """Adds the zero heads a Celo-Adam theta lacks (those its options ask for).

        Args and returns as in
        :meth:`~learnopt.learned_optimizers.base.LearnedOptimizer.extend_theta`.
        """
        rnn = theta.get("rnn_params") if isinstance(theta, dict) else None
        if not isinstance(rnn, dict) or "step_size" not in rnn:
            return theta  # not a Celo-Adam theta: the layout check names what is wrong
        if self.regime_head and "regime_step_size" not in rnn:
            theta = with_regime_head(theta)
        if self.schedule_head and "schedule_step_size" not in rnn:
            theta = with_schedule_head(theta)
        if self.weight_decay_head and "weight_decay_scale" not in rnn:
            theta = with_weight_decay_head(theta)
        if self.rms_decay_head and "rms_decay_scale" not in rnn:
            theta = with_rms_decay_head(theta)
        return theta

    #: What :meth:`opt_fn` builds from a checked theta.
    optimizer_class = _CeloAdamOptimizer


lopt_base.register_learned_optimizer("CeloAdam", CeloAdam)
