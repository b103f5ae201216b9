"""Learned optimizers in Flax's own training loops: Linen's ``TrainState`` and NNX's ``Optimizer``.

Every learnopt optimizer exports to optax (``lopt.opt_fn(theta).as_optax(num_steps=...)``,
``pretrained.load().as_optax(num_steps=...)``), and learned optimizers that read the
training loss as a feature (``HyperV2``/VeLO, ``Celo``, ``RNNMLPLOpt``) take it in the
update: ``tx.update(grads, state, params, value=loss)``. The two Flax loops differ in
whether they can pass it on.

**Flax Linen.** ``flax.training.train_state.TrainState.apply_gradients(grads=...)``
calls ``tx.update(grads, opt_state, params)`` and has no way to pass the loss. Use
:class:`TrainState` here instead, a drop-in subclass whose ``apply_gradients`` also
takes ``loss=``::

    from learnopt import pretrained
    from learnopt.flax_utils import TrainState

    tx = pretrained.load().as_optax(num_steps=1000)
    state = TrainState.create(apply_fn=model.apply, params=params, tx=tx)
    loss, grads = jax.value_and_grad(loss_fn)(state.params, batch)
    state = state.apply_gradients(grads=grads, loss=loss)

**Flax NNX.** ``nnx.Optimizer.update(model, grads, **kwargs)`` passes its keyword
arguments on to ``tx.update``, so it needs no helper::

    optimizer = nnx.Optimizer(model, tx, wrt=nnx.Param)
    loss, grads = nnx.value_and_grad(loss_fn)(model, batch)
    optimizer.update(model, grads, value=loss)

**One keyword everywhere.** ``value=loss`` (optax's name) works in all three places:
``tx.update``, ``nnx.Optimizer.update`` and this ``TrainState.apply_gradients``; so does
``loss=`` (the notes' library's name: ``tx.update(..., loss=loss)``,
``optimizer.update(model, grads, loss=loss)``, ``apply_gradients(grads=..., loss=loss)``).

Without the loss, an optimizer that needs it raises a ``ValueError`` saying so (and how
to pass it) when the step is traced. ``examples/flax_linen_trainstate.py`` and
``examples/flax_nnx.py`` train a model on the 8x8 digits with each loop.
"""

from __future__ import annotations

from typing import Any

import jax.numpy as jnp
import optax
from flax.training import train_state

__all__ = ["TrainState"]


class TrainState(train_state.TrainState):
    """Flax Linen's ``TrainState`` whose ``apply_gradients`` forwards the training loss.

    Build it as Flax's (``TrainState.create(apply_fn=..., params=..., tx=...)``); it has
    the same fields and is a pytree, so it goes through ``jax.jit`` and checkpoints the
    same way. Any optax transformation works; for learnopt's learned optimizers, pass
    the loss of the batch the gradients came from.

    Attributes:
      step: the number of ``apply_gradients`` calls so far.
      apply_fn: the model's apply function (usually ``module.apply``), not a pytree leaf.
      params: the parameters being trained.
      tx: the optax transformation (e.g. a learned optimizer's ``opt_to_optax``), not a
        pytree leaf.
      opt_state: ``tx``'s state.
    """

    def apply_gradients(
        self, *, grads: Any, loss: Any = None, value: Any = None, **kwargs: Any
    ) -> TrainState:
        """One optimizer step: ``tx.update(grads, opt_state, params, value=loss)``.

        As Flax's ``apply_gradients`` otherwise (including the ``overwrite_with_gradient``
        collection, whose entries replace the params instead of being optimized).

        Args:
          grads: the gradients, a tree like ``params``.
          loss: the training loss at ``params`` (a scalar), passed to the optimizer as
            optax's ``value=``; learned optimizers that read the loss require it. None:
            the update gets no loss, as with Flax's ``TrainState``.
          value: the same, under optax's and NNX's name (give one of the two).
          **kwargs: other fields of the state to replace, as in Flax.

        Returns:
          The state with ``step`` incremented by one and ``params`` and ``opt_state``
          updated.

        Raises:
          ValueError: ``loss`` is not a scalar, or the optimizer needs the loss and none
            was given (raised when the step is traced).
        """
        if value is not None:
            if loss is not None:
                raise ValueError(
                    "apply_gradients: give the training loss once, as loss= or as value= "
                    "(optax's name), not both"
                )
            loss = value
        extra = {}
        if loss is not None:
            if jnp.ndim(loss) != 0:
                raise ValueError(
                    "loss must be a scalar (the mean training loss of the batch), got shape "
                    f"{jnp.shape(loss)}"
                )
            extra["value"] = loss
        overwrite = train_state.OVERWRITE_WITH_GRADIENT in grads
        opt_grads = grads["params"] if overwrite else grads
        opt_params = self.params["params"] if overwrite else self.params
        updates, new_opt_state = self.tx.update(opt_grads, self.opt_state, opt_params, **extra)
        new_params = optax.apply_updates(opt_params, updates)
        if overwrite:
            new_params = {
                "params": new_params,
                train_state.OVERWRITE_WITH_GRADIENT: grads[train_state.OVERWRITE_WITH_GRADIENT],
            }
        return self.replace(
            step=self.step + 1, params=new_params, opt_state=new_opt_state, **kwargs
        )
