"""A run's output folder: its files, its lock, and the space its final theta needs.

Layout: ``config.json`` (the resolved settings), ``metrics.csv`` (one row per meta-step),
``theta.msgpack`` (theta of the latest checkpoint, then the final theta),
``checkpoints/step_<N>/`` (Orbax, the whole state), ``meta_loss.png``,
``learning_rate.png``; while a run writes the folder it also holds ``.lock`` (the writer's
process id, host and start time) and ``.theta.reserve``, both removed when it ends.

**One writer.** :meth:`RunFolder.lock` takes an exclusive ``flock`` on ``.lock``. A second
run on the same folder (``--resume DIR``, or ``--out DIR`` with ``--overwrite``) is refused
at once with :class:`RunLockedError` naming the process that writes it. The operating
system drops the lock when its process dies, so the lock of a killed run (SIGKILL
included) never blocks a resume and needs no clean-up.

**The trained theta cannot be lost to a full disk.** Space for two copies of the theta
file (a write and its atomic replacement) is reserved at the start (``.theta.reserve``);
when the final write fails for lack of space, the reservation is given back and theta is
written into it (:meth:`RunFolder.write_final_theta`).
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import socket
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from learnopt import _validate, checkpoints

try:  # POSIX; elsewhere a run folder is not locked
    import fcntl
except ImportError:  # pragma: no cover
    fcntl = None

__all__ = [
    "RunFolder",
    "RunExistsError",
    "RunLockedError",
    "holds_run",
    "evaluation_files",
    "CONFIG_FILE",
    "METRICS_FILE",
    "THETA_FILE",
    "PLOT_FILES",
]

CONFIG_FILE = "config.json"
METRICS_FILE = "metrics.csv"
THETA_FILE = "theta.msgpack"
PLOT_FILES = ("meta_loss.png", "learning_rate.png")
LOCK_FILE = ".lock"
RESERVE_FILE = ".theta.reserve"
RUN_FILES = (CONFIG_FILE, METRICS_FILE, THETA_FILE, *PLOT_FILES)


class RunExistsError(ValueError):
    """``out_dir`` already holds a run and neither ``resume`` nor ``overwrite`` was asked."""


class RunLockedError(RuntimeError):
    """Another live process is writing the run folder."""


def holds_run(out_dir: str | os.PathLike) -> bool:
    """Whether ``out_dir`` holds (part of) a meta-training run.

    Args:
      out_dir: a folder.

    Returns:
      True if it has a run's config, metrics or theta file, or its checkpoints folder.
    """
    out = Path(out_dir)
    return (
        any((out / f).is_file() for f in (CONFIG_FILE, METRICS_FILE, THETA_FILE))
        or (out / checkpoints.CHECKPOINT_DIR).is_dir()
    )


def evaluation_files(out_dir: str | os.PathLike) -> list[str]:
    """The files of a ``learnopt evaluate`` output that ``out_dir`` holds.

    A meta-training run never goes into such a folder, not even with ``overwrite``: the
    two kinds of run would mix (their ``config.json`` in particular).

    Args:
      out_dir: a folder.

    Returns:
      Their names (``config.json`` if it is an evaluation's); empty when there are none.
    """
    from learnopt.evaluation.command import FIXED_OUTPUTS

    out = Path(out_dir)
    names = [n for n in FIXED_OUTPUTS if n != CONFIG_FILE and (out / n).is_file()]
    try:
        config = json.loads((out / CONFIG_FILE).read_text())
    except (OSError, ValueError):
        config = None
    if isinstance(config, dict) and config.get("command") == "evaluate":
        names.insert(0, CONFIG_FILE)
    return names


class RunFolder:
    """The output folder of one run (``path``); process 0 of a run alone touches it.

    Args:
      path: the folder (created when the run starts).
    """

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        self._lock_fd: int | None = None
        self._reserved = 0

    def __repr__(self) -> str:
        return f"RunFolder({str(self.path)!r})"

    # -- files
    @property
    def config_path(self) -> Path:
        """The run's settings file, ``<run>/config.json``."""
        return self.path / CONFIG_FILE

    @property
    def metrics_path(self) -> Path:
        """The run's metrics table, ``<run>/metrics.csv``."""
        return self.path / METRICS_FILE

    @property
    def theta_path(self) -> Path:
        """Where the final theta is written, ``<run>/theta.msgpack``."""
        return self.path / THETA_FILE

    @property
    def checkpoint_dir(self) -> Path:
        """The folder of the run's checkpoints."""
        return self.path / checkpoints.CHECKPOINT_DIR

    def holds_run(self) -> bool:
        """Whether the folder holds (part of) a run.

        Returns:
          :func:`holds_run` of the folder.
        """
        return holds_run(self.path)

    def check_names_free(self) -> None:
        """Raises ``ValueError`` if a name the run writes is taken by something else.

        A folder named ``theta.msgpack`` (or a file named ``checkpoints``) would make the
        run fail at its first write, after the work: refuse it before any.
        """
        for name in RUN_FILES:
            p = self.path / name
            if p.exists() and not p.is_file():
                raise ValueError(
                    f"out_dir: {p} is a directory, but the run writes its {name} file there; "
                    "move it away or choose another out_dir"
                )
        ck = self.checkpoint_dir
        if ck.exists() and not ck.is_dir():
            raise ValueError(
                f"out_dir: {ck} is a file, but the run keeps its checkpoints in a folder of "
                "that name; move it away or choose another out_dir"
            )

    def read_config(self) -> dict[str, Any]:
        """The run's ``config.json`` (for a resume).

        Returns:
          The settings the run was started with.
        """
        path = self.config_path
        try:
            config = json.loads(path.read_text())
        except FileNotFoundError:
            raise ValueError(
                f"resume: {self.path} holds no run to resume (no {CONFIG_FILE}); start a new "
                "run without resume"
            ) from None
        except (OSError, ValueError) as e:
            raise ValueError(f"resume: {path} cannot be read ({e})") from None
        if not isinstance(config, dict):
            raise ValueError(f"resume: {path} is not a run's config (expected a JSON object)")
        return config

    def write_config(self, config: dict[str, Any]) -> None:
        """Writes ``config.json`` atomically.

        Args:
          config: the resolved settings (JSON-serializable; other values as strings).
        """
        data = (json.dumps(config, indent=2, default=str) + "\n").encode()
        checkpoints.write_atomic(self.config_path, data)

    def remove_run(self) -> None:
        """Removes the run's files and checkpoints (``overwrite``), those of its periodic
        evaluation included (``eval.csv``, ``theta_best.msgpack``, ...: a new run must
        neither append to them nor be compared with their best); keeps other files."""
        from learnopt.evaluation.periodic import OUTPUT_FILES

        for name in (*RUN_FILES, *OUTPUT_FILES):
            (self.path / name).unlink(missing_ok=True)
        shutil.rmtree(self.checkpoint_dir, ignore_errors=True)

    def clean_temporaries(self) -> list[Path]:
        """Removes temporary files that killed writes left behind (ours and Orbax's).

        Returns:
          The paths removed.
        """
        removed = []
        for p in self.path.glob(".*.tmp*"):
            if p.is_file() and p.name[1:].split(".tmp")[0] in RUN_FILES:
                p.unlink(missing_ok=True)
                removed.append(p)
        ck = self.checkpoint_dir
        if ck.is_dir():
            for p in ck.glob("*.orbax-checkpoint-tmp*"):
                shutil.rmtree(p, ignore_errors=True)
                removed.append(p)
        return removed

    # -- the lock
    def lock(self) -> None:
        """Takes the folder's exclusive lock, creating the folder if needed.

        Raises:
          RunLockedError: another live process holds it (the message names it).
        """
        if fcntl is None or self._lock_fd is not None:
            return
        _validate.writable_dir("out_dir", self.path)
        path = self.path / LOCK_FILE
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as e:
            os.close(fd)
            if e.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                raise
            raise RunLockedError(
                f"out_dir: {self.path} is being written by another meta-training run "
                f"({_describe_owner(path)}); wait for it to end or stop it"
            ) from None
        owner = {"pid": os.getpid(), "host": socket.gethostname(), "since": time.time()}
        os.ftruncate(fd, 0)
        os.pwrite(fd, (json.dumps(owner) + "\n").encode(), 0)
        self._lock_fd = fd

    def unlock(self) -> None:
        """Releases the lock and removes the lock file (a killed run's file stays, unlocked,
        and is taken over by the next run)."""
        if self._lock_fd is not None:
            fd, self._lock_fd = self._lock_fd, None
            try:
                # Removed while still held: a run that starts now creates a new lock file.
                (self.path / LOCK_FILE).unlink(missing_ok=True)
                fcntl.flock(fd, fcntl.LOCK_UN)
            finally:
                os.close(fd)

    # -- the reservation for the final theta
    def reserve(self, nbytes: int) -> None:
        """Reserves ``nbytes`` on the folder's file system for the final theta write.

        Args:
          nbytes: the space to keep (twice the theta file: a write and its replacement).

        Raises:
          OSError: the space is not there now (better now than after the run).
        """
        path = self.path / RESERVE_FILE
        try:
            with open(path, "wb") as f:
                chunk = b"\0" * min(nbytes, 1 << 20)
                left = nbytes
                while left > 0:
                    left -= f.write(chunk[: min(left, len(chunk))])
                f.flush()
                os.fsync(f.fileno())
        except OSError:
            path.unlink(missing_ok=True)
            raise
        self._reserved = nbytes

    def release_reserve(self) -> None:
        """Gives the reserved space back (at the end of a session)."""
        if self._reserved:
            (self.path / RESERVE_FILE).unlink(missing_ok=True)
            self._reserved = 0

    def write_final_theta(self, write: Callable[[], Any]) -> Any:
        """Runs ``write`` (the theta write); on a full disk frees the reserve and retries.

        Args:
          write: writes theta.msgpack (``checkpoints.save_theta``).

        Returns:
          What ``write`` returns.
        """
        try:
            return write()
        except OSError as e:
            if not self._reserved or e.errno not in (errno.ENOSPC, errno.EFBIG, errno.EDQUOT):
                raise
            self.release_reserve()
            return write()


def _describe_owner(path: Path) -> str:
    """Who holds the lock, as its file says: ``process 123 on host, since 12:00:01``."""
    try:
        owner = json.loads(path.read_text() or "{}")
    except (OSError, ValueError):
        owner = {}
    if not owner.get("pid"):
        return "a process that has not written its id yet"
    since = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(owner.get("since", 0)))
    return f"process {owner['pid']} on {owner.get('host', '?')}, since {since}"
