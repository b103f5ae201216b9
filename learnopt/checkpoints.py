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
see ``DESIGN.md``); integer and boolean leaves keep their dtype. Writes are atomic and
durable (a temporary file, fsynced, renamed over the destination), so a periodic
checkpoint that is interrupted never leaves a truncated file behind.

A theta file may carry **metadata** (``save_theta(path, theta, metadata={...})``: what
the learned optimizer is and how theta was meta-trained, see
:mod:`learnopt.learned_optimizers.theta_files`). It is then the msgpack map
``{"__learnopt_theta_file__": <metadata as JSON text>, "theta": <state dict>}``;
:func:`load_theta` returns the theta alone either way, :func:`load_theta_metadata` the
metadata (``None`` for a plain file).

:class:`RunCheckpointer` checkpoints the *whole* state of a meta-training run with Orbax
(``<out>/checkpoints/step_<N>/``), atomically and durably, keeping the last few; it is
what :func:`learnopt.train.meta_train` resumes from.
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
    "write_atomic",
    "fsync_tree",
    "fsync_dir",
    "RunCheckpointer",
    "CheckpointError",
    "CheckpointWriteError",
    "CHECKPOINT_DIR",
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
    """Inverse of :func:`theta_to_bytes` (metadata dropped); see :func:`load_theta`."""
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


def write_atomic(path: str | os.PathLike, data: bytes) -> Path:
    """Writes ``data`` to ``path`` atomically and durably; returns the path.

    The bytes go to a temporary file beside ``path`` (``.<name>.tmp<pid>``), which is
    fsynced and renamed over ``path``; the folder is fsynced after the rename. A process
    killed at any instant leaves either the old file or the new one, never a mix.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    try:
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        fsync_dir(path.parent)
    finally:
        if tmp.exists():
            tmp.unlink()
    return path


_write_atomic = write_atomic


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
    return _write_atomic(path, _serialize_theta(state, metadata))


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


# ----------------------------------------------------------- whole-run checkpoints (Orbax)

#: Folder of a run's checkpoints, inside the run's output folder.
CHECKPOINT_DIR = "checkpoints"
#: A checkpoint's folder is ``step_<8 digits>``.
STEP_PREFIX = "step"
STEP_DIGITS = 8


class CheckpointError(ValueError):
    """A checkpoint that cannot be read: corrupted, truncated, or of another run."""


class CheckpointWriteError(OSError):
    """A checkpoint that could not be written (full disk, unwritable folder, ...)."""


def _fsync_path(path: Path, directory: bool = False) -> None:
    flags = os.O_RDONLY | (getattr(os, "O_DIRECTORY", 0) if directory else 0)
    fd = os.open(path, flags)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_tree(root: str | os.PathLike) -> None:
    """fsyncs every file and folder under ``root`` (and ``root``): written data is durable."""
    root = Path(root)
    for dirpath, _, filenames in os.walk(root, topdown=False):
        for name in filenames:
            _fsync_path(Path(dirpath) / name)
        _fsync_path(Path(dirpath), directory=True)


def fsync_dir(path: str | os.PathLike) -> None:
    """fsyncs a folder (makes renames and new entries in it durable)."""
    _fsync_path(Path(path), directory=True)


_DURABLE_PATH_CLASS = None


def _durable_path_class():
    """Orbax's atomic-rename temporary folder, made durable.

    Orbax writes a checkpoint into ``<name>.orbax-checkpoint-tmp``, then renames it to
    ``<name>``: a process killed at any instant leaves either no ``<name>`` or a complete
    one. Orbax does not fsync; this subclass fsyncs every file before the rename and the
    parent folder after it, so a reported checkpoint also survives a power loss.
    """
    global _DURABLE_PATH_CLASS
    if _DURABLE_PATH_CLASS is None:
        import asyncio

        import orbax.checkpoint as ocp

        class DurableAtomicRenameTemporaryPath(ocp.path.atomicity.AtomicRenameTemporaryPath):
            async def finalize(self, *args: Any, **kwargs: Any) -> None:
                await asyncio.to_thread(fsync_tree, Path(self.get()))
                await super().finalize(*args, **kwargs)
                final = Path(self.get_final())
                await asyncio.to_thread(fsync_tree, final)
                await asyncio.to_thread(fsync_dir, final.parent)

        _DURABLE_PATH_CLASS = DurableAtomicRenameTemporaryPath
    return _DURABLE_PATH_CLASS


def _is_key(x: Any) -> bool:
    return hasattr(x, "dtype") and jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key)


def _savable(tree: PyTree) -> PyTree:
    """``tree`` as nested dicts of numpy arrays (typed PRNG keys as their raw data).

    Arrays sharded over other processes' devices (a multi-process run) become
    ``jax.ShapeDtypeStruct`` s: they describe a restore target, their values are elsewhere.
    """
    state = flax.serialization.to_state_dict(tree)

    def leaf(x: Any) -> Any:
        if _is_key(x):
            if isinstance(x, jax.Array) and not x.is_fully_addressable:
                return jax.ShapeDtypeStruct((*x.shape, *_key_data_shape(x)), np.uint32)
            x = jax.random.key_data(x)
        if isinstance(x, jax.Array) and not x.is_fully_addressable:
            return jax.ShapeDtypeStruct(x.shape, x.dtype)
        return np.asarray(jax.device_get(x))

    return jax.tree_util.tree_map(leaf, state)


def _key_data_shape(key: Any) -> tuple[int, ...]:
    """The trailing shape of a typed key's raw data (``(2,)`` for threefry)."""
    return tuple(jax.eval_shape(jax.random.key_data, key).shape[key.ndim :])


