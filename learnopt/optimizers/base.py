"""Optimizers: stateless objects whose states (``flax.struct`` dataclasses) hold params.

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

Built-in optimizers run their arithmetic in float32 (float64 for float64 params) and
keep accumulators in that dtype; low-precision params are cast back after each step.

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
"""

from __future__ import annotations

import functools
import inspect
import threading
from collections.abc import Callable
from typing import Any

import flax.struct
import jax
import jax.numpy as jnp
import numpy as np
import optax

from learnopt import _validate
from learnopt.canonical import compute_dtype, leaf_compute_dtype, settle_dtypes
from learnopt.optimizers import _eager
from learnopt.registry import Registry
from learnopt.tree_utils import tree_cast_like, tree_map_multi, tree_path_str, tree_vdot

PyTree = Any
Params = Any
ModelState = Any
OptState = Any

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


def _accepts(fn: Callable, name: str) -> bool:
    params = inspect.signature(fn).parameters.values()
    return any(p.name == name or p.kind is inspect.Parameter.VAR_KEYWORD for p in params)


def _loss_passing(raw_update: Callable) -> str:
    """How a subclass's ``update`` takes the loss: ``"positional"``, ``"keyword"`` or ``"none"``.

    The notes write ``update(self, opt_state, grads, loss, model_state=None, **kw)``;
    the library's newest classes write ``update(self, opt_state, grad,
    model_state=None, **kw)`` and read ``loss`` from the keywords.
    """
    params = list(inspect.signature(raw_update).parameters.values())[3:]
    positional = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    if params and params[0].kind in positional and params[0].name not in ("model_state", "key"):
        return "positional"
    return "keyword" if _accepts(raw_update, "loss") else "none"


def _check_params(params: PyTree) -> PyTree:
    """Converts Python/numpy float leaves to arrays; rejects non-float leaves by path."""

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


def _opt(num_steps: Any, key: Any) -> dict[str, Any]:
    out = {}
    if num_steps is not None:
        out["num_steps"] = num_steps
    if key is not None:
        out["key"] = key
    return out


