"""Parse amplification: how much memory a callback holds while it parses, against the response body (crawl process).

A spider middleware placed next to the spider wraps each callback's output and reads glibc's
malloc in-use bytes (``mallinfo2``, a few microseconds) just before and after every step of
it. Summing the steps' deltas gives what the callback's own code allocated and kept; its
maximum over the steps is the memory the callback held at most: the lxml tree, the decoded
text, the items and requests it built. Only the callback's own steps are counted, so other
responses processed in between are not; memory the cyclic GC frees during a step (other
objects' garbage) is taken out with a ``gc.callbacks`` hook. Not measured: async callbacks
(their steps await, so other work runs inside them), small Python objects in pymalloc arenas
(not malloc-backed), text decoded before the callback (MetaRefreshMiddleware decodes HTML).

A ``mallinfo2`` read walks glibc's free lists, so it costs more as the heap fragments (3 us in a fresh process, 150-400
us after several long crawls in one): the step clock times its own reads and, once they pass
``CRAWLMEM_AMPLIFICATION_SHARE`` of the crawl's time (counted from BURST_SECONDS before it started: a head start),
leaves callbacks unmeasured (``skipped``) until the share is met again, so the measured ones spread over the crawl.
A ``max_amplification`` budget measures them all.

:class:`AmplificationMeter` is the pure part (histograms and the worst pages); the middleware
reads no Scrapy internals and imports no Scrapy module.
"""

from __future__ import annotations

import gc
import heapq
import inspect
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

from pytest_crawlmem.core.defaults import name_of
from pytest_crawlmem.core.distribution import Histogram
from pytest_crawlmem.core.models import AmplificationSummary, AmplifiedPage

SPIDER_MIDDLEWARE_PATH = "pytest_crawlmem.probes.amplification.ParseAmplificationMiddleware"
#: Past every spider middleware Scrapy ships (they sit at 0-1000): the closest to the callback.
SPIDER_MIDDLEWARE_ORDER = 10_000
#: Bodies are counted as at least this much, as Scrapy's scraper counts active_size: a 200-byte page is not 50x.
MIN_BODY_BYTES = 1024
WORST_KEPT = 5
_RATIO_SCALE = 100  # ratios are kept in hundredths in the histogram
#: The reads' share is counted as if the crawl had started this much earlier: their first share*2 s are free.
BURST_SECONDS = 2.0


def amplification_ratio(held_bytes: int, body_bytes: int) -> float:
    """Memory held over the body size (floored at 1 KiB)."""
    return max(held_bytes, 0) / max(body_bytes, MIN_BODY_BYTES)


class AmplificationMeter:
    """The distribution of held bytes and ratios over a crawl's callbacks, and the worst pages (pure)."""

    def __init__(self, worst_kept: int = WORST_KEPT) -> None:
        self.ratios = Histogram()  # in hundredths
        self.held = Histogram()
        self.unmeasured = 0  # async callbacks
        self.skipped = 0  # callbacks left unmeasured to keep the reads within their share of the crawl's time
        self._worst: list[tuple[float, int, AmplifiedPage]] = []  # a min-heap of the worst ratios
        self._worst_kept = worst_kept
        self._added = 0

    @property
    def measured(self) -> int:
        """Callbacks measured so far."""
        return self.ratios.count

    def add(self, url: str, body_bytes: int, held_bytes: int) -> None:
        """Count one callback that held ``held_bytes`` at most while parsing a ``body_bytes`` response."""
        held_bytes = max(held_bytes, 0)
        ratio = amplification_ratio(held_bytes, body_bytes)
        self.ratios.add(round(ratio * _RATIO_SCALE))
        self.held.add(held_bytes)
        self._added += 1
        entry = (ratio, self._added, AmplifiedPage(url, body_bytes, held_bytes, round(ratio, 2)))
        if len(self._worst) < self._worst_kept:
            heapq.heappush(self._worst, entry)
        elif ratio > self._worst[0][0]:
            heapq.heapreplace(self._worst, entry)

    def summary(self) -> AmplificationSummary | None:
        """The distribution; ``None`` when no callback ran (only async ones: count 0 and ``unmeasured``)."""
        if not self.ratios.count:
            if not (self.unmeasured or self.skipped):
                return None
            return AmplificationSummary(unmeasured=self.unmeasured, skipped=self.skipped)

        def ratio(q: float) -> float | None:
            value = self.ratios.percentile(q)
            return None if value is None else value / _RATIO_SCALE

        worst = tuple(page for _, _, page in sorted(self._worst, key=lambda e: (-e[0], e[1])))
        return AmplificationSummary(
            count=self.ratios.count,
            p50_ratio=ratio(50),
            p95_ratio=ratio(95),
            max_ratio=worst[0].ratio if worst else self.ratios.max_value / _RATIO_SCALE,
            p50_held_bytes=self.held.percentile(50),
            p95_held_bytes=self.held.percentile(95),
            max_held_bytes=self.held.max_value,
            worst=worst,
            unmeasured=self.unmeasured,
            skipped=self.skipped,
        )