def _leaf_table(tree: PyTree) -> dict[str, Any]:
    flat, _ = jax.tree_util.tree_flatten_with_path(tree)
    return {jax.tree_util.keystr(p): x for p, x in flat}


def _describe_mismatch(saved: PyTree, expected: PyTree) -> str | None:
    """What differs between the saved and the expected state dicts (None: they match)."""
    got, want = _leaf_table(saved), _leaf_table(expected)
    missing = [k for k in want if k not in got]
    extra = [k for k in got if k not in want]
    problems = []
    if missing:
        problems.append(f"missing {', '.join(missing[:4])}{' ...' if len(missing) > 4 else ''}")
    if extra:
        problems.append(f"unexpected {', '.join(extra[:4])}{' ...' if len(extra) > 4 else ''}")
    for k in want:
        if k in got:
            a, b = got[k], want[k]
            shape_b = tuple(b.shape) if hasattr(b, "shape") else np.shape(b)
            dtype_b = np.dtype(b.dtype) if hasattr(b, "dtype") else np.asarray(b).dtype
            if np.shape(a) != shape_b or np.asarray(a).dtype != dtype_b:
                problems.append(
                    f"{k} is {np.asarray(a).dtype}{list(np.shape(a))}, this run has "
                    f"{dtype_b}{list(shape_b)}"
                )
                if len(problems) > 4:
                    break
    return "; ".join(problems) or None


