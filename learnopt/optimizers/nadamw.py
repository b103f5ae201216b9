"""NAdamW: Nesterov Adam with decoupled and L2 weight decay and a learning-rate schedule.

The baseline optimizer of Metz et al., 2020, "Using a thousand optimization tasks to
learn hyperparameter search strategies" (arXiv:2002.11887), whose searched
hyperparameter list is :mod:`~learnopt.optimizers.opt_list`. Per parameter, at step
``t = iteration + 1`` with ``lr = learning_rate(iteration, num_steps)`` for a schedule:

    g   <- g + l2_weight_decay * p                  (L2 decay: added to the loss)
    m   <- b1 m + (1 - b1) g
    v   <- b2 v + (1 - b2) g^2
    lr_t = lr * sqrt(1 - b2^t) / (1 - b1^t)          (bias correction)
    u    = (b1 m + (1 - b1) g) if use_nesterov else m
    p   <- p - lr_t * (u / (sqrt(v) + epsilon) + adamw_weight_decay * p)

The decoupled ("AdamW-style", Loshchilov & Hutter, arXiv:1711.05101) decay is scaled
by ``lr_t``, as in learned_optimization (and the code the list was searched with).

Differences from learned_optimization's ``NAdamW``, deliberately:

* the L2 decay adds ``l2_weight_decay * p`` to the gradient, i.e. it is the gradient
  of ``l2_weight_decay / 2 * |p|^2`` added to the loss, as the library documents; the
  library's code subtracts it (growing the weights);
* ``init`` needs ``num_steps`` only when the learning rate is a schedule;
* the state names the model state ``model_state`` (``.state`` still reads it),
  counters are int32, and the square root has a finite derivative at zero, so
  meta-gradients through NAdamW stay finite.
"""

from __future__ import annotations

from typing import Any

import flax.struct
import jax
import jax.numpy as jnp

from learnopt.optimizers.common import (
    OptimizerState,
    PyTree,
    accumulator,
    hp,
    is_zero,
    next_state,
    safe_sqrt,
)
from learnopt.optimizers.interface import OPTIMIZERS, Optimizer
from learnopt.optimizers.learning_rate_schedules import ScalarSchedule
from learnopt.tree_utils import tree_map_multi

__all__ = ["NAdamW", "NAdamWState", "adam_warmup_cosine", "WARMUP_FRACTION"]


@flax.struct.dataclass
class NAdamWState(OptimizerState):
    """State of :class:`NAdamW`.

    The fields of :class:`~learnopt.optimizers.common.OptimizerState`, then:

    Attributes:
      grad_acc: the first moments ``m``, in the params' arithmetic dtype.
      grad_sqr_acc: the second moments ``v``, in the params' arithmetic dtype.
      num_steps: the planned run length given to ``init``, int32 (-1: not given).
    """

    grad_acc: PyTree
    grad_sqr_acc: PyTree
    num_steps: jax.Array


class NAdamW(Optimizer):
    """Nesterov Adam with AdamW-style and L2 weight decay (see the module docstring).

    Args:
      learning_rate: a float (or traced scalar), or a
        :class:`~learnopt.optimizers.learning_rate_schedules.ScalarSchedule` called
        with ``(iteration, num_steps)``.
      beta1: decay of the gradient average.
      beta2: decay of the squared-gradient average.
      epsilon: added to the root of the squared-gradient average.
      adamw_weight_decay: decoupled weight decay (scaled by the step's learning rate).
      l2_weight_decay: L2 regularization strength (added to the gradient times ``p``).
      use_nesterov: use the Nesterov form of the first moment.
      use_bias_correction: accepted for the library's signature; as there, bias
        correction is always applied.
    """

    def __init__(
        self,
        learning_rate: float | ScalarSchedule = 1e-4,
        beta1: float = 0.9,
        beta2: float = 0.999,
        epsilon: float = 1e-8,
        adamw_weight_decay: float = 0.0,
        l2_weight_decay: float = 0.0,
        use_nesterov: bool = True,
        use_bias_correction: bool = True,
    ):
        self.config = {
            "learning_rate": learning_rate,
            "beta1": beta1,
            "beta2": beta2,
            "epsilon": epsilon,
            "adamw_weight_decay": adamw_weight_decay,
            "l2_weight_decay": l2_weight_decay,
            "use_nesterov": use_nesterov,
            "use_bias_correction": use_bias_correction,
        }

    def init(self, params, model_state=None, num_steps=None, key=None):
        """Zero moments, a zero step count and the planned run length.

        Args and returns as in :meth:`~learnopt.optimizers.interface.Optimizer.init`; here:

        - ``num_steps``: the planned number of updates, passed to a learning-rate schedule
          as ``max_steps``; required when ``learning_rate`` is a schedule.

        Raises:
          ValueError: ``learning_rate`` is a schedule and ``num_steps`` is None.
        """
        if num_steps is None and isinstance(self.config["learning_rate"], ScalarSchedule):
            raise ValueError(
                "NAdamW with a learning-rate schedule needs the run length: "
                "init(params, num_steps=N)"
            )
        return NAdamWState.initial(
            params,
            model_state,
            grad_acc=accumulator(params),
            grad_sqr_acc=accumulator(params),
            num_steps=jnp.asarray(-1 if num_steps is None else num_steps, jnp.int32),
        )

    def _learning_rate(self, opt_state: NAdamWState) -> Any:
        lr = self.config["learning_rate"]
        if isinstance(lr, ScalarSchedule):
            return lr(opt_state.iteration, opt_state.num_steps)
        return lr

    def update(self, opt_state, grads, loss=None, model_state=None, key=None, **kwargs):
        """One NAdamW step (the equations of the module docstring).

        Args and returns as in :meth:`~learnopt.optimizers.interface.Optimizer.update`.
        """
        c = self.config
        lr = self._learning_rate(opt_state)
        t = opt_state.iteration + 1

        def step(p, m, v, g):
            cd = m.dtype
            b1, b2 = hp(c["beta1"], cd), hp(c["beta2"], cd)
            pc = p.astype(cd)
            g = g.astype(cd)
            if not is_zero(c["l2_weight_decay"]):
                g = g + hp(c["l2_weight_decay"], cd) * pc
            m = b1 * m + (1 - b1) * g
            v = b2 * v + (1 - b2) * jnp.square(g)
            tc = t.astype(cd)
            lr_t = hp(lr, cd) * safe_sqrt(1 - b2**tc) / (1 - b1**tc)
            u = _select(c["use_nesterov"], b1 * m + (1 - b1) * g, m)
            delta = u / (safe_sqrt(v) + hp(c["epsilon"], cd))
            if not is_zero(c["adamw_weight_decay"]):
                delta = delta + hp(c["adamw_weight_decay"], cd) * pc
            return (pc - lr_t * delta).astype(p.dtype), m, v

        params, grad_acc, grad_sqr_acc = tree_map_multi(
            step, opt_state.params, opt_state.grad_acc, opt_state.grad_sqr_acc, grads
        )
        return next_state(
            opt_state,
            params,
            model_state,
            grad_acc=grad_acc,
            grad_sqr_acc=grad_sqr_acc,
            num_steps=opt_state.num_steps,
        )

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.config.items())
        return f"NAdamW({args})"


