"""What a run reports: :class:`StepInfo` to callbacks as it goes, :class:`MetaTrainResult`
at the end, and the warnings and errors it raises."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

__all__ = ["StepInfo", "MetaTrainResult", "MetaTrainWarning", "DataUnavailableError"]


class MetaTrainWarning(UserWarning):
    """A meta-training run that is going wrong (most steps skipped, theta not moving)."""


class DataUnavailableError(RuntimeError):
    """The task's data cannot be had (not prepared, corrupted, unreadable)."""


@dataclasses.dataclass
class StepInfo:
    """What callbacks receive after each metrics flush (every ``log_every`` steps).

    A callback with a true ``at_start`` attribute is also called once before the first
    meta-step of a new run, with ``step = 0`` and no ``rows``. A callback with a
    ``due(step) -> bool`` method gets a flush (and so a call) after every meta-step for
    which it returns true, whatever ``log_every`` is (``PeriodicEval`` asks for every
    multiple of its ``every``). A callback's ``OSError`` stops the run as a failed write
    naming the callback.

    Attributes:
      step: the number of meta-steps done so far.
      num_steps: the number of meta-steps the run is to do.
      state: the learner's state after ``step`` meta-steps (``.theta`` reads theta).
      learner: the gradient learner.
      rows: the metrics rows written by this flush, one dict per meta-step, with
        ``"step"`` and the metrics.csv columns.
      out_dir: the run folder, or None when the run writes none.
    """

    step: int
    num_steps: int
    state: Any
    learner: Any
    rows: list[dict[str, Any]]
    out_dir: Path | None

    @property
    def theta(self) -> Any:
        """The current theta: ``learner.get_theta(state)``."""
        return self.learner.get_theta(self.state)


@dataclasses.dataclass
class MetaTrainResult:
    """What :func:`meta_train` returns.

    Attributes:
      status: ``"completed"``, ``"interrupted"`` (SIGINT/SIGTERM), ``"diverged"`` (most
        steps skipped), ``"stalled"`` (theta stopped changing) or ``"failed"`` (a write
        failed); ``message`` says why for all but ``"completed"``.
      step: meta-steps done (including those before a resume); ``num_steps`` asked.
      theta, state, learner: the final theta (last finite one), the whole state.
      columns: metrics.csv as numpy arrays (``NaN`` where a cell is empty).
      checkpoint: the folder of the last checkpoint written, if any.
      out_dir: the run's output folder (None: the run wrote no files).
      message: why the run ended, empty for ``"completed"``.
      num_steps: the meta-steps asked for (the total, with a resumed run's).
      summary: the one-line summary printed at the end (steps, meta-loss, time).
      signal: the signal that interrupted the run (``"SIGINT"``, ``"SIGTERM"``), or None.
    """

    out_dir: Path | None
    status: str
    message: str
    step: int
    num_steps: int
    theta: Any
    state: Any
    learner: Any
    columns: dict[str, Any]
    summary: str
    checkpoint: Path | None = None
    signal: str | None = None

    @property
    def ok(self) -> bool:
        """Whether the run completed (``status == "completed"``)."""
        return self.status == "completed"

    @property
    def interrupted(self) -> bool:
        """Whether a signal (SIGINT/SIGTERM) stopped the run."""
        return self.status == "interrupted"

    @property
    def exit_code(self) -> int:
        """The command line's exit status: 0, 130 (SIGINT), 143 (SIGTERM), else 1."""
        if self.status == "completed":
            return 0
        if self.status == "interrupted":
            return 143 if self.signal == "SIGTERM" else 130
        return 1

    def __repr__(self) -> str:
        return (
            f"MetaTrainResult(status={self.status!r}, step={self.step}/{self.num_steps}, "
            f"out_dir={str(self.out_dir) if self.out_dir else None!r})"
        )
