"""SIGINT/SIGTERM handlers installed for the length of a ``with`` block (main thread only).

The base of the meta-training loop's handlers (:class:`learnopt.run.health.Signals`) and
``learnopt evaluate``'s; each subclass says what a signal does in ``_handle``.
"""

from __future__ import annotations

import signal
import threading
from typing import Any

__all__ = ["SignalHandlers"]


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
