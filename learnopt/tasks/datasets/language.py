"""Language-modelling datasets: byte-level batches of real text, offline.

The corpus is ``pystdlib``: the source files of 120 pure-Python standard-library modules
of the running interpreter (:data:`~learnopt.tasks.datasets._pystdlib.PYSTDLIB_MODULES`),
so it is on every machine that runs learnopt. It is stored through learnopt's own TFDS
builder (``learnopt_pystdlib``, config ``py311`` etc. for the Python version: the text
differs between versions), prepared in well under a second into the data dir and read
back with ``as_data_source()``, without TensorFlow. The splits are whole modules, no
module in two splits (about 3.3 MB train, 0.24 / 0.12 MB inner / outer valid, 0.21 MB
test on Python 3.11).

Tokens follow the byte vocabulary of the notes' library (seqio's ``ByteVocabulary``):
``0`` pad, ``1`` end of document, ``2`` unknown, byte ``b`` is ``b + 3``; 259 ids. Each
split is one token stream: every document's bytes followed by an end-of-document token.

Batches are ``{"obs": int32 [B, T], "target": int32 [B, T]}`` with ``target`` the next
token of ``obs``: row ``r`` is ``stream[s : s + T]`` and ``stream[s + 1 : s + T + 1]``
for a start ``s`` drawn uniformly from ``[0, len(stream) - T - 1]``. The starts of the
``i``-th batch of a split are a pure function of ``(seed, split, i)``, so ``next(it)``
and :meth:`TokenSplitIterator.take` draw the same stream and runs are reproducible.
There is no padding, so the library's mask ``obs != 0`` keeps every position.
"""

from __future__ import annotations

import math
import os
import sys
import threading
import time
import zlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import jax
import numpy as np

from learnopt.tasks.datasets import _pystdlib, _sources, storage
from learnopt.tasks.datasets import base as datasets_base
from learnopt.tasks.datasets.iterators import _Lazy

__all__ = [
    "BYTE_OFFSET",
    "BYTE_VOCAB_SIZE",
    "EOS_ID",
    "PAD_ID",
    "TEXT_DATASETS",
    "TokenSplitIterator",
    "decode_bytes",
    "encode_bytes",
    "language_datasets",
    "load_token_streams",
    "prepare_text_dataset",
    "pystdlib_bytes_datasets",
    "text_prepared_dir",
]

PAD_ID = 0
EOS_ID = 1
UNK_ID = 2
#: Token id of byte ``b`` is ``b + BYTE_OFFSET``.
BYTE_OFFSET = 3
#: 256 bytes + pad, end-of-document and unknown (seqio's ``ByteVocabulary``).
BYTE_VOCAB_SIZE = 256 + BYTE_OFFSET

#: Text corpora: name -> TFDS builder name.
TEXT_DATASETS = {"pystdlib": "learnopt_pystdlib"}

PathLike = str | os.PathLike


def encode_bytes(text: str | bytes) -> np.ndarray:
    """Token ids (int32) of ``text`` (UTF-8 bytes, each shifted by :data:`BYTE_OFFSET`).

    Args:
      text: a string (encoded as UTF-8) or bytes.

    Returns:
      ``int32 [len(bytes)]``, byte ``b`` as ``b + 3`` (no end-of-document token added).
    """
    if isinstance(text, str):
        text = text.encode("utf-8")
    return np.frombuffer(text, np.uint8).astype(np.int32) + BYTE_OFFSET


def decode_bytes(tokens: Any) -> bytes:
    """Bytes of the byte tokens in ``tokens`` (pad / end / unknown ids are dropped).

    Args:
      tokens: token ids of any shape (flattened, row-major).

    Returns:
      the bytes (decode them with ``.decode("utf-8", "replace")`` for text).
    """
    tokens = np.asarray(tokens).ravel()
    tokens = tokens[tokens >= BYTE_OFFSET]
    return (tokens - BYTE_OFFSET).astype(np.uint8).tobytes()


