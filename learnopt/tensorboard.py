"""TensorBoard event files, an option next to the CSV files (which stay the record).

``learnopt meta-train --tensorboard DIR`` and ``learnopt evaluate --tensorboard DIR``
write their metrics as TensorBoard scalars too, through `tensorboardX
<https://github.com/lanpa/tensorboardX>`_, which needs no TensorFlow. It is an optional
extra (``pip install 'learnopt[tensorboard]'``), imported only when a writer is made.

* :func:`summary_writer`: a ``tensorboardX.SummaryWriter``, or a clear error naming the
  extra when it is not installed (:func:`require` checks that alone);
* :class:`MetaTrainWriter`: a ``meta_train`` callback writing every metrics.csv column
  as the scalar ``meta_train/<column>`` at its meta-step;
* :func:`read_scalars`: the scalars of event files, read back without TensorBoard.
"""

from __future__ import annotations

import os
import struct
import time
from pathlib import Path
from typing import Any

__all__ = ["summary_writer", "require", "MetaTrainWriter", "read_scalars", "EXTRA"]

#: The optional dependency group that installs the writer.
EXTRA = "tensorboard"


def summary_writer(logdir: str | os.PathLike, purge_step: int | None = None) -> Any:
    """A TensorBoard writer into ``logdir`` (created if needed).

    Args:
      logdir: the folder of the event file (one TensorBoard "run").
      purge_step: TensorBoard hides the events of earlier files in ``logdir`` at this
        step and later (a resumed run rewrites them), or ``None``.

    Returns:
      A ``tensorboardX.SummaryWriter``; call ``close()`` when done.

    Raises:
      ImportError: tensorboardX is not installed (the message says how to install it).
    """
    SummaryWriter = require()
    Path(logdir).mkdir(parents=True, exist_ok=True)
    # tensorboardX names the file by the second and the host: a second writer in the same
    # second would replace the first one's file. The nanoseconds keep both, in order.
    suffix = f".{time.time_ns():020d}"
    return SummaryWriter(logdir=str(logdir), purge_step=purge_step, filename_suffix=suffix)


def require() -> Any:
    """tensorboardX's ``SummaryWriter`` class, or a clear error naming the extra.

    Returns:
      The class.

    Raises:
      ImportError: tensorboardX is not installed (the message says how to install it).
    """
    try:
        from tensorboardX import SummaryWriter
    except ImportError:
        raise ImportError(
            f"--tensorboard needs tensorboardX, which is not installed: pip install "
            f"'learnopt[{EXTRA}]' (or pip install tensorboardX)"
        ) from None
    return SummaryWriter


class MetaTrainWriter:
    """A ``meta_train`` callback writing the metrics rows as TensorBoard scalars.

    Every numeric column of metrics.csv (``meta_loss``, ``learning_rate``, ``grad_norm``,
    ``theta/<name>``, ...) becomes the scalar ``meta_train/<column>`` at the row's meta
    step; empty cells are left out. Events are flushed after every call. In a
    multi-process run only process 0 writes. The writer is made on the first call, so
    building the callback costs nothing; a resumed run's first call purges the steps
    from its first one on (TensorBoard hides what the killed run wrote past its last
    checkpoint, as metrics.csv drops those rows).

    Args:
      logdir: the folder of the event file.

    Example::

        from learnopt import tensorboard, train

        tb = tensorboard.MetaTrainWriter("runs/x/tensorboard")
        train.meta_train(task="QuadraticTask", steps=100, callbacks=[tb])
        tb.close()
    """

    def __init__(self, logdir: str | os.PathLike):
        self.logdir = Path(logdir)
        self._writer: Any = None

    def __call__(self, info: Any) -> None:
        """Writes the rows of one metrics flush.

        Args:
          info: the :class:`~learnopt.run.results.StepInfo` of the flush.
        """
        from learnopt import distributed

        if not distributed.is_primary():
            return
        if not info.rows:
            return
        if self._writer is None:
            first = int(info.rows[0]["step"])
            self._writer = summary_writer(self.logdir, purge_step=first if first > 1 else None)
        for row in info.rows:
            step = int(row["step"])
            for name, value in row.items():
                if name == "step" or value is None or isinstance(value, str):
                    continue
                self._writer.add_scalar(f"meta_train/{name}", float(value), step)
        self._writer.flush()

    def close(self) -> None:
        """Flushes and closes the event file (nothing if none was opened)."""
        if self._writer is not None:
            self._writer.close()
            self._writer = None


def read_scalars(path: str | os.PathLike) -> dict[str, list[tuple[int, float]]]:
    """The scalars of TensorBoard event files, in the order they were written.

    Reads the TFRecord framing (length, its CRC, the ``Event`` protobuf, its CRC)
    itself and parses the events with tensorboardX's protobuf classes; CRCs are not
    checked. A session start at step ``s`` (a writer made with ``purge_step=s``) drops
    the values read so far at step ``s`` and later, as TensorBoard does.

    Args:
      path: an event file, or a folder whose ``events.out.tfevents.*`` files are read
        (not its subfolders).

    Returns:
      ``{tag: [(step, value), ...]}``.
    """
    from tensorboardX.proto import event_pb2

    path = Path(path)
    files = sorted(path.glob("events.out.tfevents.*")) if path.is_dir() else [path]
    out: dict[str, list[tuple[int, float]]] = {}
    for file in files:
        data = file.read_bytes()
        pos = 0
        while pos + 12 <= len(data):
            (length,) = struct.unpack("<Q", data[pos : pos + 8])
            record = data[pos + 12 : pos + 12 + length]
            pos += 12 + length + 4
            if len(record) < length:
                break  # a partly written last record
            event = event_pb2.Event.FromString(record)
            if event.session_log.status == event_pb2.SessionLog.START:
                for tag, values in out.items():
                    out[tag] = [(step, v) for step, v in values if step < event.step]
            for value in event.summary.value:
                if value.HasField("simple_value"):
                    out.setdefault(value.tag, []).append((event.step, value.simple_value))
    return out
