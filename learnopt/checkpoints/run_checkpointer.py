"""The whole state of a meta-training run, checkpointed with Orbax.

:class:`RunCheckpointer` writes ``<out>/checkpoints/step_<N>/`` (two Orbax items: the
state pytree and a JSON ``meta`` dict), atomically and durably, keeping the last few; it
is what :func:`learnopt.train.meta_train` resumes from. A checkpoint that cannot be read
raises :class:`CheckpointError` (a ``ValueError``), one that cannot be written
:class:`CheckpointWriteError` (an ``OSError``). Orbax is imported on first use.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import flax.serialization
import jax
import jax.numpy as jnp
import numpy as np

from learnopt.checkpoints import durable
from learnopt.tree_utils import cast_leaf_like

PyTree = Any

__all__ = [
    "RunCheckpointer",
    "CheckpointError",
    "CheckpointWriteError",
    "CHECKPOINT_DIR",
    "STEP_PREFIX",
    "STEP_DIGITS",
]

#: Folder of a run's checkpoints, inside the run's output folder.
CHECKPOINT_DIR = "checkpoints"
#: A checkpoint's folder is ``step_<8 digits>``.
STEP_PREFIX = "step"
STEP_DIGITS = 8


class CheckpointError(ValueError):
    """A checkpoint that cannot be read: corrupted, truncated, or of another run."""


class CheckpointWriteError(OSError):
    """A checkpoint that could not be written (full disk, unwritable folder, ...)."""


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
                await asyncio.to_thread(durable.fsync_tree, Path(self.get()))
                await super().finalize(*args, **kwargs)
                final = Path(self.get_final())
                await asyncio.to_thread(durable.fsync_tree, final)
                await asyncio.to_thread(durable.fsync_dir, final.parent)

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
        """The folder of checkpoint ``step``.

        Args:
          step: the checkpoint's step.

        Returns:
          ``<directory>/step_<8 digits>`` (it may not exist).
        """
        return self.directory / f"{STEP_PREFIX}_{int(step):0{STEP_DIGITS}d}"

    def steps(self) -> list[int]:
        """The complete checkpoints' steps, oldest first (temporary folders ignored).

        Returns:
          the steps (empty when the folder does not exist).
        """
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
        """The newest complete checkpoint's step.

        Returns:
          the step, or ``None`` when there is no checkpoint.
        """
        steps = self.steps()
        return steps[-1] if steps else None

    def save(self, step: int, state: PyTree, meta: dict[str, Any]) -> Path:
        """Writes checkpoint ``step`` and returns its folder once it is complete on disk.

        Raises :class:`CheckpointWriteError` (an ``OSError``) if it cannot be written; the
        earlier checkpoints are then untouched and the partial one is removed.

        Args:
          step: the checkpoint's step (a meta-training run saves its step count).
          state: any pytree of arrays (typed PRNG keys included), e.g. the run's state.
          meta: a JSON-serializable dict stored beside it (``step`` is added).

        Returns:
          the checkpoint's folder, :meth:`path` of ``step``.
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
        durable.fsync_dir(self.directory)
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

        Args:
          target: a state of the saved structure (its values are not used).
          step: the checkpoint to read; ``None`` reads the latest.
          to_host: return numpy leaves instead of placing them like ``target``'s.

        Returns:
          ``(state, meta)``: the state in ``target``'s structure and the ``meta`` dict
          given to :meth:`save` (with its ``step``).
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
        """The JSON ``meta`` item of checkpoint ``step`` (default: the latest) alone.

        Args:
          step: the checkpoint to read; ``None`` reads the latest.

        Returns:
          the ``meta`` dict given to :meth:`save` (with its ``step``).

        Raises:
          FileNotFoundError: no such checkpoint.
          CheckpointError: its ``meta`` item cannot be read.
        """
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
        """Closes the Orbax manager (a later save or restore opens a new one)."""
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