def _check_name(name: str) -> str:
    if name not in TEXT_DATASETS:
        raise ValueError(
            f"Unknown text dataset {name!r}; known text datasets: {', '.join(TEXT_DATASETS)}."
        )
    return name


def text_prepared_dir(name: str, data_dir: PathLike | None = None) -> Path:
    """Where the TFDS files of text dataset ``name`` live for the running Python.

    Args:
      name: a text dataset (``"pystdlib"``).
      data_dir: the data dir (default: ``$LEARNOPT_DATA_DIR`` or ``~/tensorflow_datasets``).

    Returns:
      ``<data_dir>/<builder>/<config, e.g. py311>/<version>`` (it may not exist).
    """
    builder_name = TEXT_DATASETS[_check_name(name)]
    data_dir = _sources.resolve_data_dir(data_dir)
    return data_dir / builder_name / _pystdlib.pystdlib_config_name() / _sources.BUILDER_VERSION


def _is_prepared(path: Path) -> bool:
    return (path / "dataset_info.json").is_file() and (path / "features.json").is_file()


def _builder(name: str, data_dir: Path):
    from learnopt.tasks.datasets import _builders

    del name  # one corpus so far
    return _builders.LearnoptPyStdlib(
        data_dir=os.fspath(data_dir),
        config=_pystdlib.pystdlib_config_name(),
        file_format="array_record",
    )


def prepare_text_dataset(name: str = "pystdlib", data_dir: PathLike | None = None) -> Path:
    """Prepares text dataset ``name`` into the data dir (once; offline) and returns its folder.

    Args:
      name: a text dataset (``"pystdlib"``).
      data_dir: the data dir (default: ``$LEARNOPT_DATA_DIR`` or ``~/tensorflow_datasets``).

    Returns:
      the prepared folder.

    Raises:
      DatasetCorruptedError: it is prepared, but its ``dataset_info.json`` is not JSON.
    """
    path = text_prepared_dir(name, data_dir)
    if _is_prepared(path):  # a truncated dataset_info.json: DatasetCorruptedError
        _sources.check_prepared_info(name, path, _sources.resolve_data_dir(data_dir))
        return path
    from tensorflow_datasets import public_api as tfds

    builder = _builder(name, _sources.resolve_data_dir(data_dir))
    print(
        f"learnopt: preparing text dataset {name} from the Python standard library's source "
        f"files into {path} (once; nothing is downloaded)",
        file=sys.stderr,
        flush=True,
    )
    start = time.perf_counter()
    try:  # without TFDS's "downloaded and prepared" wording (storage._quietly)
        storage._quietly(
            builder.download_and_prepare,
            download_config=tfds.download.DownloadConfig(),
            file_format="array_record",
        )
    except Exception:
        if not _is_prepared(path):  # another process may have finished it meanwhile
            raise
    print(
        f"learnopt: text dataset {name} prepared in {time.perf_counter() - start:.1f} s",
        file=sys.stderr,
        flush=True,
    )
    return path


_CACHE: dict[tuple[str, str], dict[str, np.ndarray]] = {}
_CACHE_LOCK = threading.Lock()


def load_token_streams(
    name: str = "pystdlib", data_dir: PathLike | None = None
) -> dict[str, np.ndarray]:
    """``{split: uint16 token stream}`` for the four splits (prepares if needed; cached).

    A stream is every document of the split, in on-disk order, each followed by
    :data:`EOS_ID`. Streams are read-only.

    Args:
      name: a text dataset (``"pystdlib"``).
      data_dir: the data dir (default: ``$LEARNOPT_DATA_DIR`` or ``~/tensorflow_datasets``).

    Returns:
      ``{split: uint16 [num_tokens]}`` for ``train``, ``inner_valid``, ``outer_valid``
      and ``test``.
    """
    data_dir = _sources.resolve_data_dir(data_dir)
    key = (_check_name(name), os.fspath(data_dir))
    with _CACHE_LOCK:
        if key in _CACHE:
            return _CACHE[key]
        prepare_text_dataset(name, data_dir)
        sources = _builder(name, data_dir).as_data_source()
        out = {}
        for split in _pystdlib.TEXT_SPLITS:
            source = sources[split]
            docs = source.__getitems__(list(range(len(source))))
            docs.sort(key=lambda ex: ex["name"])  # on-disk order is a hash shuffle
            parts = []
            for ex in docs:
                parts.append(ex["text"].astype(np.uint16) + BYTE_OFFSET)
                parts.append(np.array([EOS_ID], np.uint16))
            stream = np.concatenate(parts)
            stream.setflags(write=False)
            out[split] = stream
        _CACHE[key] = out
        return out


