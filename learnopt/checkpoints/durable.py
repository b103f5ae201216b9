"""Atomic and durable writes: what every checkpoint of learnopt is written with.

* :func:`write_atomic`: one file, written beside its destination, fsynced and renamed
  over it; a process killed at any instant leaves the old file or the new one.
* :func:`fsync_tree` / :func:`fsync_dir`: make a written folder (an Orbax checkpoint)
  and the renames in a folder survive a power loss.

:mod:`learnopt.checkpoints.files` and :mod:`learnopt.checkpoints.run_checkpointer` call
these through this module (``durable.write_atomic(...)``), so a test that simulates a
full disk or a slow disk replaces them here (``monkeypatch.setattr(durable, ...)``).
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["write_atomic", "fsync_tree", "fsync_dir"]


def write_atomic(path: str | os.PathLike, data: bytes) -> Path:
    """Writes ``data`` to ``path`` atomically and durably; returns the path.

    The bytes go to a temporary file beside ``path`` (``.<name>.tmp<pid>``), which is
    fsynced and renamed over ``path``; the folder is fsynced after the rename. A process
    killed at any instant leaves either the old file or the new one, never a mix.

    Args:
      path: the file to write; its parent folders are created.
      data: the file's whole content.

    Returns:
      ``path`` as a ``Path``.
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


def _fsync_path(path: Path, directory: bool = False) -> None:
    flags = os.O_RDONLY | (getattr(os, "O_DIRECTORY", 0) if directory else 0)
    fd = os.open(path, flags)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_tree(root: str | os.PathLike) -> None:
    """fsyncs every file and folder under ``root`` (and ``root``): written data is durable.

    Args:
      root: a folder (e.g. an Orbax checkpoint's temporary folder before its rename).
    """
    root = Path(root)
    for dirpath, _, filenames in os.walk(root, topdown=False):
        for name in filenames:
            _fsync_path(Path(dirpath) / name)
        _fsync_path(Path(dirpath), directory=True)


def fsync_dir(path: str | os.PathLike) -> None:
    """fsyncs a folder (makes renames and new entries in it durable).

    Args:
      path: the folder.
    """
    _fsync_path(Path(path), directory=True)
