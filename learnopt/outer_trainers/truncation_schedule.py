"""Truncation schedules: how many inner steps an inner training run lasts.

A schedule samples the length of each new inner run (``sample_length(key)``, traceable).
Runs end, and are re-initialized, at the end of the unroll in which they reach their
length, so lengths are effectively rounded up to a multiple of the unroll length.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

__all__ = [
    "TruncationSchedule",
    "ConstantTruncationSchedule",
    "LogUniformLengthSchedule",
    "NeverEndingTruncationSchedule",
]

_NEVER = np.iinfo(np.int32).max


class TruncationSchedule:
    """Base class: ``sample_length(key) -> int32`` scalar."""

    def sample_length(self, key: jax.Array) -> jax.Array:
        raise NotImplementedError

    @property
    def max_length(self) -> int:
        raise NotImplementedError


class ConstantTruncationSchedule(TruncationSchedule):
    """Every inner run lasts ``total_length`` steps."""

    def __init__(self, total_length: int):
        if int(total_length) < 1:
            raise ValueError(f"total_length must be >= 1, got {total_length}")
        self.total_length = int(total_length)

    def sample_length(self, key: jax.Array) -> jax.Array:
        return jnp.asarray(self.total_length, jnp.int32)

    @property
    def max_length(self) -> int:
        return self.total_length

    def __repr__(self) -> str:
        return f"ConstantTruncationSchedule({self.total_length})"


class LogUniformLengthSchedule(TruncationSchedule):
    """Lengths log-uniform in ``[min_length, max_length]`` (learned_optimization's default)."""

    def __init__(self, min_length: int, max_length: int):
        if not 1 <= min_length <= max_length:
            raise ValueError(f"need 1 <= min_length <= max_length, got {min_length}, {max_length}")
        self.min_length = int(min_length)
        self._max_length = int(max_length)

    def sample_length(self, key: jax.Array) -> jax.Array:
        lo, hi = np.log(self.min_length), np.log(self._max_length)
        u = jax.random.uniform(key, (), jnp.float32, lo, hi)
        return jnp.clip(jnp.round(jnp.exp(u)), self.min_length, self._max_length).astype(jnp.int32)

    @property
    def max_length(self) -> int:
        return self._max_length

    def __repr__(self) -> str:
        return f"LogUniformLengthSchedule({self.min_length}, {self._max_length})"


class NeverEndingTruncationSchedule(TruncationSchedule):
    """Inner runs never end (online problems such as influence balancing)."""

    def sample_length(self, key: jax.Array) -> jax.Array:
        return jnp.asarray(_NEVER, jnp.int32)

    @property
    def max_length(self) -> int:
        return _NEVER

    def __repr__(self) -> str:
        return "NeverEndingTruncationSchedule()"