#: The token streams of a corpus: ``loader() -> {split: stream}``.
_LazyStreams = _Lazy[Mapping[str, np.ndarray]]


class TokenSplitIterator:
    """Endless iterator of ``{"obs", "target"}`` windows of one split's token stream.

    Batch ``i`` takes ``batch_size`` windows of ``sequence_length + 1`` tokens at starts
    drawn from ``(seed, split, i)``; see the module docstring. Data loads on first use.

    Args:
      data: the token streams, loaded on first use (``_LazyStreams``;
        :func:`language_datasets` makes one).
      split: the split drawn (e.g. ``"train"``).
      batch_size: windows per batch, ``B`` (>= 1).
      sequence_length: tokens per window, ``T`` (>= 1).
      seed: the stream's seed.
    """

    def __init__(
        self,
        data: _LazyStreams,
        split: str,
        batch_size: int,
        sequence_length: int,
        seed: int = 0,
    ):
        if batch_size < 1:
            raise ValueError(f"batch_size must be positive, got {batch_size}")
        if sequence_length < 1:
            raise ValueError(f"sequence_length must be positive, got {sequence_length}")
        self.split = split
        self.batch_size = int(batch_size)
        self.sequence_length = int(sequence_length)
        self.seed = int(seed)
        self._data = data
        self._stream_id = zlib.crc32(split.encode())
        self._position = 0  # batches drawn so far

    @property
    def position(self) -> int:
        """Number of batches drawn so far."""
        return self._position

    def get_state(self) -> dict[str, int]:
        """The stream's position as a JSON-able dict; :meth:`set_state` continues from it.

        Returns:
          ``{"position": batches drawn so far, "seed": ...}``.
        """
        return {"position": self._position, "seed": self.seed}

    def set_state(self, state: Any) -> None:
        """Continues the stream from ``state`` (a :meth:`get_state` of the same stream).

        Args:
          state: a :meth:`get_state` result; its ``seed``, when present, must be this
            stream's (``ValueError`` otherwise).
        """
        if "seed" in state and int(state["seed"]) != self.seed:
            raise ValueError(f"state is of a stream with seed={state['seed']}, not {self.seed}")
        position = int(state["position"])
        if position < 0:
            raise ValueError(f"state['position'] must be >= 0, got {position}")
        self._position = position

    @property
    def num_tokens(self) -> int:
        """Length of the split's token stream (loads the data)."""
        return len(self._data.get()[self.split])

    def _starts(self, first: int, count: int, num_starts: int) -> np.ndarray:
        out = np.empty((count, self.batch_size), np.int64)
        for j in range(count):
            seq = np.random.SeedSequence([self.seed % (1 << 63), self._stream_id, first + j])
            out[j] = np.random.default_rng(seq).integers(0, num_starts, self.batch_size)
        return out

    def _windows(self, count: int) -> dict[str, np.ndarray]:
        stream = self._data.get()[self.split]
        window = self.sequence_length + 1
        num_starts = len(stream) - window + 1
        if num_starts < 1:
            raise ValueError(
                f"split {self.split!r} has {len(stream)} tokens, fewer than a window of "
                f"{window}; use a shorter sequence_length"
            )
        starts = self._starts(self._position, count, num_starts)
        self._position += count
        tokens = stream[starts[..., None] + np.arange(window)].astype(np.int32)
        return {"obs": tokens[..., :-1], "target": tokens[..., 1:]}

    def __iter__(self) -> TokenSplitIterator:
        return self

    def __next__(self) -> dict[str, np.ndarray]:
        batch = self._windows(1)
        return {k: v[0] for k, v in batch.items()}

    def take(self, *shape: int) -> dict[str, np.ndarray]:
        """The next ``prod(shape)`` batches stacked as ``[*shape, B, T]`` (row-major).

        Args:
          *shape: the leading shape of the result (positive sizes).

        Returns:
          ``{"obs": int32 [*shape, B, T], "target": int32 [*shape, B, T]}``.
        """
        count = math.prod(shape)
        if count < 1 or any(s < 1 for s in shape):
            raise ValueError(f"take() needs positive sizes, got {shape}")
        batch = self._windows(count)
        return {k: v.reshape(*shape, *v.shape[1:]) for k, v in batch.items()}

    def __repr__(self) -> str:
        return (
            f"TokenSplitIterator({self.split!r}, batch_size={self.batch_size}, "
            f"sequence_length={self.sequence_length}, seed={self.seed})"
        )


