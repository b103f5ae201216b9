"""Batch iterators: endless, deterministic streams over a split held in memory.

:class:`SplitIterator` draws the batches of one split of an image dataset. Epoch ``e``
visits every example exactly once in a fresh permutation drawn from
``(seed, split, e)``, and batch ``i`` is examples ``[i*B, (i+1)*B)`` of that stream (a
batch may span two epochs; a split smaller than a batch repeats examples). Batches are
thus a pure function of the seed and their position, so ``next(it)``,
:meth:`SplitIterator.take` and :meth:`SplitIterator.take_slice` draw from the same
stream, and :meth:`SplitIterator.get_state` / :meth:`SplitIterator.set_state` continue
it exactly (a resumed run sees the batches it would have seen). The data is loaded on
the first batch, not when the iterator is made.

:func:`take_slice` draws a slice of ``take(*shape)`` from any iterator (each process of
a multi-process run draws its own tasks' rows).
"""

from __future__ import annotations

import math
import threading
import zlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Generic, TypeVar

import jax
import numpy as np

from learnopt.tasks.datasets.images import Arrays, _to_unit_float

__all__ = ["SplitIterator", "take_slice"]

T = TypeVar("T")


class _Lazy(Generic[T]):
    """Calls ``loader()`` once, on first use (thread-safe), and keeps what it returned."""

    def __init__(self, loader: Callable[[], T]):
        self._loader = loader
        self._value: T | None = None
        self._lock = threading.Lock()

    @property
    def loaded(self) -> bool:
        return self._value is not None

    def get(self) -> T:
        if self._value is None:
            with self._lock:
                if self._value is None:
                    self._value = self._loader()
        return self._value


#: The splits of an image dataset: ``loader() -> {split: (images, labels)}``.
_LazyArrays = _Lazy[Mapping[str, Arrays]]


