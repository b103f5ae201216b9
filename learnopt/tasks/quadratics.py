"""Quadratic tasks: cheap, data-free problems for tests and meta-training examples."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from learnopt.tasks import base as tasks_base

__all__ = ["QuadraticTask", "FixedDimQuadraticFamily", "BatchQuadraticTask"]


class QuadraticTask(tasks_base.Task):
    """``loss(p) = sum(p^2)`` with ``p ~ N(0, 1)^dim`` at init (no data)."""

    def __init__(self, dim: int = 10, param_dtype: Any = jnp.float32):
        self.dim = dim
        self.param_dtype = param_dtype

    def init(self, key: jax.Array) -> jax.Array:
        return jax.random.normal(key, (self.dim,), self.param_dtype)

    def loss(self, params: jax.Array, key: jax.Array, data: Any) -> jax.Array:
        _check_dim(params, self.dim)
        return jnp.sum(jnp.square(params.astype(jnp.float32)))


def _check_dim(params: jax.Array, dim: int) -> None:
    if jnp.shape(params) != (dim,):
        raise ValueError(f"quadratic params must have shape ({dim},), got {jnp.shape(params)}")


class _ScaledQuadratic(tasks_base.Task):
    def __init__(self, scales: jax.Array, dim: int):
        self.scales = scales
        self.dim = dim

    def init(self, key: jax.Array) -> jax.Array:
        return jax.random.normal(key, (self.dim,), jnp.float32)

    def loss(self, params: jax.Array, key: jax.Array, data: Any) -> jax.Array:
        _check_dim(params, self.dim)
        return 0.5 * jnp.sum(self.scales * jnp.square(params.astype(jnp.float32)))


class FixedDimQuadraticFamily(tasks_base.TaskFamily):
    """Quadratics ``0.5 * sum(c_i p_i^2)`` with curvatures ``c_i`` log-uniform in a range.

    ``sample(key)`` returns the curvature vector (the task config); a learned
    optimizer meta-trained on the family must pick a step size that is good across
    curvatures, which makes it a small, data-free meta-learning benchmark.
    """

    def __init__(self, dim: int = 10, min_curvature: float = 0.1, max_curvature: float = 10.0):
        if not 0 < min_curvature <= max_curvature:
            raise ValueError("need 0 < min_curvature <= max_curvature")
        self.dim = dim
        self.min_curvature = min_curvature
        self.max_curvature = max_curvature

    def sample(self, key: jax.Array) -> jax.Array:
        lo, hi = jnp.log(self.min_curvature), jnp.log(self.max_curvature)
        return jnp.exp(jax.random.uniform(key, (self.dim,), jnp.float32, lo, hi))

    def task_fn(self, cfg: jax.Array) -> tasks_base.Task:
        return _ScaledQuadratic(cfg, self.dim)

    @property
    def name(self) -> str:
        return f"FixedDimQuadraticFamily_{self.dim}"


class _RegressionSplit:
    """Infinite iterator of ``{"x": [B, dim], "y": [B]}`` with ``y = x @ w_true + noise``."""

    def __init__(self, w_true: np.ndarray, batch_size: int, noise: float, seed: int):
        self.w_true = w_true
        self.batch_size = batch_size
        self.noise = noise
        self._rng = np.random.default_rng(seed)

    def __iter__(self) -> _RegressionSplit:
        return self

    def __next__(self) -> dict[str, np.ndarray]:
        return self.take()

    def take(self, *shape: int) -> dict[str, np.ndarray]:
        """Batches stacked ``[*shape, B, ...]`` (same process as repeated ``next``)."""
        dim = self.w_true.shape[0]
        x = self._rng.standard_normal((*shape, self.batch_size, dim), dtype=np.float32)
        eps = self._rng.standard_normal((*shape, self.batch_size), dtype=np.float32)
        return {"x": x, "y": (x @ self.w_true + self.noise * eps).astype(np.float32)}


class _RegressionDatasets:
    def __init__(self, dim: int, batch_size: int, noise: float, seed: int):
        w_true = np.random.default_rng(seed).standard_normal(dim).astype(np.float32)
        for i, split in enumerate(("train", "inner_valid", "outer_valid", "test")):
            setattr(self, split, _RegressionSplit(w_true, batch_size, noise, seed + 1 + i))
        self.extra_info = {"name": "linear_regression", "dim": dim, "batch_size": batch_size}
        self.abstract_batch = {
            "x": jax.ShapeDtypeStruct((batch_size, dim), jnp.float32),
            "y": jax.ShapeDtypeStruct((batch_size,), jnp.float32),
        }


class BatchQuadraticTask(tasks_base.Task):
    """Least squares on batches: ``loss(w) = mean((x @ w - y)^2)``, ``y = x @ w_true + noise``.

    A stochastic quadratic: the data (synthetic, generated on the host per batch) make
    the gradient noisy, like a real training problem, at negligible cost.
    """

    def __init__(self, dim: int = 10, batch_size: int = 32, noise: float = 0.1, seed: int = 0):
        self.dim = dim
        self.datasets = _RegressionDatasets(dim, batch_size, noise, seed)

    def init(self, key: jax.Array) -> jax.Array:
        return jax.random.normal(key, (self.dim,), jnp.float32)

    def loss(self, params: jax.Array, key: jax.Array, data: Any) -> jax.Array:
        _check_dim(params, self.dim)
        x, y = data["x"], data["y"]
        if jnp.shape(x)[-1:] != (self.dim,) or jnp.shape(y) != jnp.shape(x)[:-1]:
            raise ValueError(
                f"BatchQuadraticTask needs x [B, {self.dim}] and y [B], got x "
                f"{jnp.shape(x)} and y {jnp.shape(y)}"
            )
        pred = x @ params.astype(jnp.float32)
        return jnp.mean(jnp.square(pred - y))


tasks_base.register_task(name="QuadraticTask")(QuadraticTask)
tasks_base.register_task(name="BatchQuadraticTask")(BatchQuadraticTask)
tasks_base.TASK_FAMILIES.register(FixedDimQuadraticFamily)