def language_datasets(
    name: str,
    batch_size: int,
    sequence_length: int,
    *,
    seed: int = 0,
    data_dir: PathLike | None = None,
) -> datasets_base.Datasets:
    """:class:`~learnopt.tasks.datasets.base.Datasets` of byte-level LM batches.

    Cheap: nothing is prepared or read until the first batch (or ``.load()``).
    ``extra_info`` has ``name``, ``vocab_size`` (259), ``batch_size`` and
    ``sequence_length``; ``abstract_batch`` is ``{"obs", "target"}: int32 [B, T]``.

    Args:
      name: a text dataset (``"pystdlib"``).
      batch_size: windows per batch, ``B``.
      sequence_length: tokens per window, ``T``.
      seed: the seed of every split's stream.
      data_dir: the data dir (default: ``$LEARNOPT_DATA_DIR`` or ``~/tensorflow_datasets``).

    Returns:
      the :class:`~learnopt.tasks.datasets.base.Datasets` of the four splits.
    """
    _check_name(name)
    data_dir = _sources.resolve_data_dir(data_dir)
    data = _Lazy(lambda: load_token_streams(name, data_dir))
    iterators = [
        TokenSplitIterator(data, split, batch_size, sequence_length, seed)
        for split in datasets_base.SPLITS
    ]
    abstract_batch = {
        "obs": jax.ShapeDtypeStruct((batch_size, sequence_length), np.int32),
        "target": jax.ShapeDtypeStruct((batch_size, sequence_length), np.int32),
    }
    extra_info = {
        "name": f"{name}_bytes",
        "vocab_size": BYTE_VOCAB_SIZE,
        "batch_size": int(batch_size),
        "sequence_length": int(sequence_length),
    }
    return datasets_base.Datasets(
        *iterators, extra_info=extra_info, abstract_batch=abstract_batch, _data=data
    )


def pystdlib_bytes_datasets(
    batch_size: int,
    sequence_length: int,
    *,
    seed: int = 0,
    data_dir: PathLike | None = None,
) -> datasets_base.Datasets:
    """Byte-level LM batches of the Python standard library's sources (offline).

    The offline counterpart of the library's ``lm1b_bytes_datasets(batch_size,
    sequence_length)``: same byte vocabulary (259 ids), same ``obs`` / ``target`` batches.

    Args:
      batch_size: windows per batch, ``B``.
      sequence_length: tokens per window, ``T``.
      seed: the seed of every split's stream.
      data_dir: the data dir (default: ``$LEARNOPT_DATA_DIR`` or ``~/tensorflow_datasets``).

    Returns:
      ``language_datasets("pystdlib", ...)``.
    """
    return language_datasets("pystdlib", batch_size, sequence_length, seed=seed, data_dir=data_dir)
