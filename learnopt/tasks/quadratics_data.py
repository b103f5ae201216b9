"""The synthetic data of the quadratic tasks: seeded numpy batches, no files.

Each dataset is a :class:`~learnopt.tasks.datasets.base.Datasets` of endless numpy
iterators with ``abstract_batch`` and ``take(*shape)`` (batches stacked on leading
axes), seeded per split so runs are reproducible (the notes' library drew them from
numpy's global generator); each split reports and restores its position
(``get_state`` / ``set_state``):

* :func:`batch_datasets`: standard normal noise ``float32 [4, 2]``
  (``BatchQuadraticTask``'s);
* :func:`noise_datasets`: scalar standard normal noise (``FixedDimQuadraticFamilyData``'s);
* :func:`regression_datasets`: ``{"x": [B, dim], "y": [B]}`` with
  ``y = x @ w_true + noise * eps`` (``LeastSquaresRegressionTask``'s).

:mod:`learnopt.tasks.quadratics` re-exports ``batch_datasets`` and ``noise_datasets``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import numpy as np

from learnopt.tasks.datasets import base as datasets_base

__all__ = ["batch_datasets", "noise_datasets", "regression_datasets"]


class _SyntheticSplit:
    """Endless iterator of batches ``draw(rng, leading_shape)``; also ``take(*shape)``.

    ``draw`` returns the batch (a pytree of numpy arrays) with ``leading_shape`` in front
    of every leaf; ``take(4)`` is four batches stacked, drawn in one call.
    """

    def __init__(self, draw: Callable[[np.random.Generator, tuple[int, ...]], Any], seed: int):
        self._draw = draw
        self._rng = np.random.default_rng(seed)

    def get_state(self) -> dict[str, Any]:
        """The generator's state as a JSON-able dict; :meth:`set_state` continues from it."""
        return {"bit_generator": self._rng.bit_generator.state}

    def set_state(self, state: Any) -> None:
        """Continues the stream from ``state`` (a :meth:`get_state` of the same stream)."""
        self._rng.bit_generator.state = state["bit_generator"]

    def __iter__(self) -> _SyntheticSplit:
        return self

    def __next__(self) -> Any:
        return self._draw(self._rng, ())

    def take(self, *shape: int) -> Any:
        """The next ``prod(shape)`` batches stacked as ``[*shape, ...]``."""
        if not shape or any(int(s) < 1 for s in shape):
            raise ValueError(f"take() needs positive sizes, got {shape}")
        return self._draw(self._rng, tuple(int(s) for s in shape))


def _synthetic_datasets(
    draw: Callable[[np.random.Generator, tuple[int, ...]], Any],
    abstract_batch: Any,
    extra_info: dict[str, Any],
    seed: int,
) -> datasets_base.Datasets:
    splits = [_SyntheticSplit(draw, seed * 4 + i) for i in range(len(datasets_base.SPLITS))]
    return datasets_base.Datasets(*splits, extra_info=extra_info, abstract_batch=abstract_batch)


def batch_datasets(seed: int = 0) -> datasets_base.Datasets:
    """Standard normal noise batches ``float32 [4, 2]`` (:class:`BatchQuadraticTask`'s).

    Args:
      seed: seed of the batches (split ``i`` of ``SPLITS`` draws from ``4 * seed + i``).

    Returns:
      A :class:`~learnopt.tasks.datasets.base.Datasets` of endless numpy iterators.
    """

    def draw(rng: np.random.Generator, lead: tuple[int, ...]) -> np.ndarray:
        return rng.standard_normal((*lead, 4, 2), dtype=np.float32)

    abstract = jax.ShapeDtypeStruct((4, 2), np.float32)
    return _synthetic_datasets(draw, abstract, {"name": "normal_noise"}, seed)


def noise_datasets(seed: int = 0) -> datasets_base.Datasets:
    """Scalar standard normal noise batches ``float32 []`` (for FixedDimQuadraticFamilyData).

    Args:
      seed: seed of the batches (split ``i`` of ``SPLITS`` draws from ``4 * seed + i``).

    Returns:
      A :class:`~learnopt.tasks.datasets.base.Datasets` of endless numpy iterators.
    """

    def draw(rng: np.random.Generator, lead: tuple[int, ...]) -> np.ndarray:
        return np.asarray(rng.standard_normal(lead, dtype=np.float32))

    abstract = jax.ShapeDtypeStruct((), np.float32)
    return _synthetic_datasets(draw, abstract, {"name": "scalar_normal_noise"}, seed)


class _RegressionSplit(_SyntheticSplit):
    """``{"x": [B, dim], "y": [B]}`` with ``y = x @ w_true + noise * eps``."""

    def __init__(self, w_true: np.ndarray, batch_size: int, noise: float, seed: int):
        self.w_true = w_true
        dim = w_true.shape[0]

        def draw(rng: np.random.Generator, lead: tuple[int, ...]) -> dict[str, np.ndarray]:
            x = rng.standard_normal((*lead, batch_size, dim), dtype=np.float32)
            eps = rng.standard_normal((*lead, batch_size), dtype=np.float32)
            return {"x": x, "y": (x @ w_true + noise * eps).astype(np.float32)}

        super().__init__(draw, seed)


def regression_datasets(
    dim: int, batch_size: int = 32, noise: float = 0.1, seed: int = 0
) -> datasets_base.Datasets:
    """Linear-regression batches ``{"x": [B, dim], "y": [B]}``, ``y = x @ w_true + noise * eps``.

    ``x`` and ``eps`` are standard normal; ``w_true ~ N(0, I_dim)`` is drawn once from
    ``seed`` and kept as ``datasets.train.w_true`` (the same on every split).

    Args:
      dim: the width of ``x`` (and of ``w_true``).
      batch_size: examples per batch (``B``).
      noise: standard deviation of the label noise ``eps``.
      seed: seed of ``w_true``; split ``i`` of ``SPLITS`` draws its batches from
        ``seed + 1 + i``.

    Returns:
      A :class:`~learnopt.tasks.datasets.base.Datasets` of endless numpy iterators
      (``float32``), with ``extra_info`` ``{"name": "linear_regression", "dim",
      "batch_size"}``.
    """
    w_true = np.random.default_rng(seed).standard_normal(dim).astype(np.float32)
    splits = [
        _RegressionSplit(w_true, batch_size, noise, seed + 1 + i)
        for i in range(len(datasets_base.SPLITS))
    ]
    return datasets_base.Datasets(
        *splits,
        extra_info={"name": "linear_regression", "dim": dim, "batch_size": batch_size},
        abstract_batch={
            "x": jax.ShapeDtypeStruct((batch_size, dim), np.float32),
            "y": jax.ShapeDtypeStruct((batch_size,), np.float32),
        },
    )
