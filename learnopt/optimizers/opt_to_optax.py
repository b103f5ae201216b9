"""Any learnopt :class:`~learnopt.optimizers.interface.Optimizer` as an optax transformation.

:func:`opt_to_optax_opt` turns an optimizer (a hand-designed one, or a learned
optimizer at a fixed ``theta``: ``lopt.opt_fn(theta)``) into an
``optax.GradientTransformationExtraArgs``, so it drops into any optax/Flax training
loop and composes with ``optax.chain``, schedules and ``optax.add_decayed_weights``::

    tx = opt_to_optax.opt_to_optax_opt(lopt.opt_fn(theta), num_steps=1000)
    state = tx.init(params)
    updates, state = tx.update(grads, state, params, extra_args={"loss": loss, "key": key})
    params = optax.apply_updates(params, updates)

The optimizer sees what its own ``update`` takes: the loss (learned optimizers use it
as a feature) and a PRNG key, given as the library's ``extra_args={"loss": ...,
"key": ...}`` or as plain keyword arguments (``loss=``, ``key=``, or optax's
``value=`` for the loss, which ``optax.chain`` forwards to every member). Any other
entry is passed on to the optimizer's ``update`` (e.g. ``value_fn`` for an
``OptaxOptimizer`` around ``optax.lbfgs()``).

The returned updates are ``new_params - params``, computed in the arithmetic dtype
(float32 for low-precision params) and cast to each param's dtype. The optax state is
the optimizer's state without its params (``opt.set_params(state, ())``): the training
loop owns the params, so they are not stored twice.
"""

from __future__ import annotations

import optax

from learnopt.optimizers import _to_optax, interface

__all__ = ["opt_to_optax_opt"]


def opt_to_optax_opt(
    opt: interface.Optimizer, num_steps: int | None = None
) -> optax.GradientTransformationExtraArgs:
    """Converts a learnopt optimizer into an optax transformation (see the module docstring).

    Args:
      opt: the optimizer (an instance).
      num_steps: the planned number of steps, passed to ``opt.init`` (learning-rate
        schedules and learned optimizers that condition on training progress use it).

    Returns:
      An ``optax.GradientTransformationExtraArgs``: ``init(params)`` and
      ``update(updates, state, params, *, extra_args=None, **extra)``; ``params`` is
      required.
    """
    if not isinstance(opt, interface.Optimizer):
        raise TypeError(
            f"opt_to_optax_opt expects a learnopt Optimizer instance, got {type(opt).__name__}"
        )
    return _to_optax.transformation(opt, num_steps=num_steps)
