r"""Fraction of training done, as inputs of learned optimizers.

A learned optimizer that sees only the step count ``t`` cannot tell a run of 100 steps
from one of 10,000, so it cannot learn a schedule that transfers between them (the
learned optimizers of Maheswaranathan et al., 2020, arXiv:2011.02159, learn warm-up and
decay schedules). Celo (Moudgil et al., 2025, arXiv:2501.12670) therefore feeds its
update rule the fraction of training done, ``tau = t / T`` with ``T`` the run length.
``opt.init(params, num_steps=T)`` receives ``T``; meta-training passes each inner
run's length there. With ``t`` the step count before the update:

.. math::

   \tau = \operatorname{clip}\!\Big(\frac{t}{\max(T, 1)}, 0, 1\Big), \qquad
   e(\tau) = \Big(\tau,\ \tau^2,\ \cos \pi\tau,\ \sin \pi\tau,\ \cos 2\pi\tau,\ \sin 2\pi\tau,\
   \min\!\Big(1, \frac{\log(1 + t)}{\log(1 + \max(T, 1))}\Big)\Big)

* :func:`tau_embedding`: :data:`NUM_TAU_FEATURES` smooth features of ``tau`` (and of
  ``log(1 + t) / log(1 + T)``), the same for every element of every tensor, so the
  per-element MLPs take them as per-tensor inputs (folded into their first layer's bias
  by :mod:`~learnopt.learned_optimizers.blocks.per_element`);
* :func:`resolve_num_steps`: ``T`` as an int32 array, or a clear error when an
  optimizer that needs it did not get it;
* :func:`param_scale`: the tensor's RMS plus a floor, for steps proportional to the
  parameter scale (as Celo's and VeLO's are);
* :func:`tau_variant`: the registered ``<Architecture>_tau`` variants, the same
  classes with ``tau_features=True`` by default.
"""

from __future__ import annotations

import dataclasses
import inspect
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from learnopt import _validate

__all__ = [
    "NUM_TAU_FEATURES",
    "tau_embedding",
    "fraction_done",
    "resolve_num_steps",
    "param_scale",
    "tau_variant",
]

#: Width of :func:`tau_embedding`.
NUM_TAU_FEATURES = 7


def fraction_done(iteration: jax.Array, num_steps: jax.Array, dtype: Any = jnp.float32):
    """``tau = clip(t / T, 0, 1)`` (``T`` floored at 1).

    Args:
      iteration: the step count ``t`` before this update.
      num_steps: the run length ``T``.
      dtype: the result's dtype.

    Returns:
      ``tau``, a scalar of ``dtype``.
    """
    t = jnp.asarray(iteration).astype(dtype)
    big_t = jnp.maximum(jnp.asarray(num_steps).astype(dtype), jnp.asarray(1, dtype))
    return jnp.clip(t / big_t, 0, 1)


def tau_embedding(
    iteration: jax.Array, num_steps: jax.Array, dtype: Any = jnp.float32
) -> jax.Array:
    """Features of the fraction of training done ``tau = t / T`` (in [0, 1]).

    ``[tau, tau^2, cos(pi tau), sin(pi tau), cos(2 pi tau), sin(2 pi tau),
    log(1 + t) / log(1 + T)]``: polynomial and Fourier features of ``tau`` (Celo's
    choice of inputs, arXiv:2501.12670, in learnopt's own form) and the
    log-step fraction, which resolves the start of training more finely.

    Args:
      iteration: the step count ``t`` before this update.
      num_steps: the run length ``T``.
      dtype: the result's dtype.

    Returns:
      ``[NUM_TAU_FEATURES]`` features of ``dtype``, each in [-1, 1].
    """
    tau = fraction_done(iteration, num_steps, dtype)
    t = jnp.maximum(jnp.asarray(iteration).astype(dtype), jnp.asarray(0, dtype))
    big_t = jnp.maximum(jnp.asarray(num_steps).astype(dtype), jnp.asarray(1, dtype))
    log_frac = jnp.minimum(jnp.log1p(t) / jnp.log1p(big_t), jnp.asarray(1, dtype))
    angle = jnp.asarray(np.pi, dtype) * tau
    return jnp.stack(
        [
            tau,
            tau * tau,
            jnp.cos(angle),
            jnp.sin(angle),
            jnp.cos(2 * angle),
            jnp.sin(2 * angle),
            log_frac,
        ]
    )


