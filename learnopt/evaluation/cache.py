"""The baseline cache: tuned baselines' curves on disk, reused by later evaluations.

Baselines cost most of an evaluation (a learning-rate sweep per baseline and task) and
do not change between candidates. With ``evaluate_suite(..., baseline_cache=DIR)`` (or
``learnopt evaluate --baseline-cache DIR``) each baseline's curves on each task are kept
as one ``.npz`` file, ``<task>__<sweep>__<digest>.npz``, whose digest is a hash of the
*key*: everything that determines the numbers,

* the task: its name, its definition (the registered constructor and the task's classes;
  where that code is not learnopt's own, as for a task a user registered, a hash of its
  source, of the module-level values that code reads, of the values its constructor
  closes over and of the task's attributes) and
  its data (the datasets' ``extra_info``: name, batch size, shapes, classes; the batch
  shapes; each split's iterator and its settings);
* the sweep: its ``cache_id``, labels and grid (the learning rates), and for an optimizer
  a user registered, the same hashes of its constructor and of the optimizer it builds;
* every :class:`~learnopt.evaluation.engine.TrainingSettings` field (steps, seeds,
  evaluation cadence, valid split and batches, seed, dtype, layout);
* a hash of the ``learnopt`` source a baseline's training can run (every file but those
  of ``NOT_IN_BASELINES``: learned optimizers, meta-training, the command line, the
  evaluation's tables and figures read from finished curves), the
  JAX version and the backend.

Changed code, data or settings never reuse old curves, while a change to a learned
optimizer does not re-tune the baselines it is compared with. Only tasks given by name
and sweeps with a ``cache_id`` (:func:`~learnopt.evaluation.sweeps.lr_sweep` with a
registered optimizer, OptList, the reference schedule) are cached.

Each file also stores its key and the shapes of its curves, and :meth:`BaselineCache.load`
checks both against what is asked: a file made with other settings, an unreadable one
(random bytes, truncated, empty) or one whose arrays do not fit is a miss, with one
:class:`BaselineCacheWarning` naming the file and the reason; the baseline is trained
again and the file rewritten. The cache is best effort: a folder that cannot be written
(the path is a file, the folder is read-only) is reported once before anything trains
(:meth:`BaselineCache.check_writable`; files already there are still read), and a write
that fails (a full disk) is a warning naming the file, never an error, and leaves no
temporary file behind. An evaluation's results never depend on the cache being writable.

``learnopt evaluate`` keeps its cache in :func:`default_cache_dir` unless told
otherwise (``--baseline-cache DIR``, ``--no-baseline-cache``): ``$LEARNOPT_CACHE_DIR/
baselines``, else ``$XDG_CACHE_HOME/learnopt/baselines``, else
``~/.cache/learnopt/baselines`` (the XDG base directory convention).
"""

from __future__ import annotations

import dataclasses
import errno
import hashlib
import json
import os
import tempfile
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any, BinaryIO

import jax
import numpy as np

from learnopt.evaluation.engine import TrainingSettings
from learnopt.evaluation.fingerprint import NOT_IN_BASELINES as NOT_IN_BASELINES
from learnopt.evaluation.fingerprint import PACKAGE_ROOT as PACKAGE_ROOT
from learnopt.evaluation.fingerprint import (
    _code_identity,
    _data_identity,
    _fingerprint,
    _named_only,
    source_hash,
)
from learnopt.evaluation.fingerprint import _hash_sources as _hash_sources
from learnopt.evaluation.report import file_safe
from learnopt.evaluation.results import Curves, TaskResult
from learnopt.evaluation.sweeps import Sweep
from learnopt.optimizers import base as opt_base
from learnopt.tasks import base as tasks_base

__all__ = [
    "BaselineCache",
    "BaselineCacheWarning",
    "TaskKey",
    "task_key",
    "source_hash",
    "default_cache_dir",
    "ENV_CACHE_DIR",
    "FORMAT",
]

