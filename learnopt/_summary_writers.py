"""The summary writers of :mod:`learnopt.summary` (the notes' library's interface).

``SummaryWriterBase`` is what a writer offers (``scalar``, ``histogram``, ``text``,
``flush``, ``close``); ``InMemorySummaryWriter`` keeps the values, ``PrintWriter``
prints them, ``MultiWriter`` fans out to several and ``TensorboardWriter`` writes
TensorBoard event files through tensorboardX (no TensorFlow). ``learnopt.summary``
re-exports them, the library's path.
"""

from __future__ import annotations

import collections
import os
from collections.abc import Callable
from typing import Any

import numpy as np


class SummaryWriterBase:
    """What a summary writer offers (the library's interface)."""

    def scalar(self, name: str, value: Any, step: int) -> None:
        """Writes a scalar.

        Args:
          name: the summary's name.
          value: a number or a one-element array.
          step: the step it belongs to.
        """
        raise NotImplementedError

    def histogram(self, name: str, value: Any, step: int) -> None:
        """Writes the values of an array as a histogram.

        Args:
          name: the summary's name.
          value: an array.
          step: the step it belongs to.
        """
        raise NotImplementedError

    def tensor(self, name: str, value: Any, step: int) -> None:
        """Writes an array.

        Args:
          name: the summary's name.
          value: an array.
          step: the step it belongs to.
        """
        raise NotImplementedError

    def flush(self) -> None:
        """Makes what was written durable."""
        raise NotImplementedError


class InMemorySummaryWriter(SummaryWriterBase):
    """Keeps ``data[name] = (steps, values)`` in memory."""

    def __init__(self) -> None:
        self.data: dict[str, tuple[list[Any], list[Any]]] = collections.defaultdict(
            lambda: ([], [])
        )

    def scalar(self, name: str, value: Any, step: int) -> None:
        self.data[name][0].append(np.asarray(step))
        self.data[name][1].append(np.asarray(value))

    histogram = scalar
    tensor = scalar

    def flush(self) -> None:
        pass


class PrintWriter(SummaryWriterBase):
    """Prints ``step] name=value`` for the names ``filter_fn`` accepts.

    Args:
      filter_fn: ``name -> bool``: print this summary (default: all).
    """

    def __init__(self, filter_fn: Callable[[str], bool] = lambda tag: True) -> None:
        self.filter_fn = filter_fn

    def scalar(self, name: str, value: Any, step: int) -> None:
        if self.filter_fn(name):
            print(f"{step}] {name}={value}")

    histogram = scalar

    def tensor(self, name: str, value: Any, step: int) -> None:
        if self.filter_fn(name):
            print(f"{step}] {name}=Tensor: {np.shape(value)}")

    def flush(self) -> None:
        pass


class MultiWriter(SummaryWriterBase):
    """Writes to each of ``writers``."""

    def __init__(self, *writers: SummaryWriterBase) -> None:
        self.writers = writers

    def scalar(self, name: str, value: Any, step: int) -> None:
        for w in self.writers:
            w.scalar(name, value, step)

    def histogram(self, name: str, value: Any, step: int) -> None:
        for w in self.writers:
            w.histogram(name, value, step)

    def tensor(self, name: str, value: Any, step: int) -> None:
        for w in self.writers:
            w.tensor(name, value, step)

    def flush(self) -> None:
        for w in self.writers:
            w.flush()


class TensorboardWriter(SummaryWriterBase):
    """TensorBoard event files in ``log_dir`` through tensorboardX (no TensorFlow).

    Args:
      log_dir: the folder (created if needed).

    Raises:
      ImportError: tensorboardX is not installed (the message names the extra).
    """

    def __init__(self, log_dir: str | os.PathLike) -> None:
        from learnopt import tensorboard

        self._writer = tensorboard.summary_writer(log_dir)
        self._closed = False

    def scalar(self, name: str, value: Any, step: int) -> None:
        self._writer.add_scalar(name, float(np.asarray(value)), step)

    def histogram(self, name: str, value: Any, step: int, bins: Any = None) -> None:
        """Writes the values of an array as a histogram.

        Args:
          name: the summary's name.
          value: an array (raveled).
          step: the step it belongs to.
          bins: tensorboardX's ``bins`` (default: TensorFlow's bucketing).
        """
        self._writer.add_histogram(
            name, np.ravel(np.asarray(value)), step, bins=bins or "tensorflow"
        )

    def text(self, name: str, textdata: str | bytes, step: int) -> None:
        """Writes a (markdown) text summary.

        Args:
          name: the summary's name.
          textdata: the text.
          step: the step it belongs to.

        Raises:
          ValueError: ``textdata`` is not text.
        """
        if not isinstance(textdata, (str, bytes)):
            raise ValueError("text: textdata must be str or bytes")
        if isinstance(textdata, bytes):
            textdata = textdata.decode()
        self._writer.add_text(name, textdata, step)

    def tensor(self, name: str, value: Any, step: int) -> None:
        self.histogram(name, value, step)

    def flush(self) -> None:
        self._writer.flush()

    def close(self) -> None:
        """Closes the event file (final)."""
        if not self._closed:
            self._writer.close()
            self._closed = True


#: The library's other name for :class:`TensorboardWriter`.
JaxboardWriter = TensorboardWriter
