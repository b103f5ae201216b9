"""Compatibility with the notes' library (google/learned_optimization) in the optimizer machinery.

Everything learnopt's :class:`~learnopt.optimizers.interface.Optimizer` does only so that
code written for learned_optimization (or for the notes) runs unchanged is here, in one
place:

* **The model state's name.** learnopt's states name the model state ``model_state``;
  the library's name it ``state``. Every learnopt state answers ``opt_state.state``
  too (:class:`ModelStateAlias`, read-only), and :func:`model_state_of` reads either
  field, so ported code that reads ``opt_state.state`` or defines its own states with
  a ``state`` field keeps working. :class:`OptaxStateAlias` does the same for the
  library's ``optax_opt_state``.
* **How a subclass's ``update`` takes the loss.** The notes write ``update(self,
  opt_state, grads, loss, model_state=None, **kw)``; the library's newest classes write
  ``update(self, opt_state, grad, model_state=None, **kw)`` and read ``loss`` from the
  keywords; others take no loss at all. :func:`loss_passing` reads which one a
  subclass's signature is, once, when the class is defined, and :func:`call_update`
  calls it that way; :func:`accepts` tells whether it takes ``key``.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

__all__ = [
    "ModelStateAlias",
    "OptaxStateAlias",
    "model_state_of",
    "accepts",
    "loss_passing",
    "call_update",
]


class ModelStateAlias:
    """Gives a state dataclass the library's name for its model state, read-only."""

    @property
    def state(self) -> Any:
        """The library's name for ``model_state`` (read-only)."""
        return self.model_state


class OptaxStateAlias:
    """Gives :class:`~learnopt.optimizers.optax_adapter.OptaxState` the library's field name."""

    @property
    def optax_opt_state(self) -> Any:
        """The library's name for ``optax_state`` (read-only)."""
        return self.optax_state


def model_state_of(opt_state: Any) -> Any:
    """The model state of ``opt_state``: its ``model_state`` field, or the library's ``state``.

    Args:
      opt_state: an optimizer state (learnopt's, or one defined like the library's).

    Returns:
      ``opt_state.model_state`` if the state has that field, else ``opt_state.state``.
    """
    try:
        return opt_state.model_state
    except AttributeError:
        return opt_state.state


def accepts(fn: Callable, name: str) -> bool:
    """Whether ``fn`` takes a keyword argument ``name`` (by name or through ``**kwargs``).

    Args:
      fn: the function (e.g. a subclass's raw ``update``).
      name: the argument name.

    Returns:
      True if ``fn(..., name=...)`` is accepted.
    """
    params = inspect.signature(fn).parameters.values()
    return any(p.name == name or p.kind is inspect.Parameter.VAR_KEYWORD for p in params)


def loss_passing(raw_update: Callable) -> str:
    """How a subclass's ``update`` takes the loss: ``"positional"``, ``"keyword"`` or ``"none"``.

    The notes write ``update(self, opt_state, grads, loss, model_state=None, **kw)``;
    the library's newest classes write ``update(self, opt_state, grad,
    model_state=None, **kw)`` and read ``loss`` from the keywords.

    Args:
      raw_update: the ``update`` function a subclass defines (unwrapped, with ``self``).

    Returns:
      ``"positional"`` if its fourth parameter is the loss, ``"keyword"`` if it takes
      ``loss`` as a keyword (or ``**kwargs``), ``"none"`` otherwise.
    """
    params = list(inspect.signature(raw_update).parameters.values())[3:]
    positional = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    if params and params[0].kind in positional and params[0].name not in ("model_state", "key"):
        return "positional"
    return "keyword" if accepts(raw_update, "loss") else "none"


def call_update(
    raw_update: Callable,
    mode: str,
    opt: Any,
    opt_state: Any,
    grads: Any,
    loss: Any,
    model_state: Any,
    kwargs: dict[str, Any],
) -> Any:
    """Calls a subclass's raw ``update`` the way its signature takes the loss.

    Args:
      raw_update: the subclass's ``update`` function (unwrapped).
      mode: what :func:`loss_passing` returned for it.
      opt: the optimizer (``self``).
      opt_state: the state.
      grads: the gradients.
      loss: the loss, or None.
      model_state: the new model state, or None.
      kwargs: further keyword arguments for ``update``.

    Returns:
      What ``raw_update`` returns: the next state.
    """
    if mode == "positional":
        return raw_update(opt, opt_state, grads, loss, model_state=model_state, **kwargs)
    if mode == "keyword":
        kwargs = {"loss": loss, **kwargs}
    return raw_update(opt, opt_state, grads, model_state=model_state, **kwargs)
