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
see ``DESIGN.md``); integer and boolean leaves keep their dtype. Writes are atomic (a
temporary file renamed over the destination), so a periodic checkpoint that is
interrupted never leaves a truncated file behind.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, TypeVar

import flax.serialization
import jax
import jax.numpy as jnp
import numpy as np

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


def theta_to_bytes(theta: PyTree) -> bytes:
    """``theta`` as msgpack bytes (floating leaves as float32)."""
    state = flax.serialization.to_state_dict(theta)
    state = jax.tree_util.tree_map(_to_numpy, state)
    return flax.serialization.msgpack_serialize(state)


def theta_from_bytes(data: bytes, target: PyTree | None = None) -> PyTree:
    """Inverse of :func:`theta_to_bytes`; see :func:`load_theta`."""
    state = flax.serialization.msgpack_restore(data)
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


def _write_atomic(path: str | os.PathLike, data: bytes) -> Path:
    """Writes ``data`` to a temporary file beside ``path`` and renames it over ``path``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    try:
        tmp.write_bytes(data)
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()
    return path


def save_theta(path: str | os.PathLike, theta: PyTree) -> Path:
    """Writes ``theta`` (any pytree of arrays: dicts, lists, flax dataclasses) to ``path``.

    Parent folders are created. The write is atomic. Returns the path.
    """
    return _write_atomic(path, theta_to_bytes(theta))


def save_state(path: str | os.PathLike, state: PyTree) -> Path:
    """Writes any pytree ``state`` to ``path``, every leaf as it is (dtypes kept).

    Array leaves are stored as numpy arrays (bfloat16 included); Python scalars and
    strings (e.g. ``ParameterCheckpoint.gen_id``) as themselves. Parent folders are
    created; the write is atomic. Returns the path. Read it back with :func:`load_state`.
    """
    state_dict = flax.serialization.to_state_dict(state)
    state_dict = jax.tree_util.tree_map(
        lambda x: np.asarray(jax.device_get(x)) if isinstance(x, jax.Array) else x, state_dict
    )
    return _write_atomic(path, flax.serialization.msgpack_serialize(state_dict))


def load_state(path: str | os.PathLike, state: T) -> T:
    """Reads a pytree written by :func:`save_state` into the structure of ``state``.

    ``state`` is a target of the same structure (its values are not used; e.g. a freshly
    initialized one). Array leaves come back as jax arrays with the target's dtype and
    weak type, so a restored state does not recompile the step that produced the target;
    a shape that differs from the target's raises ``ValueError``. Non-array leaves
    (strings, Python numbers) come back as stored.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no state checkpoint at {path}")
    raw = flax.serialization.msgpack_restore(path.read_bytes())
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


def load_theta(path: str | os.PathLike, target: PyTree | None = None) -> PyTree:
    """Reads a theta written by :func:`save_theta`.

    Without ``target`` returns the state dict: nested dicts of jnp arrays, floating
    leaves float32 (lists and tuples in the saved theta come back as dicts keyed
    ``"0"``, ``"1"``, ...). With ``target`` (e.g. ``lopt.init(key)``) the saved values
    are restored into ``target``'s structure, shapes and dtypes.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no theta checkpoint at {path}")
    return theta_from_bytes(path.read_bytes(), target)
