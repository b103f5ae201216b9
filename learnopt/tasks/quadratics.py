"""Quadratic tasks: cheap, data-free problems for tests and meta-training examples."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

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


tasks_base.register_task(name="QuadraticTask")(QuadraticTask)
