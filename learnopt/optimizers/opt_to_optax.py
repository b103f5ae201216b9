"""Any learnopt :class:`~learnopt.optimizers.base.Optimizer` as an optax transformation.

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

from collections.abc import Mapping
from typing import Any

import jax
import optax

from learnopt.canonical import leaf_compute_dtype
from learnopt.optimizers import base

__all__ = ["opt_to_optax_opt"]

_LOSS_NAMES = ("loss", "value")


def opt_to_optax_opt(
    opt: base.Optimizer, num_steps: int | None = None
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
    if not isinstance(opt, base.Optimizer):
        raise TypeError(
            f"opt_to_optax_opt expects a learnopt Optimizer instance, got {type(opt).__name__}"
        )

    def init_fn(params: Any, *, extra_args: Mapping[str, Any] | None = None) -> Any:
        del extra_args
        return opt.set_params(opt.init(params, num_steps=num_steps), ())

    def update_fn(
        updates: Any,
        state: Any,
        params: Any = None,
        *,
        extra_args: Mapping[str, Any] | None = None,
        **extra: Any,
    ) -> tuple[Any, Any]:
        if params is None:
            raise ValueError(
                f"the optax form of {type(opt).__name__} needs params: "
                "call update(updates, state, params, ...)"
            )
        kwargs = {**extra, **dict(extra_args or {})}
        loss = next((kwargs.pop(n) for n in _LOSS_NAMES if n in kwargs), None)
        for name in _LOSS_NAMES:
            kwargs.pop(name, None)
        kwargs.pop("grad", None)  # optax's copy of the gradient: ``updates`` already is it
        state = opt.set_params(state, params)
        new_state = opt.update(state, updates, loss, **kwargs)
        deltas = jax.tree_util.tree_map(_delta, opt.get_params(new_state), params)
        return deltas, opt.set_params(new_state, ())

    return optax.GradientTransformationExtraArgs(init_fn, update_fn)


def _delta(new: Any, old: Any) -> Any:
    cd = leaf_compute_dtype(old.dtype)
    return (new.astype(cd) - old.astype(cd)).astype(old.dtype)
