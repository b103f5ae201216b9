"""Augmentations: wrappers that turn a Task (or TaskFamily) into a related one.

Like data augmentation for supervised learning, these widen the distribution a learned
optimizer is meta-trained on, without new models (Metz et al. 2022, "Practical
tradeoffs between memory, compute, and performance in learned optimizers"):

* :class:`ReparamWeights` / :class:`ReparamWeightsFamily`: train ``w / s`` instead of
  ``w`` (the loss sees ``(w / s) * s``): the same function, gradients scaled by ``s``.
  Families draw ``s`` log-uniformly per sample: one for all weights (``global``), one
  per tensor (``tensor``) or one per parameter (``parameter``).
* :class:`ReducedBatchsizeTask` / :class:`ReducedBatchsizeFamily`: the first
  ``fraction`` of every batch (the same data iterator, smaller batches).
* :class:`ConvertFloatDType` / :func:`ConvertFloatDTypeTaskFamily`: parameters and
  float data in another dtype (bfloat16 by default).
* :class:`ModifyTaskGradient` and the gradient transforms built on it:
  :func:`NormalizeTaskGradient` (unit global norm), :func:`SubsampleDirectionsTaskGradient`
  (the gradient projected on random directions, as ES would see it) and
  :func:`AddGradientNoise` (Gaussian noise of a given standard deviation, learnopt's).
* :class:`ScaleLoss` / :class:`ScaleLossTaskFamily` (learnopt's): the loss times a
  constant (sampled log-uniformly per family member); ``normalizer`` undoes it.

Family wrappers whose quantity is sampled (reparameterization scale, loss scale,
gradient noise) draw it inside ``family.sample`` as an array, so a population of members
with different values is one ``vmap``.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from learnopt.tasks import base as tasks_base
from learnopt.tasks.datasets import base as datasets_base
from learnopt.tasks.parametric import cfgobject

__all__ = [
    "AddGradientNoise",
    "AddGradientNoiseTaskFamily",
    "ConvertFloatDType",
    "ConvertFloatDTypeTaskFamily",
    "ModifyTaskGradient",
    "NormalizeTaskGradient",
    "NormalizeTaskGradientTaskFamily",
    "ReducedBatchsizeFamily",
    "ReducedBatchsizeTask",
    "ReparamWeights",
    "ReparamWeightsFamily",
    "ScaleLoss",
    "ScaleLossTaskFamily",
    "SubsampleDirectionsTaskGradient",
    "SubsampleDirectionsTaskGradientTaskFamily",
    "WrappedTaskFamilyWithTaskWrapper",
]

PyTree = Any


def _log_uniform(key: jax.Array, shape: tuple[int, ...], lo: float, hi: float) -> jax.Array:
    if not 0 < lo <= hi:
        raise ValueError(f"need 0 < low <= high for a log-uniform range, got ({lo}, {hi})")
    return jnp.exp(jax.random.uniform(key, shape, jnp.float32, math.log(lo), math.log(hi)))


class _TaskWrapper(tasks_base.Task):
    """Forwards everything to ``task``; subclasses override what they change."""

    def __init__(self, task: tasks_base.Task):
        self.task = task

    @property
    def datasets(self):
        return self.task.datasets

    @property
    def name(self) -> str:
        return f"{type(self).__name__}_{self.task.name}"

    def init_with_state(self, key):
        return self.task.init_with_state(key)

    def init(self, key):
        return self.init_with_state(key)[0]

    def loss_with_state_and_aux(self, params, state, key, data):
        return self.task.loss_with_state_and_aux(params, state, key, data)

    def loss_with_state(self, params, state, key, data):
        loss, state, _ = self.loss_with_state_and_aux(params, state, key, data)
        return loss, state

    def loss(self, params, key, data):
        return self.loss_with_state(params, None, key, data)[0]

    def normalizer(self, loss):
        return self.task.normalizer(loss)


# ------------------------------------------------------------------ reparameterize


class ReparamWeights(_TaskWrapper):
    """Parameters ``w / param_scale``; the wrapped loss sees ``w * param_scale``.

    Args:
      task: the task to wrap.
      param_scale: a number (all parameters) or a pytree matching the parameters (per
        tensor, or per parameter with arrays of the parameters' shapes).
    """

    def __init__(self, task: tasks_base.Task, param_scale: Any):
        super().__init__(task)
        self.param_scale = param_scale

    def _scales(self, params: PyTree) -> PyTree:
        leaves = jax.tree_util.tree_leaves(self.param_scale)
        if (
            len(leaves) == 1
            and jnp.ndim(leaves[0]) == 0
            and not isinstance(self.param_scale, dict | list | tuple)
        ):
            return jax.tree_util.tree_map(lambda _: self.param_scale, params)
        if jax.tree_util.tree_structure(params) != jax.tree_util.tree_structure(self.param_scale):
            raise ValueError(
                "param_scale must be a number or match the parameters' structure: "
                f"{jax.tree_util.tree_structure(self.param_scale)} vs "
                f"{jax.tree_util.tree_structure(params)}"
            )
        return self.param_scale

    def init_with_state(self, key):
        """The wrapped task's initial params divided by their scales: ``w / param_scale``.

        Args:
          key: a PRNG key (passed to the wrapped task).

        Returns:
          ``(params / param_scale, model_state)``, each leaf in its own dtype.
        """
        params, state = self.task.init_with_state(key)
        scaled = jax.tree_util.tree_map(
            lambda p, s: (p / s).astype(p.dtype), params, self._scales(params)
        )
        return scaled, state

    def loss_with_state_and_aux(self, params, state, key, data):
        """The wrapped task's loss at ``params * param_scale``.

        Args:
          params: the reparameterized params (``w / param_scale``).
          state: the wrapped task's model state.
          key: the wrapped task's PRNG key.
          data: one batch.

        Returns:
          The wrapped task's ``(loss, new_state, aux)``.
        """
        scaled = jax.tree_util.tree_map(
            lambda p, s: (p * s).astype(p.dtype), params, self._scales(params)
        )
        return self.task.loss_with_state_and_aux(scaled, state, key, data)


class ReparamWeightsFamily(tasks_base.TaskFamily):
    """A family whose members are reparameterized by sampled scales (see :class:`ReparamWeights`).

    Args:
      task_family: the family to wrap.
      level: ``"global"`` (one scale), ``"tensor"`` (one per tensor) or ``"parameter"``
        (one per parameter; the sample stores a key per tensor, not the scales).
      param_scale_range: scales are log-uniform in this range.
    """

    def __init__(
        self,
        task_family: tasks_base.TaskFamily,
        level: str,
        param_scale_range: tuple[float, float] = (0.01, 100.0),
    ):
        if level not in ("global", "tensor", "parameter"):
            raise ValueError(f"level must be 'global', 'tensor' or 'parameter', got {level!r}")
        self.task_family = task_family
        self.level = level
        self.param_scale_range = tuple(float(x) for x in param_scale_range)
        _log_uniform(jax.random.key(0), (), *self.param_scale_range)  # validates the range
        self.datasets = task_family.datasets
        self._name = f"ReparamWeights{level}_{task_family.name}"

    @property
    def name(self) -> str:
        return self._name

    def _abstract_params(self) -> PyTree:
        def init(key):
            k1, k2 = jax.random.split(key)
            return self.task_family.task_fn(self.task_family.sample(k1)).init_with_state(k2)[0]

        return jax.eval_shape(init, jax.random.key(0))

    def sample(self, key: jax.Array) -> cfgobject.CFGNamed:
        """Draws the wrapped family's configuration and the scales, log-uniform in the range.

        Args:
          key: a PRNG key.

        Returns:
          A ``CFGNamed`` with ``sub_cfg`` and ``param_scale`` (a float32 scalar for
          ``"global"``, one per tensor for ``"tensor"``) or, for ``"parameter"``,
          ``param_scale_keys`` (one PRNG key per tensor; ``task_fn`` draws the scales).
        """
        k_sub, k_scale = jax.random.split(key)
        sub = self.task_family.sample(k_sub)
        if self.level == "global":
            values = {
                "sub_cfg": sub,
                "param_scale": _log_uniform(k_scale, (), *self.param_scale_range),
            }
        else:
            leaves, tree = jax.tree_util.tree_flatten(self._abstract_params())
            keys = jax.tree_util.tree_unflatten(tree, list(jax.random.split(k_scale, len(leaves))))
            if self.level == "tensor":
                scales = jax.tree_util.tree_map(
                    lambda k: _log_uniform(k, (), *self.param_scale_range), keys
                )
                values = {"sub_cfg": sub, "param_scale": scales}
            else:
                values = {"sub_cfg": sub, "param_scale_keys": keys}
        return cfgobject.CFGNamed("ReparamWeightsFamily", values)

    def task_fn(self, cfg: cfgobject.CFGNamed) -> tasks_base.Task:
        """The wrapped family's task for ``cfg`` as a :class:`ReparamWeights` (sampled scales).

        Args:
          cfg: a configuration drawn by :meth:`sample` (its arrays may be traced).

        Returns:
          The task.
        """
        values = cfg.values
        if self.level == "parameter":
            scale = jax.tree_util.tree_map(
                lambda p, k: _log_uniform(k, p.shape, *self.param_scale_range),
                self._abstract_params(),
                values["param_scale_keys"],
            )
        else:
            scale = values["param_scale"]
        return ReparamWeights(self.task_family.task_fn(values["sub_cfg"]), scale)


# ---------------------------------------------------------------------- batch size


class _MappedSplit:
    """A split whose batches (``next``) and stacks of batches (``take``) are transformed."""

    def __init__(self, split: Any, fn: Callable[[Any, int], Any]):
        self._split = split
        self._fn = fn  # fn(batch, number of leading stack axes)

    def __iter__(self):
        return self

    def __next__(self):
        return self._fn(next(self._split), 0)

    def take(self, *shape: int):
        return self._fn(self._split.take(*shape), len(shape))

    def get_state(self) -> Any:
        """The wrapped split's position (AttributeError if it cannot report one)."""
        return self._split.get_state()

    def set_state(self, state: Any) -> None:
        self._split.set_state(state)


def _reduced_datasets(datasets: Any, fraction: float) -> datasets_base.Datasets:
    if not 0 < fraction <= 1:
        raise ValueError(f"fraction_of_batchsize must be in (0, 1], got {fraction}")

    def size(n: int) -> int:
        return max(1, int(n * fraction))

    def reduce(batch: Any, lead: int) -> Any:
        return jax.tree_util.tree_map(
            lambda x: x[(slice(None),) * lead + (slice(0, size(x.shape[lead])),)], batch
        )

    abstract = jax.tree_util.tree_map(
        lambda s: jax.ShapeDtypeStruct((size(s.shape[0]), *s.shape[1:]), s.dtype),
        datasets.abstract_batch,
    )
    splits = [_MappedSplit(getattr(datasets, s), reduce) for s in datasets_base.SPLITS]
    info = dict(datasets.extra_info)
    if "batch_size" in info:
        info["batch_size"] = size(info["batch_size"])
    return datasets_base.Datasets(*splits, extra_info=info, abstract_batch=abstract)


class ReducedBatchsizeTask(_TaskWrapper):
    """The task on the first ``fraction_of_batchsize`` of every batch (at least one).

    Args:
      task: the task to wrap (it needs ``datasets``).
      fraction_of_batchsize: the kept fraction of each batch, in ``(0, 1]``; a batch of
        ``n`` keeps ``max(1, int(n * fraction_of_batchsize))`` examples.
    """

    def __init__(self, task: tasks_base.Task, fraction_of_batchsize: float):
        super().__init__(task)
        self.fraction_of_batchsize = float(fraction_of_batchsize)
        self._datasets = _reduced_datasets(task.datasets, self.fraction_of_batchsize)

    @property
    def datasets(self):
        return self._datasets


class ReducedBatchsizeFamily(tasks_base.TaskFamily):
    """A family on the first ``fraction_of_batchsize`` of every batch.

    Args:
      task_family: the family to wrap (it needs ``datasets``).
      fraction_of_batchsize: the kept fraction of each batch, in ``(0, 1]`` (at least one
        example is kept).
    """

    def __init__(self, task_family: tasks_base.TaskFamily, fraction_of_batchsize: float):
        self.task_family = task_family
        self.fraction_of_batchsize = float(fraction_of_batchsize)
        self.datasets = _reduced_datasets(task_family.datasets, self.fraction_of_batchsize)
        self._name = f"ReducedBatchsize_{task_family.name}"

    @property
    def name(self) -> str:
        return self._name

    def sample(self, key):
        """The wrapped family's configuration.

        Args:
          key: a PRNG key.

        Returns:
          ``task_family.sample(key)``.
        """
        return self.task_family.sample(key)

    def task_fn(self, cfg):
        """The wrapped family's task, unchanged.

        The smaller batches come from this family's ``datasets``.

        Args:
          cfg: a configuration drawn by :meth:`sample`.

        Returns:
          ``task_family.task_fn(cfg)``.
        """
        return self.task_family.task_fn(cfg)


# ---------------------------------------------------------------- family wrapping


class WrappedTaskFamilyWithTaskWrapper(tasks_base.TaskFamily):
    """Applies ``task_wrapper`` to every task of ``task_family``.

    Args:
      task_family: the family to wrap.
      task_wrapper: ``task -> task``, applied to every member.
      name: the family's name (default ``"Wrapped_<family name>"``).
    """

    def __init__(
        self,
        task_family: tasks_base.TaskFamily,
        task_wrapper: Callable[[tasks_base.Task], tasks_base.Task],
        name: str | None = None,
    ):
        self.task_family = task_family
        self.task_wrapper = task_wrapper
        self.datasets = task_family.datasets
        self._name = name or f"Wrapped_{task_family.name}"

    @property
    def name(self) -> str:
        return self._name

    def sample(self, key: jax.Array) -> cfgobject.CFGNamed:
        """The wrapped family's configuration, named.

        Args:
          key: a PRNG key.

        Returns:
          A ``CFGNamed`` with ``inner_cfg``, the wrapped family's sample.
        """
        return cfgobject.CFGNamed(
            "WrappedTaskFamilyWithTaskWrapper", {"inner_cfg": self.task_family.sample(key)}
        )

    def task_fn(self, cfg: cfgobject.CFGNamed) -> tasks_base.Task:
        """``task_wrapper`` applied to the wrapped family's task for ``cfg``.

        Args:
          cfg: a configuration drawn by :meth:`sample` (its arrays may be traced).

        Returns:
          The task.
        """
        return self.task_wrapper(self.task_family.task_fn(cfg.values["inner_cfg"]))


# --------------------------------------------------------------------------- dtype


class ConvertFloatDType(_TaskWrapper):
    """Parameters (from ``init``) and float32 data in ``dtype`` (bfloat16 by default).

    Args:
      task: the task to wrap.
      dtype: the dtype of the params and of the float32 leaves of every batch.
    """

    def __init__(self, task: tasks_base.Task, dtype: Any = jnp.bfloat16):
        super().__init__(task)
        self.dtype = jnp.dtype(dtype)

    def _cast(self, tree):
        return jax.tree_util.tree_map(
            lambda x: x.astype(self.dtype) if jnp.result_type(x) == jnp.float32 else x, tree
        )

    def init_with_state(self, key):
        """The wrapped task's initial params, every leaf cast to ``dtype``.

        Args:
          key: a PRNG key (passed to the wrapped task).

        Returns:
          ``(params, model_state)``; the model state is unchanged.
        """
        params, state = self.task.init_with_state(key)
        params = jax.tree_util.tree_map(lambda x: jnp.asarray(x, self.dtype), params)
        return params, state

    def loss_with_state_and_aux(self, params, state, key, data):
        """The wrapped task's loss on the batch with its float32 leaves cast to ``dtype``.

        Args:
          params: the params (used as given).
          state: the wrapped task's model state.
          key: the wrapped task's PRNG key.
          data: one batch.

        Returns:
          The wrapped task's ``(loss, new_state, aux)``.
        """
        return self.task.loss_with_state_and_aux(params, state, key, self._cast(data))


def ConvertFloatDTypeTaskFamily(task_family, dtype=jnp.bfloat16):  # noqa: N802
    """:class:`ConvertFloatDType` on every member of ``task_family``.

    Args:
      task_family: the family to wrap.
      dtype: the dtype of the members' params and float32 data.

    Returns:
      A :class:`WrappedTaskFamilyWithTaskWrapper` named ``ConvertFloatDType_<family name>``.
    """
    return WrappedTaskFamilyWithTaskWrapper(
        task_family,
        functools.partial(ConvertFloatDType, dtype=dtype),
        name=f"ConvertFloatDType_{task_family.name}",
    )


# ---------------------------------------------------------------------- gradients


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


class AddGradientNoiseTaskFamily(tasks_base.TaskFamily):
    """Members get gradient noise with ``std`` log-uniform in ``std_range`` (traced).

    Args:
      task_family: the family to wrap.
      std_range: ``(low, high)`` with ``0 < low <= high``.
    """

    def __init__(self, task_family: tasks_base.TaskFamily, std_range=(1e-3, 1e-1)):
        self.task_family = task_family
        self.std_range = tuple(float(x) for x in std_range)
        _log_uniform(jax.random.key(0), (), *self.std_range)
        self.datasets = task_family.datasets
        self._name = f"AddGradientNoise_{task_family.name}"

    @property
    def name(self) -> str:
        return self._name

    def sample(self, key):
        """Draws the wrapped family's configuration and ``std``, log-uniform in ``std_range``.

        Args:
          key: a PRNG key.

        Returns:
          A ``CFGNamed`` with ``sub_cfg`` and ``std`` (a float32 scalar).
        """
        k1, k2 = jax.random.split(key)
        return cfgobject.CFGNamed(
            "AddGradientNoise",
            {"sub_cfg": self.task_family.sample(k1), "std": _log_uniform(k2, (), *self.std_range)},
        )

    def task_fn(self, cfg):
        """The wrapped family's task for ``cfg`` under :func:`AddGradientNoise` (sampled ``std``).

        Args:
          cfg: a configuration drawn by :meth:`sample` (its arrays may be traced).

        Returns:
          The task.
        """
        return AddGradientNoise(self.task_family.task_fn(cfg.values["sub_cfg"]), cfg.values["std"])


# ----------------------------------------------------------------------- loss scale


class ScaleLoss(_TaskWrapper):
    """The loss times ``scale`` (gradients scale too); ``normalizer`` divides it back.

    Args:
      task: the task to wrap.
      scale: the factor (a number or a traced scalar).
    """

    def __init__(self, task: tasks_base.Task, scale: float | jax.Array):
        super().__init__(task)
        self.scale = scale

    def loss_with_state_and_aux(self, params, state, key, data):
        """The wrapped task's loss times ``scale`` (in the loss's dtype).

        Args:
          params: the params.
          state: the wrapped task's model state.
          key: the wrapped task's PRNG key.
          data: one batch.

        Returns:
          ``(scale * loss, new_state, aux)``.
        """
        loss, state, aux = self.task.loss_with_state_and_aux(params, state, key, data)
        return loss * jnp.asarray(self.scale, loss.dtype), state, aux

    def normalizer(self, loss):
        """The wrapped task's normalizer of ``loss / scale``.

        Args:
          loss: a loss of this (scaled) task.

        Returns:
          The normalized loss, on the wrapped task's scale.
        """
        return self.task.normalizer(loss / jnp.asarray(self.scale, jnp.result_type(loss)))


class ScaleLossTaskFamily(tasks_base.TaskFamily):
    """Members' losses are scaled by a factor log-uniform in ``scale_range`` (traced).

    Args:
      task_family: the family to wrap.
      scale_range: ``(low, high)`` with ``0 < low <= high``.
    """

    def __init__(self, task_family: tasks_base.TaskFamily, scale_range=(0.1, 10.0)):
        self.task_family = task_family
        self.scale_range = tuple(float(x) for x in scale_range)
        _log_uniform(jax.random.key(0), (), *self.scale_range)
        self.datasets = task_family.datasets
        self._name = f"ScaleLoss_{task_family.name}"

    @property
    def name(self) -> str:
        return self._name

    def sample(self, key):
        """Draws the wrapped family's configuration and the scale, log-uniform in ``scale_range``.

        Args:
          key: a PRNG key.

        Returns:
          A ``CFGNamed`` with ``sub_cfg`` and ``scale`` (a float32 scalar).
        """
        k1, k2 = jax.random.split(key)
        return cfgobject.CFGNamed(
            "ScaleLoss",
            {
                "sub_cfg": self.task_family.sample(k1),
                "scale": _log_uniform(k2, (), *self.scale_range),
            },
        )

    def task_fn(self, cfg):
        """The wrapped family's task for ``cfg`` as a :class:`ScaleLoss` (sampled scale).

        Args:
          cfg: a configuration drawn by :meth:`sample` (its arrays may be traced).

        Returns:
          The task.
        """
        return ScaleLoss(self.task_family.task_fn(cfg.values["sub_cfg"]), cfg.values["scale"])
