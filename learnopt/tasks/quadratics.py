"""Quadratic tasks: cheap, (mostly) data-free problems for tests and meta-training examples.

The names below mean what they mean in the notes' library (``learned_optimization``'s
``tasks/quadratics.py``): same constructor arguments, same initialization, same loss,
and the same use of PRNG keys (so one key gives the same task and the same init):

===============================  ============================================================
``QuadraticTask(dim=10)``        ``sum(p^2)``, ``p ~ N(0, I_dim)``; no data.
``BatchQuadraticTask()``         ``sum(p^2)``, ``p ~ N(0, I_10)``; has noise batches
                                 (``float32 [4, 2]``, standard normal) that the loss ignores.
``LogQuadraticTask()``           ``log(sum(p^2))``, ``p ~ N(0, I_10)``.
``SumQuadraticTask()``           ``sum((a + b)^2)`` over params ``{"a": [10], "b": [10]}``.
``NoisyMeanQuadraticTask``       ``sum((p - s * eps)^2)``, ``eps ~ N(0, I_dim)`` drawn from
                                 the loss key at every call (a noisy target).
``FixedDimQuadraticFamily``      target ``c ~ N(0, I_dim)``; ``sum((c - p)^2)``.
``FixedDimQuadraticFamilyData``  as above plus a scalar noise batch added to the loss;
                                 aux ``l2 = mean(p^2)``, ``l1 = mean(|p|)``; normalizer clips
                                 to ``[0, 1000]``.
``NoisyQuadraticFamily``         center ``c ~ N(0, I)``, scales ``s ~ 25 U[0, 1)^dim``;
                                 ``sum((s * (c - p))^2)`` whose *gradient* carries
                                 multiplicative noise ``cov * eps * p`` (the value does not).
===============================  ============================================================

learnopt's own quadratics, with maths of their own, have their own names:
``CurvatureQuadraticFamily`` (``0.5 * sum(c_i p_i^2)``, curvatures log-uniform in a
range) and ``LeastSquaresRegressionTask`` (``mean((x @ w - y)^2)`` on synthetic
regression batches).

Data, where a task has it, is a :class:`~learnopt.tasks.datasets.base.Datasets` of numpy
iterators with ``abstract_batch`` and ``take(*shape)`` (batches stacked on leading
axes), seeded per split so runs are reproducible (the library drew them from numpy's
global generator); it is made in :mod:`learnopt.tasks.quadratics_data`, whose
``batch_datasets`` and ``noise_datasets`` are re-exported here. Losses are computed in
at least float32 (float64 for float64 params).
"""

from __future__ import annotations

import math
from typing import Any

import jax
import jax.numpy as jnp

from learnopt.tasks import base as tasks_base
from learnopt.tasks.datasets import base as datasets_base
from learnopt.tasks.quadratics_data import batch_datasets, noise_datasets, regression_datasets

__all__ = [
    "QuadraticTask",
    "BatchQuadraticTask",
    "LogQuadraticTask",
    "SumQuadraticTask",
    "NoisyMeanQuadraticTask",
    "FixedDimQuadraticFamily",
    "FixedDimQuadraticFamilyData",
    "NoisyQuadraticFamily",
    "CurvatureQuadraticFamily",
    "LeastSquaresRegressionTask",
    "batch_datasets",
    "noise_datasets",
]


def _f32_or_wider(x: jax.Array) -> jax.Array:
    x = jnp.asarray(x)
    return x.astype(jnp.promote_types(x.dtype, jnp.float32))


def _sum_squares(x: jax.Array) -> jax.Array:
    return jnp.sum(jnp.square(_f32_or_wider(x)))


# ------------------------------------------------------------------------ fixed tasks


class QuadraticTask(tasks_base.Task):
    """``loss(p) = sum(p^2)`` with ``p ~ N(0, I_dim)`` at init; no data.

    Args:
      dim: number of parameters.
      param_dtype: dtype of the params made by ``init`` (learnopt addition; the
        library always used float32).
    """

    def __init__(self, dim: int = 10, *, param_dtype: Any = jnp.float32):
        self._dim = int(dim)
        self.param_dtype = jnp.dtype(param_dtype)

    @property
    def dim(self) -> int:
        """Number of parameters."""
        return self._dim

    def init(self, key: jax.Array) -> jax.Array:
        """Initial params ``p ~ N(0, I_dim)``.

        Args and returns as in :meth:`~learnopt.tasks.base.Task.init`.
        """
        return jax.random.normal(key, (self._dim,), self.param_dtype)

    def loss(self, params: jax.Array, key: jax.Array, data: Any) -> jax.Array:
        """``sum(p^2)``, computed in at least float32.

        Args:
          params: ``[dim]``.
          key: unused.
          data: unused (the task has no data).

        Returns:
          A scalar.
        """
        del key, data
        return _sum_squares(params)


