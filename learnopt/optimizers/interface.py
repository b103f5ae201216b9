"""The ``Optimizer`` interface and the guarantees every optimizer gets from it.

The interface is learned_optimization's: ``opt.init(params) -> state`` and
``opt.update(state, grads, loss) -> state``; ``opt.get_params(state)`` reads the
params back. Unlike optax, the state carries ``params``, ``model_state`` and
``iteration``, so an optimizer may look at the loss, the step count or the params.

Every subclass, including user subclasses written like the notes'
``MomentumOptimizer``, gets three guarantees from this base class without writing any
code for them (its ``init``/``update`` are wrapped when the class is defined):

* ``init`` returns a state whose leaves already have the dtypes (and strong types)
  one ``update`` produces (:func:`learnopt.canonical.settle_dtypes`), so a jitted
  training step compiles exactly once;
* ``update`` checks its inputs (tree structure, shapes; Python floats and numpy
  arrays are accepted) and returns a state with the same dtypes as the one it was
  given, so params keep their dtype and mixed precision (bf16 params, f32 grads)
  cannot make a step recompile;
* called outside ``jit`` (as the notes' meta-training loop calls
  ``theta_opt.update``), ``init``/``update`` run as cached jitted programs after a
  few op-by-op calls, with the results the same call gives under ``jit`` (see
  :mod:`learnopt.optimizers._eager`; set ``eager_jit = False`` on a class or instance
  whose methods are not pure).

What the wrappers do only for code written for the notes' library (the ``.state``
name of the model state, the three ways a subclass's ``update`` may take the loss) is
in :mod:`learnopt.optimizers.library_compat`.

:data:`OPTIMIZERS` is the registry of every optimizer learnopt ships; each module of
the package registers its own optimizers in it, and the package's ``__init__``
imports them all.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax

from learnopt import _validate
from learnopt.canonical import compute_dtype, settle_dtypes
from learnopt.optimizers import _eager, _to_optax, library_compat
from learnopt.optimizers.common import ModelState, OptState, Params, PyTree
from learnopt.registry import Registry
from learnopt.tree_utils import tree_cast_like, tree_path_str

__all__ = [
    "Optimizer",
    "all_finite",
    "OPTIMIZERS",
    "register_optimizer",
    "get_optimizer",
    "registered_optimizers",
    "require_optimizer",
    "eager_cache_info",
    "clear_eager_cache",
]

_local = threading.local()


def _depth() -> int:
    return getattr(_local, "depth", 0)


class _Nested:
    """Marks calls made from inside a wrapped init/update (e.g. ``super().init``)."""

    def __enter__(self) -> None:
        _local.depth = _depth() + 1

    def __exit__(self, *exc: Any) -> None:
        _local.depth = _depth() - 1


def _check_params(params: PyTree, allow_empty_leaves: bool = True) -> PyTree:
    """Converts Python/numpy float leaves to arrays; rejects non-float leaves by path, a
    tree with no leaves at all, and (unless ``allow_empty_leaves``) zero-size leaves."""
    if not jax.tree_util.tree_leaves(params):
        raise ValueError(
            f"params has no arrays to optimize (got {params!r}): pass the model's parameters"
        )

    def convert(path: tuple, x: Any) -> jax.Array:
        if isinstance(x, bool) or isinstance(x, int | np.integer):
            raise TypeError(
                f"params leaf {tree_path_str(path)} is an integer ({x!r}); optimizers need "
                "floating-point params (e.g. 1.0 instead of 1)"
            )
        if isinstance(x, float):
            return jnp.asarray(x, dtype=jnp.result_type(float))
        dtype = getattr(x, "dtype", None)
        if dtype is None:
            raise TypeError(
                f"params leaf {tree_path_str(path)} is a {type(x).__name__}, not an array"
            )
        if not jnp.issubdtype(dtype, jnp.floating):
            raise TypeError(
                f"params leaf {tree_path_str(path)} has dtype {dtype}; optimizers need "
                "floating-point params (float32, bfloat16, float16 or float64)"
            )
        if not allow_empty_leaves and np.size(x) == 0:
            raise ValueError(
                f"params leaf {tree_path_str(path)} has no elements (shape {np.shape(x)}); "
                "this optimizer normalizes over each tensor's elements: leave it out of "
                "the tree it optimizes"
            )
        return x if isinstance(x, jax.Array) else jnp.asarray(x)

    return jax.tree_util.tree_map_with_path(convert, params)


def _check_grads(grads: PyTree, params: PyTree) -> PyTree:
    """Checks grads against params (structure, shapes); converts Python/numpy leaves."""
    p_def = jax.tree_util.tree_structure(params)
    g_def = jax.tree_util.tree_structure(grads)
    if p_def != g_def:
        raise ValueError(
            f"grads do not have the tree structure of params:\n  params: {p_def}\n  grads:  {g_def}"
        )

    def convert(path: tuple, g: Any, p: Any) -> jax.Array:
        if isinstance(g, int | float) and not isinstance(g, bool):
            return jnp.asarray(g, dtype=p.dtype)
        if not hasattr(g, "dtype"):
            raise TypeError(f"grads leaf {tree_path_str(path)} is a {type(g).__name__}")
        if np.shape(g) != np.shape(p):
            raise ValueError(
                f"grads leaf {tree_path_str(path)} has shape {np.shape(g)} but the param has "
                f"shape {np.shape(p)}"
            )
        if not jnp.issubdtype(g.dtype, jnp.floating):
            raise TypeError(f"grads leaf {tree_path_str(path)} has non-float dtype {g.dtype}")
        return g if isinstance(g, jax.Array) else jnp.asarray(g)

    return jax.tree_util.tree_map_with_path(convert, grads, params)


def all_finite(grads: PyTree, loss: Any = None) -> jax.Array:
    """True (a boolean scalar) when no element of ``grads`` (nor ``loss``, if given) is
    NaN or infinite: the test behind :attr:`Optimizer.skip_nonfinite`.

    Args:
      grads: a pytree of arrays.
      loss: a scalar, or None.

    Returns:
      A boolean scalar array (traced under ``jit``).
    """
    leaves = jax.tree_util.tree_leaves(grads) + ([] if loss is None else [loss])
    checks = [jnp.all(jnp.isfinite(x)) for x in leaves if jnp.size(x)]
    return jnp.all(jnp.stack(checks)) if checks else jnp.asarray(True)


def _skip_if_nonfinite(
    new_state: OptState, opt_state: OptState, grads: PyTree, loss: Any
) -> OptState:
    """``new_state``, or ``opt_state`` unchanged where the step's inputs were not finite."""
    finite = all_finite(grads, loss)

    def pick(new: Any, old: Any) -> Any:
        if not isinstance(new, jax.Array | np.ndarray):
            return new
        return jax.lax.select(finite, new, jnp.asarray(old))

    return jax.tree_util.tree_map(pick, new_state, opt_state)