class SplitIterator:
    """Endless iterator of batches of one split; also draws many batches at once.

    Images are ``float32 [B, H, W, C]`` in ``[0, 1]``, labels ``int32 [B]``. The stream
    is deterministic given ``seed`` and the split name, reshuffled every epoch; see the
    module docstring. Data is loaded on the first batch.

    Args:
      data: the dataset's splits, loaded on first use (``_LazyArrays``; the functions of
        :mod:`learnopt.tasks.datasets.base` make one).
      split: the split drawn (a key of the loaded splits, e.g. ``"train"``).
      batch_size: examples per batch, ``B`` (>= 1).
      seed: the stream's seed (with the split name, it fixes every epoch's order).
    """

    def __init__(self, data: _LazyArrays, split: str, batch_size: int, seed: int = 0):
        if batch_size < 1:
            raise ValueError(f"batch_size must be positive, got {batch_size}")
        self.split = split
        self.batch_size = int(batch_size)
        self.seed = int(seed)
        self._data = data
        self._stream = zlib.crc32(split.encode())
        self._images: np.ndarray | None = None
        self._labels: np.ndarray | None = None
        self._n = 0
        self._epoch = 0
        self._offset = 0  # position inside the current epoch's permutation
        self._perm: np.ndarray | None = None
        self._pending: int | None = None  # a set_state position, applied once data is bound

    # -- state
    def _bind(self) -> None:
        images, labels = self._data.get()[self.split]
        if len(images) == 0:
            raise ValueError(f"split {self.split!r} is empty")
        self._images, self._labels = images, labels
        self._n = len(images)
        if self._pending is not None:
            self._epoch, self._offset = divmod(self._pending, self._n)
            self._pending = None
        self._perm = self._permutation(self._epoch)

    def _permutation(self, epoch: int) -> np.ndarray:
        seq = np.random.SeedSequence([self.seed % (1 << 63), self._stream, epoch])
        return np.random.default_rng(seq).permutation(self._n)

    @property
    def num_examples(self) -> int:
        """Examples per epoch (loads the data)."""
        if self._images is None:
            self._bind()
        return self._n

    @property
    def epoch(self) -> int:
        """Epoch of the next example to be drawn."""
        return self._epoch + (1 if self._n and self._offset == self._n else 0)

    @property
    def position(self) -> int:
        """Number of examples drawn so far."""
        if self._pending is not None:
            return self._pending
        return self._epoch * self._n + self._offset

    def get_state(self) -> dict[str, int]:
        """The stream's position as a JSON-able dict; :meth:`set_state` continues from it.

        Returns:
          ``{"position": examples drawn so far, "seed": ..., "batch_size": ...}``.
        """
        return {"position": self.position, "seed": self.seed, "batch_size": self.batch_size}

    def set_state(self, state: Mapping[str, int]) -> None:
        """Continues the stream from ``state`` (a :meth:`get_state` of the same stream).

        The next batches are the ones the saved iterator would have drawn (batches are a
        pure function of the seed and the position). Does not load the data.

        Args:
          state: a :meth:`get_state` result; its ``seed`` and ``batch_size``, when
            present, must be this stream's (``ValueError`` otherwise).
        """
        for name in ("seed", "batch_size"):
            if name in state and int(state[name]) != getattr(self, name):
                raise ValueError(
                    f"state is of a stream with {name}={state[name]}, this one has "
                    f"{name}={getattr(self, name)}"
                )
        position = int(state["position"])
        if position < 0:
            raise ValueError(f"state['position'] must be >= 0, got {position}")
        self._pending = position
        if self._images is not None:
            self._bind()

    def _indices(self, count: int) -> np.ndarray:
        if self._images is None:
            self._bind()
        end = self._offset + count
        if end <= self._n:  # fast path: inside the current epoch
            idx = self._perm[self._offset : end]
            self._offset = end
            return idx
        out = np.empty(count, np.intp)
        filled = 0
        while filled < count:
            if self._offset == self._n:
                self._epoch += 1
                self._perm = self._permutation(self._epoch)
                self._offset = 0
            k = min(self._n - self._offset, count - filled)
            out[filled : filled + k] = self._perm[self._offset : self._offset + k]
            self._offset += k
            filled += k
        return out

    def _gather(self, idx: np.ndarray) -> dict[str, np.ndarray]:
        return {"image": _to_unit_float(self._images[idx]), "label": self._labels[idx]}

    # -- iteration
    def __iter__(self) -> SplitIterator:
        return self

    def __next__(self) -> dict[str, np.ndarray]:
        return self._gather(self._indices(self.batch_size))

    def take(self, *shape: int) -> dict[str, np.ndarray]:
        """The next ``prod(shape)`` batches stacked as ``[*shape, B, ...]``.

        ``take(4)`` equals ``np.stack`` of four ``next`` calls (and advances the stream
        as much); ``take(4, 8)`` has images ``[4, 8, B, H, W, C]``, row-major.

        Args:
          *shape: the leading shape of the result (positive sizes).

        Returns:
          ``{"image": float32 [*shape, B, H, W, C], "label": int32 [*shape, B]}``.
        """
        count = math.prod(shape)
        if count < 1 or any(s < 1 for s in shape):
            raise ValueError(f"take() needs positive sizes, got {shape}")
        batch = self._gather(self._indices(count * self.batch_size))
        return {k: v.reshape(*shape, self.batch_size, *v.shape[1:]) for k, v in batch.items()}

    def take_slice(
        self, shape: Sequence[int], axis: int, start: int, stop: int
    ) -> dict[str, np.ndarray]:
        """``take(*shape)`` sliced ``[start:stop]`` along ``axis``, drawing only that slice.

        The stream advances as much as ``take(*shape)`` does, so a process of a
        multi-process run that draws the rows of its own tasks sees exactly those rows
        of the single-process batch, and all processes stay at the same position.

        Args:
          shape: the leading shape of the whole ``take(*shape)``.
          axis: the axis of ``shape`` that is sliced.
          start: the first index kept along ``axis``.
          stop: one past the last index kept (``0 <= start < stop <= shape[axis]``).

        Returns:
          the batches of ``take(*shape)[..., start:stop, ...]`` (along ``axis``), drawn
          alone.
        """
        shape, count = _check_slice(shape, axis, start, stop)
        if self._images is None:
            self._bind()
        flat = np.arange(count).reshape(shape)
        picked = np.take(flat, np.arange(start, stop), axis=axis)  # batches, row-major
        first = self.position
        examples = (first + picked[..., None] * self.batch_size) + np.arange(self.batch_size)
        epochs, offsets = np.divmod(examples.reshape(-1), self._n)
        idx = np.empty(epochs.shape, np.intp)
        for epoch in np.unique(epochs):
            where = epochs == epoch
            perm = self._perm if epoch == self._epoch else self._permutation(int(epoch))
            idx[where] = perm[offsets[where]]
        epoch, self._offset = divmod(first + count * self.batch_size, self._n)
        if epoch != self._epoch:
            self._epoch, self._perm = epoch, self._permutation(epoch)
        batch = self._gather(idx)
        out_shape = (*picked.shape, self.batch_size)
        return {k: v.reshape(*out_shape, *v.shape[1:]) for k, v in batch.items()}

    def __repr__(self) -> str:
        return f"SplitIterator({self.split!r}, batch_size={self.batch_size}, seed={self.seed})"