class BatchQuadraticTask(tasks_base.Task):
    """``loss(p) = sum(p^2)``, ``p ~ N(0, I_10)``, with noise batches that the loss ignores.

    It exists to exercise the data path of a trainer on a quadratic: ``datasets``
    yields standard normal ``float32 [4, 2]`` batches (see :func:`batch_datasets`).

    Args:
      seed: seed of the noise batches (learnopt addition).
    """

    def __init__(self, seed: int = 0):
        self.datasets = batch_datasets(seed)

    def init(self, key: jax.Array) -> jax.Array:
        """Initial params ``p ~ N(0, I_10)``.

        Args and returns as in :meth:`~learnopt.tasks.base.Task.init`.
        """
        return jax.random.normal(key, (10,))

    def loss(self, params: jax.Array, key: jax.Array, data: Any) -> jax.Array:
        """``sum(p^2)``, computed in at least float32; ``key`` and the batch are ignored.

        Args and returns as in :meth:`~learnopt.tasks.base.Task.loss`.
        """
        del key, data
        return _sum_squares(params)


class LogQuadraticTask(tasks_base.Task):
    """``loss(p) = log(sum(p^2))``, ``p ~ N(0, I_10)``; no data.

    Its gradient ``2 p / sum(p^2)`` grows as ``p -> 0``: a badly conditioned problem
    that punishes optimizers that trust the gradient scale.
    """

    def init(self, key: jax.Array) -> jax.Array:
        """Initial params ``p ~ N(0, I_10)``.

        Args and returns as in :meth:`~learnopt.tasks.base.Task.init`.
        """
        return jax.random.normal(key, (10,))

    def loss(self, params: jax.Array, key: jax.Array, data: Any) -> jax.Array:
        """``log(sum(p^2))``, computed in at least float32.

        Args:
          params: ``[10]``.
          key: unused.
          data: unused (the task has no data).

        Returns:
          A scalar.
        """
        del key, data
        return jnp.log(_sum_squares(params))


class SumQuadraticTask(tasks_base.Task):
    """``loss = sum((a + b)^2)`` over params ``{"a": [10], "b": [10]}``, both ``N(0, I)``.

    Only ``a + b`` matters, so the minimum is a 10-dimensional valley: a minimal
    test of optimizers on a pytree of params with a redundant direction.
    """

    def init(self, key: jax.Array) -> dict[str, jax.Array]:
        """Initial params ``{"a": N(0, I_10), "b": N(0, I_10)}`` (one key each).

        Args and returns as in :meth:`~learnopt.tasks.base.Task.init`.
        """
        key_a, key_b = jax.random.split(key)
        return {"a": jax.random.normal(key_a, (10,)), "b": jax.random.normal(key_b, (10,))}

    def loss(self, params: dict[str, jax.Array], key: jax.Array, data: Any) -> jax.Array:
        """``sum((a + b)^2)``, computed in at least float32.

        Args:
          params: ``{"a": [10], "b": [10]}``.
          key: unused.
          data: unused (the task has no data).

        Returns:
          A scalar.
        """
        del key, data
        return _sum_squares(params["a"] + params["b"])


