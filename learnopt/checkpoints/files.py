"""Saving and loading ``theta`` and any other pytree as msgpack files.

Two pairs of functions, both writing Flax's msgpack encoding of the state dict
(:func:`flax.serialization.to_state_dict`) atomically:

* :func:`save_state` / :func:`load_state` (the notes' library's functions): any pytree,
  exactly, restored into the structure of a target pytree (``ParameterCheckpoint`` and
  ``OptCheckpoint`` of :mod:`learnopt.outer_trainers.gradient_learner`, a learner state,
  an optimizer state, ...).
* :func:`save_theta` / :func:`load_theta`: meta-parameters, loadable without a target.

A ``theta`` file holds nested dicts of numpy arrays, readable with
:func:`flax.serialization.msgpack_restore` alone, so it loads back **without knowing
theta's structure**::

    save_theta("theta.msgpack", theta)
    theta = load_theta("theta.msgpack")          # dict of float32 jnp arrays
    theta = load_theta("theta.msgpack", target=lopt.init(key))   # restore the structure

Floating-point leaves are stored and returned as float32 (theta is float32 by design,
see ``docs/design.md``); integer and boolean leaves keep their dtype. Writes are atomic and
durable (:func:`learnopt.checkpoints.durable.write_atomic`: a temporary file, fsynced,
renamed over the destination), so a periodic checkpoint that is interrupted never leaves
a truncated file behind.

A theta file may carry **metadata** (``save_theta(path, theta, metadata={...})``: what
the learned optimizer is and how theta was meta-trained, see
:mod:`learnopt.learned_optimizers.theta_files`). It is then the msgpack map
``{"__learnopt_theta_file__": <metadata as JSON text>, "theta": <state dict>}``;
:func:`load_theta` returns the theta alone either way, :func:`load_theta_metadata` the
metadata (``None`` for a plain file).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypeVar

import flax.serialization
import jax
import jax.numpy as jnp
import numpy as np

from learnopt.checkpoints import durable
from learnopt.tree_utils import cast_leaf_like

PyTree = Any
T = TypeVar("T")

__all__ = [
    "save_state",
    "load_state",
    "save_theta",
    "load_theta",
    "theta_to_bytes",
    "theta_from_bytes",
    "load_theta_metadata",
    "THETA_METADATA_KEY",
]


def _to_numpy(leaf: Any) -> np.ndarray:
    arr = np.asarray(jax.device_get(leaf))
    if np.issubdtype(arr.dtype, np.floating) or arr.dtype.name == "bfloat16":
        arr = arr.astype(np.float32)
    return arr


def _to_jax(leaf: Any) -> Any:
    if not isinstance(leaf, np.ndarray | np.generic):
        return leaf
    arr = np.asarray(leaf)
    if np.issubdtype(arr.dtype, np.floating):
        return jnp.asarray(arr, dtype=jnp.float32)
    return jnp.asarray(arr, dtype=arr.dtype)


#: Top-level key of a theta file with metadata (its value is the metadata as JSON text).
THETA_METADATA_KEY = "__learnopt_theta_file__"


def _theta_state(theta: PyTree) -> PyTree:
    """The state dict of ``theta`` with numpy leaves, floating ones as float32."""
    return jax.tree_util.tree_map(_to_numpy, flax.serialization.to_state_dict(theta))


def _leaf_name(path: tuple[Any, ...]) -> str:
    return "/".join(str(getattr(k, "key", getattr(k, "idx", k))) for k in path) or "<root>"


def _nonfinite_leaves(state: PyTree) -> list[str]:
    """``"name (bad of size)"`` for each floating leaf of ``state`` holding NaN or Inf."""
    found = []
    for path, leaf in jax.tree_util.tree_leaves_with_path(state):
        if isinstance(leaf, np.ndarray | np.generic) and np.issubdtype(leaf.dtype, np.floating):
            bad = int(np.size(leaf) - np.count_nonzero(np.isfinite(leaf)))
            if bad:
                found.append(f"{_leaf_name(path)} ({bad} of {np.size(leaf)})")
    return found


def _serialize_theta(state: PyTree, metadata: Mapping[str, Any] | None) -> bytes:
    if metadata is not None:
        if not isinstance(metadata, Mapping):
            raise TypeError(f"metadata must be a dict, got {type(metadata).__name__}")
        try:
            text = json.dumps(dict(metadata), sort_keys=True, allow_nan=True)
        except (TypeError, ValueError) as e:
            raise TypeError(f"metadata must be JSON-serializable: {e}") from None
        state = {THETA_METADATA_KEY: text, "theta": state}
    return flax.serialization.msgpack_serialize(state)


def theta_to_bytes(theta: PyTree, metadata: Mapping[str, Any] | None = None) -> bytes:
    """``theta`` as msgpack bytes (floating leaves as float32), with optional metadata.

    Args:
      theta: any pytree of arrays.
      metadata: a JSON-serializable dict stored beside theta (tuples become lists).

    Returns:
      the bytes :func:`theta_from_bytes` reads back (non-finite values included).
    """
    return _serialize_theta(_theta_state(theta), metadata)


def _split_metadata(raw: Any, where: str = "the theta bytes") -> tuple[Any, dict | None]:
    """``(theta state dict, metadata or None)`` of a restored theta file."""
    if not (isinstance(raw, dict) and THETA_METADATA_KEY in raw):
        return raw, None
    text = raw[THETA_METADATA_KEY]
    try:
        metadata = json.loads(text) if isinstance(text, str | bytes) else None
    except ValueError as e:
        raise ValueError(f"{where}: the metadata is not valid JSON ({e})") from None
    if not isinstance(metadata, dict) or "theta" not in raw:
        raise ValueError(
            f"{where}: a theta file with metadata must hold a JSON object under "
            f"{THETA_METADATA_KEY!r} and the theta under 'theta'"
        )
    return raw["theta"], metadata


def theta_from_bytes(data: bytes, target: PyTree | None = None) -> PyTree:
    """Inverse of :func:`theta_to_bytes` (metadata dropped); see :func:`load_theta`.

    Args:
      data: bytes from :func:`theta_to_bytes` (or a theta file's content).
      target: a pytree of theta's structure to restore into, or ``None``.

    Returns:
      without ``target``, the state dict (nested dicts of jnp arrays, floating leaves
      float32); with it, the values in ``target``'s structure and dtypes.

    Raises:
      ValueError: the metadata is broken, or a leaf's shape differs from ``target``'s.
    """
    state = flax.serialization.msgpack_restore(data)
    state, _ = _split_metadata(state)
    state = jax.tree_util.tree_map(_to_jax, state)
    if target is None:
        return state
    restored = flax.serialization.from_state_dict(target, state)
    return jax.tree_util.tree_map(_cast_like, restored, target)


def _cast_like(value: Any, ref: Any) -> Any:
    dtype = getattr(ref, "dtype", None)
    if dtype is None or not hasattr(value, "dtype"):
        return value
    if jnp.shape(value) != jnp.shape(ref):
        raise ValueError(
            f"checkpoint leaf has shape {jnp.shape(value)}, target expects {jnp.shape(ref)}"
        )
    return jnp.asarray(value, dtype=dtype)


def save_theta(
    path: str | os.PathLike,
    theta: PyTree,
    *,
    metadata: Mapping[str, Any] | None = None,
    allow_nonfinite: bool = False,
) -> Path:
    """Writes ``theta`` (any pytree of arrays: dicts, lists, flax dataclasses) to ``path``.

    Parent folders are created; the write is atomic.

    Args:
      path: the file to write (e.g. ``runs/x/theta.msgpack``).
      theta: the meta-parameters.
      metadata: a JSON-serializable dict stored beside theta (see the module docstring;
        :func:`learnopt.learned_optimizers.theta_files.save` writes the standard fields).
      allow_nonfinite: write a theta holding NaN or Inf (after the float32 cast) too;
        by default such a theta is refused, as no learned optimizer can use it.

    Returns:
      ``path``.

    Raises:
      ValueError: ``theta`` has non-finite values (naming the leaves and the file), and
        ``allow_nonfinite`` is false; nothing is written.
    """
    state = _theta_state(theta)
    if not allow_nonfinite:
        bad = _nonfinite_leaves(state)
        if bad:
            shown = ", ".join(bad[:5]) + (f" and {len(bad) - 5} more" if len(bad) > 5 else "")
            raise ValueError(
                f"theta has non-finite values in {shown}: refusing to write {path} "
                "(allow_nonfinite=True writes it anyway)"
            )
    return durable.write_atomic(path, _serialize_theta(state, metadata))


def save_state(path: str | os.PathLike, state: PyTree) -> Path:
    """Writes any pytree ``state`` to ``path``, every leaf as it is (dtypes kept).

    Array leaves are stored as numpy arrays (bfloat16 included); Python scalars and
    strings (e.g. ``ParameterCheckpoint.gen_id``) as themselves. Parent folders are
    created; the write is atomic. Returns the path. Read it back with :func:`load_state`.

    Args:
      path: the file to write.
      state: any pytree (dicts, lists, flax dataclasses) of arrays, numbers, strings.

    Returns:
      ``path`` as a ``Path``.
    """
    state_dict = flax.serialization.to_state_dict(state)
    state_dict = jax.tree_util.tree_map(
        lambda x: np.asarray(jax.device_get(x)) if isinstance(x, jax.Array) else x, state_dict
    )
    return durable.write_atomic(path, flax.serialization.msgpack_serialize(state_dict))


def load_state(path: str | os.PathLike, state: T) -> T:
    """Reads a pytree written by :func:`save_state` into the structure of ``state``.

    ``state`` is a target of the same structure (its values are not used; e.g. a freshly
    initialized one). Array leaves come back as jax arrays with the target's dtype and
    weak type, so a restored state does not recompile the step that produced the target;
    a shape that differs from the target's raises ``ValueError``. Non-array leaves
    (strings, Python numbers) come back as stored.

    Args:
      path: a file written by :func:`save_state`.
      state: the target pytree, of the saved structure.

    Returns:
      the saved values in ``state``'s structure.

    Raises:
      FileNotFoundError: nothing at ``path``.
      ValueError: the file is not a msgpack checkpoint, or does not fit ``state``.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no state checkpoint at {path}")
    raw = _msgpack_file(path)
    try:
        restored = flax.serialization.from_state_dict(state, raw)
    except (KeyError, ValueError, TypeError) as e:
        raise ValueError(
            f"the checkpoint at {path} does not match the structure of the target "
            f"{type(state).__name__}: {e}"
        ) from None
    return jax.tree_util.tree_map(_restore_like, restored, state)


def _restore_like(value: Any, ref: Any) -> Any:
    if not isinstance(ref, jax.Array | np.ndarray | np.generic):
        return value
    if np.shape(value) != np.shape(ref):
        raise ValueError(
            f"checkpoint leaf has shape {np.shape(value)}, target expects {np.shape(ref)}"
        )
    return cast_leaf_like(jnp.asarray(value), ref)


#: A run folder's theta file (``learnopt meta-train --out DIR`` writes DIR/theta.msgpack).
_RUN_THETA_FILE = "theta.msgpack"


def _theta_file_at(path: str | os.PathLike, missing: str) -> Path:
    """``path`` as a ``Path`` if it is a file; else ``IsADirectoryError``/``FileNotFoundError``."""
    path = Path(path)
    if path.is_dir():
        inside = path / _RUN_THETA_FILE
        hint = (
            f"a run folder? its theta is {inside}"
            if inside.is_file()
            else f"it holds no {_RUN_THETA_FILE} either"
        )
        raise IsADirectoryError(f"{path} is a directory, not a theta file ({hint})")
    if not path.is_file():
        raise FileNotFoundError(f"{missing} at {path}")
    return path


def load_theta(path: str | os.PathLike, target: PyTree | None = None) -> PyTree:
    """Reads a theta written by :func:`save_theta`.

    Without ``target`` returns the state dict: nested dicts of jnp arrays, floating
    leaves float32 (lists and tuples in the saved theta come back as dicts keyed
    ``"0"``, ``"1"``, ...). With ``target`` (e.g. ``lopt.init(key)``) the saved values
    are restored into ``target``'s structure, shapes and dtypes. A file's metadata is
    not returned (:func:`load_theta_metadata` reads it).

    Args:
      path: a theta file (e.g. ``runs/x/theta.msgpack``).
      target: a pytree of theta's structure to restore into, or ``None``.

    Returns:
      the theta.

    Raises:
      FileNotFoundError: nothing at ``path``.
      IsADirectoryError: ``path`` is a folder (the message names its ``theta.msgpack``
        when it holds one, as a run folder does).
      ValueError: the file is not a theta file (corrupted, truncated), or its theta does
        not fit ``target``.
    """
    path = _theta_file_at(path, "no theta checkpoint")
    _split_metadata(_msgpack_file(path), str(path))  # clear errors for corrupted files
    if target is not None:
        from learnopt import _validate

        raw = theta_from_bytes(path.read_bytes())
        expected = flax.serialization.to_state_dict(target)
        if isinstance(expected, dict) and isinstance(raw, dict):
            _validate.theta_like(f"the theta in {path}", raw, expected, "the target")
    return theta_from_bytes(path.read_bytes(), target)


def load_theta_metadata(path: str | os.PathLike) -> dict[str, Any] | None:
    """The metadata stored in a theta file, or ``None`` for a file without metadata.

    Args:
      path: a theta file.

    Returns:
      the metadata dict, or ``None``.

    Raises:
      FileNotFoundError: nothing at ``path``.
      IsADirectoryError: ``path`` is a folder (as for :func:`load_theta`).
      ValueError: naming the file, for one that is not a theta file (corrupted,
        truncated) or whose metadata is broken.
    """
    path = _theta_file_at(path, "no theta file")
    return _split_metadata(_msgpack_file(path), str(path))[1]


def _msgpack_file(path: Path) -> Any:
    """The msgpack state dict in ``path``; ``ValueError`` naming the file if it is not one."""
    data = path.read_bytes()
    try:
        return flax.serialization.msgpack_restore(data)
    except Exception as e:  # msgpack raises several types for corrupted bytes
        raise ValueError(
            f"{path} is not a msgpack checkpoint (corrupted or truncated? {type(e).__name__}: {e})"
        ) from None
