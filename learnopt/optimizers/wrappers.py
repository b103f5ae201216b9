"""Optimizers built from other optimizers: gradient clipping and learning-rate grafting.

:class:`GradientClipOptimizer` clips each gradient element before running the
optimizer it wraps; :class:`GraftedOptimizer` takes one optimizer's step direction
with another's step length. Same names, arguments and state layout as
learned_optimization's. :class:`OptimizerWrapper` is the base of wrappers whose state
is the wrapped optimizer's.
"""

from __future__ import annotations

import flax.struct
import jax
import jax.numpy as jnp

from learnopt import _validate
from learnopt.optimizers.adam import Adam
from learnopt.optimizers.common import (
    OptimizerState,
    Params,
    PyTree,
    arith_dtype,
    hp,
    next_state,
    safe_sqrt,
)
from learnopt.optimizers.interface import OPTIMIZERS, Optimizer, require_optimizer
from learnopt.optimizers.sgd import SGDM
from learnopt.tree_utils import tree_vdot

__all__ = ["OptimizerWrapper", "GradientClipOptimizer", "GraftedOptimizer", "GraftedOptimizerState"]


class OptimizerWrapper(Optimizer):
    """Base of optimizers that run another, ``self.opt``, and keep its state as theirs.

    Every method calls ``opt``'s: a subclass sets ``self.opt`` in its constructor and
    overrides what it changes (e.g. ``update``, to alter the gradients first).
    """

    def get_params(self, opt_state):
        """``opt``'s :meth:`~learnopt.optimizers.interface.Optimizer.get_params`."""
        return self.opt.get_params(opt_state)

    def get_state(self, opt_state):
        """``opt``'s :meth:`~learnopt.optimizers.interface.Optimizer.get_state`."""
        return self.opt.get_state(opt_state)

    def set_params(self, opt_state, params):
        """``opt``'s :meth:`~learnopt.optimizers.interface.Optimizer.set_params`."""
        return self.opt.set_params(opt_state, params)

    def init(self, params, model_state=None, num_steps=None, key=None, **kwargs):
        """``opt``'s state (the wrapper adds none).

        Args and returns as in :meth:`~learnopt.optimizers.interface.Optimizer.init`.
        """
        return self.opt.init(params, model_state, num_steps=num_steps, key=key, **kwargs)

    def update(self, opt_state, grads, loss=None, model_state=None, key=None, **kwargs):
        """One step of ``opt``.

        Args and returns as in :meth:`~learnopt.optimizers.interface.Optimizer.update`.
        """
        return self.opt.update(opt_state, grads, loss, model_state=model_state, key=key, **kwargs)


class GradientClipOptimizer(OptimizerWrapper):
    """Clips every gradient element to ``[-grad_clip, grad_clip]``, then runs ``opt``.

    The state is ``opt``'s state (``get_params``/``get_state``/``set_params`` are
    ``opt``'s), as in learned_optimization.

    Args:
      opt: the optimizer to run on the clipped gradients (an instance).
      grad_clip: the clipping threshold.
    """

    def __init__(self, opt: Optimizer, grad_clip: float = 3.0):
        require_optimizer(opt, "GradientClipOptimizer's opt")
        _validate.positive_float("grad_clip", grad_clip)
        self.opt = opt
        self.grad_clip = grad_clip

    def update(self, opt_state, grads, loss=None, model_state=None, key=None, **kwargs):
        """Clips every gradient element to ``[-grad_clip, grad_clip]``, then runs ``opt``.

        Args and returns as in :meth:`~learnopt.optimizers.interface.Optimizer.update`.
        """

        def clip(g):
            c = hp(self.grad_clip, g.dtype)
            return jnp.clip(g, -c, c)

        grads = jax.tree_util.tree_map(clip, grads)
        return self.opt.update(opt_state, grads, loss, model_state=model_state, key=key, **kwargs)

    def __repr__(self) -> str:
        return f"GradientClipOptimizer({self.opt!r}, grad_clip={self.grad_clip})"


@flax.struct.dataclass
class GraftedOptimizerState(OptimizerState):
    """State of :class:`GraftedOptimizer`.

    The fields of :class:`~learnopt.optimizers.common.OptimizerState`, then:

    Attributes:
      mag_opt_state: ``magnitude_opt``'s state.
      dir_opt_state: ``direction_opt``'s state.
    """

    mag_opt_state: PyTree
    dir_opt_state: PyTree


