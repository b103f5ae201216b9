"""The optax form of an optimizer: the mechanism behind ``opt.as_optax()`` and ``opt_to_optax``.

It only calls the optimizer's methods, so it sits below the ``Optimizer`` interface:
:meth:`~learnopt.optimizers.interface.Optimizer.as_optax` uses it directly and
:func:`learnopt.optimizers.opt_to_optax.opt_to_optax_opt` (the library's entry point,
which checks its argument is an ``Optimizer``) calls it. See
:mod:`learnopt.optimizers.opt_to_optax` for what the transformation does.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Mapping
from typing import Any

import jax
import jax.numpy as jnp
import optax

from learnopt.canonical import leaf_compute_dtype

__all__ = ["transformation", "with_weight_decay"]

_LOSS_NAMES = ("loss", "value")

# Learned optimizers that read the loss raise a ValueError with these words without it.
_NEEDS_LOSS = "needs the training loss"
_HOW_TO_PASS_THE_LOSS = (
    "In optax form, pass it to the update: tx.update(grads, state, params, value=loss). "
    "Flax Linen's TrainState.apply_gradients cannot pass it: use "
    "learnopt.flax_utils.TrainState and state.apply_gradients(grads=grads, loss=loss). "
    "Flax NNX: optimizer.update(model, grads, value=loss)"
)


def transformation(opt: Any, num_steps: int | None = None) -> optax.GradientTransformationExtraArgs:
    """``opt`` as an optax transformation (``opt`` is not checked; see ``opt_to_optax``).

    Args:
      opt: a learnopt optimizer (an instance).
      num_steps: the planned number of steps, passed to ``opt.init``.

    Returns:
      An ``optax.GradientTransformationExtraArgs`` whose updates are
      ``new_params - params`` and whose state is ``opt``'s state without its params.
      With ``num_steps``, the first update past it (the state's ``iteration`` equal to
      ``num_steps``) warns once (:func:`_past_the_end`).
    """
    past_the_end = _past_the_end(opt, num_steps)

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
        if past_the_end is not None and hasattr(state, "iteration"):
            iteration = jnp.asarray(state.iteration)
            jax.lax.cond(
                iteration == num_steps,
                lambda: jax.debug.callback(past_the_end, iteration),
                lambda: None,
            )
        try:
            new_state = opt.update(state, updates, loss, **kwargs)
        except ValueError as err:
            if loss is None and _NEEDS_LOSS in str(err):
                raise ValueError(f"{err}. {_HOW_TO_PASS_THE_LOSS}") from err
            raise
        deltas = jax.tree_util.tree_map(_delta, opt.get_params(new_state), params)
        return deltas, opt.set_params(new_state, ())

    return optax.GradientTransformationExtraArgs(init_fn, update_fn)


def _past_the_end(opt: Any, num_steps: int | None) -> Callable[[Any], None] | None:
    """A host callback that warns, once, that the run has gone past ``num_steps``."""
    if num_steps is None:
        return None
    warned: list[bool] = []

    def callback(iteration: Any) -> None:
        if warned:
            return
        warned.append(True)
        name = getattr(getattr(opt, "lopt", None), "name", None) or type(opt).__name__
        warnings.warn(
            f"{name}: this update is past num_steps={num_steps}, the run "
            "length given to as_optax/init. Optimizers that read the fraction of training "
            "done hold it at 1 from here (a schedule that decays to zero now steps zero); "
            "pass the real number of steps.",
            RuntimeWarning,
            stacklevel=2,
        )

    return callback


def _delta(new: Any, old: Any) -> Any:
    cd = leaf_compute_dtype(old.dtype)
    return (new.astype(cd) - old.astype(cd)).astype(old.dtype)


def with_weight_decay(
    tx: optax.GradientTransformationExtraArgs,
    weight_decay: float,
    mask: Any | Callable[[Any], Any] | None = None,
) -> optax.GradientTransformationExtraArgs:
    """``tx`` followed by decoupled weight decay: ``p <- p + update - weight_decay * p``.

    ``tx``'s updates are already the signed step (``new_params - params``), so the decay
    is subtracted after it (``optax.add_decayed_weights(-weight_decay)``), not added as
    before a ``scale(-lr)``: chaining ``add_decayed_weights(wd)`` after a learned
    optimizer makes the weights grow. This is AdamW's decoupled decay with
    ``weight_decay`` in the role of ``learning_rate * weight_decay`` (Loshchilov and
    Hutter, 2019, arXiv:1711.05101).

    Args:
      tx: the transformation whose updates are the step itself.
      weight_decay: the fraction of each parameter removed per step, in [0, 1).
      mask: as in ``optax.add_decayed_weights``: a tree of booleans (or a function of
        the params returning one), True where to decay; None decays every parameter.

    Returns:
      ``tx`` itself for ``weight_decay == 0``, else ``optax.chain(tx, decay)``.
    """
    if (
        isinstance(weight_decay, bool)
        or not isinstance(weight_decay, int | float)
        or not math.isfinite(weight_decay)
        or not 0.0 <= weight_decay < 1.0
    ):
        raise ValueError(
            "weight_decay must be a number in [0, 1) (the fraction of each parameter "
            f"removed per step), got {weight_decay!r}"
        )
    if weight_decay == 0.0:
        return tx
    return optax.chain(tx, optax.add_decayed_weights(-float(weight_decay), mask=mask))