def resolve_num_steps(num_steps: Any, default: int | None, owner: str) -> jax.Array:
    """The run length ``T`` an optimizer's ``init`` got, as an int32 scalar.

    Args:
      num_steps: ``init``'s ``num_steps`` (an int or a traced integer array), or None.
      default: the learned optimizer's ``default_num_steps`` (used when ``num_steps``
        is None), or None for no fallback.
      owner: the learned optimizer's name, for the error.

    Returns:
      ``T``, an int32 array.

    Raises:
      ValueError: neither ``num_steps`` nor ``default`` is given
        (:class:`learnopt._validate.RunLengthMissing`), or ``num_steps`` is below 1.
      TypeError: ``num_steps`` is not an integer.
    """
    num_steps = _validate.run_length("num_steps", num_steps)
    if num_steps is None:
        if default is None:
            raise _validate.RunLengthMissing(
                f"{owner} reads the fraction of training done, t / num_steps: pass the run "
                "length to opt.init(params, num_steps=T), or construct it with "
                "default_num_steps=T"
            )
        num_steps = default
    return jnp.asarray(num_steps, jnp.int32)


def param_scale(p: jax.Array, floor: float) -> jax.Array:
    """``sqrt(mean(p^2)) + floor``: the scale of a parameter tensor (a scalar).

    Args:
      p: the parameter tensor, in the compute dtype.
      floor: added to the RMS, so that zero-initialized tensors (biases) still move.

    Returns:
      A scalar of ``p``'s dtype.
    """
    mean_sq = jnp.mean(jnp.square(p))
    # sqrt with a finite derivative at 0 (an all-zero tensor).
    safe = jnp.where(mean_sq > 0, mean_sq, jnp.ones_like(mean_sq))
    rms = jnp.where(mean_sq > 0, jnp.sqrt(safe), jnp.zeros_like(mean_sq))
    return rms + jnp.asarray(floor, p.dtype)


def _args_section(cls: type) -> str:
    """The ``Args:`` section of ``cls``'s docstring, so that a variant lists its arguments."""
    lines = inspect.cleandoc(cls.__doc__ or "").splitlines()
    if "Args:" not in lines:
        return ""
    section = ["Args:"]
    for line in lines[lines.index("Args:") + 1 :]:
        if line.strip() and not line.startswith(" "):
            break
        section.append(line)
    return "\n".join(section).rstrip() + "\n"


def tau_variant(cls: type, name: str) -> type:
    """``cls`` with ``tau_features=True`` by default, named ``name`` (for the registry).

    The variant is a subclass whose constructor has ``cls``'s signature with that one
    default changed (for a class whose settings are a dataclass, as HyperV2's, whose
    ``default_config`` has it on), so theta files record and rebuild it like any
    architecture.

    Args:
      cls: a learned optimizer class whose constructor takes ``tau_features``.
      name: the variant's registry name and ``lopt.name`` (e.g. ``"MLPLOpt_tau"``).

    Returns:
      The subclass.
    """
    doc = (
        f"{cls.__name__} with the fraction-of-training inputs on (``tau_features=True``;\n"
        f"see :mod:`learnopt.learned_optimizers.blocks.progress`). Arguments as {cls.__name__}'s.\n"
    )
    namespace = {"__doc__": doc, "__module__": cls.__module__, "name": property(lambda self: name)}
    config = getattr(cls, "default_config", None)
    if dataclasses.is_dataclass(config) and hasattr(config, "tau_features"):
        namespace["default_config"] = dataclasses.replace(config, tau_features=True)
        namespace["__doc__"] = f"{doc}\n{_args_section(cls)}"
        return type(cls.__name__ + "Tau", (cls,), namespace)
    sig = inspect.signature(cls.__init__)
    if "tau_features" not in sig.parameters:
        raise TypeError(f"{cls.__name__} has no tau_features argument")
    params = [
        p.replace(default=True) if p.name == "tau_features" else p for p in sig.parameters.values()
    ]

    def __init__(self, *args, **kwargs):
        if "tau_features" not in sig.bind_partial(self, *args, **kwargs).arguments:
            kwargs["tau_features"] = True
        cls.__init__(self, *args, **kwargs)

    __init__.__signature__ = sig.replace(parameters=params)
    __init__.__doc__ = (
        f"Builds the variant; ``tau_features`` defaults to True.\n\n{_args_section(cls)}"
    )
    return type(cls.__name__ + "Tau", (cls,), {**namespace, "__init__": __init__})