def _tree_step(new: Params, old: Params) -> PyTree:
    return jax.tree_util.tree_map(
        lambda n, o: n.astype(arith_dtype(o)) - o.astype(arith_dtype(o)), new, old
    )


class GraftedOptimizer(Optimizer):
    """Learning-rate grafting: ``direction_opt``'s direction with ``magnitude_opt``'s step size.

    Both optimizers step from the same params; the step taken is
    ``dir_step * ||mag_step|| / ||dir_step||`` (global norms over the whole tree),
    and both inner states continue from the resulting params. Agarwal et al., 2020,
    "Disentangling Adaptive Gradient Methods from Learning Rates", arXiv:2002.11803.

    Unlike learned_optimization, a zero direction step gives a zero step (not NaN),
    the norms' derivatives are finite at zero, and each inner optimizer gets its own
    split of ``key``.

    Args:
      magnitude_opt: the optimizer whose step length is used.
      direction_opt: the optimizer whose step direction is used.
    """

    def __init__(self, magnitude_opt: Optimizer, direction_opt: Optimizer):
        require_optimizer(magnitude_opt, "GraftedOptimizer's magnitude_opt")
        require_optimizer(direction_opt, "GraftedOptimizer's direction_opt")
        self.magnitude_opt = magnitude_opt
        self.direction_opt = direction_opt

    def init(self, params, model_state=None, num_steps=None, key=None, **kwargs):
        """Both inner states, each from its own split of ``key``.

        Args and returns as in :meth:`~learnopt.optimizers.interface.Optimizer.init`; here:

        - ``key``: split between the two optimizers (or None).
        """
        keys = (None, None) if key is None else tuple(jax.random.split(key))
        return GraftedOptimizerState.initial(
            params,
            model_state,
            mag_opt_state=self.magnitude_opt.init(
                params, model_state, num_steps=num_steps, key=keys[0], **kwargs
            ),
            dir_opt_state=self.direction_opt.init(
                params, model_state, num_steps=num_steps, key=keys[1], **kwargs
            ),
        )

    def update(self, opt_state, grads, loss=None, model_state=None, key=None, **kwargs):
        """Steps along ``direction_opt``'s direction with ``magnitude_opt``'s step length.

        Args and returns as in :meth:`~learnopt.optimizers.interface.Optimizer.update`; here:

        - ``key``: split between the two optimizers (or None).
        """
        keys = (None, None) if key is None else tuple(jax.random.split(key))
        base = opt_state.params
        mag_state = self.magnitude_opt.update(
            opt_state.mag_opt_state, grads, loss, model_state=model_state, key=keys[0], **kwargs
        )
        dir_state = self.direction_opt.update(
            opt_state.dir_opt_state, grads, loss, model_state=model_state, key=keys[1], **kwargs
        )
        mag_step = _tree_step(self.magnitude_opt.get_params(mag_state), base)
        dir_step = _tree_step(self.direction_opt.get_params(dir_state), base)
        mag_norm = safe_sqrt(tree_vdot(mag_step, mag_step))
        dir_norm = safe_sqrt(tree_vdot(dir_step, dir_step))
        nonzero = dir_norm > 0
        scale = jnp.where(nonzero, mag_norm / jnp.where(nonzero, dir_norm, 1), 0)
        params = jax.tree_util.tree_map(
            lambda p, d: (p.astype(d.dtype) + scale.astype(d.dtype) * d).astype(p.dtype),
            base,
            dir_step,
        )
        return next_state(
            opt_state,
            params,
            model_state,
            mag_opt_state=self.magnitude_opt.set_params(mag_state, params),
            dir_opt_state=self.direction_opt.set_params(dir_state, params),
        )

    def __repr__(self) -> str:
        return f"GraftedOptimizer({self.magnitude_opt!r}, {self.direction_opt!r})"


OPTIMIZERS.register(
    lambda grad_clip=3.0: GradientClipOptimizer(Adam(), grad_clip), name="GradientClipOptimizer"
)
OPTIMIZERS.register(lambda: GraftedOptimizer(SGDM(), Adam()), name="GraftedOptimizer")
