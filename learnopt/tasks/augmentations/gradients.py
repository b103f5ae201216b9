"""Gradient transforms: the same loss, whose gradient is transformed.

:class:`ModifyTaskGradient` applies ``fn(grad, key)`` to the gradient in the backward
pass; built on it: :func:`NormalizeTaskGradient` (unit global norm),
:func:`SubsampleDirectionsTaskGradient` (the gradient projected on random directions,
as ES would see it) and :func:`AddGradientNoise` (Gaussian noise of a given standard
deviation, learnopt's), each with its family version.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np

from learnopt.tasks import base as tasks_base
from learnopt.tasks.augmentations.wrapping import (
    PyTree,
    WrappedTaskFamilyWithTaskWrapper,
    _LogUniformFamily,
    _TaskWrapper,
)

__all__ = [
    "AddGradientNoise",
    "AddGradientNoiseTaskFamily",
    "ModifyTaskGradient",
    "NormalizeTaskGradient",
    "NormalizeTaskGradientTaskFamily",
    "SubsampleDirectionsTaskGradient",
    "SubsampleDirectionsTaskGradientTaskFamily",
]


class ModifyTaskGradient(_TaskWrapper):
    """The same loss; its gradient with respect to the parameters is ``fn(grad, key)``.

    ``key`` is split: one part for the wrapped loss, one for ``fn`` (the loss and its
    gradient see the same randomness).

    Args:
      task: the task to wrap.
      fn: ``(grads, key) -> grads``, applied to the params' gradient (a pytree like the
        params) in the backward pass; the gradients of state and data are unchanged.
    """

    def __init__(self, task: tasks_base.Task, fn: Callable[[PyTree, jax.Array], PyTree]):
        super().__init__(task)
        self.fn = fn
        inner = task.loss_with_state_and_aux

        @jax.custom_vjp
        def loss_fn(params, state, key, data):
            return inner(params, state, jax.random.split(key)[0], data)

        def fwd(params, state, key, data):
            k_loss, k_grad = jax.random.split(key)
            out, vjp = jax.vjp(inner, params, state, k_loss, data)
            return out, (vjp, k_grad, key)

        def bwd(res, g):
            vjp, k_grad, key = res
            dparams, dstate, _, ddata = vjp(g)
            dkey = np.zeros(jnp.shape(key), jax.dtypes.float0)
            return self.fn(dparams, k_grad), dstate, dkey, ddata

        loss_fn.defvjp(fwd, bwd)
        self._loss_fn = loss_fn

    def loss_with_state_and_aux(self, params, state, key, data):
        """The wrapped task's loss, whose gradient with respect to ``params`` is ``fn(grad, k)``.

        A ``jax.custom_vjp``: ``key`` splits into the wrapped loss's key and ``k``.

        Args:
          params: the params.
          state: the wrapped task's model state.
          key: a PRNG key (required: it is split).
          data: one batch.

        Returns:
          The wrapped task's ``(loss, new_state, aux)``.
        """
        return self._loss_fn(params, state, key, data)


def _tree_norm(tree: PyTree) -> jax.Array:
    leaves = jax.tree_util.tree_leaves(tree)
    return jnp.sqrt(sum(jnp.sum(jnp.square(x.astype(jnp.float32))) for x in leaves))


def NormalizeTaskGradient(task):  # noqa: N802
    """The gradient divided by its global norm (a zero gradient stays zero).

    ``g -> g / ||g||_2``, the norm over all leaves (computed in float32).

    Args:
      task: the task to wrap.

    Returns:
      A :class:`ModifyTaskGradient`.
    """

    def normalize(grads, key):
        del key
        norm = _tree_norm(grads)
        inv = jnp.where(norm > 0, 1.0 / jnp.where(norm > 0, norm, 1.0), 0.0)
        return jax.tree_util.tree_map(lambda g: (g * inv).astype(g.dtype), grads)

    return ModifyTaskGradient(task, normalize)


def NormalizeTaskGradientTaskFamily(task_family):  # noqa: N802
    """:func:`NormalizeTaskGradient` on every member of ``task_family``.

    Args:
      task_family: the family to wrap.

    Returns:
      A :class:`WrappedTaskFamilyWithTaskWrapper` named ``NormalizeTaskGradient_<family name>``.
    """
    return WrappedTaskFamilyWithTaskWrapper(
        task_family, NormalizeTaskGradient, name=f"NormalizeTaskGradient_{task_family.name}"
    )


def _random_unit_direction(tree: PyTree, key: jax.Array) -> PyTree:
    leaves, treedef = jax.tree_util.tree_flatten(tree)
    keys = jax.random.split(key, len(leaves))
    noise = [jax.random.normal(k, x.shape, jnp.float32) for k, x in zip(keys, leaves, strict=True)]
    norm = _tree_norm(noise)
    return jax.tree_util.tree_unflatten(treedef, [n / norm for n in noise])


def SubsampleDirectionsTaskGradient(task, directions: int = 1, sign_direction: bool = False):  # noqa: N802
    """The gradient's components along ``directions`` random unit directions, summed.

    ``g -> sum_i (g . u_i) u_i`` (or ``sign(g . u_i) u_i``), which simulates the
    information an evolution-strategies estimate with few directions carries.

    Args:
      task: the task to wrap.
      directions: the number of directions ``u_i`` (Gaussian, normalized over all leaves,
        fresh from the loss key at every call).
      sign_direction: keep only the sign of each component ``g . u_i``.

    Returns:
      A :class:`ModifyTaskGradient`.
    """

    def project(grads, key):
        def one(k):
            u = _random_unit_direction(grads, k)
            dot = sum(
                jnp.sum(g.astype(jnp.float32) * d)
                for g, d in zip(
                    jax.tree_util.tree_leaves(grads), jax.tree_util.tree_leaves(u), strict=True
                )
            )
            amount = jnp.sign(dot) if sign_direction else dot
            return jax.tree_util.tree_map(lambda d: d * amount, u)

        parts = jax.vmap(one)(jax.random.split(key, directions))
        return jax.tree_util.tree_map(lambda p, g: jnp.sum(p, axis=0).astype(g.dtype), parts, grads)

    return ModifyTaskGradient(task, project)


def SubsampleDirectionsTaskGradientTaskFamily(  # noqa: N802
    task_family, directions: int = 1, sign_direction: bool = False
):
    """:func:`SubsampleDirectionsTaskGradient` on every member of ``task_family``.

    Args:
      task_family: the family to wrap.
      directions: the number of random directions.
      sign_direction: keep only the sign of each component.

    Returns:
      A :class:`WrappedTaskFamilyWithTaskWrapper` named
      ``SubsampleDirectionsTaskGradient_<family name>``.
    """
    return WrappedTaskFamilyWithTaskWrapper(
        task_family,
        functools.partial(
            SubsampleDirectionsTaskGradient, directions=directions, sign_direction=sign_direction
        ),
        name=f"SubsampleDirectionsTaskGradient_{task_family.name}",
    )


def AddGradientNoise(task, std: float | jax.Array):  # noqa: N802
    """The gradient plus Gaussian noise of standard deviation ``std`` per component.

    ``g -> g + std * eps``, ``eps ~ N(0, I)`` fresh from the loss key at every call.

    Args:
      task: the task to wrap.
      std: the standard deviation (a number or a traced scalar).

    Returns:
      A :class:`ModifyTaskGradient`.
    """

    def add_noise(grads, key):
        leaves, treedef = jax.tree_util.tree_flatten(grads)
        keys = jax.random.split(key, len(leaves))
        noisy = [
            (g + std * jax.random.normal(k, g.shape, jnp.float32)).astype(g.dtype)
            for g, k in zip(leaves, keys, strict=True)
        ]
        return jax.tree_util.tree_unflatten(treedef, noisy)

    return ModifyTaskGradient(task, add_noise)


class AddGradientNoiseTaskFamily(_LogUniformFamily):
    """Members get gradient noise with ``std`` log-uniform in ``std_range`` (traced).

    Members are :func:`AddGradientNoise` tasks; configurations hold ``sub_cfg`` and ``std``.

    Args:
      task_family: the family to wrap.
      std_range: ``(low, high)`` with ``0 < low <= high``.
    """

    _cfg_name, _field, _wrap = "AddGradientNoise", "std", staticmethod(AddGradientNoise)

    def __init__(self, task_family: tasks_base.TaskFamily, std_range=(1e-3, 1e-1)):
        self.std_range = tuple(float(x) for x in std_range)
        super().__init__(task_family, self.std_range)