def _opt(num_steps: Any, key: Any) -> dict[str, Any]:
    out = {}
    if num_steps is not None:
        out["num_steps"] = num_steps
    if key is not None:
        out["key"] = key
    return out


def _wrap_init(raw_init: Callable) -> Callable:
    def plain(self, params, model_state, num_steps, key, kwargs):
        params = _check_params(params, getattr(self, "allows_empty_leaves", True))
        with _Nested():
            state = raw_init(self, params, model_state, **_opt(num_steps, key), **kwargs)
            return self._settle(state)

    @functools.wraps(raw_init)
    def init(self, params, model_state=None, num_steps=None, key=None, **kwargs):
        if _depth():
            return raw_init(self, params, model_state, **_opt(num_steps, key), **kwargs)
        args = (params, model_state, num_steps, key, kwargs)
        return _eager.call(self, "init", plain, args, warmup=_eager.INIT_WARMUP)

    return init


def _wrap_update(raw_update: Callable) -> Callable:
    takes_key = library_compat.accepts(raw_update, "key")
    loss_passing = library_compat.loss_passing(raw_update)

    def run(self, opt_state, grads, loss, model_state, kwargs):
        return library_compat.call_update(
            raw_update, loss_passing, self, opt_state, grads, loss, model_state, kwargs
        )

    def plain(self, opt_state, grads, loss, model_state, key, kwargs):
        if takes_key and key is not None:
            kwargs = {**kwargs, "key": key}
        params = self.get_params(opt_state)
        grads = _check_grads(grads, params)
        if loss is not None:
            loss = jnp.asarray(loss, dtype=compute_dtype(params))
        with _Nested():
            new_state = run(self, opt_state, grads, loss, model_state, kwargs)
        if jax.tree_util.tree_structure(new_state) == jax.tree_util.tree_structure(opt_state):
            new_state = tree_cast_like(new_state, opt_state)
            if self.skip_nonfinite:
                new_state = _skip_if_nonfinite(new_state, opt_state, grads, loss)
        return new_state

    @functools.wraps(raw_update)
    def update(self, opt_state, grads, loss=None, model_state=None, key=None, **kwargs):
        if _depth():
            if takes_key and key is not None:
                kwargs["key"] = key
            return run(self, opt_state, grads, loss, model_state, kwargs)
        if isinstance(loss, float | int | np.generic) and not isinstance(loss, bool):
            # A Python number would be a static part of the eager cache key (a new
            # program per value); as an array of the arithmetic dtype it is an input.
            loss = np.asarray(loss, dtype=compute_dtype(self.get_params(opt_state)))
        args = (opt_state, grads, loss, model_state, key, kwargs)
        return _eager.call(self, "update", plain, args, warmup=_eager.UPDATE_WARMUP)

    update._takes_key = takes_key  # type: ignore[attr-defined]
    return update


