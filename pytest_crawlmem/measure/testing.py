"""Helpers for tests of crawls: an item pipeline that reproduces a processing backlog on demand.

Enable in a crawl's settings (Scrapy builds pipelines from their class path, so they are
configured through settings)::

    ITEM_PIPELINES = {"pytest_crawlmem.testing.SlowPipeline": 300}
    CRAWLMEM_SLOW_PIPELINE_DELAY_MS = 200   # each item waits this long, without blocking the reactor
    CRAWLMEM_SLOW_PIPELINE_CPU_MS = 0       # each item burns this much CPU, blocking the reactor

Runs in the crawl process.
"""

from __future__ import annotations

import time
from typing import Any

from scrapy.exceptions import NotConfigured

from pytest_crawlmem.core.defaults import name_of


class SlowPipeline:
    """Delays each item by ``delay_ms`` (non-blocking) and burns ``cpu_ms`` of CPU on it."""

    def __init__(self, delay_ms: float = 0.0, cpu_ms: float = 0.0) -> None:
        if delay_ms < 0 or cpu_ms < 0:
            raise ValueError(f"invalid SlowPipeline delay_ms={delay_ms!r} cpu_ms={cpu_ms!r}: expected milliseconds >= 0")
        self.delay_ms = delay_ms
        self.cpu_ms = cpu_ms

    @classmethod
    def from_crawler(cls, crawler: Any) -> SlowPipeline:
        """Read CRAWLMEM_SLOW_PIPELINE_DELAY_MS and CRAWLMEM_SLOW_PIPELINE_CPU_MS; NotConfigured when both are 0."""
        settings, delay, cpu = crawler.settings, name_of("slow_pipeline_delay_ms"), name_of("slow_pipeline_cpu_ms")
        delay_ms, cpu_ms = settings.getfloat(delay, 0.0), settings.getfloat(cpu, 0.0)
        if not delay_ms and not cpu_ms:
            raise NotConfigured(f"{delay} and {cpu} are both 0")
        return cls(delay_ms=delay_ms, cpu_ms=cpu_ms)

    async def process_item(self, item: Any, spider: Any = None) -> Any:  # Scrapy 2.13 passes the spider
        """Burn the CPU time, then wait the delay on the reactor; return the item unchanged."""
        if self.cpu_ms:
            burn_cpu(self.cpu_ms / 1000)
        if self.delay_ms:
            await sleep_on_reactor(self.delay_ms / 1000)
        return item


def burn_cpu(seconds: float) -> None:
    """Keep the CPU busy (and the reactor blocked) for ``seconds`` of process CPU time."""
    deadline = time.process_time() + seconds
    while time.process_time() < deadline:
        sum(range(1000))


async def sleep_on_reactor(seconds: float) -> None:
    """Wait ``seconds`` without blocking the reactor (any reactor, asyncio or not)."""
    from scrapy.utils.defer import maybe_deferred_to_future
    from twisted.internet import reactor
    from twisted.internet.task import deferLater

    await maybe_deferred_to_future(deferLater(reactor, seconds, lambda: None))
