"""The governor's backlog levers: a Scheduler that spills to Scrapy's disk queues, and a gate on start requests.

Both do nothing until :class:`pytest_crawlmem.governor.extension.MemoryGovernor` asks (crawl process, reactor thread):
without JOBDIR the scheduler keeps every request in memory, as Scrapy's does, and builds its disk queues in a
temporary folder that it fills only while spilling; with JOBDIR it is Scrapy's scheduler (every request on disk).
"""

from __future__ import annotations

import asyncio
import logging
import shutil
import tempfile
import time
from collections.abc import AsyncIterator, Callable, Iterable, Iterator
from typing import Any

from scrapy import Request
from scrapy.core.scheduler import Scheduler
from scrapy.utils.misc import build_from_crawler

from pytest_crawlmem.governor.pacing import OUTPUT_EVERY

logger = logging.getLogger("pytest_crawlmem.governor")

SCHEDULER_PATH = "pytest_crawlmem.governor.SpillingScheduler"
START_GATE_PATH = "pytest_crawlmem.governor.StartGate"
#: Outermost of the spider middlewares: it holds back what start() yields before any other middleware sees it.
START_GATE_ORDER = 1


class SpillingScheduler(Scheduler):
    """Scrapy's scheduler whose memory queue can be spilled to disk queues (``scrapy.squeues``) and read back."""

    spilling: bool = False
    spilled: int = 0
    _spill_dir: str | None = None

    def open(self, spider: Any) -> Any:
        """Open as Scrapy's does; without JOBDIR, build the disk queues in a temporary folder, idle until spilling."""
        result = super().open(spider)
        if self.dqs is None:
            self._spill_dir = tempfile.mkdtemp(prefix="crawlmem-spill-")
            pqclass: Any = self.pqclass
            crawler: Any = self.crawler
            self.dqs = build_from_crawler(
                pqclass, crawler, downstream_queue_cls=self.dqclass, key=self._spill_dir,
                startprios=(), start_queue_cls=self._sdqclass,
            )
        return result

    @property
    def in_memory(self) -> int:
        """Requests held in memory (what spilling frees)."""
        return len(self.mqs)

    @property
    def on_disk(self) -> int:
        """Requests in the disk queues."""
        return len(self.dqs) if self.dqs is not None else 0

    def _dqpush(self, request: Any) -> bool:
        if self._spill_dir is not None and not self.spilling:
            return False  # memory, as Scrapy's scheduler without JOBDIR
        return bool(super()._dqpush(request))

    def spill(self, limit: int) -> int:
        """Move up to ``limit`` requests from memory to disk; return how many moved (unserializable ones stay)."""
        if self.dqs is None:
            return 0
        kept: list[Any] = []
        moved = 0
        while moved + len(kept) < limit:
            request = self.mqs.pop()
            if request is None:
                break
            if super()._dqpush(request):
                moved += 1
            else:
                kept.append(request)
        for request in kept:
            self.mqs.push(request)
        self.spilled += moved
        if self.stats is not None and moved:
            self.stats.inc_value("crawlmem/governor/spilled", moved)
        return moved

    def close(self, reason: str) -> Any:
        """Close; a temporary spill folder is removed (JOBDIR's queue is written as Scrapy writes it)."""
        if self._spill_dir is not None:
            left = self.on_disk
            if left and reason == "finished":  # pragma: no cover - a finished crawl has an empty queue
                logger.warning("crawlmem governor: %d spilled requests left on disk at the close", left)
            if self.dqs is not None:
                self.dqs.close()
            self.dqs = None
            shutil.rmtree(self._spill_dir, ignore_errors=True)
            self._spill_dir = None
        return super().close(reason)