class NoisyMeanQuadraticTask(tasks_base.Task):
    """``loss(p) = sum((p - s * eps)^2)`` with a fresh ``eps ~ N(0, I_dim)`` per loss key.

    A quadratic whose target is noise around 0: the loss and its gradient
    ``2 (p - s eps)`` are unbiased estimates of those of
    ``E[loss] = sum(p^2) + dim * s^2``, so it is the simplest stochastic problem with
    additive gradient noise of variance ``4 s^2`` per coordinate.

    Args:
      dim: number of parameters.
      noise_stddev: ``s``, the standard deviation of the target.
    """

    def __init__(self, dim: int = 10, noise_stddev: float = 1.0):
        if noise_stddev < 0:
            raise ValueError(f"noise_stddev must be >= 0, got {noise_stddev}")
        self._dim = int(dim)
        self._noise_stddev = float(noise_stddev)

    def init(self, key: jax.Array) -> jax.Array:
        """Initial params ``p ~ N(0, I_dim)``.

        Args and returns as in :meth:`~learnopt.tasks.base.Task.init`.
        """
        return jax.random.normal(key, (self._dim,))

    def loss(self, params: jax.Array, key: jax.Array, data: Any) -> jax.Array:
        """``sum((p - s * eps)^2)`` with ``eps ~ N(0, I_dim)`` drawn from ``key``.

        Args:
          params: ``[dim]``.
          key: a PRNG key (required: it draws the target ``eps``).
          data: unused (the task has no data).

        Returns:
          A scalar, in at least float32.
        """
        del data
        params = _f32_or_wider(params)
        mean = self._noise_stddev * jax.random.normal(key, (self._dim,), params.dtype)
        return jnp.sum(jnp.square(params - mean))


# ---------------------------------------------------------------------- task families


class _TargetQuadratic(tasks_base.Task):
    """``sum((target - p)^2)`` with ``p ~ N(0, I_dim)`` (a member of FixedDimQuadraticFamily)."""

    def __init__(self, target: jax.Array, dim: int):
        self.target = target
        self._dim = dim

    def init(self, key: jax.Array) -> jax.Array:
        return jax.random.normal(key, (self._dim,))

    def loss(self, params: jax.Array, key: jax.Array, data: Any) -> jax.Array:
        del key, data
        return _sum_squares(self.target - _f32_or_wider(params))


class FixedDimQuadraticFamily(tasks_base.TaskFamily):
    """Quadratics ``sum((c - p)^2)`` with a sampled target ``c ~ N(0, I_dim)``.

    ``sample(key)`` returns the target (the task config); every member starts from
    ``p ~ N(0, I_dim)``; no data.

    Args:
      dim: number of parameters (learnopt default 10; required in the library).
    """

    def __init__(self, dim: int = 10):
        self._dim = int(dim)

    def sample(self, key: jax.Array) -> jax.Array:
        """Draws a target ``c ~ N(0, I_dim)``.

        Args:
          key: a PRNG key.

        Returns:
          The target, ``[dim]``, in JAX's default float dtype.
        """
        return jax.random.normal(key, (self._dim,))

    def task_fn(self, task_params: jax.Array) -> tasks_base.Task:
        """The member with target ``task_params``: ``sum((c - p)^2)``, ``p ~ N(0, I_dim)`` at init.

        Args:
          task_params: a target drawn by :meth:`sample` (may be traced).

        Returns:
          The task.
        """
        return _TargetQuadratic(task_params, self._dim)


class _TargetQuadraticPlusData(_TargetQuadratic):
    """``sum((target - p)^2) + batch`` (a member of FixedDimQuadraticFamilyData)."""

    def __init__(self, target: jax.Array, dim: int, datasets: datasets_base.Datasets):
        super().__init__(target, dim)
        self.datasets = datasets

    def loss(self, params: jax.Array, key: jax.Array, data: Any) -> jax.Array:
        return super().loss(params, key, None) + data

    def loss_and_aux(
        self, params: jax.Array, key: jax.Array, data: Any
    ) -> tuple[jax.Array, dict[str, jax.Array]]:
        return self.loss(params, key, data), {
            "l2": jnp.mean(jnp.square(params)),
            "l1": jnp.mean(jnp.abs(params)),
        }

    def normalizer(self, loss: jax.Array) -> jax.Array:
        return jnp.clip(loss, 0, 1000)


class FixedDimQuadraticFamilyData(FixedDimQuadraticFamily):
    """:class:`FixedDimQuadraticFamily` whose loss adds a scalar batch of standard normal noise.

    ``loss = sum((c - p)^2) + batch`` with ``batch`` from ``datasets`` (scalar
    ``float32``, see :func:`noise_datasets`); ``loss_and_aux`` also reports
    ``l2 = mean(p^2)`` and ``l1 = mean(|p|)``; the normalizer clips to ``[0, 1000]``.

    Args:
      dim: number of parameters (learnopt gives the library's required argument a
        default of 10).
      seed: seed of the noise batches (learnopt addition).
    """

    def __init__(self, dim: int = 10, seed: int = 0):
        super().__init__(dim)
        self.datasets = noise_datasets(seed)

    def task_fn(self, task_params: jax.Array) -> tasks_base.Task:
        """The member with target ``task_params``: ``sum((c - p)^2) + batch`` on this family's data.

        Args:
          task_params: a target drawn by :meth:`sample` (may be traced).

        Returns:
          The task (with ``loss_and_aux`` and the clipping normalizer).
        """
        return _TargetQuadraticPlusData(task_params, self._dim, self.datasets)