#: learnopt's cache folder; the baselines go into its ``baselines`` subfolder.
ENV_CACHE_DIR = "LEARNOPT_CACHE_DIR"

#: The layout of a cache file (part of the key: files of another layout are never read).
FORMAT = 2

#: The arrays of a cache file besides its metadata (``meta``, a JSON string).
_ARRAYS = ("train_loss", "valid_steps", "valid_loss")


class BaselineCacheWarning(UserWarning):
    """The baseline cache could not be used as asked (a file ignored, a write that failed)."""


def default_cache_dir() -> Path:
    """Where ``learnopt evaluate`` keeps the baselines' curves unless told otherwise.

    ``$LEARNOPT_CACHE_DIR/baselines`` if that variable is set, else
    ``$XDG_CACHE_HOME/learnopt/baselines`` if that one is an absolute path (the XDG base
    directory specification ignores relative ones), else ``~/.cache/learnopt/baselines``.
    Nothing is created here.

    Returns:
      The folder, as an absolute path.
    """
    root = os.environ.get(ENV_CACHE_DIR)
    if root:
        return Path(root).expanduser().absolute() / "baselines"
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg) if xdg and Path(xdg).is_absolute() else Path.home() / ".cache"
    return base / "learnopt" / "baselines"


@dataclasses.dataclass(frozen=True)
class TaskKey:
    """A task's part of the cache key, taken once before its runs train.

    Attributes:
      name: the task's name (the start of its files' names).
      definition: the task's code and configuration: the registered constructor and the
        task's classes, named, with (where that code is not learnopt's own, which
        :func:`source_hash` covers) a hash of their source, of the values the
        constructor closes over and of the task's attributes; JSON-able.
      data: what identifies the data the task reads (:func:`task_key`); JSON-able,
        ``None`` for a data-free task.
    """

    name: str
    definition: Any
    data: Any


def task_key(task: str | tasks_base.Task) -> TaskKey:
    """The task's part of the cache key: its name, definition and data.

    Take it before the task trains (training moves its data streams).

    Args:
      task: a registered task name (built afresh) or a task.

    Returns:
      The :class:`TaskKey`: the task's name; its definition (the registered constructor
      and the task's classes by qualified name, plus, where that code is not learnopt's
      own, hashes of their source, of the constructor's closure and of the task's
      attributes); and its data (the datasets' ``extra_info``, batch shapes and each
      split's iterator settings).
    """
    if isinstance(task, str):
        name, task = task, tasks_base.get_task(task)
    elif isinstance(task, tasks_base.Task):
        name = task.name
    else:
        raise TypeError(f"expected a task or a registered task name, got {type(task).__name__}")
    ctor = tasks_base.TASKS.constructor(name) if name in tasks_base.TASKS else None
    classes = [c for c in type(task).__mro__ if c is not object]
    definition: dict[str, Any] = {
        "constructor": None if ctor is None else _code_identity(ctor),
        "classes": [_code_identity(c) for c in classes],
    }
    if not all(_named_only(c) for c in [*classes, *([ctor] if ctor else [])]):
        attrs = {k: v for k, v in getattr(task, "__dict__", {}).items() if k != "datasets"}
        definition["attributes"] = _fingerprint(attrs)
    return TaskKey(name, definition, _data_identity(getattr(task, "datasets", None)))


def _optimizer_identity(sweep: Sweep) -> Any:
    """The optimizer of a cached sweep: its registered name, and more if it is a user's.

    A constructor that is not learnopt's own (an optimizer a user registered) is
    described by :func:`_code_identity` and by the optimizer it builds at the first sweep
    point (its class, with a hash of its source, and its attributes).
    """
    assert sweep.cache_id is not None
    name = sweep.cache_id.split("|", 1)[0]
    if name not in opt_base.OPTIMIZERS:
        return name
    ctor = opt_base.OPTIMIZERS.constructor(name)
    if _named_only(ctor):
        return _code_identity(ctor)
    out: dict[str, Any] = {"constructor": _code_identity(ctor)}
    try:
        optimizer = sweep.make_opt(jax.tree_util.tree_map(lambda x: x[0], sweep.hparams))
    except Exception as e:  # a user's constructor: the key says it failed
        out["optimizer"] = f"not built: {type(e).__name__}"
    else:
        out["optimizer"] = _fingerprint(optimizer)
    return out


