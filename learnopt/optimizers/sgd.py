"""Stochastic gradient descent, plain (:class:`SGD`) and with heavy-ball momentum (:class:`SGDM`).

Both compute in float32 (float64 for float64 params) and cast the new params back to
their dtype; ``SGDM`` keeps its momentum in that arithmetic dtype. The learning rate
and momentum may be traced scalars (``LearnableSGD``/``LearnableSGDM`` build them from
``theta``). Same names, arguments and maths as learned_optimization's ``SGD``/``SGDM``.
"""

from __future__ import annotations

import flax.struct
import jax

from learnopt import _validate
from learnopt.optimizers.common import (
    OptimizerState,
    PyTree,
    accumulator,
    arith_dtype,
    hp,
    next_state,
)
from learnopt.optimizers.interface import OPTIMIZERS, Optimizer
from learnopt.tree_utils import tree_map_multi

__all__ = ["SGD", "SGDState", "SGDM", "SGDMState"]


@flax.struct.dataclass
class SGDState(OptimizerState):
    """State of :class:`SGD`: the fields of :class:`~learnopt.optimizers.common.OptimizerState`."""


@flax.struct.dataclass
class SGDMState(OptimizerState):
    """State of :class:`SGDM`.

    The fields of :class:`~learnopt.optimizers.common.OptimizerState`, then:

    Attributes:
      momentums: the momentums ``m``, shaped like the params, in their arithmetic
        dtype.
    """

    momentums: PyTree


class SGD(Optimizer):
    """Stochastic gradient descent: ``p <- p - lr * g``.

    Args:
      learning_rate: step size (a float or a traced scalar).
    """

    def __init__(self, learning_rate: float = 0.01):
        _validate.positive_float("learning_rate", learning_rate)
        self.learning_rate = learning_rate

    def init(self, params, model_state=None, num_steps=None, key=None):
        """SGD's state: the params, the model state and a zero step count.

        Args and returns as in :meth:`~learnopt.optimizers.interface.Optimizer.init`.
        """
        return SGDState.initial(params, model_state)

    def update(self, opt_state, grads, loss=None, model_state=None, key=None, **kwargs):
        """One step ``p <- p - lr * g``.

        Args and returns as in :meth:`~learnopt.optimizers.interface.Optimizer.update`.
        """

        def step(p, g):
            cd = arith_dtype(p)
            return (p.astype(cd) - hp(self.learning_rate, cd) * g.astype(cd)).astype(p.dtype)

        params = jax.tree_util.tree_map(step, opt_state.params, grads)
        return next_state(opt_state, params, model_state)

    @property
    def name(self) -> str:
        """The name with the learning rate, e.g. ``SGD_lr0.01``."""
        return f"SGD_lr{self.learning_rate}"

    def __repr__(self) -> str:
        return f"SGD(learning_rate={self.learning_rate})"


class SGDM(Optimizer):
    """SGD with heavy-ball momentum (Polyak, 1964): ``m <- mu m + g; p <- p - lr m``.

    Args:
      learning_rate: step size.
      momentum: decay ``mu`` of the momentum accumulator.
    """

    def __init__(self, learning_rate: float = 0.01, momentum: float = 0.9):
        _validate.positive_float("learning_rate", learning_rate)
        _validate.unit_interval("momentum", momentum)
        self.learning_rate = learning_rate
        self.momentum = momentum

    def init(self, params, model_state=None, num_steps=None, key=None):
        """SGDM's state: the params, zero momentums (in the arithmetic dtype).

        Args and returns as in :meth:`~learnopt.optimizers.interface.Optimizer.init`.
        """
        return SGDMState.initial(params, model_state, momentums=accumulator(params))

    def update(self, opt_state, grads, loss=None, model_state=None, key=None, **kwargs):
        """One step ``m <- mu m + g; p <- p - lr m``.

        Args and returns as in :meth:`~learnopt.optimizers.interface.Optimizer.update`.
        """

        def step(p, m, g):
            cd = m.dtype
            m = hp(self.momentum, cd) * m + g.astype(cd)
            p = (p.astype(cd) - hp(self.learning_rate, cd) * m).astype(p.dtype)
            return p, m

        params, momentums = tree_map_multi(step, opt_state.params, opt_state.momentums, grads)
        return next_state(opt_state, params, model_state, momentums=momentums)

    @property
    def name(self) -> str:
        """The name with the hyperparameters, e.g. ``SGDM_lr0.01_m0.9``."""
        return f"SGDM_lr{self.learning_rate}_m{self.momentum}"

    def __repr__(self) -> str:
        return f"SGDM(learning_rate={self.learning_rate}, momentum={self.momentum})"


OPTIMIZERS.register(SGD)
OPTIMIZERS.register(SGDM)