class StepClock:
    """Malloc in-use bytes around the steps of callbacks, net of what the cyclic GC freed inside a step (reactor thread)."""

    def __init__(self, read_bytes: Callable[[], int | None], share: float = 0.0,
                 clock: Callable[[], float] = time.perf_counter) -> None:
        self._read_bytes = read_bytes
        self.share = share  # the most of the time since start() the reads may take (0: no bound)
        self._clock = clock
        self._in_step = False
        self._gc_started = 0
        self._gc_delta = 0
        self.read_seconds = 0.0
        self.reads = 0
        self._started = clock()

    def _read(self) -> int | None:
        started = self._clock()
        value = self._read_bytes()
        self.read_seconds += self._clock() - started
        self.reads += 1
        return value

    def within_share(self) -> bool:
        """Whether the reads so far took at most ``share`` of the time since :meth:`start` and BURST_SECONDS (always,
        with no bound)."""
        return not self.share or self.read_seconds <= self.share * (BURST_SECONDS + self._clock() - self._started)

    def gc_callback(self, phase: str, info: dict[str, Any]) -> None:
        """``gc.callbacks`` hook: measure what a collection that runs inside a step freed."""
        if not self._in_step:
            return
        if phase == "start":
            self._gc_started = self._read() or 0
        else:
            self._gc_delta += (self._read() or 0) - self._gc_started

    def start(self) -> None:
        """Install the GC hook (once per crawl)."""
        self._started = self._clock()
        if self.gc_callback not in gc.callbacks:
            gc.callbacks.append(self.gc_callback)

    def stop(self) -> None:
        """Remove the GC hook."""
        if self.gc_callback in gc.callbacks:
            gc.callbacks.remove(self.gc_callback)

    async def measure(self, steps: AsyncIterator[Any], held: list[int]) -> AsyncIterator[Any]:
        """Yield what ``steps`` yields; keep ``[running, peak]`` bytes held by its steps in ``held``."""
        iterator = steps.__aiter__()
        while True:
            self._gc_delta = 0
            self._in_step = True
            before = self._read() or 0
            try:
                item = await iterator.__anext__()
            except StopAsyncIteration:
                self._add(held, before)
                return
            except BaseException:
                self._add(held, before)
                raise
            self._add(held, before)
            yield item

    def _add(self, held: list[int], before: int) -> None:
        self._in_step = False
        held[0] += (self._read() or 0) - before - self._gc_delta
        held[1] = max(held[1], held[0])


def _is_async_callback(response: Any, spider: Any) -> bool:
    """Whether the response's callback is ``async def`` (its steps await: other work runs inside them)."""
    request = getattr(response, "request", None)
    callback = getattr(request, "callback", None) or getattr(spider, "parse", None)
    return inspect.iscoroutinefunction(callback) or inspect.isasyncgenfunction(callback)


class ParseAmplificationMiddleware:
    """Spider middleware measuring the memory each callback holds while parsing (crawl process)."""

    def __init__(self, meter: AmplificationMeter, clock: StepClock, spider: Any = None) -> None:
        self.meter = meter
        self.clock = clock
        self.spider = spider

    @classmethod
    def from_crawler(cls, crawler: Any) -> ParseAmplificationMiddleware:
        """Attach to the measuring extension's meter; NotConfigured without it or with CRAWLMEM_AMPLIFICATION off."""
        from scrapy import signals
        from scrapy.exceptions import NotConfigured

        from pytest_crawlmem.probes.readings import read_malloc_in_use_bytes

        extension = next((e for e in getattr(crawler.extensions, "middlewares", ())
                          if isinstance(getattr(e, "amplification", None), AmplificationMeter)), None)
        if extension is None or not extension.config.amplification:
            raise NotConfigured(f"the crawlmem extension is not enabled, or {name_of('amplification')} is off")
        if read_malloc_in_use_bytes() is None:
            raise NotConfigured("parse amplification reads glibc's mallinfo2, which this system lacks")
        clock = StepClock(read_malloc_in_use_bytes, share=extension.config.amplification_share)
        middleware = cls(extension.amplification, clock)
        crawler.signals.connect(middleware.spider_opened, signal=signals.spider_opened)
        crawler.signals.connect(middleware.spider_closed, signal=signals.spider_closed)
        return middleware

    def spider_opened(self, spider: Any) -> None:
        """Install the GC hook for the crawl."""
        self.spider = spider
        self.clock.start()

    def spider_closed(self, spider: Any) -> None:
        """Remove the GC hook."""
        self.clock.stop()
        self.spider = None

    async def process_spider_output(self, response: Any, result: AsyncIterator[Any], spider: Any = None) -> AsyncIterator[Any]:
        """Pass the callback's output on unchanged, measuring each of its steps."""
        if _is_async_callback(response, self.spider):
            self.meter.unmeasured += 1
            async for item in result:
                yield item
            return
        if not self.clock.within_share():
            self.meter.skipped += 1
            async for item in result:
                yield item
            return
        held = [0, 0]
        try:
            async for item in self.clock.measure(result, held):
                yield item
        finally:
            self.meter.add(response.url, len(response.body), held[1])
