"""Learned optimizers: optimizers parameterized by meta-parameters ``theta``.

``lopt.init(key) -> theta`` and ``lopt.opt_fn(theta) -> Optimizer``. ``theta`` is a
pytree of strongly typed float32 arrays, so a jitted meta-step that takes and
returns ``theta`` compiles once. Hyperparameters that must stay in a range are
stored in an unconstrained form (``log_lr``; ``one_minus_beta1`` is ``log(1 - beta1)``).
"""

from __future__ import annotations

import dataclasses
import difflib
import inspect
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax

from learnopt import _validate
from learnopt.learned_optimizers import common
from learnopt.learned_optimizers.blocks import progress
from learnopt.optimizers import base as opt_base
from learnopt.registry import Registry

MetaParams = Any
# The library's other type names of this module (research code annotates with them).
Params = Any
PRNGKey = jax.Array

__all__ = [
    "LearnedOptimizer",
    "LearnableSGD",
    "LearnableSGDM",
    "LearnableAdam",
    "LOPTS",
    "register_learned_optimizer",
    "get_learned_optimizer",
    "registered_learned_optimizers",
    "constructor_args",
    "constructor_parameters",
    "settings_from",
    "keep_arguments",
]


def _f32(value: float) -> jax.Array:
    """A strongly typed float32 scalar (``jnp.asarray(python_float)`` would be weak)."""
    return jnp.asarray(np.float32(value), dtype=jnp.float32)


def _check_scalar_theta(lopt: LearnedOptimizer, theta: Any, names: tuple[str, ...]) -> None:
    """``theta`` is a dict of exactly these scalars (static check: cheap, works under jit)."""
    _validate.theta_like("theta", theta, dict.fromkeys(names, np.zeros(())), lopt.name)


