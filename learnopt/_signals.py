"""SIGINT/SIGTERM handlers installed for the length of a ``with`` block (main thread only).

The base of the meta-training loop's handlers (:class:`learnopt.run.health.Signals`) and
``learnopt evaluate``'s; each subclass says what a signal does in ``_handle``.
"""

from __future__ import annotations

import signal
import threading
from typing import Any

__all__ = ["SignalHandlers", "RaiseOnSignal", "Interrupted"]


class SignalHandlers:
    """Installs ``self._handle`` for SIGINT and SIGTERM on entry, restores them on exit.

    Args:
      enabled: whether to install the handlers (only done in the main thread).
    """

    def __init__(self, enabled: bool):
        self.enabled = enabled and threading.current_thread() is threading.main_thread()
        self.received: str | None = None
        self._old: dict[int, Any] = {}

    def _handle(self, signum: int, frame: Any) -> None:
        raise NotImplementedError

    def __enter__(self) -> SignalHandlers:
        if self.enabled:
            for sig in (signal.SIGINT, signal.SIGTERM):
                self._old[sig] = signal.getsignal(sig)
                signal.signal(sig, self._handle)
        return self

    def __exit__(self, *exc: Any) -> None:
        for sig, old in self._old.items():
            signal.signal(sig, old if old is not None else signal.SIG_DFL)
        self._old.clear()


class Interrupted(KeyboardInterrupt):
    """SIGINT or SIGTERM received where there is nothing to finish (a run's set-up).

    A ``KeyboardInterrupt`` (code that handles Ctrl-C handles it), with the signal's name
    in :attr:`signal` (``"SIGINT"`` or ``"SIGTERM"``) and :attr:`exit_code` (130 or 143).
    """

    def __init__(self, signal_name: str):
        super().__init__(signal_name)
        self.signal = signal_name
        self.exit_code = 128 + int(signal.Signals[signal_name])


class RaiseOnSignal(SignalHandlers):
    """SIGINT and SIGTERM raise :class:`Interrupted` inside the ``with`` block.

    For the stretches where stopping at once loses nothing (building a run, loading data,
    evaluating the initial theta): SIGTERM then ends the program the way Ctrl-C does, with
    ``finally`` blocks run, instead of killing it without a word.
    """

    def _handle(self, signum: int, frame: Any) -> None:
        self.received = signal.Signals(signum).name
        raise Interrupted(self.received)
