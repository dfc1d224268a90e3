"""Ctrl-C during a measured crawl: the first SIGINT closes the crawl so its report is written, the second is hard.

Without this, a SIGINT raised inside the reactor's greenlet is caught by Twisted's
Deferred machinery (it turns any BaseException into a Failure): the crawl ignores Ctrl-C.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from types import FrameType


@dataclass
class Guard:
    """Whether a SIGINT arrived while the guard was installed."""

    interrupted: bool = False


@contextlib.contextmanager
def graceful_sigint(on_first: Callable[[], None]) -> Iterator[Guard]:
    """Call ``on_first()`` on the first SIGINT; raise KeyboardInterrupt on the second (main thread only)."""
    guard = Guard()
    if threading.current_thread() is not threading.main_thread():
        yield guard
        return
    previous = signal.getsignal(signal.SIGINT)

    def handler(signum: int, frame: FrameType | None) -> None:
        if guard.interrupted:
            signal.default_int_handler(signum, frame)
        guard.interrupted = True
        on_first()

    signal.signal(signal.SIGINT, handler)
    try:
        yield guard
    finally:
        signal.signal(signal.SIGINT, previous)