class Optimizer:
    """Base class of all optimizers (see the module docstring for what it guarantees).

    Subclasses implement :meth:`init` and :meth:`update`; states are ``flax.struct``
    dataclasses with ``params``, ``model_state`` and ``iteration`` fields (or override
    :meth:`get_params`, :meth:`get_state` and :meth:`set_params`).

    A minimal subclass (plain SGD; :mod:`learnopt.optimizers.sgd` is the full one)::

        @flax.struct.dataclass
        class State:
            params: Any
            model_state: Any
            iteration: jax.Array

        class MySGD(Optimizer):
            def __init__(self, learning_rate=0.01):
                self.learning_rate = learning_rate

            def init(self, params, model_state=None, num_steps=None, key=None):
                return State(params, model_state, jnp.zeros((), jnp.int32))

            def update(self, opt_state, grads, loss=None, model_state=None, **kwargs):
                params = jax.tree_util.tree_map(
                    lambda p, g: p - self.learning_rate * g, opt_state.params, grads
                )
                if model_state is None:
                    model_state = opt_state.model_state
                return State(params, model_state, opt_state.iteration + 1)

    The base class's constructor takes no arguments; a subclass's constructor takes
    its hyperparameters (floats, or traced scalars when a learned optimizer builds
    the optimizer from ``theta``).
    """

    #: A step whose gradients or loss hold a NaN or an infinity is skipped: ``update``
    #: returns the state it was given, unchanged (params, accumulators and ``iteration``:
    #: a skipped step is not counted as training, so ``iteration`` is the number of
    #: applied steps and the steps taken minus ``iteration`` the number skipped; test
    #: inputs with :func:`all_finite`). One non-finite element would otherwise poison a
    #: tensor (a learned optimizer normalizing over the tensor turns all of it NaN) and
    #: every later step. Set to False on a class or an instance to propagate non-finite
    #: values as optax does, e.g. to find where they come from.
    skip_nonfinite: bool = True
    #: Eager calls of ``init``/``update`` run as cached jitted programs. Set to False on
    #: a subclass (or an instance) whose methods have side effects or read state
    #: other than their arguments and the optimizer's attributes.
    eager_jit: bool = True
    # The eager cache describes optimizers attribute by attribute (arrays are inputs).
    _eager_hyperparams = True

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "init" in cls.__dict__:
            cls.init = _wrap_init(cls.__dict__["init"])
        if "update" in cls.__dict__:
            cls.update = _wrap_update(cls.__dict__["update"])

    def init(
        self,
        params: Params,
        model_state: ModelState = None,
        num_steps: int | None = None,
        key: jax.Array | None = None,
    ) -> OptState:
        """Creates the optimizer state for ``params``.

        Called once before training. A subclass's ``init`` builds its accumulators
        (momentum, second moments, ...) shaped like ``params`` and stores ``params``,
        ``model_state`` and a step counter (``int32`` zero) in the state it returns.
        The base class has already converted Python/numpy float leaves of ``params``
        to arrays and rejected non-float leaves before the subclass's code runs.

        Args:
          params: the initial parameters: a pytree (dict, list, tuple, dataclass...)
            whose leaves are floating-point arrays of any shape and dtype (float32,
            bfloat16, float16 or float64); the state keeps each leaf's dtype.
          model_state: non-trained model state (e.g. batch-norm statistics), any
            pytree or None; stored in the state and returned by :meth:`get_state`.
          num_steps: the planned number of :meth:`update` calls, for optimizers whose
            step depends on it (learning-rate schedules, learned optimizers that see
            the training progress); None when unknown.
          key: a ``jax.random`` PRNG key, for optimizers with random state; None
            otherwise.

        Returns:
          The state, a pytree (usually a ``flax.struct`` dataclass) that holds the
          params; the base class casts its leaves to the dtypes one :meth:`update`
          produces, so a jitted step compiles once.
        """
        raise NotImplementedError

    def update(
        self,
        opt_state: OptState,
        grads: PyTree,
        loss: jax.Array | None = None,
        model_state: ModelState = None,
        key: jax.Array | None = None,
        **kwargs: Any,
    ) -> OptState:
        """One optimization step: the next state from the current one and the gradients.

        Pure: a subclass's ``update`` returns a new state and changes neither its
        arguments nor ``self`` (the base class may run it under ``jit``, even when it
        is called eagerly).

        Args:
          opt_state: the current state, as returned by :meth:`init` or by the
            previous ``update``.
          grads: the gradients of the loss with respect to the params: a pytree with
            the tree structure and leaf shapes of ``get_params(opt_state)`` (the base
            class checks this and converts Python/numpy leaves to arrays); grads may
            have another float dtype than the params (e.g. float32 grads for bfloat16
            params).
          loss: the training loss at the current params, a scalar (the base class
            casts it to the arithmetic dtype of the params, their widest float and at
            least float32), or None when the caller has none; optimizers that do not
            look at the loss ignore it.
          model_state: the model state produced by the forward pass that computed
            ``grads``, to store in the next state; None keeps the current one.
          key: a ``jax.random`` PRNG key for a stochastic step (passed on only if the
            subclass's ``update`` accepts ``key``); None otherwise.
          **kwargs: further inputs some optimizers take, e.g. ``value_fn`` for line
            searches.

        Returns:
          The next state, with the same tree structure as ``opt_state``; the base class
          casts its leaves back to ``opt_state``'s dtypes.
        """
        raise NotImplementedError

    def get_params(self, opt_state: OptState) -> Params:
        """The params held by ``opt_state``.

        Override this (with :meth:`get_state` and :meth:`set_params`) when the state
        keeps its params somewhere other than a ``params`` field, e.g. a wrapper whose
        state holds its inner optimizer's state.

        Args:
          opt_state: a state of this optimizer (from :meth:`init` or :meth:`update`).

        Returns:
          The params pytree, with the structure, shapes and dtypes given to
          :meth:`init` (``opt_state.params`` here).
        """
        return opt_state.params

    def get_state(self, opt_state: OptState) -> ModelState:
        """The model state: ``opt_state.model_state`` (or ``.state``, the library's name).

        Args:
          opt_state: a state of this optimizer (from :meth:`init` or :meth:`update`).

        Returns:
          The model state stored in ``opt_state``: what :meth:`init` or the last
          :meth:`update` that was given one received (None for stateless models).
        """
        return library_compat.model_state_of(opt_state)

    def get_params_state(self, opt_state: OptState) -> tuple[Params, ModelState]:
        """The params and the model state held by ``opt_state``.

        Args:
          opt_state: a state of this optimizer.

        Returns:
          ``(get_params(opt_state), get_state(opt_state))``.
        """
        return self.get_params(opt_state), self.get_state(opt_state)

    def set_params(self, opt_state: OptState, params: Params) -> OptState:
        """``opt_state`` with new params (a dataclass ``replace`` or a namedtuple ``_replace``).

        Used by code that edits the params outside the optimizer (e.g. projecting them
        or restoring them from a checkpoint); the accumulators are kept as they are.

        Args:
          opt_state: a state of this optimizer (from :meth:`init` or :meth:`update`).
          params: the params to put in it, with the tree structure, shapes and dtypes
            of ``get_params(opt_state)``.

        Returns:
          A new state; ``opt_state`` itself is unchanged.
        """
        if hasattr(opt_state, "replace"):
            return opt_state.replace(params=params)
        return opt_state._replace(params=params)

    @property
    def name(self) -> str:
        """A short name of the optimizer and its hyperparameters (the class name here)."""
        return type(self).__name__

    def _abstract_update_kwargs(self, opt_state: OptState) -> dict[str, Any]:
        """Extra keyword arguments for the abstract update run by :meth:`_settle`."""
        return {}

    def _settle(self, state: OptState) -> OptState:
        """Casts ``state`` to the dtypes one ``update`` produces (see ``canonical``)."""
        params = self.get_params(state)
        loss = jnp.zeros((), compute_dtype(params))
        kwargs = self._abstract_update_kwargs(state)
        if getattr(type(self).update, "_takes_key", False):
            kwargs["key"] = jax.random.PRNGKey(0)

        def step(s):
            grads = self.get_params(s)
            return self.update(s, grads, loss, model_state=self.get_state(s), **kwargs)

        return settle_dtypes(step, state, what=f"{type(self).__name__} state")

    def as_optax(
        self,
        num_steps: int | None = None,
        weight_decay: float = 0.0,
        weight_decay_mask: Any = None,
    ) -> optax.GradientTransformationExtraArgs:
        """This optimizer as an optax transformation (see :mod:`~learnopt.optimizers.opt_to_optax`).

        ``update(grads, state, params, extra_args={"loss": ..., "key": ...})`` (or
        ``value=loss``, optax's name) runs :meth:`update` and returns
        ``new_params - params``; it composes with ``optax.chain``. Those updates are
        the signed step: decay weights with ``weight_decay=`` here, not by chaining
        ``optax.add_decayed_weights(wd)`` after it (that adds ``+wd * params`` to the
        step and makes the weights grow).

        Args:
          num_steps: the planned number of steps, passed to :meth:`init`.
          weight_decay: decoupled weight decay, the fraction of each parameter removed
            per step (``p <- p + step - weight_decay * p``; AdamW's ``lr * wd``), in
            [0, 1). 0: none.
          weight_decay_mask: which parameters decay (``optax.add_decayed_weights``'s
            ``mask``: a tree of booleans or a function of the params); None: all.

        Returns:
          An ``optax.GradientTransformationExtraArgs``. When the step count reaches
          ``num_steps``, it warns once (``RuntimeWarning``): optimizers that read the
          fraction of training done hold it at 1 from there (a schedule that decays to
          zero steps zero), so a run longer than planned trains on in name only.

        Raises:
          ValueError, TypeError: ``num_steps`` is not an integer >= 1.
        """
        num_steps = _validate.run_length("as_optax: num_steps", num_steps)
        if num_steps is None:
            self._check_needs_no_run_length()
        tx = _to_optax.transformation(self, num_steps=num_steps)
        return _to_optax.with_weight_decay(tx, weight_decay, weight_decay_mask)

    def _check_needs_no_run_length(self) -> None:
        """Raises at ``as_optax()`` when ``init`` would need ``num_steps`` (found by an
        abstract ``init`` on a tiny tree: nothing is computed)."""
        try:
            jax.eval_shape(lambda: self.init({"w": jnp.zeros((2,), jnp.float32)}))
        except _validate.RunLengthMissing:
            owner = getattr(getattr(self, "lopt", None), "name", None) or type(self).__name__
            raise ValueError(
                f"{owner} reads the fraction of training done, t / num_steps: give the "
                "planned number of steps, as_optax(num_steps=T)"
            ) from None
        except Exception:  # anything else surfaces at tx.init, with the real params
            return

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