class StartGate:
    """A spider middleware that stops reading ``start()`` while the governor holds it closed (downloads go on).

    It also frees each response's parse tree once the callback is done with it (:func:`release_parse_tree`).
    """

    def __init__(self) -> None:
        self._open = asyncio.Event()
        self._open.set()
        self.waits = 0
        #: Called before each start item (the governor's out-of-turn tick: late, or RSS past the act share, read at
        #: most every 20 ms): Scrapy reads start() without yielding to the reactor while the downloader is full, so
        #: the governor's LoopingCall would not run until it ends.
        self.on_item: Callable[[], None] | None = None
        #: Called with one item in ``output_every`` that a callback yields (the first of each): the governor learns
        #: what an item carries, and from ``items_out`` and ``responses_out`` how many a response yields.
        self.on_output: Callable[[Any], None] | None = None
        self.output_every = OUTPUT_EVERY  # the governor sets it from what an item carries (pacing.output_every)
        self._to_output = 1  # items until the next call of on_output
        self.items_out = 0  # items (not requests) the callbacks yielded
        self.responses_out = 0  # callbacks whose output ended
        #: Called with a response as its callback begins (0), gives an output (1) and ends (2): the governor measures
        #: what a parse costs (admit.py).
        self.on_parse: Callable[[Any, int], None] | None = None
        self.exhausted = False  # start() came to its end
        self._start: AsyncIterator[Any] | None = None
        self._reading = False  # the engine is inside start()'s __anext__ (nobody else may read it then)
        self._counting = False
        self._counted = asyncio.Event()  # set once count_unread() is done with start()
        self._held = False

    @property
    def is_open(self) -> bool:
        """Whether start requests are read."""
        return self._open.is_set()

    def close_gate(self) -> None:
        """Stop reading start requests (after the one being read)."""
        self._open.clear()

    def open_gate(self) -> None:
        """Read start requests again (not once the unread ones are being counted: the crawl is closing)."""
        if not self._counting:
            self._open.set()

    async def process_start(self, start: AsyncIterator[Any]) -> AsyncIterator[Any]:
        """Yield what ``start`` yields, waiting while the gate is closed."""
        self._start = start
        while True:
            if self._counting:  # the crawl is closing: count_unread() reads what start() has left, not the engine
                await self._counted.wait()
                return
            self._reading = True
            try:
                item_or_request = await start.__anext__()
            except StopAsyncIteration:
                self.exhausted = True
                return
            finally:
                self._reading = False
            if self.on_item is not None:
                self.on_item()
            if not self._open.is_set():
                self.waits += 1
                self._held = True  # read from start(), not yet yielded
                await self._open.wait()
                self._held = False
            if self._counting:  # the one held here was counted with the rest
                await self._counted.wait()
                return
            yield item_or_request

    async def count_unread(self, max_seconds: float = 2.0) -> tuple[int, bool]:
        """Close the gate for good and read what ``start()`` has left, counting it: (count, whether it is all).

        The governor calls this as it closes a crawl, so that the requests it will never crawl are counted, not just
        those in the scheduler. Not all when the engine is inside start() now, or when reading it takes longer than
        ``max_seconds``.
        """
        self._counting = True
        self._open.clear()
        try:
            return await self._count_unread(max_seconds)
        finally:
            self._counted.set()
            self._open.set()  # the engine's reading of start() ends (without reading it)

    async def _count_unread(self, max_seconds: float) -> tuple[int, bool]:
        held = int(self._held)  # the one read and held at the gate is not crawled either
        if self.exhausted:
            return held, True
        if self._start is None or self._reading:
            return held, False
        count, deadline = held, time.monotonic() + max_seconds
        try:
            while True:
                try:
                    await self._start.__anext__()
                except StopAsyncIteration:
                    self.exhausted = True
                    return count, True
                count += 1
                if time.monotonic() > deadline:
                    return count, False
        except RuntimeError:  # the engine reads it after all ("already running")
            return count, False

    def _count_output(self, item: Any) -> None:
        """Count an item a callback yielded (requests are not items); tell the governor of one in ``output_every``."""
        if not isinstance(item, Request) and self.on_output is not None:
            self.items_out += 1
            self._to_output -= 1
            if self._to_output <= 0:
                self._to_output = self.output_every
                self.on_output(item)

    def process_spider_output(self, response: Any, result: Iterable[Any]) -> Iterator[Any]:
        """Pass a callback's output through; when it is done, release the response's parse tree."""
        try:
            if self.on_parse is not None:
                self.on_parse(response, 0)
            if self.on_output is None:
                yield from result
            else:
                first = self.on_parse is not None
                for item in result:
                    if first and self.on_parse is not None:
                        self.on_parse(response, 1)  # the callback ran up to its first output: what it parsed is alive
                        first = False
                    self._count_output(item)
                    yield item
        finally:
            self.responses_out += 1
            if self.on_parse is not None:
                self.on_parse(response, 2)
            release_parse_tree(response)

    async def process_spider_output_async(self, response: Any, result: AsyncIterator[Any]) -> AsyncIterator[Any]:
        """Pass a callback's output through (async); when it is done, release the response's parse tree."""
        try:
            if self.on_parse is not None:
                self.on_parse(response, 0)
            first = self.on_parse is not None
            async for item in result:
                if first and self.on_parse is not None:
                    self.on_parse(response, 1)
                    first = False
                self._count_output(item)
                yield item
        finally:
            self.responses_out += 1
            if self.on_parse is not None:
                self.on_parse(response, 2)
            release_parse_tree(response)


def release_parse_tree(response: Any) -> None:
    """Drop the selector a ``TextResponse`` caches, so its tree is freed with the response, not at a full collection.

    ``response.selector`` keeps a ``Selector`` that points back at the response: a reference cycle that holds the
    parsed tree (~6x the body: 12 MiB for a 2 MiB page) until the collector's oldest generation runs, which a big
    heap rarely gets. Once the callback's output is consumed nothing reads it; a later ``response.css`` parses again.
    """
    if getattr(response, "_cached_selector", None) is not None:
        response._cached_selector = None
