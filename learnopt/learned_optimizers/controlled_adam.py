r"""ControlledAdam: a learned per-tensor controller on Adam's warmup-cosine schedule.

The learned optimizers that hold up on unseen tasks keep a hand-designed update and learn
bounded multipliers on it: LHOPT (Almeida et al., "A Generalizable Approach to Learning
Optimizers", 2021, arXiv:2106.00958) is a small policy that scales an AdamW-style
optimizer's learning rate and weight decay from scale-free features of the run, and
Celo-Adam (Moudgil et al., 2025, arXiv:2501.12670) drives Adam's step with a learned
scheduler. ControlledAdam is that idea on learnopt's :class:`ScheduledAdam` with the
fixed warmup-cosine prior: a small MLP, shared by all tensors, reads each tensor's
features at every step and multiplies that tensor's step and weight decay by factors in
``[1 / max_multiplier, max_multiplier]``. For a tensor ``p`` of kind ``k`` at step ``t``:

    d, m, v = adam_direction(g, m, v; beta1, beta2, eps)      (bias-corrected)
    o = MLP(phi_p)                      (2 outputs; the last layer starts at zero)
    a = max_multiplier ** tanh(o[0]);   c = max_multiplier ** tanh(o[1])
    p <- p - exp(log_lr + offset_k) * c(t, T) * a * (d + c_wd * weight_decay * p)

with ``c(t, T)`` the warmup-cosine schedule and ``c_wd = c`` (the second factor). At the
initial theta the MLP's outputs are exactly zero, so both factors are exactly 1 and
ControlledAdam is ``ScheduledAdam(schedule_prior="warmup_cosine", learn_schedule=False)``
with the same values, step for step, bit for bit.

.. math::

   p_{t+1} = p_t - e^{\lambda + \delta_k}\, c(t, T)\, m^{\tanh o_0}
             \left(d_t + m^{\tanh o_1}\, \omega\, p_t\right),
   \qquad o = \mathrm{MLP}_\theta(\phi_p), \quad m = \texttt{max\_multiplier}

The features ``phi_p`` (:data:`NUM_FEATURES` of them, each of order 1 or less, none
depending on the scale of the parameters or of the loss): ScheduledAdam's per-tensor
features (:func:`~learnopt.learned_optimizers.scheduled_adam.tensor_features`: the
fraction-of-training embedding, the momentum's signal-to-noise ratio, ``log10`` of the
tensor's RMS and size, its kind), the cosine between the gradient and the momentum, the
relative size of Adam's step ``log10(rms(lr * d) / rms(p))``, and two loss features when
``update`` is given the loss (zero otherwise): progress ``log(ema / first loss)`` and
trend ``(loss - ema) / |ema|``, clipped. The state keeps the loss's exponential moving
average (decay 0.9) and the first loss seen.

``theta`` is ScheduledAdam's (``log_lr``, ``log_epsilon``, ``beta1_logit``,
``beta2_logit``, ``kind_offsets``) plus ``"controller"``, the MLP ``{"mlp/~/linear_0":
{"w": [NUM_FEATURES, H], "b": [H]}, "mlp/~/linear_1": {"w": [H, 2], "b": [2]}}``.
:meth:`ControlledAdam.from_scheduled_adam` starts it from a ScheduledAdam theta (for
example the shipped default entry's), so meta-training refines a good optimizer instead
of rediscovering it; ``freeze_groups()["base"]`` keeps those values fixed.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import flax.struct
import jax
import jax.numpy as jnp
import numpy as np

from learnopt import _validate
from learnopt.learned_optimizers import base as lopt_base
from learnopt.learned_optimizers import common, scheduled_adam
from learnopt.optimizers.adam import adam_direction_from_decays
from learnopt.optimizers.common import safe_sqrt
from learnopt.tree_utils import tree_map_multi

PyTree = Any

__all__ = ["ControlledAdam", "ControlledAdamState", "NUM_FEATURES", "BASE_KEYS"]

#: Inputs of the controller: ScheduledAdam's per-tensor features, the gradient-momentum
#: cosine, the relative step size, loss progress and loss trend.
NUM_FEATURES = scheduled_adam.NUM_TENSOR_FEATURES + 4
#: The theta keys of the controlled optimizer (ScheduledAdam's), frozen by ``"base"``.
BASE_KEYS = ("beta1_logit", "beta2_logit", "kind_offsets", "log_epsilon", "log_lr")
_LOSS_DECAY = 0.9


@flax.struct.dataclass
class ControlledAdamState(scheduled_adam.ScheduledAdamState):
    """State of the optimizer :meth:`ControlledAdam.opt_fn` returns: the fields of
    :class:`~learnopt.learned_optimizers.scheduled_adam.ScheduledAdamState` and the loss
    statistics the controller reads.

    Attributes:
      loss_ema: the exponential moving average of the losses given to ``update`` (0
        before the first).
      first_loss: the first loss given to ``update`` (0 before it).
    """

    loss_ema: jax.Array
    first_loss: jax.Array


def _loss_features(loss: Any, ema: jax.Array, first: jax.Array) -> jax.Array:
    """``[progress, trend]`` of the loss (zeros without a loss or before a positive one)."""
    f32 = jnp.float32
    if loss is None:
        return jnp.zeros((2,), f32)
    loss = jnp.asarray(loss, f32)
    ok = (first > 0) & (ema > 0)
    safe_ema = jnp.where(ok, ema, 1.0)
    progress_ = jnp.clip(jnp.log(safe_ema / jnp.where(ok, first, 1.0)), -10.0, 3.0) / 5.0
    trend = jnp.clip((loss - safe_ema) / jnp.abs(safe_ema), -1.0, 1.0)
    return jnp.where(ok, jnp.stack([progress_, trend]), 0.0)


class _ControlledAdamOptimizer(scheduled_adam._ScheduledAdamOptimizer):
    """The optimizer :meth:`ControlledAdam.opt_fn` returns."""

    def init(self, params, model_state=None, num_steps=None, key=None):
        """ScheduledAdam's state (zero moments, the run length) and no loss seen yet.

        Args and returns as in :meth:`~learnopt.optimizers.interface.Optimizer.init`; here:

        - ``num_steps``: the run length ``T`` (required unless the learned optimizer has a
          ``default_num_steps``).
        """
        base = super().init(params, model_state, num_steps, key)
        fields = {f.name: getattr(base, f.name) for f in dataclasses.fields(base)}
        zero = jnp.zeros((), jnp.float32)
        return ControlledAdamState(**fields, loss_ema=zero, first_loss=zero)

    def update(self, opt_state, grads, loss=None, model_state=None, key=None, **kwargs):
        """One controlled Adam step (module docstring).

        Args and returns as in :meth:`~learnopt.optimizers.interface.Optimizer.update`; here:

        - ``loss``: the training loss (its features are zero without it).
        """
        theta, s, lopt = self.theta, opt_state, self.lopt
        c = self._context(s)
        t, kinds = c.t, c.kinds
        loss_phi = _loss_features(loss, s.loss_ema, s.first_loss)
        log_max = jnp.log(jnp.asarray(lopt.max_multiplier, jnp.float32))

        def step(p, m, v, g, kind):
            cd = m.dtype
            d, m, v = adam_direction_from_decays(m, v, g, t, c.omb1, c.omb2, c.eps, 0.0)
            base = jnp.exp(c.log_lr[kind]) * c.prior  # ScheduledAdam's step size
            phi = jnp.concatenate(
                [
                    scheduled_adam.tensor_features(
                        p, m, v, kind, c.tau, c.correction1, c.correction2
                    ),
                    _tensor_dynamics(p, m, g, d, base),
                    loss_phi,
                ]
            )
            out = common.mlp_apply(theta["controller"], phi[None])[0]
            step_mult, decay_mult = jnp.exp(log_max * jnp.tanh(out))
            lr = (base * step_mult).astype(cd)
            pc = p.astype(cd)
            if lopt.weight_decay:
                d = d + (decay_mult * lopt.weight_decay).astype(cd) * pc
            return (pc - lr * d).astype(p.dtype), m, v

        params, mu, nu = tree_map_multi(step, s.params, s.mu, s.nu, grads, kinds)
        loss_ema, first_loss = s.loss_ema, s.first_loss
        if loss is not None:
            value = jnp.asarray(loss, jnp.float32)
            fresh = s.first_loss <= 0
            first_loss = jnp.where(fresh, value, s.first_loss)
            loss_ema = jnp.where(fresh, value, _LOSS_DECAY * s.loss_ema + (1 - _LOSS_DECAY) * value)
        return common.next_state(
            s, params, model_state, mu=mu, nu=nu, loss_ema=loss_ema, first_loss=first_loss
        )


def _tensor_dynamics(p, m, g, d, base) -> jax.Array:
    """``[cos(g, m), log10(rms(base * d) / rms(p)) / 3]`` of one tensor, float32."""
    f32 = jnp.float32
    g32, m32 = g.astype(f32), m.astype(f32)
    # safe_sqrt: finite meta-gradients where a tensor or its gradient is all zeros.
    norms = jnp.maximum(safe_sqrt(jnp.sum(g32 * g32) * jnp.sum(m32 * m32)), 1e-12)
    cos = jnp.sum(g32 * m32) / norms  # (a 1e-30 floor's square is 0 in float32: NaN)
    rms = lambda x: safe_sqrt(jnp.mean(jnp.square(x.astype(f32))))  # noqa: E731
    rel = jnp.log10((base * rms(d) + 1e-12) / (rms(p) + 1e-6)) / 3.0
    return jnp.stack([jnp.clip(cos, -1.0, 1.0), jnp.clip(rel, -3.0, 1.0)])


class ControlledAdam(scheduled_adam.ScheduledAdam):
    """Adam on a warmup-cosine schedule with a learned, bounded per-tensor controller.

    See the module docstring for the update, the features and theta (LHOPT,
    arXiv:2106.00958; Celo-Adam, arXiv:2501.12670). At the initial theta it is
    ``ScheduledAdam(schedule_prior="warmup_cosine", learn_schedule=False)`` with the
    same initial values, bit for bit.

    Args:
      initial_lr: the peak learning rate at the initial theta.
      initial_beta1: the first-moment decay at the initial theta, in (0, 1).
      initial_beta2: the second-moment decay at the initial theta, in (0, 1).
      initial_epsilon: Adam's ``epsilon`` at the initial theta (> 0).
      initial_kind_offsets: the initial log step-size offset of each tensor kind
        (:data:`~learnopt.learned_optimizers.scheduled_adam.TENSOR_KINDS` order).
      hidden_size: width of the controller's hidden layer.
      default_num_steps: the run length assumed when ``opt.init`` gets no
        ``num_steps``; None (the default) makes ``num_steps`` required.
      warmup_fraction: the warmup's share of the run, in [0, 1).
      offset_kinds: which kind's offset each kind uses (as in ScheduledAdam).
      weight_decay: the decoupled weight decay the controller scales (AdamW's form,
        multiplied by the step size); 0 (the default) leaves the step without decay.
      max_multiplier: the largest factor the controller may apply (> 1); its factors
        lie in ``[1 / max_multiplier, max_multiplier]``.
    """

    def __init__(
        self,
        initial_lr: float = 1e-3,
        initial_beta1: float = 0.9,
        initial_beta2: float = 0.999,
        initial_epsilon: float = 1e-8,
        initial_kind_offsets: Sequence[float] = (0.0, 0.0, 0.0, 0.0),
        hidden_size: int = 16,
        default_num_steps: int | None = None,
        warmup_fraction: float = 0.05,
        offset_kinds: Sequence[str] = scheduled_adam.TENSOR_KINDS,
        weight_decay: float = 0.0,
        max_multiplier: float = 2.0,
    ):
        super().__init__(
            initial_lr=initial_lr,
            initial_beta1=initial_beta1,
            initial_beta2=initial_beta2,
            initial_epsilon=initial_epsilon,
            hidden_size=hidden_size,
            default_num_steps=default_num_steps,
            schedule_prior="warmup_cosine",
            warmup_fraction=warmup_fraction,
            learn_schedule=False,
            offset_kinds=offset_kinds,
        )
        offsets = tuple(float(x) for x in initial_kind_offsets)
        if len(offsets) != len(scheduled_adam.TENSOR_KINDS) or not all(np.isfinite(offsets)):
            raise ValueError(
                f"initial_kind_offsets must be {len(scheduled_adam.TENSOR_KINDS)} finite "
                f"numbers (one per kind of {scheduled_adam.TENSOR_KINDS}), got "
                f"{initial_kind_offsets!r}"
            )
        _validate.real("weight_decay", weight_decay, low=0.0)
        _validate.real("max_multiplier", max_multiplier, low=1.0, low_open=True)
        self.initial_kind_offsets = offsets
        self.weight_decay = float(weight_decay)
        self.max_multiplier = float(max_multiplier)

    def init(self, key: jax.Array) -> dict:
        """The initial theta: ScheduledAdam's values and a controller whose outputs are 0.

        Args and returns as in :meth:`~learnopt.learned_optimizers.base.LearnedOptimizer.init`.
        """
        k_base, k_ctrl = jax.random.split(key)
        theta = super().init(k_base)
        theta["kind_offsets"] = jnp.asarray(self.initial_kind_offsets, jnp.float32)
        theta["controller"] = common.draw(
            k_ctrl,
            {
                "mlp/~/linear_0": common.linear_spec(NUM_FEATURES, self.hidden_size),
                "mlp/~/linear_1": common.linear_spec(self.hidden_size, 2, zero_weights=True),
            },
        )
        return theta

    def freeze_groups(self) -> dict[str, tuple[str, ...]]:
        """``{"base": the controlled optimizer's values, "controller": the MLP}``.

        Returns:
          The named groups of theta keys (``--freeze base`` trains the controller alone).
        """
        return {"base": BASE_KEYS, "controller": ("controller",)}

    @classmethod
    def from_scheduled_adam(
        cls, lopt: scheduled_adam.ScheduledAdam, theta: dict, key: jax.Array, **kwargs: Any
    ) -> tuple[ControlledAdam, dict]:
        """A ControlledAdam that starts as a fixed-shape warmup-cosine ScheduledAdam.

        Args:
          lopt: a ``ScheduledAdam`` with ``schedule_prior="warmup_cosine"``,
            ``learn_schedule=False`` and no ``tensor_features`` (e.g. the shipped default
            entry's: ``pretrained.load("ScheduledAdam_cosine_hparams")``).
          theta: its theta.
          key: the PRNG key of the controller's first layer.
          **kwargs: further constructor arguments (``hidden_size``, ``weight_decay``,
            ``max_multiplier``, ...).

        Returns:
          ``(controlled, controlled_theta)``, whose first update equals ``lopt``'s.

        Raises:
          ValueError: ``lopt`` is not such a ScheduledAdam.
        """
        if (
            not isinstance(lopt, scheduled_adam.ScheduledAdam)
            or lopt.schedule_prior != "warmup_cosine"
            or lopt.learn_schedule
            or lopt.tensor_features
        ):
            raise ValueError(
                "from_scheduled_adam takes a ScheduledAdam with schedule_prior="
                f"'warmup_cosine', learn_schedule=False and no tensor_features, got {lopt!r}"
            )
        sigmoid = lambda x: float(jax.nn.sigmoid(np.float32(x)))  # noqa: E731
        controlled = cls(
            initial_lr=float(np.exp(np.float32(theta["log_lr"]))),
            initial_beta1=sigmoid(theta["beta1_logit"]),
            initial_beta2=sigmoid(theta["beta2_logit"]),
            initial_epsilon=float(np.exp(np.float32(theta["log_epsilon"]))),
            initial_kind_offsets=tuple(np.asarray(theta["kind_offsets"]).tolist()),
            default_num_steps=lopt.default_num_steps,
            warmup_fraction=lopt.warmup_fraction,
            offset_kinds=lopt.offset_kinds,
            **kwargs,
        )
        new = controlled.init(key)
        for name in BASE_KEYS:  # the values themselves, not their round trip
            new[name] = jnp.asarray(theta[name], jnp.float32)
        return controlled, new

    #: What :meth:`opt_fn` builds from a checked theta.
    optimizer_class = _ControlledAdamOptimizer


lopt_base.register_learned_optimizer("ControlledAdam", ControlledAdam)