class _NoisyScaledQuadratic(tasks_base.Task):
    """A member of NoisyQuadraticFamily (see there)."""

    def __init__(self, center: jax.Array, scale: jax.Array, dim: int, cov: float):
        self.center = center
        self.scale = scale
        self._dim = dim
        self._cov = cov

    def init(self, key: jax.Array) -> jax.Array:
        return jax.random.normal(key, (self._dim,))

    def loss(self, params: jax.Array, key: jax.Array, data: Any) -> jax.Array:
        del data
        params = _f32_or_wider(params)
        noise = self._cov * jax.random.normal(key, (self._dim,), params.dtype) * params
        # Zero in value, ``cov * eps`` in gradient: noise on the gradient only.
        grad_noise = noise - jax.lax.stop_gradient(noise)
        return jnp.sum(jnp.square(self.scale * (self.center - params)) + grad_noise)


class NoisyQuadraticFamily(tasks_base.TaskFamily):
    """Axis-aligned quadratics with random center and scales and noisy gradients.

    ``sample(key)`` returns ``(center, scale)``: ``center ~ N(0, I_dim)`` and
    ``scale ~ scale_constant * U[0, 1)^dim`` (``scale_constant = 25``). A member's
    loss is ``sum((scale * (center - p))^2)``; its gradient gets extra noise
    ``cov * eps_i`` on coordinate ``i``, ``eps ~ N(0, I)`` from the loss key (added as
    ``n - stop_gradient(n)`` with ``n = cov * eps * p``, which is zero in value).

    Args:
      dim: number of parameters (learnopt default 10; required in the library).
      cov: scale of the gradient noise (learnopt default 0.1; required in the library).
    """

    scale_constant: float = 25.0

    def __init__(self, dim: int = 10, cov: float = 0.1):
        self._dim = int(dim)
        self._cov = float(cov)
        self.datasets = None

    def sample(self, key: jax.Array) -> tuple[jax.Array, jax.Array]:
        """Draws ``center ~ N(0, I_dim)`` and ``scale ~ scale_constant * U[0, 1)^dim``.

        Args:
          key: a PRNG key.

        Returns:
          ``(center, scale)``, each ``[dim]``, in JAX's default float dtype.
        """
        key, subkey = jax.random.split(key)
        center = jax.random.normal(key, (self._dim,))
        scale = jax.random.uniform(subkey, (self._dim,)) * self.scale_constant
        return center, scale

    def task_fn(self, task_params: tuple[jax.Array, jax.Array]) -> tasks_base.Task:
        """The member ``sum((scale * (center - p))^2)`` with gradient noise of scale ``cov``.

        Args:
          task_params: ``(center, scale)`` drawn by :meth:`sample` (may be traced).

        Returns:
          The task; its loss needs a PRNG key (it draws the gradient noise).
        """
        center, scale = task_params
        return _NoisyScaledQuadratic(center, scale, self._dim, self._cov)


# ---------------------------------------------------------------- learnopt's own tasks


class _CurvatureQuadratic(tasks_base.Task):
    def __init__(self, curvatures: jax.Array, dim: int):
        self.curvatures = curvatures
        self._dim = dim

    def init(self, key: jax.Array) -> jax.Array:
        return jax.random.normal(key, (self._dim,), jnp.float32)

    def loss(self, params: jax.Array, key: jax.Array, data: Any) -> jax.Array:
        del key, data
        return 0.5 * jnp.sum(self.curvatures * jnp.square(_f32_or_wider(params)))


