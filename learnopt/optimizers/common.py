"""Small pieces every built-in optimizer is made of: arithmetic dtypes, hyperparameters, states.

Built-in optimizers run their arithmetic in float32 (float64 for float64 params,
:func:`arith_dtype`), keep accumulators in that dtype (:func:`accumulator`) and cast
low-precision params back after each step. Hyperparameters may be Python floats or
traced scalars (learned optimizers pass ``jnp.exp(theta[...])``); :func:`hp` casts
either to the arithmetic dtype, and :func:`is_zero` tells when a term can be left out
of the program altogether. :func:`safe_sqrt` is the square root whose derivative stays
finite at zero, which keeps meta-gradients through Adam-like updates free of NaN.
:class:`OptimizerState` declares the fields every state starts with and builds the
states ``init`` and ``update`` return.
"""

from __future__ import annotations

from typing import Any

import flax.struct
import jax
import jax.numpy as jnp
import numpy as np

from learnopt.canonical import leaf_compute_dtype
from learnopt.optimizers.library_compat import ModelStateAlias

PyTree = Any
Params = Any
ModelState = Any
OptState = Any
#: The library's name for a gradient tree (a tree like the params).
Gradient = Any

__all__ = [
    "PyTree",
    "Params",
    "ModelState",
    "OptState",
    "arith_dtype",
    "hp",
    "is_zero",
    "safe_sqrt",
    "iteration0",
    "accumulator",
    "next_model_state",
    "next_state",
    "OptimizerState",
]


def arith_dtype(x: jax.Array) -> np.dtype:
    """The dtype an optimizer computes in for the leaf ``x``.

    Args:
      x: a params (or gradient) leaf.

    Returns:
      float32 for float32 and lower-precision leaves, float64 for float64 leaves.
    """
    return leaf_compute_dtype(x.dtype)


def hp(value: Any, dtype: np.dtype) -> jax.Array:
    """A hyperparameter (Python float or traced scalar) in the arithmetic dtype.

    Args:
      value: the hyperparameter.
      dtype: the arithmetic dtype.

    Returns:
      ``value`` as an array of ``dtype``.
    """
    return jnp.asarray(value).astype(dtype)


def is_zero(value: Any) -> bool:
    """Whether a hyperparameter is a Python zero (so its term can be left out).

    Args:
      value: the hyperparameter (a traced value is never a Python zero).

    Returns:
      True for ``0`` and ``0.0``.
    """
    return isinstance(value, float | int) and value == 0


def safe_sqrt(x: jax.Array) -> jax.Array:
    """``sqrt(x)`` for ``x >= 0`` whose derivative at 0 is 0 instead of ``inf``.

    Meta-gradients through Adam-like updates multiply ``d sqrt(v)/dv`` by zero where
    a gradient is exactly zero (a dead ReLU unit); ``0 * inf`` would be NaN.

    Args:
      x: a non-negative array.

    Returns:
      ``sqrt(x)`` where ``x > 0``, else 0.
    """
    positive = x > 0
    return jnp.where(positive, jnp.sqrt(jnp.where(positive, x, 1)), 0)


def iteration0() -> jax.Array:
    """The step counter of a fresh state: a strongly typed int32 zero.

    Returns:
      ``int32`` scalar 0.
    """
    return jnp.zeros((), jnp.int32)


def accumulator(params: Params, dtype: Any = None) -> PyTree:
    """Zeros shaped like ``params``, in the arithmetic dtype of each leaf (or ``dtype``).

    Args:
      params: the params pytree.
      dtype: the dtype of every leaf; None: :func:`arith_dtype` of each param.

    Returns:
      A pytree of zeros with the structure and shapes of ``params``.
    """
    return jax.tree_util.tree_map(lambda p: jnp.zeros(np.shape(p), dtype or arith_dtype(p)), params)


def next_model_state(model_state: ModelState, opt_state: OptState) -> ModelState:
    """The model state of the next state: the one passed to ``update``, else the current one.

    Args:
      model_state: what ``update`` was given (None when the model has no new state).
      opt_state: the current optimizer state.

    Returns:
      ``model_state`` if it is not None, else ``opt_state.model_state``.
    """
    return model_state if model_state is not None else opt_state.model_state


def next_state(state: Any, params: Params, model_state: ModelState = None, **fields: Any) -> Any:
    """``state`` after one update: the new ``params`` and ``fields``, ``iteration + 1``.

    What every optimizer's ``update`` returns, hand-designed or learned.

    Args:
      state: the state ``update`` was given (a ``flax.struct`` dataclass with ``params``,
        ``model_state`` and ``iteration``).
      params: the updated parameters.
      model_state: what ``update`` was given (None keeps ``state.model_state``, as
        :func:`next_model_state`).
      **fields: the other fields the update changed; the rest are kept.

    Returns:
      ``state.replace(...)`` with those fields.
    """
    return state.replace(
        params=params,
        model_state=next_model_state(model_state, state),
        iteration=state.iteration + 1,
        **fields,
    )


@flax.struct.dataclass
class OptimizerState(ModelStateAlias):
    """The fields a built-in optimizer's state starts with; each state adds its own after them.

    Attributes:
      params: the parameters, in their own dtypes.
      model_state: the model state (or None).
      iteration: the number of updates applied, int32.
    """

    params: Params
    model_state: ModelState
    iteration: jax.Array

    @classmethod
    def initial(cls, params: Params, model_state: ModelState, **fields: Any) -> OptimizerState:
        """The state of ``init``: ``params``, ``model_state``, a zero step count and ``fields``.

        Args:
          params: the params.
          model_state: the model state (or None).
          **fields: the values of the subclass's own fields.

        Returns:
          A new state of this class.
        """
        return cls(params=params, model_state=model_state, iteration=iteration0(), **fields)
