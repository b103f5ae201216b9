"""Signals and health of a run: stop cleanly on SIGINT/SIGTERM, notice divergence and stalls.

:class:`Signals` turns the first SIGINT/SIGTERM into "finish this meta-step, checkpoint,
stop" (a second one acts at once). :class:`Health` watches the ``skipped`` and
``update_norm`` columns: it warns when more than half of the last ``window`` steps were
skipped as non-finite, and stops the run (``"diverged"`` or ``"stalled"``) when theta has
not changed for ``window`` steps.
"""

from __future__ import annotations

import collections
import math
import signal
import sys
from typing import Any

from learnopt._signals import SignalHandlers

__all__ = ["Signals", "Health"]


class Signals(SignalHandlers):
    """SIGINT/SIGTERM: the first asks the loop to stop after its step; a second acts at once.

    A context manager: the handlers are installed on entry and restored on exit.

    Args:
      enabled: whether to install the handlers (only done in the main thread).
    """

    def _handle(self, signum: int, frame: Any) -> None:
        self.received = signal.Signals(signum).name
        for sig, old in self._old.items():  # a second signal gets the usual behaviour
            signal.signal(sig, old)
        print(
            f"\nlearnopt: {self.received} received: finishing this meta-step and writing a "
            "checkpoint (send it again to stop at once)",
            file=sys.stderr,
            flush=True,
        )


# ------------------------------------------------------------------------------ health


class Health:
    """Tracks skipped steps, steps where theta did not change, and a never-finite meta-loss.

    Args:
      window: the health window (0: no divergence or stall checks).
      never_finite_after: stop when the meta-loss has not been finite once in this many
        steps from the start of the run (a task or learned optimizer that gives NaN at
        the initial theta: no outer learning rate causes or cures that); 0: off.
    """

    #: Steps after which a meta-loss that was never finite stops the run.
    NEVER_FINITE_STEPS = 10

    def __init__(self, window: int, never_finite_after: int = NEVER_FINITE_STEPS):
        self.window = window
        self.never_finite_after = never_finite_after
        self.first_finite: int | None = None  # the first step with a finite meta-loss
        self.recent: collections.deque = collections.deque(maxlen=max(1, window))
        self.skipped_total = 0
        self.steps = 0
        self.still = 0  # consecutive steps where theta did not change
        self.last_moved = 0  # the last step that changed theta
        self._warned = False

    def add(self, step: int, skipped: bool, update_norm: float, meta_loss: float = 0.0) -> None:
        """Records meta-step ``step``.

        Args:
          step: the step (1-based, as in metrics.csv).
          skipped: whether its update was skipped as non-finite.
          update_norm: the norm of its change to theta.
          meta_loss: its meta-loss (a non-finite value counts toward the never-finite check).
        """
        self.steps = step
        if self.first_finite is None and math.isfinite(meta_loss):
            self.first_finite = step
        self.recent.append(bool(skipped))
        self.skipped_total += bool(skipped)
        moved = (not skipped) and update_norm != 0.0
        if moved:
            self.still, self.last_moved = 0, step
        else:
            self.still += 1

    def warning(self) -> str | None:
        """A warning the first time most recent steps were skipped (again after recovery).

        Returns:
          The warning's text, or None.
        """
        if not self.window or len(self.recent) < min(self.window, 20):
            return None
        frac = sum(self.recent) / len(self.recent)
        if frac > 0.5 and not self._warned:
            self._warned = True
            return (
                f"{sum(self.recent)} of the last {len(self.recent)} meta-steps were skipped "
                f"(non-finite meta-gradient, theta or outer state; step {self.steps}); theta "
                "stays at its last finite value. Try a smaller outer learning rate or "
                "max_grad_norm."
            )
        if frac <= 0.25:
            self._warned = False
        return None

    def stop_reason(self) -> tuple[str, str] | None:
        """``(status, message)`` when the run should stop now, else None.

        Returns:
          ``("diverged", ...)`` when the meta-loss was never finite in the first
          ``never_finite_after`` steps, or when every step of the last ``window`` was
          skipped; ``("stalled", ...)`` when theta has not changed for ``window`` steps.
        """
        reason = None
        if self.never_finite_after and self.steps >= self.never_finite_after:
            reason = self._never_finite()
        return reason or self._window_reason()

    def _never_finite(self) -> tuple[str, str] | None:
        # Never a finite meta-loss, and theta never moved (every step skipped).
        if self.first_finite is not None or not self.steps or self.still < self.steps:
            return None
        return "diverged", (
            f"the meta-loss is not finite at any of the first {self.steps} meta-steps "
            "(NaN or Inf from the start, before theta ever changed): the task's loss or "
            "the learned optimizer at its initial theta gives non-finite values; check "
            "task.loss on a batch at the initial params (an outer learning rate neither "
            "causes nor cures this)"
        )

    def _window_reason(self) -> tuple[str, str] | None:
        if not self.window or self.still < self.window:
            return None
        all_skipped = len(self.recent) == self.recent.maxlen and all(self.recent)
        if all_skipped:
            return "diverged", (
                f"meta-training diverged: every meta-step since step {self.last_moved} was "
                f"skipped as non-finite ({self.still} steps); theta is the last finite one "
                f"(step {self.last_moved}). Try a smaller outer learning rate or max_grad_norm."
            )
        return "stalled", (
            f"meta-training stalled: theta has not changed for {self.still} meta-steps "
            f"(since step {self.last_moved})"
        )

    def final(self) -> tuple[str, str] | None:
        """The verdict on a run that did all its steps.

        Returns:
          ``(status, message)``: ``"diverged"`` when the meta-loss was never finite or most
          steps were skipped, else what :meth:`stop_reason` says; None if the run is fine.
        """
        never = self._never_finite() if self.never_finite_after else None
        if never:
            return never
        if self.steps and self.skipped_total * 2 > self.steps:
            return "diverged", (
                f"meta-training diverged: {self.skipped_total} of {self.steps} meta-steps were "
                "skipped as non-finite; theta is the last finite one. Try a smaller outer "
                "learning rate or max_grad_norm."
            )
        return self.stop_reason()