class LearnedOptimizer:
    """Base class: ``init(key) -> theta`` and ``opt_fn(theta, is_training) -> Optimizer``.

    Subclasses implement :meth:`init` and either set :attr:`optimizer_class` (the
    :class:`~learnopt.learned_optimizers.common.ThetaOptimizer` that :meth:`opt_fn`
    builds as ``optimizer_class(theta, self)`` once theta is checked against
    :meth:`init`'s layout) or override :meth:`opt_fn`; meta-training differentiates (or
    perturbs) the inner training run with respect to ``theta`` through :meth:`opt_fn`,
    so ``opt_fn`` must build the optimizer from ``theta`` with JAX operations only. The
    base class's constructor takes no arguments; a subclass's constructor takes its
    architecture and the initial values of its hyperparameters, each stored under its
    own name (the repr, theta files and ``learnopt list`` read them back from there).
    """

    #: The optimizer :meth:`opt_fn` builds, ``optimizer_class(theta, self)``, after
    #: checking ``theta`` against :meth:`init`'s layout; None: the subclass overrides
    #: :meth:`opt_fn`.
    optimizer_class: type[opt_base.Optimizer] | None = None

    def init(self, key: jax.Array) -> MetaParams:
        """Draws the initial meta-parameters ``theta``.

        Args:
          key: a ``jax.random`` PRNG key (learned optimizers whose theta is not random,
            like :class:`LearnableAdam`, ignore it).

        Returns:
          ``theta``: a pytree (usually a dict) of strongly typed float32 arrays, the
          same structure and shapes for every key.
        """
        raise NotImplementedError

    def opt_fn(self, theta: MetaParams, is_training: bool = False) -> opt_base.Optimizer:
        """The inner optimizer with meta-parameters ``theta``.

        Args:
          theta: meta-parameters with the structure and shapes :meth:`init` returns
            (concrete, or traced when meta-training differentiates through them).
          is_training: True when the optimizer is built for meta-training (the outer
            trainers pass True), False for evaluation and plain use; learned optimizers
            whose update is the same in both ignore it.

        Returns:
          An :class:`~learnopt.optimizers.base.Optimizer` whose ``init``/``update``
          run the update ``theta`` defines.

        Raises:
          ValueError: ``theta`` does not have :meth:`init`'s structure and shapes (the
            message names the missing, unexpected and misshapen entries).
        """
        if self.optimizer_class is None:
            raise NotImplementedError(
                f"{type(self).__name__} sets neither optimizer_class nor opt_fn"
            )
        common.check_theta(self, theta)
        return self.optimizer_class(theta, self)

    @property
    def name(self) -> str:
        """A short name for logs and file names (the class name here)."""
        return type(self).__name__

    def freeze_groups(self) -> dict[str, tuple[str, ...]]:
        """Named parts of ``theta`` that meta-training can keep fixed (``--freeze NAME``).

        Override to name an architecture's meta-training phases (``Celo``: ``phase1``
        freezes the schedule, ``phase2`` the update rule). Not in the notes' library.

        Returns:
          ``{name: theta keys}``, the keys as ``frozen_keys`` of the learners take them
          (paths joined by ``"/"``, or their prefixes); ``{}`` here.
        """
        return {}

    def extend_theta(self, theta: Any) -> Any:
        """Completes a theta saved before this configuration added meta-parameters.

        Called on a file's theta (as a state dict: nested dicts of arrays) before it is
        checked against this learned optimizer, by
        :func:`~learnopt.learned_optimizers.theta_files.load` and by the learners'
        ``init_theta_from_path``. Override when a
        configuration adds parameters whose initial value leaves the optimizer's steps
        unchanged (``CeloAdam(regime_head=True)`` fills a zero regime head), so that a
        published theta starts it. Not in the notes' library.

        Args:
          theta: the file's theta, a state dict.

        Returns:
          The theta to load; ``theta`` itself here.
        """
        return theta

    def as_optax(
        self,
        theta: MetaParams,
        weight_decay: float = 0.0,
        weight_decay_mask: Any = None,
        *,
        num_steps: int | None = None,
    ) -> optax.GradientTransformationExtraArgs:
        """This learned optimizer, with ``theta`` fixed, as an optax transformation.

        Args:
          theta: the meta-parameters to fix (e.g. a trained theta).
          weight_decay: decoupled weight decay per step (``p <- p + step -
            weight_decay * p``), in [0, 1); use this rather than chaining
            ``optax.add_decayed_weights``, which would make the weights grow (see
            :meth:`~learnopt.optimizers.base.Optimizer.as_optax`).
          weight_decay_mask: which parameters decay (None: all).
          num_steps: the planned length of the run, passed to the optimizer's ``init``:
            architectures that read the fraction of training done (``ScheduledAdam``,
            ``Celo``, the ``*_tau`` variants) need it.

        Returns:
          ``opt_fn(theta).as_optax(...)``: an ``optax.GradientTransformationExtraArgs``
          whose updates are ``new_params - params`` (see
          :meth:`~learnopt.optimizers.base.Optimizer.as_optax`).
        """
        return self.opt_fn(theta).as_optax(
            num_steps=num_steps, weight_decay=weight_decay, weight_decay_mask=weight_decay_mask
        )

    def __repr__(self) -> str:
        """``Name(arg=value, ...)`` with the constructor arguments that differ from their
        defaults, read from the attributes of the same names."""
        params = constructor_parameters(type(self))
        shown = [
            f"{k}={v!r}"
            for k, v in (constructor_args(self) or {}).items()
            if not _same(v, params[k].default)
        ]
        return f"{self.name}({', '.join(shown)})"


def constructor_parameters(cls: type) -> dict[str, inspect.Parameter]:
    """The named parameters of ``cls.__init__`` (not ``self``, ``*args``, ``**kwargs``).

    A class whose settings are a dataclass (a ``default_config`` class attribute, taken by
    ``__init__(config=None, **settings)``, as HyperV2's) has the dataclass's fields in
    place of ``config``, with the class's defaults.

    Args:
      cls: a learned optimizer class.

    Returns:
      ``{name: inspect.Parameter}`` in signature order.
    """
    try:
        params = inspect.signature(cls.__init__).parameters
    except (TypeError, ValueError):
        return {}
    skip = (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)
    named = {k: p for k, p in params.items() if k != "self" and p.kind not in skip}
    config = getattr(cls, "default_config", None)
    if dataclasses.is_dataclass(config) and "config" in named:
        del named["config"]
        for field in dataclasses.fields(config):
            named[field.name] = inspect.Parameter(
                field.name, inspect.Parameter.KEYWORD_ONLY, default=getattr(config, field.name)
            )
    return named


