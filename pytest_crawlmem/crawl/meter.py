"""The sampling loop and the hard ceiling shared by crawls (extension) and browser jobs (crawl or job process).

:class:`Sampler` calls a ``take`` function every interval on its own thread, records what fails instead
of stopping, and counts its own CPU time; :class:`Ceiling` fires a stop once when a sample reaches
``kill_at``. What a sample holds, and how a stop is carried out, stay with the caller.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from ..core import stops
from .recording import Recording


class Sampler:
    """Calls ``take()`` every ``interval_seconds`` on a daemon thread until :meth:`stop` (any thread)."""

    def __init__(self, take: Callable[[], object], interval_seconds: float, recording: Recording, *, name: str) -> None:
        self.take = take
        self.interval_seconds = interval_seconds
        self.recording = recording
        self.name = name
        self.cpu_seconds = 0.0  # the sampler thread's CPU time (it alone writes it)
        self._stopped = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Start the thread (once)."""
        self._thread = threading.Thread(target=self.run, name=self.name, daemon=True)
        self._thread.start()

    def run(self) -> None:
        """The loop: a failed sample is recorded as an error, and the next one is still taken."""
        while not self._stopped.wait(self.interval_seconds):
            started = time.thread_time()
            try:
                self.take()
            except Exception as exc:
                self.recording.add_error(f"sample failed: {exc!r}")
            self.cpu_seconds += time.thread_time() - started

    def stop(self, join_seconds: float = 5.0) -> None:
        """Stop the loop and wait for the thread (at most ``join_seconds``)."""
        self._stopped.set()
        if self._thread is not None:
            self._thread.join(timeout=join_seconds)


class Ceiling:
    """The hard ceiling ``kill_at``: :meth:`check` calls ``stop(reason, message)`` the first time a sample reaches it."""

    def __init__(self, kill_at_bytes: int | None, stop: Callable[[str, str], object]) -> None:
        self.kill_at_bytes = kill_at_bytes
        self._stop = stop
        self.fired = False

    def check(self, rss_bytes: int, t_seconds: float) -> bool:
        """Whether this reading reached the ceiling for the first time (and the stop was called)."""
        if self.fired or not stops.over_kill_at(rss_bytes, self.kill_at_bytes):
            return False
        self.fired = True
        self._stop(stops.KILL_AT, stops.kill_at_message(rss_bytes, t_seconds))
        return True