class CurvatureQuadraticFamily(tasks_base.TaskFamily):
    """Quadratics ``0.5 * sum(c_i p_i^2)`` with curvatures ``c_i`` log-uniform in a range.

    ``sample(key)`` returns the curvature vector (the task config); params start at
    ``p ~ N(0, I_dim)``. The minimum is always 0 at ``p = 0``; what varies is the
    conditioning, so a learned optimizer meta-trained on the family must pick a step
    size that is good across curvatures: a small, data-free meta-learning benchmark
    with a known optimal step ``2 / (c_min + c_max)`` for gradient descent.
    (learnopt's own; not in the notes' library.)

    Args:
      dim: number of parameters.
      min_curvature, max_curvature: range of the log-uniform curvatures.
    """

    def __init__(self, dim: int = 10, min_curvature: float = 0.1, max_curvature: float = 10.0):
        if not 0 < min_curvature <= max_curvature:
            raise ValueError(
                "need 0 < min_curvature <= max_curvature, got "
                f"min_curvature={min_curvature}, max_curvature={max_curvature}"
            )
        self.dim = int(dim)
        self.min_curvature = float(min_curvature)
        self.max_curvature = float(max_curvature)

    def sample(self, key: jax.Array) -> jax.Array:
        """Draws curvatures ``c_i = exp(u_i)``, ``u_i ~ U[log min_curvature, log max_curvature)``.

        Args:
          key: a PRNG key.

        Returns:
          The curvatures, ``float32 [dim]``.
        """
        lo, hi = math.log(self.min_curvature), math.log(self.max_curvature)
        return jnp.exp(jax.random.uniform(key, (self.dim,), jnp.float32, lo, hi))

    def task_fn(self, cfg: jax.Array) -> tasks_base.Task:
        """The member ``0.5 * sum(c_i p_i^2)``, ``p ~ N(0, I_dim)`` at init.

        Args:
          cfg: curvatures drawn by :meth:`sample` (may be traced).

        Returns:
          The task.
        """
        return _CurvatureQuadratic(cfg, self.dim)


class LeastSquaresRegressionTask(tasks_base.Task):
    """Linear least squares on batches: ``loss(w) = mean((x @ w - y)^2)``.

    Batches are synthetic: ``x ~ N(0, I_dim)``, ``y = x @ w_true + noise * eps`` with a
    fixed ``w_true ~ N(0, I_dim)`` (``datasets.train.w_true``) drawn from ``seed``. A
    stochastic quadratic: the batches make the gradient noisy like a real training
    problem at negligible cost. (learnopt's own; not in the notes' library.)

    Args:
      dim: number of parameters (the width of ``x``).
      batch_size: examples per batch.
      noise: standard deviation of the label noise ``eps``.
      seed: seed of ``w_true``; split ``i`` of ``SPLITS`` draws its batches from
        ``seed + 1 + i``.
    """

    def __init__(self, dim: int = 10, batch_size: int = 32, noise: float = 0.1, seed: int = 0):
        self.dim = int(dim)
        self.datasets = regression_datasets(self.dim, batch_size, noise, seed)

    def init(self, key: jax.Array) -> jax.Array:
        """Initial weights ``w ~ N(0, I_dim)``.

        Args and returns as in :meth:`~learnopt.tasks.base.Task.init`.
        """
        return jax.random.normal(key, (self.dim,), jnp.float32)

    def loss(self, params: jax.Array, key: jax.Array, data: Any) -> jax.Array:
        """``mean((x @ w - y)^2)`` over the batch, computed in at least float32.

        Args:
          params: the weights ``w``, ``[dim]``.
          key: unused.
          data: ``{"x": [B, dim], "y": [B]}``.

        Returns:
          A scalar.

        Raises:
          ValueError: ``data`` does not have those shapes.
        """
        del key
        x, y = data["x"], data["y"]
        if jnp.shape(x)[-1:] != (self.dim,) or jnp.shape(y) != jnp.shape(x)[:-1]:
            raise ValueError(
                f"{self.name} needs data x [B, {self.dim}] and y [B], got x "
                f"{jnp.shape(x)} and y {jnp.shape(y)}"
            )
        pred = x @ _f32_or_wider(params)
        return jnp.mean(jnp.square(pred - y))


for _task in (
    QuadraticTask,
    BatchQuadraticTask,
    LogQuadraticTask,
    SumQuadraticTask,
    NoisyMeanQuadraticTask,
    LeastSquaresRegressionTask,
):
    tasks_base.TASKS.register(_task)
for _family in (
    FixedDimQuadraticFamily,
    FixedDimQuadraticFamilyData,
    NoisyQuadraticFamily,
    CurvatureQuadraticFamily,
):
    tasks_base.TASK_FAMILIES.register(_family)
del _task, _family