class RunCheckpointer:
    """The whole state of a run, checkpointed with Orbax as ``<directory>/step_<N>/``.

    Each checkpoint holds two Orbax items: ``state`` (any pytree of arrays, e.g. the
    meta-training state: theta, the outer optimizer's state, every estimator's state) and
    ``meta`` (a JSON dict: the step, data positions, ...). Saving is synchronous and
    atomic (Orbax writes ``step_<N>.orbax-checkpoint-tmp`` and renames it; a process
    killed at any instant leaves the earlier checkpoints complete) and durable (every
    file is fsynced before the rename, the folder after it). Only the last ``keep``
    checkpoints are kept; temporary folders of interrupted saves are removed when the
    checkpointer is created.

    In a multi-process run only process 0 uses it (the others never touch the folder):
    the state it saves is gathered to the host first (``learnopt.distributed.to_host``)
    and what it restores with ``to_host=True`` is sent to the others
    (``learnopt.distributed.broadcast_from_primary``), so a checkpoint is the same file
    whatever the number of processes that wrote or reads it.

    Args:
      directory: the checkpoints' folder (created on the first save).
      keep: how many checkpoints to keep (>= 1).
    """

    def __init__(self, directory: str | os.PathLike, keep: int = 3):
        if isinstance(keep, bool) or not isinstance(keep, int | np.integer) or keep < 1:
            raise ValueError(f"keep must be an integer >= 1, got {keep!r}")
        self.directory = Path(directory)
        self.keep = int(keep)
        self._manager = None

    def _mngr(self):
        if self._manager is None:
            import orbax.checkpoint as ocp

            options = ocp.CheckpointManagerOptions(
                max_to_keep=self.keep,
                step_prefix=STEP_PREFIX,
                step_format_fixed_length=STEP_DIGITS,
                enable_async_checkpointing=False,
                cleanup_tmp_directories=True,
                temporary_path_class=_durable_path_class(),
                create=False,
                # One writer (this process): no barriers with the other processes.
                multiprocessing_options=ocp.options.MultiprocessingOptions(
                    primary_host=jax.process_index(), active_processes={jax.process_index()}
                ),
            )
            self.directory.mkdir(parents=True, exist_ok=True)
            self._manager = ocp.CheckpointManager(
                self.directory.absolute(), options=options, item_names=("state", "meta")
            )
        return self._manager

    def path(self, step: int) -> Path:
        """The folder of checkpoint ``step``."""
        return self.directory / f"{STEP_PREFIX}_{int(step):0{STEP_DIGITS}d}"

    def steps(self) -> list[int]:
        """The complete checkpoints' steps, oldest first (temporary folders ignored)."""
        if not self.directory.is_dir():
            return []
        out = []
        for p in self.directory.iterdir():
            name = p.name
            if not name.startswith(f"{STEP_PREFIX}_") or not p.is_dir():
                continue
            digits = name[len(STEP_PREFIX) + 1 :]
            if digits.isdigit():
                out.append(int(digits))
        return sorted(out)

    def latest_step(self) -> int | None:
        steps = self.steps()
        return steps[-1] if steps else None

    def save(self, step: int, state: PyTree, meta: dict[str, Any]) -> Path:
        """Writes checkpoint ``step`` and returns its folder once it is complete on disk.

        Raises :class:`CheckpointWriteError` (an ``OSError``) if it cannot be written; the
        earlier checkpoints are then untouched and the partial one is removed.
        """
        import orbax.checkpoint as ocp

        try:
            mngr = self._mngr()
            saved = mngr.save(
                int(step),
                args=ocp.args.Composite(
                    state=ocp.args.StandardSave(_savable(state)),
                    meta=ocp.args.JsonSave(dict(meta, step=int(step))),
                ),
                force=True,
            )
            mngr.wait_until_finished()
        except Exception as e:  # Orbax and tensorstore raise many types for I/O errors
            self._remove_partial(step)
            raise CheckpointWriteError(_one_line(e)) from e
        if not saved or not self.path(step).is_dir():
            raise CheckpointWriteError(f"Orbax did not write the checkpoint of step {step}")
        fsync_dir(self.directory)
        return self.path(step)

    def _remove_partial(self, step: int) -> None:
        import shutil

        for p in self.directory.glob(f"{self.path(step).name}.orbax-checkpoint-tmp*"):
            shutil.rmtree(p, ignore_errors=True)

    def restore(
        self, target: PyTree, step: int | None = None, *, to_host: bool = False
    ) -> tuple[PyTree, dict[str, Any]]:
        """Reads checkpoint ``step`` (default: the latest) into the structure of ``target``.

        ``target`` is a state of the same structure (e.g. freshly initialized): leaves come
        back with its dtypes, weak types and shardings (an array sharded over a mesh comes
        back sharded: each device receives only its slice), typed PRNG keys as keys. With
        ``to_host=True`` the leaves stay numpy arrays of the target's dtypes (keys as their
        raw data), for a multi-process run to place them. Raises :class:`CheckpointError`
        (a ``ValueError``) naming the checkpoint if it is corrupted, truncated or of a
        different structure, ``FileNotFoundError`` if there is none.
        """
        import orbax.checkpoint as ocp

        if step is None:
            step = self.latest_step()
            if step is None:
                raise FileNotFoundError(f"no checkpoint in {self.directory}")
        path = self.path(step)
        if not path.is_dir():
            raise FileNotFoundError(f"no checkpoint of step {step} in {self.directory}")
        expected = _savable(target)
        try:
            restored = self._mngr().restore(
                int(step),
                args=ocp.args.Composite(
                    state=ocp.args.StandardRestore(), meta=ocp.args.JsonRestore()
                ),
            )
            raw, meta = restored["state"], restored["meta"]
        except Exception as e:
            raise CheckpointError(
                f"checkpoint {path} cannot be read (corrupted or truncated): {_one_line(e)}"
            ) from None
        if not isinstance(meta, dict) or meta.get("step") != int(step):
            raise CheckpointError(f"checkpoint {path} has no valid metadata (meta item)")
        problem = _describe_mismatch(raw, expected)
        if problem:
            raise CheckpointError(f"checkpoint {path} does not match this run's state: {problem}")
        state = flax.serialization.from_state_dict(flax.serialization.to_state_dict(target), raw)
        state = flax.serialization.from_state_dict(target, state)

        def leaf(value: Any, ref: Any) -> Any:
            if to_host:
                return np.asarray(value, np.uint32 if _is_key(ref) else getattr(ref, "dtype", None))
            if isinstance(ref, jax.Array) and len(ref.sharding.device_set) > 1:
                from learnopt import distributed

                return distributed.put_like(np.asarray(value), ref)
            if _is_key(ref):
                return jax.random.wrap_key_data(jnp.asarray(value), impl=jax.random.key_impl(ref))
            return cast_leaf_like(jnp.asarray(value), ref)

        return jax.tree_util.tree_map(leaf, state, target), meta

    def read_meta(self, step: int | None = None) -> dict[str, Any]:
        """The JSON ``meta`` item of checkpoint ``step`` (default: the latest) alone."""
        import orbax.checkpoint as ocp

        step = self.latest_step() if step is None else step
        if step is None or not self.path(step).is_dir():
            raise FileNotFoundError(f"no checkpoint of step {step} in {self.directory}")
        try:
            restored = self._mngr().restore(
                int(step), args=ocp.args.Composite(meta=ocp.args.JsonRestore())
            )
        except Exception as e:
            raise CheckpointError(
                f"checkpoint {self.path(step)} cannot be read: {_one_line(e)}"
            ) from None
        return restored["meta"]

    def close(self) -> None:
        if self._manager is not None:
            self._manager.close()
            self._manager = None

    def __enter__(self) -> RunCheckpointer:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def _one_line(error: BaseException) -> str:
    """``error`` as one line: ``Type: first line`` (our own errors without the type)."""
    text = str(error).strip().splitlines()
    first = text[0] if text else ""
    if isinstance(error, CheckpointWriteError | CheckpointError) and first:
        return first
    name = type(error).__name__
    return f"{name}: {first}" if first else name