def _check_slice(shape: Sequence[int], axis: int, start: int, stop: int) -> tuple[tuple, int]:
    shape = tuple(int(s) for s in shape)
    if not shape or any(s < 1 for s in shape):
        raise ValueError(f"shape must hold positive sizes, got {shape}")
    if not 0 <= axis < len(shape):
        raise ValueError(f"axis must be in [0, {len(shape)}), got {axis}")
    if not 0 <= start < stop <= shape[axis]:
        raise ValueError(
            f"start, stop must satisfy 0 <= start < stop <= {shape[axis]}, got {start}, {stop}"
        )
    return shape, math.prod(shape)


def take_slice(iterator: Any, shape: Sequence[int], axis: int, start: int, stop: int) -> Any:
    """``iterator.take(*shape)`` sliced ``[start:stop]`` along ``axis`` (every leaf).

    Iterators with their own ``take_slice`` (:class:`SplitIterator`) draw only the slice;
    others draw everything and slice it. Either way the stream advances as much as
    ``take(*shape)``. Multi-process meta-training draws each process's task rows this way.

    Args:
      iterator: an iterator with ``take(*shape)`` (a :class:`SplitIterator`, a split of a
        ``Datasets``).
      shape: the leading shape of the whole ``take(*shape)``.
      axis: the axis of ``shape`` that is sliced.
      start: the first index kept along ``axis``.
      stop: one past the last index kept (``0 <= start < stop <= shape[axis]``).

    Returns:
      every leaf of ``iterator.take(*shape)`` sliced ``[start:stop]`` along ``axis``.
    """
    if hasattr(iterator, "take_slice"):
        return iterator.take_slice(shape, axis, start, stop)
    shape, _ = _check_slice(shape, axis, start, stop)
    index = (slice(None),) * axis + (slice(start, stop),)
    return jax.tree.map(lambda x: np.asarray(x)[index], iterator.take(*shape))


class _StackingIterator:
    """Adds ``take(*shape)`` (stacked ``next`` calls) to a plain iterator of batches."""

    def __init__(self, iterator: Any):
        self._iterator = iter(iterator)

    def __iter__(self) -> _StackingIterator:
        return self

    def __next__(self) -> Any:
        return next(self._iterator)

    def take(self, *shape: int) -> Any:
        """The next ``prod(shape)`` batches stacked as ``[*shape, ...]``."""
        count = math.prod(shape)
        if count < 1 or any(s < 1 for s in shape):
            raise ValueError(f"take() needs positive sizes, got {shape}")
        batches = [next(self._iterator) for _ in range(count)]
        return jax.tree.map(
            lambda *xs: np.stack([np.asarray(x) for x in xs]).reshape(*shape, *np.shape(xs[0])),
            *batches,
        )
