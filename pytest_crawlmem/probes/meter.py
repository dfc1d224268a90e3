"""The sampling loop, the hard ceiling and the drained checkpoint shared by crawls (extension) and browser jobs
(crawl or job process).

:class:`Sampler` calls a ``take`` function every interval on its own thread, records what fails instead
of stopping, and counts its own CPU time; :class:`Ceiling` fires a stop once when a sample reaches
``kill_at``; :func:`drained_checkpoint` collects garbage, trims the heap and reads the process. What a
sample holds, how a stop is carried out and how the work is drained stay with the caller.
"""

from __future__ import annotations

import gc
import sys
import threading
import time
import tracemalloc
from collections.abc import Callable, Mapping
from typing import Any

from pytest_crawlmem.core import stops
from pytest_crawlmem.core.models import Checkpoint
from pytest_crawlmem.probes import readings as probes
from pytest_crawlmem.probes.recording import Recording


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

    def check(self, rss_bytes: int, t_seconds: float, browser_pss_bytes: int = 0) -> bool:
        """Whether this reading reached the ceiling for the first time (and the stop was called).

        A browser crawl's footprint is the crawl process's RSS plus the browser tree's PSS (``browser_pss_bytes``):
        ``kill_at`` covers both, so a browser that grows without bound is stopped too.
        """
        total = rss_bytes + browser_pss_bytes
        if self.fired or not stops.over_kill_at(total, self.kill_at_bytes):
            return False
        self.fired = True
        message = stops.kill_at_message(rss_bytes, t_seconds)
        if browser_pss_bytes:
            message = (f"RSS of the crawl ({rss_bytes / 2**20:,.1f} MiB) and PSS of its browser tree"
                       f" ({browser_pss_bytes / 2**20:,.1f} MiB) reached {total / 2**20:,.1f} MiB at {t_seconds:.1f} s,"
                       " the hard ceiling kill_at")
        self._stop(stops.KILL_AT, message)
        return True


def settle() -> None:
    """Collect garbage and give freed heap memory back to the kernel, so what is read next is what is in use."""
    gc.collect()
    probes.malloc_trim()


def drained_checkpoint(
    responses: int,
    *,
    started_at: float,
    cost_started: float,
    traced: bool = True,
    read: Callable[[], Mapping[str, Any]] | None = None,
    **fields: Any,
) -> Checkpoint:
    """Settle the process, then read it into a :class:`Checkpoint` (the caller has drained its work first).

    Read here: RSS, glibc's heap in use, allocated blocks and, when ``traced`` and tracemalloc runs, the traced
    memory and the tracer's own; then ``read()``'s fields (read after those, inside the cost); ``fields`` are
    given values. ``t_seconds`` counts from ``started_at``, ``cost_seconds`` from ``cost_started`` (both
    ``time.monotonic()``), so a caller's drain wait counts in the checkpoint's cost.
    """
    settle()
    tracing = traced and tracemalloc.is_tracing()
    traced_bytes = tracemalloc.get_traced_memory()[0] if tracing else None
    t_seconds = round(time.monotonic() - started_at, 4)
    rss_bytes = probes.read_rss_bytes()
    heap_bytes = probes.read_malloc_in_use_bytes()
    allocated_blocks = sys.getallocatedblocks()
    tracer_bytes = tracemalloc.get_tracemalloc_memory() if tracing else 0
    values = {**fields, **(read() if read is not None else {})}
    return Checkpoint(
        responses=responses,
        t_seconds=t_seconds,
        rss_bytes=rss_bytes,
        heap_bytes=heap_bytes,
        traced_bytes=traced_bytes,
        allocated_blocks=allocated_blocks,
        tracer_bytes=tracer_bytes,
        cost_seconds=round(time.monotonic() - cost_started, 4),
        **values,
    )
