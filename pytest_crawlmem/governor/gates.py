"""The governor's gates on the downloader (crawl process, reactor thread).

- :class:`DownloadGate` holds every request at the downloader's door (``Downloader._enqueue_request``, which
  ``Downloader.fetch`` looks up on each call) while the transfers it let through reach the governor's limit. Media
  pipelines download through ``engine.download_async`` -> ``downloader.fetch``, past the scheduler and past
  ``total_concurrency`` (read only by ``needs_backout()``, before the engine pulls from the scheduler): the gate is
  the one place every download goes through. Its ``fits`` (the governor's admission by cost, ``admit``) holds
  a download back while what those under way will cost, with a parse, would pass the act share. It also makes the
  limit hold per slot: under the asyncio reactor a slot starts every queued download before any joins
  ``transferring`` (DESIGN.md), so a slot's own concurrency does not hold. Open (limit 0), it only counts.
- :class:`PullHold` stops the engine from pulling requests out of the scheduler while the items inside the item
  pipelines reach the governor's cap (``Downloader.needs_backout``, which the engine asks before each pull). Media
  downloads, which items in a FilesPipeline wait for, still go through: holding them would deadlock the pipeline.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from typing import Any

from scrapy.utils.defer import maybe_deferred_to_future
from twisted.internet.defer import Deferred


def is_spilling(scheduler: Any, spilling_cls: type) -> bool:
    """Whether ``scheduler`` is a ``spilling_cls`` by its class: Scrapy's ``BaseSchedulerMeta`` makes ``isinstance``
    true for any object with a scheduler's methods, so a plain ``Scheduler`` passes ``isinstance``."""
    return spilling_cls in type(scheduler).__mro__


class DownloadGate:
    """Lets at most ``limit`` downloads past the downloader's door at once (0: no limit), in arrival order."""

    def __init__(self, downloader: Any) -> None:
        self.downloader = downloader
        self.limit = 0
        self.paused = False  # admit nothing new (over the close share)
        self.passed = 0  # let through and not finished (in a slot's queue or transferring)
        self.waits = 0  # requests that had to wait
        self.peak_passed = 0
        self.fits: Callable[[], bool] | None = None  # one more fits by cost (asked while something downloads)
        #: thread CPU of the downloads a release started (the crawl's own work, run inside the governor's calls)
        self.released_seconds = 0.0
        self.releasing = False  # a download the gate let through is starting, inside _wake
        self._waiting: deque[Deferred[None]] = deque()
        self._original = downloader._enqueue_request
        downloader._enqueue_request = self._enqueue_request

    @property
    def waiting(self) -> int:
        """Requests held at the door (counted in ``downloader.active``, not yet downloading)."""
        return len(self._waiting)

    def set_limit(self, limit: int) -> None:
        """Set the limit (0: none) and let through what it now admits."""
        self.limit = max(0, int(limit))
        self._wake()

    def set_paused(self, paused: bool) -> None:
        """Admit no new download while paused; let through what the limit admits once not."""
        was, self.paused = self.paused, paused
        if was and not paused:
            self._wake()

    def _admits(self) -> bool:
        if self.paused or 0 < self.limit <= self.passed:
            return False
        return self.passed == 0 or self.fits is None or self.fits()  # nothing downloading: one goes, never a stall

    def wake(self) -> None:
        """Let through what now fits (a parse ended: its memory is free)."""
        if self._waiting:
            self._wake()

    async def _enqueue_request(self, request: Any) -> Any:
        if self._waiting or not self._admits():
            self.waits += 1
            waiter: Deferred[None] = Deferred()
            self._waiting.append(waiter)
            try:
                await maybe_deferred_to_future(waiter)  # counted in self.passed by _wake()
            except BaseException:
                if waiter in self._waiting:
                    self._waiting.remove(waiter)
                else:
                    self.passed -= 1
                raise
        else:
            self.passed += 1
        self.peak_passed = max(self.peak_passed, self.passed)
        try:
            return await self._original(request)
        finally:
            self.passed -= 1
            self._wake()

    def _wake(self) -> None:
        while self._waiting and self._admits():
            waiter = self._waiting.popleft()
            self.passed += 1
            if self.releasing:  # a release inside a release's download: the outer one times it
                waiter.callback(None)
                continue
            self.releasing, began = True, time.thread_time()
            try:
                waiter.callback(None)  # the download starts now, inside this call
            finally:
                self.releasing = False
                self.released_seconds += time.thread_time() - began

    def release(self) -> None:
        """Let every waiting request through (the crawl closes: nothing may stay held)."""
        self.limit = 0
        self.paused = False
        self._wake()

    def uninstall(self) -> None:
        """Put the downloader's own method back."""
        self.release()
        if self.downloader.__dict__.get("_enqueue_request") == self._enqueue_request:
            del self.downloader._enqueue_request


class PullHold:
    """Makes ``downloader.needs_backout()`` true while ``items()`` is at or over ``cap`` (0: no cap)."""

    def __init__(self, downloader: Any, engine: Any, items: Any) -> None:
        self.downloader = downloader
        self.engine = engine
        self.items = items  # () -> items inside the item pipelines
        self.cap = 0
        self.paused = False  # refuse every pull (over the close share)
        self.closing = False  # refuse every pull for good: the governor is closing the crawl and counts the queue
        self.holds = 0  # pulls refused
        self._original = downloader.needs_backout
        downloader.needs_backout = self.needs_backout

    def needs_backout(self) -> bool:
        """Scrapy's answer, or True while the items in the pipelines fill the cap."""
        if self._original():
            return True
        if self.closing or self.paused or (self.cap > 0 and self.items() >= self.cap):
            self.holds += 1
            return True
        return False

    def set_cap(self, cap: int) -> None:
        """Set the cap (0: none); when it rises, ask the engine to pull again now rather than at its next heartbeat."""
        raised = cap <= 0 < self.cap or cap > self.cap > 0
        self.cap = max(0, int(cap))
        if raised:
            self.kick()

    def hold_for_close(self) -> None:
        """Refuse every pull from now on: the close counts what the scheduler holds as not crawled, and the engine's
        own closing flag is set only once its close runs (a task of the reactor's next turn), so a pull in between
        would crawl a request the count already called queued."""
        self.closing = True

    def kick(self) -> None:
        """Ask the engine to pull from the scheduler (it would wait for its 5 s heartbeat otherwise)."""
        if self.closing:
            return
        nextcall = getattr(getattr(self.engine, "_slot", None), "nextcall", None)
        if nextcall is not None:
            nextcall.schedule()

    def uninstall(self) -> None:
        """Put the downloader's own method back."""
        self.cap = 0
        if self.downloader.__dict__.get("needs_backout") == self.needs_backout:
            del self.downloader.needs_backout
