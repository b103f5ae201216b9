"""Checkpoints: theta files, any pytree as a file, and the whole state of a run.

* :mod:`~learnopt.checkpoints.files`: :func:`save_theta` / :func:`load_theta` (theta as a
  msgpack file, loadable without knowing its structure, with optional metadata read by
  :func:`load_theta_metadata`) and :func:`save_state` / :func:`load_state` (any pytree,
  exactly, into the structure of a target; the notes' library's functions);
* :mod:`~learnopt.checkpoints.run_checkpointer`: :class:`RunCheckpointer`, the whole
  state of a meta-training run checkpointed with Orbax as
  ``<out>/checkpoints/step_<N>/``, the last few kept; what
  :func:`learnopt.train.meta_train` resumes from;
* :mod:`~learnopt.checkpoints.durable`: :func:`write_atomic`, :func:`fsync_tree` and
  :func:`fsync_dir`, with which every checkpoint is written atomically and durably (a
  process killed at any instant, or a power loss, leaves the old checkpoint or the new
  one, never a truncated one).

Every name is re-exported here (``from learnopt import checkpoints;
checkpoints.save_theta(...)``). The modules call the writes through
:mod:`~learnopt.checkpoints.durable`, so replace them there (not here) to simulate a
failing disk in a test.
"""

from __future__ import annotations

from learnopt.checkpoints.durable import fsync_dir, fsync_tree, write_atomic
from learnopt.checkpoints.files import (
    THETA_METADATA_KEY,
    load_state,
    load_theta,
    load_theta_metadata,
    save_state,
    save_theta,
    theta_from_bytes,
    theta_to_bytes,
)
from learnopt.checkpoints.files import PyTree as PyTree
from learnopt.checkpoints.run_checkpointer import (
    CHECKPOINT_DIR,
    CheckpointError,
    CheckpointWriteError,
    RunCheckpointer,
)
from learnopt.checkpoints.run_checkpointer import STEP_DIGITS as STEP_DIGITS
from learnopt.checkpoints.run_checkpointer import STEP_PREFIX as STEP_PREFIX
from learnopt.checkpoints.run_checkpointer import _one_line as _one_line

# ``X as X`` above: importable here as before, not part of the API (the checkpoint
# folders' naming, the pytree alias, the one-line error text learnopt.run.session uses).
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
