"""Ctrl-C or SIGTERM during a measured crawl: the first closes the crawl so its report is written, the second is hard.

SIGTERM is what a CI job's timeout or cancel sends (``timeout`` sends it to pytest's whole process group); Scrapy's own
shutdown handlers treat it as Ctrl-C, and so does this: the first closes the crawl gracefully, the next aborts.
Without this, a SIGINT raised inside the reactor's greenlet is caught by Twisted's Deferred machinery (the crawl
ignores Ctrl-C), and a SIGTERM reaches the reactor's own handler, which stops pytest-twisted's reactor under the
running test ("illegal switch in blockon").
"""

from __future__ import annotations

import contextlib
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from types import FrameType
from typing import Any

from pytest_crawlmem.core.stops import INTERRUPTED_MESSAGE

#: The signals that close a measured crawl early: Ctrl-C, and what a CI job's timeout or cancel sends.
INTERRUPT_SIGNALS = (signal.SIGINT, signal.SIGTERM)


def interrupted_message(signum: int) -> str:
    """The sentence of a crawl closed early by the signal ``signum`` (SIGINT keeps its Ctrl-C wording)."""
    if signum == signal.SIGINT:
        return INTERRUPTED_MESSAGE
    name = signal.Signals(signum).name
    return f"interrupted by {name}: the crawl was closed early; send {name} again to abort at once"


@dataclass
class Guard:
    """Which interrupting signal arrived while the guard was installed (None: none did)."""

    signum: int | None = None

    @property
    def interrupted(self) -> bool:
        """Whether a SIGINT or SIGTERM arrived."""
        return self.signum is not None

    @property
    def message(self) -> str:
        """The sentence saying which signal closed the crawl."""
        return interrupted_message(self.signum if self.signum is not None else signal.SIGINT)


@contextlib.contextmanager
def graceful_interrupts(
    on_first: Callable[[int], None], signals: tuple[int, ...] = INTERRUPT_SIGNALS
) -> Iterator[Guard]:
    """Call ``on_first(signum)`` on the first of ``signals``; raise KeyboardInterrupt on the next (main thread only)."""
    guard = Guard()
    if threading.current_thread() is not threading.main_thread():
        yield guard
        return
    previous = {signum: signal.getsignal(signum) for signum in signals}

    def handler(signum: int, frame: FrameType | None) -> None:
        if guard.signum is not None:
            raise KeyboardInterrupt(f"{signal.Signals(signum).name} again: aborted at once")
        guard.signum = signum
        on_first(signum)

    installed = True

    def install() -> None:
        if installed:
            for signum in signals:
                signal.signal(signum, handler)

    install()
    _again_when_the_reactor_starts(install)
    try:
        yield guard
    finally:
        installed = False
        for signum, before in previous.items():
            signal.signal(signum, before if before is not None else signal.SIG_DFL)


def _again_when_the_reactor_starts(install: Callable[[], None]) -> None:
    """Call ``install`` again once Twisted's reactor runs, when it does not yet.

    pytest-twisted starts the reactor inside the first crawl, after the guard is in place, and the reactor then puts
    its own SIGTERM handler in (stop the reactor, under the running test); the guard's goes back on top of it. When the
    guard ends, the handlers from before it are back, so a SIGTERM between crawls ends pytest as it would without the
    plugin.
    """
    reactor: Any = sys.modules.get("twisted.internet.reactor")  # the installed reactor, if one is
    if reactor is not None and hasattr(reactor, "callWhenRunning") and not reactor.running:
        reactor.callWhenRunning(install)
