"""Optimizers: the ``Optimizer`` interface, hand-designed optimizers, the optax adapter.

Code written for the notes' library imports ``from learnopt.optimizers import base as
opt_base`` (``opt_base.Adam``, ``opt_base.Optimizer``, ``opt_base.OPTIMIZERS``); the
implementations live one concept per module:

* ``interface``: the ``Optimizer`` base class and its guarantees, the ``OPTIMIZERS``
  registry; ``library_compat``: the library's conventions it accepts; ``common``:
  pieces the built-in optimizers share;
* ``sgd``, ``adam``, ``rmsprop``, ``wrappers`` (gradient clipping, grafting),
  ``nadamw``, ``opt_list``, ``gradient_accumulator``, ``shampoo``;
* ``optax_adapter`` (``OptaxOptimizer``), ``optax_opts`` (the library's optax-backed
  optimizers), ``optax_zoo`` (optax setups of the conformance suite), ``opt_to_optax``
  (any optimizer as an optax transformation);
* ``learning_rate_schedules``; ``test_utils``: the library's path for the smoke test
  of :mod:`learnopt.testing.optimizers`.

Each module registers the optimizers it defines in ``interface.OPTIMIZERS``; the
imports below fill the registry, so importing any module of the package lists every
built-in optimizer.
"""

from learnopt.optimizers import (  # noqa: F401  (each registers its optimizers)
    adam,
    base,
    gradient_accumulator,
    nadamw,
    opt_list,
    optax_adapter,
    optax_opts,
    rmsprop,
    sgd,
    shampoo,
    wrappers,
)

# The library's package namespace: base's and optax_opts' public names (its
# ``from learned_optimization.optimizers import OptaxOptimizer`` works here too).
from learnopt.optimizers import base as _base  # noqa: E402
from learnopt.optimizers import optax_opts as _optax_opts  # noqa: E402
from learnopt.optimizers.base import *  # noqa: E402, F403
from learnopt.optimizers.optax_opts import *  # noqa: E402, F403

__all__ = sorted(set(_base.__all__) | set(_optax_opts.__all__))