def eager_cache_info() -> _eager.EagerCacheInfo:
    """Counters of the eager-call cache: hits, compiles, traces, plain calls, failures.

    Returns:
      A copy of the counters since the last :func:`clear_eager_cache`.
    """
    return _eager.cache_info()


def clear_eager_cache() -> None:
    """Drops the compiled programs of eager optimizer calls (and resets the counters)."""
    _eager.clear_cache()


def require_optimizer(opt: Any, what: str) -> None:
    """Raises unless ``opt`` is an :class:`Optimizer` instance (wrappers check their inner one).

    Args:
      opt: the value to check.
      what: how the error message names it (e.g. "GradientClipOptimizer's opt").

    Raises:
      ValueError: ``opt`` is not an ``Optimizer`` instance (e.g. the class was passed).
    """
    if not isinstance(opt, Optimizer):
        raise ValueError(
            f"{what} must be an Optimizer instance (did you pass the class instead of an "
            f"instance?), got {opt!r}"
        )


#: Every built-in optimizer by name: ``OPTIMIZERS.get("Adam", learning_rate=1e-3)``.
#: Each module registers the optimizers it defines; ``learnopt.optimizers`` imports
#: them all. Entries whose class needs arguments (``AdamW``'s learning rate, a wrapped
#: optimizer) are registered with small-problem values that keyword arguments
#: override. The dtype conformance sweep (``tests/test_conformance.py``) runs every entry.
OPTIMIZERS: Registry[Optimizer] = Registry("optimizer", listing="optimizers")


def register_optimizer(name: str, fn: Callable[..., Optimizer]) -> None:
    """Adds an optimizer constructor to the registry used by conformance tests and the CLI.

    Args:
      name: the registry name.
      fn: a callable returning an :class:`Optimizer` (keyword arguments allowed).
    """
    OPTIMIZERS.register(fn, name=name)


def registered_optimizers() -> list[str]:
    """The names accepted by :func:`get_optimizer`.

    Returns:
      The registered names, sorted.
    """
    return OPTIMIZERS.names()


def get_optimizer(name: str, **kwargs: Any) -> Optimizer:
    """Builds a registered optimizer by name.

    Args:
      name: a registered name (see :func:`registered_optimizers`).
      **kwargs: arguments for its constructor.

    Returns:
      The optimizer.
    """
    return OPTIMIZERS.get(name, **kwargs)
