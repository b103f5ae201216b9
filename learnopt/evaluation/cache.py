"""The baseline cache: tuned baselines' curves on disk, reused by later evaluations.

Baselines cost most of an evaluation (a learning-rate sweep per baseline and task) and
do not change between candidates. With ``evaluate_suite(..., baseline_cache=DIR)`` (or
``learnopt evaluate --baseline-cache DIR``) each baseline's curves on each task are kept
as one ``.npz`` file, keyed by the task, the sweep, every
:class:`~learnopt.evaluation.engine.TrainingSettings` field, a hash of the ``learnopt``
source a baseline's training can run (every file but those of :data:`NOT_IN_BASELINES`:
learned optimizers, meta-training, the command line), the JAX version and the backend:
changed code or settings never reuse old curves, while a change to a learned optimizer
does not re-tune the baselines it is compared with. Only tasks given by name and sweeps from
:func:`~learnopt.evaluation.sweeps.lr_sweep` with a registered optimizer are cached
(their ``cache_id``).

``learnopt evaluate`` keeps its cache in :func:`default_cache_dir` unless told
otherwise (``--baseline-cache DIR``, ``--no-baseline-cache``): ``$LEARNOPT_CACHE_DIR/
baselines``, else ``$XDG_CACHE_HOME/learnopt/baselines``, else
``~/.cache/learnopt/baselines`` (the XDG base directory convention).
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import os
from collections.abc import Sequence
from pathlib import Path

import jax
import numpy as np

from learnopt.evaluation.engine import TrainingSettings
from learnopt.evaluation.report import file_safe
from learnopt.evaluation.results import Curves, TaskResult
from learnopt.evaluation.sweeps import Sweep

__all__ = ["BaselineCache", "source_hash", "default_cache_dir", "ENV_CACHE_DIR"]

#: The ``learnopt`` package: its ``.py`` files are part of the cache key.
PACKAGE_ROOT = Path(__file__).resolve().parent.parent
#: Parts of the package that training a hand-designed baseline never runs (the layers
#: of docs/design.md: baselines are ``learnopt.optimizers`` on ``learnopt.tasks``, driven
#: by ``learnopt.evaluation``): left out of the key.
NOT_IN_BASELINES = (
    "learned_optimizers",
    "research",
    "pretrained",
    "outer_trainers",
    "run",
    "cli",
    "recipes.py",
    "summary.py",
)

#: learnopt's cache folder; the baselines go into its ``baselines`` subfolder.
ENV_CACHE_DIR = "LEARNOPT_CACHE_DIR"


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


@functools.lru_cache(maxsize=1)
def source_hash() -> str:
    """A hash of the learnopt source baselines can run (cached curves die with it).

    Returns:
      The SHA-256 hex digest of the relative path and bytes of every ``.py`` file of the
      ``learnopt`` package outside :data:`NOT_IN_BASELINES`, in sorted order.
    """
    return _hash_sources(PACKAGE_ROOT)


def _hash_sources(root: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root)
        if rel.parts[0] in NOT_IN_BASELINES:
            continue
        digest.update(str(rel).encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


class BaselineCache:
    """Baseline curves on disk, one ``.npz`` per task and sweep, keyed by every setting.

    Args:
      folder: where the files go (created when the first one is written).
    """

    def __init__(self, folder: str | os.PathLike):
        self.folder = Path(folder)

    def path(self, task: str, settings: TrainingSettings, sweep: Sweep) -> Path | None:
        """The file of ``sweep``'s curves on ``task`` under ``settings``.

        Args:
          task: the task's name.
          settings: how the runs train.
          sweep: the baseline sweep.

        Returns:
          The path, or ``None`` for a sweep that is never cached (no ``cache_id``).
        """
        if sweep.cache_id is None:
            return None
        key = {
            "task": task,
            "sweep": sweep.cache_id,
            **{f.name: getattr(settings, f.name) for f in dataclasses.fields(settings)},
            "eval_every": settings.steps_per_eval,
            "param_dtype": str(settings.param_dtype),
            "source": source_hash(),
            "jax": jax.__version__,
            "backend": jax.default_backend(),
        }
        digest = hashlib.sha256(repr(sorted(key.items())).encode()).hexdigest()[:20]
        return self.folder / f"{file_safe(task)}__{file_safe(sweep.name)}__{digest}.npz"

    def load(
        self, task: str, settings: TrainingSettings, sweeps: Sequence[Sweep]
    ) -> dict[str, Curves]:
        """The cached curves of those of ``sweeps`` that are on disk.

        Args:
          task: the task's name.
          settings: how the runs train.
          sweeps: the baseline sweeps.

        Returns:
          ``{sweep name: Curves}`` for every sweep found (possibly none).
        """
        out = {}
        for sweep in sweeps:
            path = self.path(task, settings, sweep)
            if path is None or not path.is_file():
                continue
            with np.load(path) as data:
                out[sweep.name] = Curves(
                    name=sweep.name,
                    labels=sweep.labels,
                    values=dict(sweep.values),
                    train_loss=data["train_loss"],
                    valid_steps=data["valid_steps"],
                    valid_loss=data["valid_loss"],
                )
        return out

    def save(
        self,
        task: str,
        settings: TrainingSettings,
        sweeps: Sequence[Sweep],
        result: TaskResult,
    ) -> None:
        """Writes the curves of ``sweeps`` from ``result`` (atomically, file by file).

        Args:
          task: the task's name.
          settings: how the runs trained.
          sweeps: the baseline sweeps to keep (uncacheable ones are skipped).
          result: the task's result, holding every sweep's curves.
        """
        for sweep in sweeps:
            path = self.path(task, settings, sweep)
            if path is None:
                continue
            path.parent.mkdir(parents=True, exist_ok=True)
            c = result.curves[sweep.name]
            tmp = path.with_name(f".{path.name}.tmp{os.getpid()}.npz")
            np.savez_compressed(
                tmp, train_loss=c.train_loss, valid_loss=c.valid_loss, valid_steps=c.valid_steps
            )
            os.replace(tmp, path)