#: How :func:`keep_arguments` stores a value, by its parameter's annotation.
_AS_ANNOTATED = {
    "int": int,
    "float": float,
    "bool": bool,
    "Sequence[float]": lambda v: tuple(float(x) for x in v),
}


def keep_arguments(lopt: LearnedOptimizer, values: dict[str, Any]) -> None:
    """Stores each named constructor argument of ``lopt`` under its own name.

    What the repr, theta files and :func:`constructor_args` read back. A value is stored
    as its annotation says: ``int``, ``float``, ``bool`` and ``Sequence[float]`` (as a
    tuple of floats) converted, ``X | None`` as ``X`` unless it is None, any other as
    given.

    Args:
      lopt: the learned optimizer being constructed.
      values: the constructor's ``locals()`` (entries that are not parameters are ignored).
    """
    # The parameters of the __init__ that called: a subclass's differ (MLPNomLOpt's
    # exp_mult is a sequence where AdafacMLPLOpt's, which it calls, is a float).
    code = inspect.currentframe().f_back.f_code
    cls = next(
        (c for c in type(lopt).__mro__ if getattr(vars(c).get("__init__"), "__code__", 0) is code),
        type(lopt),
    )
    for name, param in constructor_parameters(cls).items():
        if name in values:
            value = values[name]
            convert = _AS_ANNOTATED.get(str(param.annotation).removesuffix(" | None"))
            setattr(lopt, name, value if value is None or convert is None else convert(value))


def settings_from(cls: type, config: Any, settings: dict[str, Any]) -> Any:
    """The settings dataclass of a ``cls(config, **settings)`` call.

    Args:
      cls: a learned optimizer class with a ``default_config`` dataclass.
      config: the ``config`` argument (None: ``cls.default_config``).
      settings: the keyword arguments, fields of that dataclass to change.

    Returns:
      ``dataclasses.replace(config, **settings)``.

    Raises:
      TypeError: ``config`` is not of the dataclass's type, or a setting names no field
        (the message names the closest ones).
    """
    default = cls.default_config
    if config is None:
        config = default
    elif not isinstance(config, type(default)):
        raise TypeError(
            f"{cls.__name__}: config must be a {type(default).__name__}, got {config!r}"
        )
    fields = [f.name for f in dataclasses.fields(config)]
    unknown = sorted(set(settings) - set(fields))
    if unknown:
        close = {n: difflib.get_close_matches(n, fields, n=1) for n in unknown}
        hints = [f"{n!r} (did you mean {c[0]!r}?)" if c else repr(n) for n, c in close.items()]
        raise TypeError(f"{cls.__name__}: unknown argument {', '.join(hints)}")
    return dataclasses.replace(config, **settings)


def _same(value: Any, default: Any) -> bool:
    if default is inspect.Parameter.empty:
        return False
    try:
        return bool(value == default) and type(value) is type(default)
    except Exception:  # arrays and other values without a single truth value
        return False


def constructor_args(lopt: LearnedOptimizer) -> dict[str, Any] | None:
    """``{argument: value}`` of every named constructor argument of ``lopt``, read from
    the attribute of the same name, or None when one has no such attribute.

    Args:
      lopt: a learned optimizer.

    Returns:
      The arguments that rebuild it, ``type(lopt)(**constructor_args(lopt))``, or None.
    """
    args = {}
    for name in constructor_parameters(type(lopt)):
        if not hasattr(lopt, name):
            return None
        args[name] = getattr(lopt, name)
    return args