def _select(flag: Any, if_true: jax.Array, if_false: jax.Array) -> jax.Array:
    """``if_true if flag else if_false`` for a Python bool, ``jnp.where`` for a traced one."""
    if isinstance(flag, bool):
        return if_true if flag else if_false
    return jnp.where(flag, if_true, if_false)


def _with_cosine_schedule() -> NAdamW:
    """NAdamW on a warmup + cosine schedule (the conformance sweep's schedule case)."""
    from learnopt.optimizers.learning_rate_schedules import CosineLearningRateSchedule

    return NAdamW(
        learning_rate=CosineLearningRateSchedule(1e-2, 0.1, 0.3, 0.1),
        adamw_weight_decay=1e-3,
        l2_weight_decay=1e-3,
    )


#: Fraction of the run that :func:`adam_warmup_cosine` warms up over.
WARMUP_FRACTION = 0.05


def adam_warmup_cosine(
    learning_rate: Any = 1e-3,
    warmup_fraction: float = WARMUP_FRACTION,
    beta1: float = 0.9,
    beta2: float = 0.999,
    epsilon: float = 1e-8,
) -> NAdamW:
    """Adam with linear warmup, then cosine decay to zero (registered as ``AdamWarmupCosine``).

    The schedule every modern training recipe uses (Loshchilov & Hutter, arXiv:1608.03983;
    warmup as in Goyal et al., arXiv:1706.02677): with ``T`` the run length given to
    ``init(num_steps=T)`` and ``w = warmup_fraction``, the rate rises linearly from 0
    to ``learning_rate`` over the first ``w T`` steps, then follows a half cosine to 0
    at ``T``. The direction is plain Adam's (NAdamW without Nesterov momentum or weight
    decay). ``learnopt evaluate`` tunes its peak rate per task: a learned optimizer
    knows the run length, so its rival should too.

    Args:
      learning_rate: the peak rate (a float or a traced scalar).
      warmup_fraction: fraction of the run spent warming up, in ``[0, 1)``.
      beta1: decay of the gradient average.
      beta2: decay of the squared-gradient average.
      epsilon: added to the root of the squared-gradient average.

    Returns:
      A :class:`NAdamW` whose ``init`` needs ``num_steps``.
    """
    from learnopt.optimizers.learning_rate_schedules import CosineLearningRateSchedule

    if not 0.0 <= float(warmup_fraction) < 1.0:
        raise ValueError(f"warmup_fraction must be in [0, 1), got {warmup_fraction!r}")
    schedule = CosineLearningRateSchedule(
        learning_rate,
        min_learning_rate_mult=0.0,
        constant_fraction=warmup_fraction,
        warmup_fraction=warmup_fraction,
    )
    return NAdamW(schedule, beta1=beta1, beta2=beta2, epsilon=epsilon, use_nesterov=False)


OPTIMIZERS.register(NAdamW)
OPTIMIZERS.register(_with_cosine_schedule, name="NAdamW_cosine")
OPTIMIZERS.register(adam_warmup_cosine, name="AdamWarmupCosine")