def _as_task_key(task: str | tasks_base.Task | TaskKey) -> TaskKey:
    return task if isinstance(task, TaskKey) else task_key(task)


def _expected_shapes(settings: TrainingSettings, sweep: Sweep) -> dict[str, list[int]]:
    """The shapes of a sweep's curves under ``settings`` (as :class:`Curves` has them)."""
    evals = len(_valid_steps(settings))
    points, seeds = sweep.size, settings.num_seeds
    return {
        "train_loss": [points, seeds, settings.num_steps],
        "valid_steps": [evals],
        "valid_loss": [points, seeds, evals],
    }


def _valid_steps(settings: TrainingSettings) -> list[int]:
    """The steps after which the valid loss is measured: 0, every chunk, the last step."""
    return [*range(0, settings.num_steps, settings.steps_per_eval), settings.num_steps]


def _short(value: Any, limit: int = 60) -> str:
    text = json.dumps(value, sort_keys=True) if not isinstance(value, str) else value
    return text if len(text) <= limit else text[: limit - 3] + "..."


# --------------------------------------------------------------------------- cache


class BaselineCache:
    """Baseline curves on disk, one ``.npz`` per task and sweep, keyed by every setting.

    Best effort: a file that cannot be used is a miss with a warning, a write that fails
    a warning (:class:`BaselineCacheWarning`); neither is ever an error.

    Args:
      folder: where the files go (created by :meth:`check_writable` or the first write).
    """

    def __init__(self, folder: str | os.PathLike):
        self.folder = Path(folder)
        #: ``False`` once a write failed or :meth:`check_writable` found the folder
        #: unusable: later writes are skipped (reads still happen).
        self.writable = True

    # -- keys
    def key(
        self, task: str | tasks_base.Task | TaskKey, settings: TrainingSettings, sweep: Sweep
    ) -> dict[str, Any] | None:
        """Everything that determines ``sweep``'s curves on ``task`` under ``settings``.

        Args:
          task: the task, its name (built afresh) or its :func:`task_key`.
          settings: how the runs train.
          sweep: the baseline sweep.

        Returns:
          The key as a JSON-able dict (stored in the file and checked when it is read),
          or ``None`` for a sweep that is never cached (no ``cache_id``).
        """
        if sweep.cache_id is None:
            return None
        tk = _as_task_key(task)
        key = {
            "format": FORMAT,
            "task": tk.name,
            "task_definition": tk.definition,
            "data": tk.data,
            "sweep": sweep.cache_id,
            "sweep_name": sweep.name,
            "optimizer": _optimizer_identity(sweep),
            "labels": list(sweep.labels),
            "grid": {k: [float(x) for x in v] for k, v in sweep.values.items()},
            **{f.name: getattr(settings, f.name) for f in dataclasses.fields(settings)},
            "eval_every": settings.steps_per_eval,
            "param_dtype": str(settings.param_dtype),
            "source": source_hash(),
            "jax": jax.__version__,
            "backend": jax.default_backend(),
        }
        return json.loads(json.dumps(key, sort_keys=True))  # as read back from a file

    def path(
        self, task: str | tasks_base.Task | TaskKey, settings: TrainingSettings, sweep: Sweep
    ) -> Path | None:
        """The file of ``sweep``'s curves on ``task`` under ``settings``.

        Args:
          task: the task, its name (built afresh) or its :func:`task_key`.
          settings: how the runs train.
          sweep: the baseline sweep.

        Returns:
          The path, ``<task>__<sweep>__<digest of the key>.npz``, or ``None`` for a
          sweep that is never cached (no ``cache_id``).
        """
        key = self.key(task, settings, sweep)
        if key is None:
            return None
        return self._path(key)

    def _path(self, key: dict[str, Any]) -> Path:
        digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:20]
        name = f"{file_safe(key['task'])}__{file_safe(key['sweep_name'])}__{digest}.npz"
        return self.folder / name

    # -- checks
    def check_writable(self) -> bool:
        """Checks, before anything trains, that files can be written into the folder.

        Creates the folder if needed and writes and removes a probe file. If that fails
        (the path is a file, the folder is read-only), warns once and stops writing:
        the evaluation goes on, reading what files are there.

        Returns:
          Whether the folder is writable.
        """
        if not self.writable:
            return False
        try:
            if self.folder.exists() and not self.folder.is_dir():
                raise NotADirectoryError(errno.ENOTDIR, "it exists and is not a folder")
            self.folder.mkdir(parents=True, exist_ok=True)
            fd, probe = _make_temp(self.folder, ".write-check")
            os.close(fd)
            os.unlink(probe)
        except OSError as e:
            self._stop_writing(
                f"baseline cache: cannot write to {self.folder} "
                f"({type(e).__name__}: {e.strerror or e})"
            )
        return self.writable

    def _stop_writing(self, message: str) -> None:
        self.writable = False
        warnings.warn(
            f"{message}; baselines are trained and used but not cached in this run",
            BaselineCacheWarning,
            stacklevel=3,
        )

    # -- reading
    def load(
        self,
        task: str | tasks_base.Task | TaskKey,
        settings: TrainingSettings,
        sweeps: Sequence[Sweep],
    ) -> dict[str, Curves]:
        """The cached curves of those of ``sweeps`` that are on disk and fit.

        A file is used only if its stored key equals the one asked for and its arrays
        have the shapes the settings give; otherwise (and for a file that cannot be
        read: random bytes, truncated, empty) it is a miss, with one
        :class:`BaselineCacheWarning` naming the file and the reason.

        Args:
          task: the task, its name (built afresh) or its :func:`task_key`.
          settings: how the runs train.
          sweeps: the baseline sweeps.

        Returns:
          ``{sweep name: Curves}`` for every sweep found (possibly none).
        """
        tk = _as_task_key(task)
        out = {}
        for sweep in sweeps:
            key = self.key(tk, settings, sweep)
            if key is None:
                continue
            path = self._path(key)
            if not path.is_file():
                continue
            found = self._read(path, key, settings, sweep)
            if isinstance(found, str):
                warnings.warn(
                    f"baseline cache: ignoring {path}: {found}; training {sweep.name} on "
                    f"{tk.name} again (the file is rewritten)",
                    BaselineCacheWarning,
                    stacklevel=2,
                )
                continue
            out[sweep.name] = Curves(
                name=sweep.name,
                labels=sweep.labels,
                values=dict(sweep.values),
                train_loss=found["train_loss"],
                valid_steps=found["valid_steps"],
                valid_loss=found["valid_loss"],
            )
        return out

    def _read(
        self, path: Path, key: dict[str, Any], settings: TrainingSettings, sweep: Sweep
    ) -> dict[str, np.ndarray] | str:
        """The arrays of ``path`` if it holds ``key``'s curves, else why not."""
        try:
            with open(path, "rb") as f:  # ours to close, whatever numpy makes of it
                head = f.read(4)
                if not head:
                    return "it is empty"
                if head != b"PK\x03\x04":
                    return f"it is not an .npz (zip) file (it starts with {head!r})"
                f.seek(0)
                with np.load(f, allow_pickle=False) as data:
                    files = set(data.files)
                    missing = [name for name in ("meta", *_ARRAYS) if name not in files]
                    if missing:
                        return f"it lacks {', '.join(missing)} (not a baseline cache file)"
                    meta = json.loads(str(data["meta"][()]))
                    arrays = {name: np.asarray(data[name]) for name in _ARRAYS}
        except Exception as e:  # whatever unreadable bytes raise (zip, zlib, numpy)
            return f"it cannot be read ({type(e).__name__}: {_short(str(e), 120)})"
        stored = meta.get("key") if isinstance(meta, dict) else None
        if not isinstance(stored, dict):
            return "its metadata holds no key"
        if stored != key:
            fields = sorted(set(stored) | set(key), key=str)
            diff = [f for f in fields if stored.get(f) != key.get(f)]
            shown = "; ".join(
                f"{f}: file {_short(stored.get(f))}, asked {_short(key.get(f))}" for f in diff[:4]
            )
            more = f" (and {len(diff) - 4} more)" if len(diff) > 4 else ""
            return f"it was made with other settings ({shown}{more})"
        expected = _expected_shapes(settings, sweep)
        for name in _ARRAYS:
            shape = list(arrays[name].shape)
            if shape != expected[name]:
                return f"{name} has shape {shape}, expected {expected[name]}"
        losses = (arrays["train_loss"], arrays["valid_loss"])
        if not all(np.issubdtype(a.dtype, np.floating) for a in losses):
            return "its losses are not floating-point numbers"
        if arrays["valid_steps"].tolist() != _valid_steps(settings):
            return f"its valid steps {arrays['valid_steps'].tolist()} are not those asked"
        return arrays

    # -- writing
    def save(
        self,
        task: str | tasks_base.Task | TaskKey,
        settings: TrainingSettings,
        sweeps: Sequence[Sweep],
        result: TaskResult,
    ) -> list[Path]:
        """Writes the curves of ``sweeps`` from ``result`` (atomically, file by file).

        Each file holds the curves and its key (``meta``). Best effort: a write that
        fails (a full disk, a read-only folder) warns once, naming the file, removes its
        temporary file and stops writing; nothing is raised.

        Args:
          task: the task, its name (built afresh) or its :func:`task_key` (taken before
            the task trained).
          settings: how the runs trained.
          sweeps: the baseline sweeps to keep (uncacheable ones are skipped).
          result: the task's result, holding every sweep's curves.

        Returns:
          The files written.
        """
        tk = _as_task_key(task)
        written = []
        for sweep in sweeps:
            if not self.writable:
                break
            key = self.key(tk, settings, sweep)
            if key is None:
                continue
            path = self._path(key)
            c = result.curves[sweep.name]
            arrays = {
                "train_loss": np.asarray(c.train_loss),
                "valid_steps": np.asarray(c.valid_steps),
                "valid_loss": np.asarray(c.valid_loss),
            }
            meta = {"key": key, "shapes": {k: list(v.shape) for k, v in arrays.items()}}
            try:
                self._write(path, {"meta": np.asarray(json.dumps(meta, sort_keys=True)), **arrays})
            except (OSError, ValueError) as e:
                reason = e.strerror if isinstance(e, OSError) and e.strerror else str(e)
                self._stop_writing(
                    f"baseline cache: could not write {path} ({type(e).__name__}: {reason})"
                )
                continue
            written.append(path)
        return written

    def _write(self, path: Path, arrays: dict[str, np.ndarray]) -> None:
        """Writes ``arrays`` to ``path`` through a temporary file (removed if anything fails)."""
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = _make_temp(path.parent, f".{path.name}")
        try:
            with os.fdopen(fd, "wb") as f:
                _write_npz(f, arrays)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise


def _make_temp(folder: Path, prefix: str) -> tuple[int, str]:
    """A new temporary file in ``folder`` (``tempfile.mkstemp``): its descriptor and path."""
    return tempfile.mkstemp(dir=folder, prefix=prefix, suffix=".tmp")


def _write_npz(f: BinaryIO, arrays: dict[str, np.ndarray]) -> None:
    """``arrays`` as a compressed ``.npz`` into the open file ``f``."""
    np.savez_compressed(f, **arrays)