class LearnableSGD(LearnedOptimizer):
    """SGD with a learnable learning rate; ``theta = {"log_lr"}``.

    Args:
      initial_lr: the learning rate of the initial theta (``log_lr = log(initial_lr)``).
    """

    def __init__(self, initial_lr: float = 1e-3):
        _validate.positive_float("initial_lr", initial_lr)
        self.initial_lr = initial_lr

    def init(self, key: jax.Array) -> MetaParams:
        """The initial theta, ``{"log_lr": log(initial_lr)}``.

        Args and returns as in :meth:`LearnedOptimizer.init`.
        """
        return {"log_lr": _f32(np.log(self.initial_lr))}

    def opt_fn(self, theta: MetaParams, is_training: bool = False) -> opt_base.Optimizer:
        """SGD with learning rate ``exp(theta["log_lr"])``.

        Args and returns as in :meth:`LearnedOptimizer.opt_fn`; here:

        - ``theta``: ``{"log_lr": scalar}`` (checked: ValueError if the keys or shapes differ).
        """
        _check_scalar_theta(self, theta, ("log_lr",))
        return opt_base.SGD(learning_rate=jnp.exp(theta["log_lr"]))


class LearnableSGDM(LearnedOptimizer):
    """SGD with momentum, learnable ``log_lr`` and ``one_minus_momentum = log(1 - mu)``.

    Args:
      initial_lr: the learning rate of the initial theta.
      initial_momentum: the momentum ``mu`` of the initial theta, in ``[0, 1)``.
    """

    def __init__(self, initial_lr: float = 1e-3, initial_momentum: float = 0.9):
        _validate.positive_float("initial_lr", initial_lr)
        _validate.unit_interval("initial_momentum", initial_momentum)
        self.initial_lr = initial_lr
        self.initial_momentum = initial_momentum

    def init(self, key: jax.Array) -> MetaParams:
        """The initial theta: ``log(initial_lr)`` and ``log(1 - initial_momentum)``.

        Args and returns as in :meth:`LearnedOptimizer.init`.
        """
        return {
            "log_lr": _f32(np.log(self.initial_lr)),
            "one_minus_momentum": _f32(np.log(1 - self.initial_momentum)),
        }

    def opt_fn(self, theta: MetaParams, is_training: bool = False) -> opt_base.Optimizer:
        """SGDM with ``lr = exp(log_lr)`` and ``mu = 1 - exp(one_minus_momentum)``.

        Args and returns as in :meth:`LearnedOptimizer.opt_fn`; here:

        - ``theta``: ``{"log_lr", "one_minus_momentum"}`` scalars (checked: ValueError if
          the keys or shapes differ).
        """
        _check_scalar_theta(self, theta, ("log_lr", "one_minus_momentum"))
        return opt_base.SGDM(
            learning_rate=jnp.exp(theta["log_lr"]),
            momentum=1 - jnp.exp(theta["one_minus_momentum"]),
        )


