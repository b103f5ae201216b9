"""RMSProp (Tieleman & Hinton, 2012) with optional Nesterov momentum, as ``optax.rmsprop``.

Epsilon is added inside the square root; the squared-gradient average and the momentum
are kept in float32 (float64 for float64 params) and the params cast back to their
dtype. Same name, arguments and maths as learned_optimization's ``RMSProp``.
"""

from __future__ import annotations

import flax.struct
import jax.numpy as jnp

from learnopt import _validate
from learnopt.optimizers.common import (
    OptimizerState,
    PyTree,
    accumulator,
    hp,
    next_state,
    safe_sqrt,
)
from learnopt.optimizers.interface import OPTIMIZERS, Optimizer
from learnopt.tree_utils import tree_map_multi

__all__ = ["RMSProp", "RMSPropState"]


@flax.struct.dataclass
class RMSPropState(OptimizerState):
    """State of :class:`RMSProp`.

    The fields of :class:`~learnopt.optimizers.common.OptimizerState`, then:

    Attributes:
      nu: the squared-gradient averages ``v``, shaped like the params, in their
        arithmetic dtype.
      momentums: the momentums ``m``, likewise.
    """

    nu: PyTree
    momentums: PyTree


class RMSProp(Optimizer):
    """RMSProp (Tieleman & Hinton, 2012) with optional (Nesterov) momentum.

    ``v <- d v + (1-d) g^2;  u = lr * g / sqrt(v + epsilon);  m <- mu m + u;
    p <- p - (u + mu m if nesterov else m)`` -- epsilon inside the root, as
    ``optax.rmsprop`` (which learned_optimization's ``RMSProp`` wraps).

    Args:
      learning_rate: step size.
      decay: decay ``d`` of the squared-gradient average.
      epsilon: added to the average inside the root.
      momentum: decay ``mu`` of the momentum (0: plain RMSProp).
      nesterov: use Nesterov momentum.
    """

    def __init__(
        self,
        learning_rate: float = 0.01,
        decay: float = 0.9,
        epsilon: float = 1e-8,
        momentum: float = 0.0,
        nesterov: bool = False,
    ):
        _validate.positive_float("learning_rate", learning_rate)
        _validate.unit_interval("decay", decay)
        _validate.non_negative_float("epsilon", epsilon)
        _validate.unit_interval("momentum", momentum)
        self.learning_rate = learning_rate
        self.decay = decay
        self.epsilon = epsilon
        self.momentum = momentum
        self.nesterov = nesterov

    def init(self, params, model_state=None, num_steps=None, key=None):
        """RMSProp's state: the params, zero ``nu`` and ``momentums``.

        Args and returns as in :meth:`~learnopt.optimizers.interface.Optimizer.init`.
        """
        nu, momentums = accumulator(params), accumulator(params)
        return RMSPropState.initial(params, model_state, nu=nu, momentums=momentums)

    def update(self, opt_state, grads, loss=None, model_state=None, key=None, **kwargs):
        """One RMSProp step (see the class docstring).

        Args and returns as in :meth:`~learnopt.optimizers.interface.Optimizer.update`.
        """

        def step(p, v, m, g):
            cd = v.dtype
            d, mu = hp(self.decay, cd), hp(self.momentum, cd)
            g = g.astype(cd)
            v = d * v + (1 - d) * jnp.square(g)
            u = hp(self.learning_rate, cd) * (g / safe_sqrt(v + hp(self.epsilon, cd)))
            m = mu * m + u
            delta = u + mu * m if self.nesterov else m
            return (p.astype(cd) - delta).astype(p.dtype), v, m

        params, nu, momentums = tree_map_multi(
            step, opt_state.params, opt_state.nu, opt_state.momentums, grads
        )
        return next_state(opt_state, params, model_state, nu=nu, momentums=momentums)

    @property
    def name(self) -> str:
        """The name with the hyperparameters, e.g. ``RMSProp_lr0.01_d0.9_...``."""
        return (
            f"RMSProp_lr{self.learning_rate}_d{self.decay}_eps{self.epsilon}"
            f"_m{self.momentum}_nesterov{self.nesterov}"
        )

    def __repr__(self) -> str:
        return (
            f"RMSProp(learning_rate={self.learning_rate}, decay={self.decay}, "
            f"epsilon={self.epsilon}, momentum={self.momentum}, nesterov={self.nesterov})"
        )


OPTIMIZERS.register(RMSProp)
