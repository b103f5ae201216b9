"""Optimizers at the notes' library's path: ``from learnopt.optimizers import base as opt_base``.

This module is the face that code written for learned_optimization imports; the
implementations live one concept per module and are re-exported here unchanged:

* :mod:`~learnopt.optimizers.interface`: the :class:`Optimizer` interface and the
  guarantees every subclass gets (dtypes settled at ``init``, checked inputs, cached
  eager calls), the :data:`OPTIMIZERS` registry;
* :mod:`~learnopt.optimizers.library_compat`: what the interface does only for the
  library's conventions (``opt_state.state``, the ways ``update`` takes the loss);
* :mod:`~learnopt.optimizers.common`: the pieces built-in optimizers share
  (:func:`safe_sqrt`, arithmetic dtypes, accumulators);
* :mod:`~learnopt.optimizers.sgd` (``SGD``, ``SGDM``), :mod:`~learnopt.optimizers.adam`
  (``Adam``, ``AdamW``), :mod:`~learnopt.optimizers.rmsprop` (``RMSProp``),
  :mod:`~learnopt.optimizers.wrappers` (``GradientClipOptimizer``,
  ``GraftedOptimizer``), :mod:`~learnopt.optimizers.optax_adapter` (``OptaxOptimizer``).

Names shared with learned_optimization mean the same thing there and here (arguments,
defaults, maths): ``SGD``, ``SGDM``, ``Adam`` (default learning rate 1e-2 and
``epsilon_root=1e-8``, as the library's optax-backed ``Adam``), ``RMSProp`` (epsilon
inside the square root, optional Nesterov momentum), ``AdamW`` (the library's
``optax_opts.AdamW``), ``OptaxOptimizer``, ``GradientClipOptimizer`` and
``GraftedOptimizer``. Two deliberate differences:

* states name the model state ``model_state`` (the library: ``state``); every
  learnopt state also answers ``opt_state.state`` (a read-only alias), and
  :meth:`Optimizer.get_state` reads either field, so ported code that reads
  ``opt_state.state`` or defines states with a ``state`` field keeps working;
* ``update(opt_state, grads, loss=None, model_state=None, key=None, **kwargs)`` takes
  the loss as its third argument (the notes' convention; the library's newest base
  class takes it as a keyword, which works here too).

The registry is filled by the modules that define the optimizers; importing any
module of ``learnopt.optimizers`` (this one included) imports them all, so
``OPTIMIZERS.names()`` lists every built-in optimizer.
"""

from __future__ import annotations

from learnopt.optimizers.adam import Adam, AdamState, AdamW
from learnopt.optimizers.common import Gradient as Gradient
from learnopt.optimizers.common import ModelState as ModelState
from learnopt.optimizers.common import OptState as OptState
from learnopt.optimizers.common import Params as Params
from learnopt.optimizers.common import PyTree as PyTree
from learnopt.optimizers.common import safe_sqrt
from learnopt.optimizers.interface import (
    OPTIMIZERS,
    Optimizer,
    all_finite,
    clear_eager_cache,
    eager_cache_info,
    get_optimizer,
    register_optimizer,
    registered_optimizers,
)
from learnopt.optimizers.optax_adapter import OptaxDtypeError, OptaxOptimizer, OptaxState
from learnopt.optimizers.rmsprop import RMSProp, RMSPropState
from learnopt.optimizers.sgd import SGD, SGDM, SGDMState, SGDState
from learnopt.optimizers.wrappers import (
    GradientClipOptimizer,
    GraftedOptimizer,
    GraftedOptimizerState,
)

__all__ = [
    "Optimizer",
    "SGD",
    "SGDM",
    "Adam",
    "AdamW",
    "RMSProp",
    "OptaxOptimizer",
    "GradientClipOptimizer",
    "GraftedOptimizer",
    "OptaxDtypeError",
    "SGDState",
    "SGDMState",
    "AdamState",
    "RMSPropState",
    "OptaxState",
    "GraftedOptimizerState",
    "OPTIMIZERS",
    "register_optimizer",
    "get_optimizer",
    "registered_optimizers",
    "safe_sqrt",
    "all_finite",
    "eager_cache_info",
    "clear_eager_cache",
]