class LearnableAdam(LearnedOptimizer):
    """Adam with learnable hyperparameters (learned_optimization's ``LearnableAdam``).

    ``theta = {"log_lr", "log_epsilon", "one_minus_beta1", "one_minus_beta2"}`` with
    ``one_minus_beta = log(1 - beta)``; defaults lr 1e-3, epsilon 1e-8, betas 0.9, 0.999.
    The Adam it builds takes ``1 - beta = exp(one_minus_beta)`` directly (never
    ``1 - exp(...)``, which rounds to 1 in float32 below about -16.6) and computes the
    bias corrections stably, so every theta that training can reach gives finite updates.

    Args:
      initial_lr: the learning rate of the initial theta.
      initial_epsilon: Adam's ``epsilon`` in the initial theta (> 0).
      initial_beta1: the first-moment decay of the initial theta, in ``[0, 1)``.
      initial_beta2: the second-moment decay of the initial theta, in ``[0, 1)``.
    """

    def __init__(
        self,
        initial_lr: float = 1e-3,
        initial_epsilon: float = 1e-8,
        initial_beta1: float = 0.9,
        initial_beta2: float = 0.999,
    ):
        _validate.positive_float("initial_lr", initial_lr)
        _validate.positive_float("initial_epsilon", initial_epsilon)
        _validate.unit_interval("initial_beta1", initial_beta1)
        _validate.unit_interval("initial_beta2", initial_beta2)
        self.initial_lr = initial_lr
        self.initial_epsilon = initial_epsilon
        self.initial_beta1 = initial_beta1
        self.initial_beta2 = initial_beta2

    def init(self, key: jax.Array) -> MetaParams:
        """The initial theta: the logs of ``initial_epsilon``, ``initial_lr``, ``1 - beta``.

        Args and returns as in :meth:`LearnedOptimizer.init`.
        """
        return {
            "log_epsilon": _f32(np.log(self.initial_epsilon)),
            "log_lr": _f32(np.log(self.initial_lr)),
            "one_minus_beta1": _f32(np.log(1 - self.initial_beta1)),
            "one_minus_beta2": _f32(np.log(1 - self.initial_beta2)),
        }

    def opt_fn(self, theta: MetaParams, is_training: bool = False) -> opt_base.Optimizer:
        """Adam with ``lr``, ``epsilon`` and ``1 - beta`` the exponentials of ``theta``'s entries.

        Args and returns as in :meth:`LearnedOptimizer.opt_fn`; here:

        - ``theta``: ``{"log_epsilon", "log_lr", "one_minus_beta1", "one_minus_beta2"}``
          scalars (checked: ValueError if the keys or shapes differ).
        """
        _check_scalar_theta(
            self, theta, ("log_epsilon", "log_lr", "one_minus_beta1", "one_minus_beta2")
        )
        return opt_base.Adam(
            learning_rate=jnp.exp(theta["log_lr"]),
            beta1=1 - jnp.exp(theta["one_minus_beta1"]),
            beta2=1 - jnp.exp(theta["one_minus_beta2"]),
            epsilon=jnp.exp(theta["log_epsilon"]),
            one_minus_beta1=jnp.exp(theta["one_minus_beta1"]),
            one_minus_beta2=jnp.exp(theta["one_minus_beta2"]),
        )


#: Every registered learned optimizer: ``LOPTS.get(name, **kwargs)`` builds one. Each
#: architecture module registers its learned optimizers; ``learnopt.learned_optimizers``
#: imports them all, so the registry is full whichever module was imported first.
LOPTS: Registry[LearnedOptimizer] = Registry("learned optimizer", listing="lopts")
for _cls in (LearnableSGD, LearnableSGDM, LearnableAdam):
    LOPTS.register(_cls)


def register_learned_optimizer(
    name: str, fn: Callable[..., LearnedOptimizer], *, tau: str | None = None
) -> type | None:
    """Adds a learned optimizer constructor to the registry (CLI, conformance tests).

    Args:
      name: the registry name.
      fn: a callable returning a :class:`LearnedOptimizer` (keyword arguments allowed).
      tau: also register ``fn``'s fraction-of-training variant under this name
        (:func:`~learnopt.learned_optimizers.blocks.progress.tau_variant`; ``fn`` must be a
        class whose constructor takes ``tau_features``).

    Returns:
      The variant class when ``tau`` is given, else None.
    """
    LOPTS.register(fn, name=name)
    if tau is None:
        return None
    variant = progress.tau_variant(fn, tau)
    LOPTS.register(variant, name=tau)
    return variant


def registered_learned_optimizers() -> list[str]:
    """The names accepted by :func:`get_learned_optimizer`.

    Returns:
      The registered names, sorted.
    """
    return LOPTS.names()


def get_learned_optimizer(name: str, **kwargs: Any) -> LearnedOptimizer:
    """Builds a registered learned optimizer by name, e.g. ``"LearnableAdam"``.

    Args:
      name: a registered name (see :func:`registered_learned_optimizers`).
      **kwargs: arguments for its constructor.

    Returns:
      The learned optimizer.
    """
    return LOPTS.get(name, **kwargs)
