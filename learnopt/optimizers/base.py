"""Optimizers: stateless objects whose states (``flax.struct`` dataclasses) hold params.

The interface follows learned_optimization: ``opt.init(params) -> state`` and
``opt.update(state, grads, loss) -> state``; ``opt.get_params(state)`` reads the
params back. Unlike optax, the state carries ``params``, ``model_state`` and
``iteration``, so an optimizer may look at the loss, the step count or the params.

Every subclass, including user subclasses written like the notes'
``MomentumOptimizer``, gets two guarantees from this base class without writing any
code for them (its ``init``/``update`` are wrapped when the class is defined):

* ``init`` returns a state whose leaves already have the dtypes (and strong types)
  one ``update`` produces (:func:`learnopt.canonical.settle_dtypes`), so a jitted
  training step compiles exactly once;
* ``update`` checks its inputs (tree structure, shapes; Python floats and numpy
  arrays are accepted) and returns a state with the same dtypes as the one it was
  given, so params keep their dtype and mixed precision (bf16 params, f32 grads)
  cannot make a step recompile.

Built-in optimizers run their arithmetic in float32 (float64 for float64 params) and
keep accumulators in that dtype; low-precision params are cast back after each step.
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

from learnopt.canonical import compute_dtype, leaf_compute_dtype, settle_dtypes
from learnopt.registry import Registry
from learnopt.tree_utils import tree_cast_like, tree_map_multi, tree_path_str

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
    "OptaxDtypeError",
    "SGDState",
    "SGDMState",
    "AdamState",
    "RMSPropState",
    "OptaxState",
    "OPTIMIZERS",
    "register_optimizer",
    "get_optimizer",
    "registered_optimizers",
    "safe_sqrt",
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


def _wrap_init(raw_init: Callable) -> Callable:
    @functools.wraps(raw_init)
    def init(self, params, model_state=None, num_steps=None, key=None, **kwargs):
        if _depth():
            return raw_init(self, params, model_state=model_state, **_opt(num_steps, key), **kwargs)
        params = _check_params(params)
        with _Nested():
            state = raw_init(
                self, params, model_state=model_state, **_opt(num_steps, key), **kwargs
            )
            return self._settle(state)

    return init


def _opt(num_steps: Any, key: Any) -> dict[str, Any]:
    out = {}
    if num_steps is not None:
        out["num_steps"] = num_steps
    if key is not None:
        out["key"] = key
    return out


def _wrap_update(raw_update: Callable) -> Callable:
    takes_key = _accepts(raw_update, "key")

    @functools.wraps(raw_update)
    def update(self, opt_state, grads, loss=None, model_state=None, key=None, **kwargs):
        if takes_key and key is not None:
            kwargs["key"] = key
        if _depth():
            return raw_update(self, opt_state, grads, loss, model_state=model_state, **kwargs)
        params = self.get_params(opt_state)
        grads = _check_grads(grads, params)
        if loss is not None:
            loss = jnp.asarray(loss, dtype=compute_dtype(params))
        with _Nested():
            new_state = raw_update(self, opt_state, grads, loss, model_state=model_state, **kwargs)
        if jax.tree_util.tree_structure(new_state) == jax.tree_util.tree_structure(opt_state):
            new_state = tree_cast_like(new_state, opt_state)
        return new_state

    update._takes_key = takes_key  # type: ignore[attr-defined]
    return update


class Optimizer:
    """Base class of all optimizers (see the module docstring for what it guarantees).

    Subclasses implement ``init(params, model_state=None, num_steps=None, key=None)``
    returning a ``flax.struct`` state with ``params``, ``model_state`` and ``iteration``
    fields, and ``update(opt_state, grads, loss=None, model_state=None, key=None)``
    returning the next state.
    """

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
        raise NotImplementedError

    def get_params(self, opt_state: OptState) -> Params:
        return opt_state.params

    def get_state(self, opt_state: OptState) -> ModelState:
        return opt_state.model_state

    def get_params_state(self, opt_state: OptState) -> tuple[Params, ModelState]:
        return self.get_params(opt_state), self.get_state(opt_state)

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

        return settle_dtypes(step, state, what=f"{self.name} state")

    def as_optax(self) -> optax.GradientTransformationExtraArgs:
        """This optimizer as an optax transformation, usable in any optax/Flax loop.

        ``update(grads, state, params, value=loss)`` runs :meth:`update` and returns
        ``new_params - params`` as the updates, so ``optax.apply_updates`` gives the
        new params. ``params`` is required.
        """

        def init_fn(params):
            return self.init(params)

        def update_fn(updates, state, params=None, **extra):
            if params is None:
                raise ValueError(f"{self.name}.as_optax() needs params in update()")
            state = state.replace(params=params) if hasattr(state, "replace") else state
            loss = extra.get("value")
            new_state = self.update(state, updates, loss, model_state=self.get_state(state))
            new_params = self.get_params(new_state)
            deltas = jax.tree_util.tree_map(
                lambda n, p: (n.astype(leaf_compute_dtype(p.dtype)) - p).astype(p.dtype),
                new_params,
                params,
            )
            return deltas, new_state

        return optax.GradientTransformationExtraArgs(init_fn, update_fn)

    def __repr__(self) -> str:
        return f"{self.name}()"


def _cd(x: jax.Array) -> np.dtype:
    return leaf_compute_dtype(x.dtype)


def _hp(value: Any, dtype: np.dtype) -> jax.Array:
    """A hyperparameter (Python float or traced scalar) in the arithmetic dtype."""
    return jnp.asarray(value).astype(dtype)


def safe_sqrt(x: jax.Array) -> jax.Array:
    """``sqrt(x)`` for ``x >= 0`` whose derivative at 0 is 0 instead of ``inf``.

    Meta-gradients through Adam-like updates multiply ``d sqrt(v)/dv`` by zero where
    a gradient is exactly zero (a dead ReLU unit); ``0 * inf`` would be NaN.
    """
    positive = x > 0
    return jnp.where(positive, jnp.sqrt(jnp.where(positive, x, 1)), 0)


def _iteration0() -> jax.Array:
    return jnp.zeros((), jnp.int32)


def _accumulator(params: Params) -> PyTree:
    return jax.tree_util.tree_map(lambda p: jnp.zeros(np.shape(p), _cd(p)), params)


@flax.struct.dataclass
class SGDState:
    params: Params
    model_state: ModelState
    iteration: jax.Array


class SGD(Optimizer):
    """Stochastic gradient descent: ``p <- p - lr * g``."""

    def __init__(self, learning_rate: float = 0.01):
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
            model_state=model_state if model_state is not None else opt_state.model_state,
            iteration=opt_state.iteration + 1,
        )

    def __repr__(self) -> str:
        return f"SGD(learning_rate={self.learning_rate})"


@flax.struct.dataclass
class SGDMState:
    params: Params
    model_state: ModelState
    iteration: jax.Array
    momentums: PyTree


class SGDM(Optimizer):
    """SGD with heavy-ball momentum (Polyak, 1964): ``m <- mu m + g; p <- p - lr m``."""

    def __init__(self, learning_rate: float = 0.01, momentum: float = 0.9):
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
            model_state=model_state if model_state is not None else opt_state.model_state,
            iteration=opt_state.iteration + 1,
            momentums=momentums,
        )

    def __repr__(self) -> str:
        return f"SGDM(learning_rate={self.learning_rate}, momentum={self.momentum})"


@flax.struct.dataclass
class AdamState:
    params: Params
    model_state: ModelState
    iteration: jax.Array
    mu: PyTree
    nu: PyTree


class Adam(Optimizer):
    """Adam (Kingma & Ba, 2015, arXiv:1412.6980) with bias correction.

    ``m <- b1 m + (1-b1) g;  v <- b2 v + (1-b2) g^2;
    p <- p - lr * m_hat / (sqrt(v_hat) + eps) - lr * wd * p``
    (``weight_decay`` > 0 gives AdamW's decoupled decay). Hyperparameters may be
    traced arrays, which is how learned optimizers such as ``LearnableAdam`` use it.
    """

    def __init__(
        self,
        learning_rate: float = 1e-3,
        beta1: float = 0.9,
        beta2: float = 0.999,
        epsilon: float = 1e-8,
        weight_decay: float = 0.0,
    ):
        self.learning_rate = learning_rate
        self.beta1 = beta1
        self.beta2 = beta2
        self.epsilon = epsilon
        self.weight_decay = weight_decay

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
            b1, b2 = _hp(self.beta1, cd), _hp(self.beta2, cd)
            g = g.astype(cd)
            m = b1 * m + (1 - b1) * g
            v = b2 * v + (1 - b2) * jnp.square(g)
            m_hat = m / (1 - b1 ** t.astype(cd))
            v_hat = v / (1 - b2 ** t.astype(cd))
            direction = m_hat / (safe_sqrt(v_hat) + _hp(self.epsilon, cd))
            pc = p.astype(cd)
            if not (isinstance(self.weight_decay, float | int) and self.weight_decay == 0):
                direction = direction + _hp(self.weight_decay, cd) * pc
            return (pc - _hp(self.learning_rate, cd) * direction).astype(p.dtype), m, v

        params, mu, nu = tree_map_multi(step, opt_state.params, opt_state.mu, opt_state.nu, grads)
        return AdamState(
            params=params,
            model_state=model_state if model_state is not None else opt_state.model_state,
            iteration=t,
            mu=mu,
            nu=nu,
        )

    def __repr__(self) -> str:
        return (
            f"{self.name}(learning_rate={self.learning_rate}, beta1={self.beta1}, "
            f"beta2={self.beta2}, epsilon={self.epsilon}, weight_decay={self.weight_decay})"
        )


class AdamW(Adam):
    """Adam with decoupled weight decay (Loshchilov & Hutter, 2019, arXiv:1711.05101)."""

    def __init__(
        self,
        learning_rate: float = 1e-3,
        beta1: float = 0.9,
        beta2: float = 0.999,
        epsilon: float = 1e-8,
        weight_decay: float = 1e-4,
    ):
        super().__init__(learning_rate, beta1, beta2, epsilon, weight_decay)


@flax.struct.dataclass
class RMSPropState:
    params: Params
    model_state: ModelState
    iteration: jax.Array
    nu: PyTree
    momentums: PyTree


class RMSProp(Optimizer):
    """RMSProp (Tieleman & Hinton, 2012): ``v <- d v + (1-d) g^2; p <- p - lr g/(sqrt(v)+eps)``.

    With ``momentum > 0`` the scaled step is accumulated with heavy-ball momentum.
    """

    def __init__(
        self,
        learning_rate: float = 1e-3,
        decay: float = 0.9,
        epsilon: float = 1e-8,
        momentum: float = 0.0,
    ):
        self.learning_rate = learning_rate
        self.decay = decay
        self.epsilon = epsilon
        self.momentum = momentum

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
            d = _hp(self.decay, cd)
            g = g.astype(cd)
            v = d * v + (1 - d) * jnp.square(g)
            m = _hp(self.momentum, cd) * m + g / (safe_sqrt(v) + _hp(self.epsilon, cd))
            return (p.astype(cd) - _hp(self.learning_rate, cd) * m).astype(p.dtype), v, m

        params, nu, momentums = tree_map_multi(
            step, opt_state.params, opt_state.nu, opt_state.momentums, grads
        )
        return RMSPropState(
            params=params,
            model_state=model_state if model_state is not None else opt_state.model_state,
            iteration=opt_state.iteration + 1,
            nu=nu,
            momentums=momentums,
        )

    def __repr__(self) -> str:
        return (
            f"RMSProp(learning_rate={self.learning_rate}, decay={self.decay}, "
            f"epsilon={self.epsilon}, momentum={self.momentum})"
        )


@flax.struct.dataclass
class OptaxState:
    params: Params
    model_state: ModelState
    iteration: jax.Array
    optax_state: PyTree


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
        params_c = jax.tree_util.tree_map(lambda p: p.astype(cd), params)
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
        params_c = jax.tree_util.tree_map(lambda p: p.astype(cd), params)
        grads_c = jax.tree_util.tree_map(lambda g: g.astype(cd), grads)
        extra = dict(kwargs)
        extra["grad"] = grads_c
        if loss is not None:
            extra["value"] = jnp.asarray(loss).astype(cd)
        if "value_fn" in extra:
            user_fn = extra["value_fn"]

            def value_fn(p_c, *args, **kw):
                p = jax.tree_util.tree_map(lambda x, ref: x.astype(ref.dtype), p_c, params)
                return jnp.asarray(user_fn(p, *args, **kw)).astype(cd)

            extra["value_fn"] = value_fn
        updates, optax_state = self.opt.update(grads_c, opt_state.optax_state, params_c, **extra)
        new_params = jax.tree_util.tree_map(
            lambda pc, u, p: (pc + u.astype(cd)).astype(p.dtype), params_c, updates, params
        )
        return OptaxState(
            params=new_params,
            model_state=model_state if model_state is not None else opt_state.model_state,
            iteration=opt_state.iteration + 1,
            optax_state=optax_state,
        )

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
            state = OptaxState(
                params=p, model_state=None, iteration=_iteration0(), optax_state=self.opt.init(p)
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


#: The built-in hand-designed optimizers by name: ``OPTIMIZERS.get("Adam", learning_rate=1e-3)``.
OPTIMIZERS: Registry[Optimizer] = Registry("optimizer")
for _cls in (SGD, SGDM, Adam, AdamW, RMSProp):
    OPTIMIZERS.register(_cls)


def register_optimizer(name: str, fn: Callable[..., Optimizer]) -> None:
    """Adds an optimizer constructor to the registry used by conformance tests and the CLI."""
    OPTIMIZERS.register(fn, name=name)


def registered_optimizers() -> list[str]:
    return OPTIMIZERS.names()


def get_optimizer(name: str, **kwargs: Any) -> Optimizer:
    """Builds a registered optimizer by name."""
    return OPTIMIZERS.get(name, **kwargs)
