"""Spiders of benchmarks/backpressure.py: a crawl whose scraper backs out because a pipeline serializes its writes.

A module of its own, free of side effects (no reactor is installed on import). ``BackoutMeter`` is a Scrapy extension
reading the scraper every 50 ms in a plain Scrapy crawl (no plugin): the figure the plugin's verdict is compared with.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from typing import Any

import scrapy
from scrapy import signals
from twisted.internet import task

#: Each write holds the pipeline's lock this long (seconds): one writer, one row at a time.
WRITE_SECONDS = 0.05
#: Each lookup of ``SerializedLookups`` holds its lock this long (seconds).
LOOKUP_SECONDS = 0.04
#: Sampling interval of ``BackoutMeter`` (seconds).
METER_SECONDS = 0.05


class LargePages(scrapy.Spider):
    """``pages`` pages of ``kb`` KiB (the fixture site's ``/large/<id>``; ``path`` another route), one item each."""

    name = "large_pages"
    base = ""
    pages = 600
    kb = 256
    path = "/large/{i}?kb={kb}"

    async def start(self) -> AsyncIterator[Any]:
        """Every page from the start."""
        for i in range(int(self.pages)):
            yield scrapy.Request(self.base + self.path.format(i=i, kb=int(self.kb)))

    def parse(self, response: Any) -> Iterator[Any]:
        """One row a page."""
        yield {"url": response.url, "size": len(response.body)}


class SerializedLookups(LargePages):
    """Each page's callback awaits a lookup serialized behind one lock (``LOOKUP_SECONDS`` each: an API allowing one
    call at a time) before its row: the callback, not a pipeline, falls behind."""

    name = "serialized_lookups"
    lock: asyncio.Lock | None = None

    async def parse(self, response: Any) -> AsyncIterator[Any]:  # type: ignore[override]
        """One row a page, after the lookup."""
        if self.lock is None:
            self.lock = asyncio.Lock()
        async with self.lock:
            await asyncio.sleep(LOOKUP_SECONDS)
        yield {"url": response.url, "size": len(response.body)}


class SerializedWrites:
    """An item pipeline writing one row at a time (a lock around a 50 ms write: a database with one connection)."""

    def __init__(self) -> None:
        self.lock: asyncio.Lock | None = None

    async def process_item(self, item: Any, spider: Any = None) -> Any:
        """Write the row."""
        if self.lock is None:
            self.lock = asyncio.Lock()
        async with self.lock:
            await asyncio.sleep(WRITE_SECONDS)
        return item


#: What the last ``BackoutMeter`` read: samples, and those with the scraper over its active-size limit.
READINGS: dict[str, int] = {"samples": 0, "over": 0}


class BackoutMeter:
    """Reads ``engine.scraper.slot.needs_backout()`` every 50 ms of a plain Scrapy crawl."""

    def __init__(self, crawler: Any) -> None:
        self.crawler = crawler
        self.loop = task.LoopingCall(self.read)

    @classmethod
    def from_crawler(cls, crawler: Any) -> BackoutMeter:
        """Connect to the engine's start and the spider's close."""
        meter = cls(crawler)
        crawler.signals.connect(meter.engine_started, signal=signals.engine_started)
        crawler.signals.connect(meter.spider_closed, signal=signals.spider_closed)
        return meter

    def engine_started(self) -> None:
        """Start reading."""
        READINGS.update(samples=0, over=0)
        self.loop.start(METER_SECONDS, now=False)

    def spider_closed(self, spider: Any) -> None:
        """Stop reading."""
        if self.loop.running:
            self.loop.stop()

    def read(self) -> None:
        """One reading of the scraper."""
        slot = getattr(getattr(self.crawler.engine, "scraper", None), "slot", None)
        if slot is None:
            return
        READINGS["samples"] += 1
        READINGS["over"] += bool(slot.needs_backout())