def _wrap_init(raw_init: Callable) -> Callable:
    def plain(self, params, model_state, num_steps, key, kwargs):
        params = _check_params(params)
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
    takes_key = _accepts(raw_update, "key")
    loss_passing = _loss_passing(raw_update)

    def run(self, opt_state, grads, loss, model_state, kwargs):
        if loss_passing == "positional":
            return raw_update(self, opt_state, grads, loss, model_state=model_state, **kwargs)
        if loss_passing == "keyword":
            kwargs = {"loss": loss, **kwargs}
        return raw_update(self, opt_state, grads, model_state=model_state, **kwargs)

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
    """

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

        Args:
          params: the initial parameters (a pytree of float arrays).
          model_state: non-trained model state (e.g. batch-norm statistics), stored in
            the state and returned by :meth:`get_state`.
          num_steps: the planned length of training, for optimizers whose update
            depends on it (learning-rate schedules).
          key: a PRNG key, for optimizers with random state.

        Returns:
          The state; the base class casts it to the dtypes :meth:`update` produces.
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
        """One optimization step.

        Args:
          opt_state: the current state.
          grads: gradients with the structure and shapes of the params (already
            checked and converted to arrays by the base class).
          loss: the loss at the current params (a scalar in the arithmetic dtype), or
            None.
          model_state: the new model state, to store in the next state.
          key: a PRNG key (passed only if the subclass's ``update`` accepts ``key``).
          **kwargs: further inputs, e.g. ``value_fn`` for line searches.

        Returns:
          The next state; the base class casts it back to ``opt_state``'s dtypes.
        """
        raise NotImplementedError

    def get_params(self, opt_state: OptState) -> Params:
        return opt_state.params

    def get_state(self, opt_state: OptState) -> ModelState:
        """The model state: ``opt_state.model_state`` (or ``.state``, the library's name)."""
        try:
            return opt_state.model_state
        except AttributeError:
            return opt_state.state

    def get_params_state(self, opt_state: OptState) -> tuple[Params, ModelState]:
        return self.get_params(opt_state), self.get_state(opt_state)

    def set_params(self, opt_state: OptState, params: Params) -> OptState:
        """``opt_state`` with new params (a dataclass ``replace`` or a namedtuple ``_replace``)."""
        if hasattr(opt_state, "replace"):
            return opt_state.replace(params=params)
        return opt_state._replace(params=params)

    @property
    def name(self) -> str:
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

    def as_optax(self, num_steps: int | None = None) -> optax.GradientTransformationExtraArgs:
        """This optimizer as an optax transformation (see :mod:`~learnopt.optimizers.opt_to_optax`).

        ``update(grads, state, params, extra_args={"loss": ..., "key": ...})`` (or
        ``value=loss``, optax's name) runs :meth:`update` and returns
        ``new_params - params``; it composes with ``optax.chain``.
        """
        from learnopt.optimizers import opt_to_optax

        return opt_to_optax.opt_to_optax_opt(self, num_steps=num_steps)

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


def eager_cache_info() -> _eager.EagerCacheInfo:
    """Counters of the eager-call cache: hits, compiles, traces, plain calls, failures."""
    return _eager.cache_info()


def clear_eager_cache() -> None:
    """Drops the compiled programs of eager optimizer calls (and resets the counters)."""
    _eager.clear_cache()


class _ModelStateAlias:
    """Gives a state dataclass the library's name for its model state, read-only."""

    @property
    def state(self) -> ModelState:
        return self.model_state


def _cd(x: jax.Array) -> np.dtype:
    return leaf_compute_dtype(x.dtype)


def _hp(value: Any, dtype: np.dtype) -> jax.Array:
    """A hyperparameter (Python float or traced scalar) in the arithmetic dtype."""
    return jnp.asarray(value).astype(dtype)


def _is_zero(value: Any) -> bool:
    """Whether a hyperparameter is a Python zero (so its term can be left out)."""
    return isinstance(value, float | int) and value == 0


def safe_sqrt(x: jax.Array) -> jax.Array:
    """``sqrt(x)`` for ``x >= 0`` whose derivative at 0 is 0 instead of ``inf``.

    Meta-gradients through Adam-like updates multiply ``d sqrt(v)/dv`` by zero where
    a gradient is exactly zero (a dead ReLU unit); ``0 * inf`` would be NaN.
    """
    positive = x > 0
    return jnp.where(positive, jnp.sqrt(jnp.where(positive, x, 1)), 0)


def _iteration0() -> jax.Array:
    return jnp.zeros((), jnp.int32)


def _accumulator(params: Params, dtype: Any = None) -> PyTree:
    return jax.tree_util.tree_map(lambda p: jnp.zeros(np.shape(p), dtype or _cd(p)), params)


def _next_model_state(model_state: ModelState, opt_state: OptState) -> ModelState:
    return model_state if model_state is not None else opt_state.model_state


@flax.struct.dataclass
class SGDState(_ModelStateAlias):
    params: Params
    model_state: ModelState
    iteration: jax.Array


class SGD(Optimizer):
    """Stochastic gradient descent: ``p <- p - lr * g``.

    Args:
      learning_rate: step size (a float or a traced scalar).
    """

    def __init__(self, learning_rate: float = 0.01):
        _validate.positive_float("learning_rate", learning_rate)
        self.learning_rate = learning_rate

    def init(self, params, model_state=None, num_steps=None, key=None):
        return SGDState(params=params, model_state=model_state, iteration=_iteration0())

    def update(self, opt_state, grads, loss=None, model_state=None, key=None, **kwargs):
        def step(p, g):
            cd = _cd(p)
            return (p.astype(cd) - _hp(self.learning_rate, cd) * g.astype(cd)).astype(p.dtype)

        params = jax.tree_util.tree_map(step, opt_state.params, grads)
        return SGDState(
            params=params,
            model_state=_next_model_state(model_state, opt_state),
            iteration=opt_state.iteration + 1,
        )

    @property
    def name(self) -> str:
        return f"SGD_lr{self.learning_rate}"

    def __repr__(self) -> str:
        return f"SGD(learning_rate={self.learning_rate})"


@flax.struct.dataclass
class SGDMState(_ModelStateAlias):
    params: Params
    model_state: ModelState
    iteration: jax.Array
    momentums: PyTree


class SGDM(Optimizer):
    """SGD with heavy-ball momentum (Polyak, 1964): ``m <- mu m + g; p <- p - lr m``.

    Args:
      learning_rate: step size.
      momentum: decay ``mu`` of the momentum accumulator.
    """

    def __init__(self, learning_rate: float = 0.01, momentum: float = 0.9):
        _validate.positive_float("learning_rate", learning_rate)
        _validate.unit_interval("momentum", momentum)
        self.learning_rate = learning_rate
        self.momentum = momentum

    def init(self, params, model_state=None, num_steps=None, key=None):
        return SGDMState(
            params=params,
            model_state=model_state,
            iteration=_iteration0(),
            momentums=_accumulator(params),
        )

    def update(self, opt_state, grads, loss=None, model_state=None, key=None, **kwargs):
        def step(p, m, g):
            cd = m.dtype
            m = _hp(self.momentum, cd) * m + g.astype(cd)
            p = (p.astype(cd) - _hp(self.learning_rate, cd) * m).astype(p.dtype)
            return p, m

        params, momentums = tree_map_multi(step, opt_state.params, opt_state.momentums, grads)
        return SGDMState(
            params=params,
            model_state=_next_model_state(model_state, opt_state),
            iteration=opt_state.iteration + 1,
            momentums=momentums,
        )

    @property
    def name(self) -> str:
        return f"SGDM_lr{self.learning_rate}_m{self.momentum}"

    def __repr__(self) -> str:
        return f"SGDM(learning_rate={self.learning_rate}, momentum={self.momentum})"


@flax.struct.dataclass
class AdamState(_ModelStateAlias):
    params: Params
    model_state: ModelState
    iteration: jax.Array
    mu: PyTree
    nu: PyTree


def _adam_direction(m, v, g, t, b1, b2, eps, eps_root):
    """One Adam moment update in the arithmetic dtype of ``m``; returns (direction, m, v).

    ``direction = m_hat / (sqrt(v_hat + eps_root) + eps)`` with the bias-corrected
    moments ``m_hat = m / (1 - b1^t)``, ``v_hat = v / (1 - b2^t)`` (optax's
    ``scale_by_adam``).
    """
    cd = m.dtype
    b1, b2 = _hp(b1, cd), _hp(b2, cd)
    g = g.astype(cd)
    m = b1 * m + (1 - b1) * g
    v = b2 * v + (1 - b2) * jnp.square(g)
    m_hat = m / (1 - b1 ** t.astype(cd))
    v_hat = v / (1 - b2 ** t.astype(cd))
    if not _is_zero(eps_root):
        v_hat = v_hat + _hp(eps_root, cd)
    return m_hat / (safe_sqrt(v_hat) + _hp(eps, cd)), m, v


def _decay_complement(one_minus_beta: Any, dtype: np.dtype) -> jax.Array:
    """``1 - beta`` for arithmetic in ``dtype``, as a float32 (float64) scalar.

    Kept in ``[max(16 sqrt(tiny32), tiny), 1 - ulp]`` with ``where`` (a zero gradient
    outside, never ``0 * inf``): ``beta`` never rounds to 1 (a bias correction of 0) nor
    to 0, and ``1 / (1 - beta^t)`` and its derivative stay finite. Below the floor
    (``beta > 1 - 2e-18``) every result is the same to float32 precision.
    """
    sd = np.float64 if np.dtype(dtype) == np.float64 else np.float32
    omb = jnp.asarray(one_minus_beta).astype(sd)
    lo = max(16 * np.sqrt(np.finfo(sd).tiny), float(jnp.finfo(dtype).tiny))
    hi = 1 - float(jnp.finfo(dtype).epsneg)
    omb = jnp.where(omb < lo, jnp.asarray(lo, sd), omb)
    return jnp.where(omb > hi, jnp.asarray(hi, sd), omb)


def _adam_direction_from_decays(m, v, g, t, omb1, omb2, eps, eps_root):
    """:func:`_adam_direction` with ``1 - beta`` given directly (numerically safe form).

    ``m <- m + (1-b1)(g - m)``, ``v <- v + (1-b2)(g^2 - v)`` and the bias corrections
    ``1 - b^t = -expm1(t * log1p(-(1-b)))`` (in float32 or float64 scalars): exact for
    ``1 - b`` far below float precision, where ``b`` itself would round to 1 and
    ``1 - b^t`` to 0.
    """
    cd = m.dtype
    omb1, omb2 = _decay_complement(omb1, cd), _decay_complement(omb2, cd)
    g = g.astype(cd)
    m = m + omb1.astype(cd) * (g - m)
    v = v + omb2.astype(cd) * (jnp.square(g) - v)

    def inverse_correction(omb):
        return (1 / -jnp.expm1(t.astype(omb.dtype) * jnp.log1p(-omb))).astype(cd)

    m_hat = m * inverse_correction(omb1)
    v_hat = v * inverse_correction(omb2)
    if not _is_zero(eps_root):
        v_hat = v_hat + _hp(eps_root, cd)
    return m_hat / (safe_sqrt(v_hat) + _hp(eps, cd)), m, v


class Adam(Optimizer):
    """Adam (Kingma & Ba, 2015, arXiv:1412.6980), as learned_optimization's ``Adam``.

    ``m <- b1 m + (1-b1) g;  v <- b2 v + (1-b2) g^2;
    p <- p - lr * m_hat / (sqrt(v_hat + epsilon_root) + epsilon)`` with bias-corrected
    ``m_hat``, ``v_hat``; this is ``optax.adam(lr, b1, b2, eps, eps_root)``.
    Hyperparameters may be traced arrays, which is how learned optimizers such as
    ``LearnableAdam`` use it.

    Args:
      learning_rate: step size (the library's default, 1e-2).
      beta1: decay of the first moment.
      beta2: decay of the second moment.
      epsilon: added to the root of the second moment.
      epsilon_root: added to the second moment inside the root (the library's default,
        1e-8, keeps the root's derivative finite where gradients are zero).
      one_minus_beta1, one_minus_beta2: ``1 - beta`` given directly instead of the betas
        (learnopt's addition, e.g. ``exp(theta)`` in ``LearnableAdam``): the moments then
        update as ``m + (1-b)(g - m)`` and the bias corrections are
        ``-expm1(t log1p(-(1-b)))``, so a beta within float precision of 1 never rounds
        to 1; ``1 - b`` is kept in ``[tiny, 1)`` of the arithmetic dtype.
    """

    def __init__(
        self,
        learning_rate: float = 0.01,
        beta1: float = 0.9,
        beta2: float = 0.999,
        epsilon: float = 1e-8,
        epsilon_root: float = 1e-8,
        *,
        one_minus_beta1: Any = None,
        one_minus_beta2: Any = None,
    ):
        _validate.positive_float("learning_rate", learning_rate)
        _validate.unit_interval("beta1", beta1)
        _validate.unit_interval("beta2", beta2)
        _validate.non_negative_float("epsilon", epsilon)
        _validate.non_negative_float("epsilon_root", epsilon_root)
        for name, omb in (
            ("one_minus_beta1", one_minus_beta1),
            ("one_minus_beta2", one_minus_beta2),
        ):
            if omb is not None:
                _validate.real(name, omb, low=0.0, high=1.0, low_open=True)
        self.learning_rate = learning_rate
        self.beta1 = beta1
        self.beta2 = beta2
        self.epsilon = epsilon
        self.epsilon_root = epsilon_root
        if (one_minus_beta1 is None) != (one_minus_beta2 is None):
            raise ValueError("one_minus_beta1 and one_minus_beta2 go together: pass both or none")
        self.one_minus_beta1 = one_minus_beta1
        self.one_minus_beta2 = one_minus_beta2

    def init(self, params, model_state=None, num_steps=None, key=None):
        return AdamState(
            params=params,
            model_state=model_state,
            iteration=_iteration0(),
            mu=_accumulator(params),
            nu=_accumulator(params),
        )

    def update(self, opt_state, grads, loss=None, model_state=None, key=None, **kwargs):
        t = opt_state.iteration + 1

        def step(p, m, v, g):
            cd = m.dtype
            if self.one_minus_beta1 is None:
                d, m, v = _adam_direction(
                    m, v, g, t, self.beta1, self.beta2, self.epsilon, self.epsilon_root
                )
            else:
                omb1, omb2 = self.one_minus_beta1, self.one_minus_beta2
                d, m, v = _adam_direction_from_decays(
                    m, v, g, t, omb1, omb2, self.epsilon, self.epsilon_root
                )
            return (p.astype(cd) - _hp(self.learning_rate, cd) * d).astype(p.dtype), m, v

        params, mu, nu = tree_map_multi(step, opt_state.params, opt_state.mu, opt_state.nu, grads)
        return AdamState(
            params=params,
            model_state=_next_model_state(model_state, opt_state),
            iteration=t,
            mu=mu,
            nu=nu,
        )

    @property
    def name(self) -> str:
        return (
            f"Adam_lr{self.learning_rate}_b1{self.beta1}_b2{self.beta2}"
            f"_eps{self.epsilon}_epsroot{self.epsilon_root}"
        )

    def __repr__(self) -> str:
        return (
            f"Adam(learning_rate={self.learning_rate}, beta1={self.beta1}, "
            f"beta2={self.beta2}, epsilon={self.epsilon}, epsilon_root={self.epsilon_root})"
        )


def _full_mask(mask: Any, params: Params) -> PyTree:
    """``mask`` (a pytree prefix of params, or a callable of params) as one bool per leaf."""
    if callable(mask):
        mask = mask(params)
    return jax.tree_util.tree_map(
        lambda m, sub: jax.tree_util.tree_map(lambda _: bool(m), sub), mask, params
    )


class AdamW(Optimizer):
    """Adam with decoupled weight decay (Loshchilov & Hutter, 2019, arXiv:1711.05101).

    ``p <- p - lr * (m_hat / (sqrt(v_hat + eps_root) + eps) + weight_decay * p)``;
    this is ``optax.adamw`` and learned_optimization's ``optax_opts.AdamW`` (same
    arguments and defaults).

    Args:
      learning_rate: step size (required, as in the library).
      b1: decay of the first moment.
      b2: decay of the second moment.
      eps: added to the root of the second moment.
      eps_root: added to the second moment inside the root.
      mu_dtype: dtype the first moment is stored in (default: the arithmetic dtype).
      weight_decay: decoupled weight-decay rate.
      mask: which params are decayed: a pytree of bools with the params' structure
        (or a prefix of it), or a callable ``params -> such a pytree``; None decays all.
    """

    def __init__(
        self,
        learning_rate: float,
        b1: float = 0.9,
        b2: float = 0.999,
        eps: float = 1e-8,
        eps_root: float = 0.0,
        mu_dtype: Any = None,
        weight_decay: float = 1e-4,
        mask: Any = None,
    ):
        _validate.positive_float("learning_rate", learning_rate)
        _validate.unit_interval("b1", b1)
        _validate.unit_interval("b2", b2)
        _validate.non_negative_float("eps", eps)
        _validate.non_negative_float("eps_root", eps_root)
        _validate.non_negative_float("weight_decay", weight_decay)
        self.learning_rate = learning_rate
        self.b1 = b1
        self.b2 = b2
        self.eps = eps
        self.eps_root = eps_root
        self.mu_dtype = None if mu_dtype is None else jnp.dtype(mu_dtype)
        self.weight_decay = weight_decay
        self.mask = mask

    def init(self, params, model_state=None, num_steps=None, key=None):
        return AdamState(
            params=params,
            model_state=model_state,
            iteration=_iteration0(),
            mu=_accumulator(params, self.mu_dtype),
            nu=_accumulator(params),
        )

    def update(self, opt_state, grads, loss=None, model_state=None, key=None, **kwargs):
        t = opt_state.iteration + 1
        params = opt_state.params
        decay = (
            _full_mask(self.mask, params)
            if self.mask is not None
            else jax.tree_util.tree_map(lambda _: True, params)
        )

        def step(p, m, v, g, decayed):
            cd = v.dtype
            d, m_new, v = _adam_direction(
                m.astype(cd), v, g, t, self.b1, self.b2, self.eps, self.eps_root
            )
            pc = p.astype(cd)
            if decayed and not _is_zero(self.weight_decay):
                d = d + _hp(self.weight_decay, cd) * pc
            p = (pc - _hp(self.learning_rate, cd) * d).astype(p.dtype)
            return p, m_new.astype(m.dtype), v

        params, mu, nu = tree_map_multi(step, params, opt_state.mu, opt_state.nu, grads, decay)
        return AdamState(
            params=params,
            model_state=_next_model_state(model_state, opt_state),
            iteration=t,
            mu=mu,
            nu=nu,
        )

    def __repr__(self) -> str:
        return (
            f"AdamW(learning_rate={self.learning_rate}, b1={self.b1}, b2={self.b2}, "
            f"eps={self.eps}, eps_root={self.eps_root}, weight_decay={self.weight_decay})"
        )


@flax.struct.dataclass
class RMSPropState(_ModelStateAlias):
    params: Params
    model_state: ModelState
    iteration: jax.Array
    nu: PyTree
    momentums: PyTree


class RMSProp(Optimizer):
    """RMSProp (Tieleman & Hinton, 2012) with optional (Nesterov) momentum.

    ``v <- d v + (1-d) g^2;  u = lr * g / sqrt(v + epsilon);  m <- mu m + u;
    p <- p - (u + mu m if nesterov else m)`` -- epsilon inside the root, as
    ``optax.rmsprop`` (which learned_optimization's ``RMSProp`` wraps).

    Args:
      learning_rate: step size.
      decay: decay ``d`` of the squared-gradient average.
      epsilon: added to the average inside the root.
      momentum: decay ``mu`` of the momentum (0: plain RMSProp).
      nesterov: use Nesterov momentum.
    """

    def __init__(
        self,
        learning_rate: float = 0.01,
        decay: float = 0.9,
        epsilon: float = 1e-8,
        momentum: float = 0.0,
        nesterov: bool = False,
    ):
        _validate.positive_float("learning_rate", learning_rate)
        _validate.unit_interval("decay", decay)
        _validate.non_negative_float("epsilon", epsilon)
        _validate.unit_interval("momentum", momentum)
        self.learning_rate = learning_rate
        self.decay = decay
        self.epsilon = epsilon
        self.momentum = momentum
        self.nesterov = nesterov

    def init(self, params, model_state=None, num_steps=None, key=None):
        return RMSPropState(
            params=params,
            model_state=model_state,
            iteration=_iteration0(),
            nu=_accumulator(params),
            momentums=_accumulator(params),
        )

    def update(self, opt_state, grads, loss=None, model_state=None, key=None, **kwargs):
        def step(p, v, m, g):
            cd = v.dtype
            d, mu = _hp(self.decay, cd), _hp(self.momentum, cd)
            g = g.astype(cd)
            v = d * v + (1 - d) * jnp.square(g)
            u = _hp(self.learning_rate, cd) * (g / safe_sqrt(v + _hp(self.epsilon, cd)))
            m = mu * m + u
            delta = u + mu * m if self.nesterov else m
            return (p.astype(cd) - delta).astype(p.dtype), v, m

        params, nu, momentums = tree_map_multi(
            step, opt_state.params, opt_state.nu, opt_state.momentums, grads
        )
        return RMSPropState(
            params=params,
            model_state=_next_model_state(model_state, opt_state),
            iteration=opt_state.iteration + 1,
            nu=nu,
            momentums=momentums,
        )

    @property
    def name(self) -> str:
        return (
            f"RMSProp_lr{self.learning_rate}_d{self.decay}_eps{self.epsilon}"
            f"_m{self.momentum}_nesterov{self.nesterov}"
        )

    def __repr__(self) -> str:
        return (
            f"RMSProp(learning_rate={self.learning_rate}, decay={self.decay}, "
            f"epsilon={self.epsilon}, momentum={self.momentum}, nesterov={self.nesterov})"
        )


@flax.struct.dataclass
class OptaxState(_ModelStateAlias):
    params: Params
    model_state: ModelState
    iteration: jax.Array
    optax_state: PyTree

    @property
    def optax_opt_state(self) -> PyTree:
        """The library's name for :attr:`optax_state` (read-only)."""
        return self.optax_state


class OptaxDtypeError(TypeError):
    """An optax transform fails for the dtype learnopt runs it in (raised at ``init``)."""


def _transform_name(tx: Any) -> str:
    """A readable name for an optax transform: the function that built it, if known."""
    qualname = getattr(getattr(tx, "update", None), "__qualname__", "")
    head = qualname.split(".<locals>")[0]
    if head and head != qualname:
        return head
    return type(tx).__name__


def _first_lines(err: BaseException, n: int = 3) -> str:
    lines = [x for x in str(err).splitlines() if x.strip()]
    text = "\n    ".join(lines[:n])
    return f"{type(err).__name__}: {text}" + (" ..." if len(lines) > n else "")


def _dtype_names(tree: PyTree) -> str:
    names = sorted({str(np.dtype(x.dtype)) for x in jax.tree_util.tree_leaves(tree)})
    return "/".join(names)


class OptaxOptimizer(Optimizer):
    """Wraps any optax ``GradientTransformation`` as a learnopt :class:`Optimizer`.

    The transformation runs in float32 (float64 for float64 params): low-precision
    params and grads are upcast before ``tx.update`` and the new params cast back, so
    every optax transform works for bfloat16/float16 params and mixed precision,
    and quantities such as L-BFGS's ``1 / <s, y>`` cannot overflow float16. The state
    is settled at ``init`` (see :mod:`learnopt.canonical`), so a jitted step compiles
    once. The cost: optax accumulators are float32 even for bfloat16 params.

    ``update`` passes ``value=loss`` and ``grad=grads`` and forwards any other keyword
    arguments, such as ``value_fn``, to ``GradientTransformationExtraArgs`` (e.g.
    ``optax.lbfgs()``); plain transforms ignore them (``optax.with_extra_args_support``)::

        opt = OptaxOptimizer(optax.lbfgs())
        state = opt.update(state, grads, loss, value_fn=loss_fn)

    If the transform itself fails for the dtype it runs in (an internal ``lax.cond``
    whose branches disagree on dtype, say), ``init`` raises :class:`OptaxDtypeError`
    naming the transform and the dtypes, instead of a trace from inside the first step.

    Args:
      opt: the optax transformation.
      name: its name in error messages and ``repr`` (default: the optax function that
        built it, e.g. ``chain``).
    """

    def __init__(self, opt: optax.GradientTransformation, name: str | None = None):
        if not (hasattr(opt, "init") and hasattr(opt, "update")):
            raise TypeError(
                f"OptaxOptimizer expects an optax GradientTransformation, got {type(opt).__name__}"
            )
        self.tx_name = name or _transform_name(opt)
        if not isinstance(opt, optax.GradientTransformationExtraArgs):
            opt = optax.with_extra_args_support(opt)
        self.opt = opt

    def init(self, params, model_state=None, num_steps=None, key=None):
        cd = compute_dtype(params)
        params_c = self._to_tx(jax.tree_util.tree_map(lambda p: p.astype(cd), params))
        try:
            optax_state = self.opt.init(params_c)
        except Exception as err:
            raise self._dtype_error(params, err) from None
        return OptaxState(
            params=params,
            model_state=model_state,
            iteration=_iteration0(),
            optax_state=optax_state,
        )

    def update(self, opt_state, grads, loss=None, model_state=None, key=None, **kwargs):
        params = opt_state.params
        cd = compute_dtype(params)
        params_c = self._to_tx(jax.tree_util.tree_map(lambda p: p.astype(cd), params))
        grads_c = self._to_tx(jax.tree_util.tree_map(lambda g: g.astype(cd), grads))
        extra = dict(kwargs)
        extra["grad"] = grads_c
        if loss is not None:
            extra["value"] = jnp.asarray(loss).astype(cd)
        if "value_fn" in extra:
            user_fn = extra["value_fn"]

            def value_fn(p_c, *args, **kw):
                p = self._from_tx(p_c, params)
                p = jax.tree_util.tree_map(lambda x, ref: x.astype(ref.dtype), p, params)
                return jnp.asarray(user_fn(p, *args, **kw)).astype(cd)

            extra["value_fn"] = value_fn
        updates, optax_state = self.opt.update(grads_c, opt_state.optax_state, params_c, **extra)
        new_params = jax.tree_util.tree_map(
            lambda pc, u, p: (pc + u.astype(cd)).astype(p.dtype),
            self._from_tx(params_c, params),
            self._from_tx(updates, params),
            params,
        )
        return OptaxState(
            params=new_params,
            model_state=_next_model_state(model_state, opt_state),
            iteration=opt_state.iteration + 1,
            optax_state=optax_state,
        )

    def _to_tx(self, tree: PyTree) -> PyTree:
        """Params-shaped tree -> what the transform sees (identity; SM3 adds an axis to scalars)."""
        return tree

    def _from_tx(self, tree: PyTree, params: Params) -> PyTree:
        """Inverse of :meth:`_to_tx`, given the params for their shapes."""
        return tree

    def _abstract_update_kwargs(self, opt_state):
        # A stand-in objective with the params' structure, for transforms (such as
        # L-BFGS's line search) that evaluate the loss at new points.
        return {"value_fn": lambda p: sum(jnp.sum(jnp.square(x)) for x in jax.tree.leaves(p))}

    def _settle(self, state):
        try:
            return super()._settle(state)
        except Exception as err:
            raise self._dtype_error(state.params, err) from None

    def _works_in(self, params: Params, dtype: Any) -> bool:
        """Whether the transform initializes and settles for ``params`` cast to ``dtype``."""
        try:
            p = jax.tree_util.tree_map(lambda x: jnp.zeros(np.shape(x), dtype), params)
            tx_state = self.opt.init(self._to_tx(p))
            state = OptaxState(
                params=p, model_state=None, iteration=_iteration0(), optax_state=tx_state
            )
            Optimizer._settle(self, state)
        except Exception:
            return False
        return True

    def _dtype_error(self, params: Params, err: Exception) -> Exception:
        """``err`` as a short :class:`OptaxDtypeError` if it is caused by the dtype.

        The transform is tried once more in float32: if it fails there too, the
        problem is not the dtype and ``err`` is returned unchanged.
        """
        cd = compute_dtype(params)
        if cd == np.dtype(jnp.float32) or not self._works_in(params, jnp.float32):
            return err
        new = OptaxDtypeError(
            f"optax transform {self.tx_name!r} does not work in {cd}: learnopt runs it in "
            f"{cd} for params of dtype {_dtype_names(params)} (grads, value and value_fn "
            f"outputs are cast to {cd}), and the transform raises\n    {_first_lines(err)}\n"
            "It works in float32: use float32 params (or bfloat16/float16 ones, which run "
            "in float32) for this transform."
        )
        new.original = err  # type: ignore[attr-defined]
        return new

    @property
    def name(self) -> str:
        return f"OptaxOptimizer({self.tx_name})"

    def __repr__(self) -> str:
        return self.name


def _require_optimizer(opt: Any, what: str) -> None:
    if not isinstance(opt, Optimizer):
        raise ValueError(
            f"{what} must be an Optimizer instance (did you pass the class instead of an "
            f"instance?), got {opt!r}"
        )


class GradientClipOptimizer(Optimizer):
    """Clips every gradient element to ``[-grad_clip, grad_clip]``, then runs ``opt``.

    The state is ``opt``'s state (``get_params``/``get_state``/``set_params`` are
    ``opt``'s), as in learned_optimization.

    Args:
      opt: the optimizer to run on the clipped gradients (an instance).
      grad_clip: the clipping threshold.
    """

    def __init__(self, opt: Optimizer, grad_clip: float = 3.0):
        _require_optimizer(opt, "GradientClipOptimizer's opt")
        _validate.positive_float("grad_clip", grad_clip)
        self.opt = opt
        self.grad_clip = grad_clip

    def get_params(self, opt_state):
        return self.opt.get_params(opt_state)

    def get_state(self, opt_state):
        return self.opt.get_state(opt_state)

    def set_params(self, opt_state, params):
        return self.opt.set_params(opt_state, params)

    def init(self, params, model_state=None, num_steps=None, key=None, **kwargs):
        return self.opt.init(params, model_state, num_steps=num_steps, key=key, **kwargs)

    def update(self, opt_state, grads, loss=None, model_state=None, key=None, **kwargs):
        def clip(g):
            c = _hp(self.grad_clip, g.dtype)
            return jnp.clip(g, -c, c)

        grads = jax.tree_util.tree_map(clip, grads)
        return self.opt.update(opt_state, grads, loss, model_state=model_state, key=key, **kwargs)

    def __repr__(self) -> str:
        return f"GradientClipOptimizer({self.opt!r}, grad_clip={self.grad_clip})"


@flax.struct.dataclass
class GraftedOptimizerState(_ModelStateAlias):
    params: Params
    model_state: ModelState
    iteration: jax.Array
    mag_opt_state: PyTree
    dir_opt_state: PyTree


def _tree_step(new: Params, old: Params) -> PyTree:
    return jax.tree_util.tree_map(lambda n, o: n.astype(_cd(o)) - o.astype(_cd(o)), new, old)


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
        _require_optimizer(magnitude_opt, "GraftedOptimizer's magnitude_opt")
        _require_optimizer(direction_opt, "GraftedOptimizer's direction_opt")
        self.magnitude_opt = magnitude_opt
        self.direction_opt = direction_opt

    def init(self, params, model_state=None, num_steps=None, key=None, **kwargs):
        keys = (None, None) if key is None else tuple(jax.random.split(key))
        return GraftedOptimizerState(
            params=params,
            model_state=model_state,
            iteration=_iteration0(),
            mag_opt_state=self.magnitude_opt.init(
                params, model_state, num_steps=num_steps, key=keys[0], **kwargs
            ),
            dir_opt_state=self.direction_opt.init(
                params, model_state, num_steps=num_steps, key=keys[1], **kwargs
            ),
        )

    def update(self, opt_state, grads, loss=None, model_state=None, key=None, **kwargs):
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
        return GraftedOptimizerState(
            params=params,
            model_state=_next_model_state(model_state, opt_state),
            iteration=opt_state.iteration + 1,
            mag_opt_state=self.magnitude_opt.set_params(mag_state, params),
            dir_opt_state=self.direction_opt.set_params(dir_state, params),
        )

    def __repr__(self) -> str:
        return f"GraftedOptimizer({self.magnitude_opt!r}, {self.direction_opt!r})"


def _import_builtin() -> None:
    from learnopt.optimizers import (  # noqa: F401
        gradient_accumulator,
        nadamw,
        opt_list,
        optax_opts,
    )


#: Every built-in optimizer by name: ``OPTIMIZERS.get("Adam", learning_rate=1e-3)``.
#: Entries whose class needs arguments (``AdamW``'s learning rate, a wrapped optimizer)
#: are registered with small-problem values that keyword arguments override. The dtype
#: conformance sweep (``tests/test_conformance.py``) runs every entry.
OPTIMIZERS: Registry[Optimizer] = Registry("optimizer", loader=_import_builtin)
for _cls in (SGD, SGDM, Adam, RMSProp):
    OPTIMIZERS.register(_cls)
OPTIMIZERS.register(functools.partial(AdamW, learning_rate=1e-2), name="AdamW")
OPTIMIZERS.register(
    lambda grad_clip=3.0: GradientClipOptimizer(Adam(), grad_clip), name="GradientClipOptimizer"
)
OPTIMIZERS.register(lambda: GraftedOptimizer(SGDM(), Adam()), name="GraftedOptimizer")


def register_optimizer(name: str, fn: Callable[..., Optimizer]) -> None:
    """Adds an optimizer constructor to the registry used by conformance tests and the CLI."""
    OPTIMIZERS.register(fn, name=name)


def registered_optimizers() -> list[str]:
    return OPTIMIZERS.names()


def get_optimizer(name: str, **kwargs: Any) -> Optimizer:
    """Builds a registered optimizer by name."""
    return OPTIMIZERS.get(name, **kwargs)
