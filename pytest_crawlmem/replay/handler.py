"""The Scrapy side of replay: a download handler that asks the replay site, and the copies middleware (crawl process).

:class:`ReplayDownloadHandler` is Scrapy's HTTP/1.1 handler (same limits, timeouts,
DOWNLOAD_MAXSIZE) that sends ``GET https://shop.example/p/1`` to the replay site as
``GET http://127.0.0.1:PORT/https://shop.example/p/1`` and hands the spider a response whose
``url`` is the original one. Nothing is resolved or fetched off the machine.
"""

from __future__ import annotations

import inspect
import weakref
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from scrapy import Request, signals
from scrapy.core.downloader.handlers.http11 import HTTP11DownloadHandler
from scrapy.exceptions import NotConfigured
from scrapy.http import Response
from scrapy.spidermiddlewares.base import BaseSpiderMiddleware

from pytest_crawlmem.core.defaults import name_of
from pytest_crawlmem.core.replay import COPY_PREFIX, HANDLER_PATH, MAX_MISSED_URLS, copy_of, copy_url
from pytest_crawlmem.replay.copies import (
    DROPPED,
    RESPONSES,
    SCRAPED,
    YIELDED,
    CopyTally,
    adapt_spider_rules,
    attribute_patterns,
    copy_of_response,
    mark_item,
)

MARKER_HEADER = b"X-Crawlmem-Replay"
STATS_HITS = "crawlmem/replay/hits"
STATS_MISSES = "crawlmem/replay/misses"
STATS_ROBOTS_ABSENT = "crawlmem/replay/robots_absent"
ROBOTS_PATH = "/robots.txt"


@dataclass
class Tally:
    """Hits, misses and the first missed URLs of one replayed crawl.

    A miss is counted once per distinct request of the recording: the same unrecorded URL asked on every copy
    (``crawlmem-copyK.<host>``) is one miss. A ``/robots.txt`` the recording lacks is answered 404, as a site without
    one answers (ROBOTSTXT_OBEY then allows every URL), and is counted in ``robots_absent``, not as a miss.
    """

    hits: int = 0
    misses: int = 0
    robots_absent: int = 0
    missed_urls: dict[str, None] = field(default_factory=dict)  # insertion-ordered set
    _missed: set[str] = field(default_factory=set)
    copies: CopyTally = field(default_factory=CopyTally)  # responses and items per copy

    def count(self, url: str, hit: bool) -> None:
        """Count one replayed response."""
        copy = copy_of(url)
        self.copies.count(copy, RESPONSES)
        if not copy:
            self.copies.hosts.setdefault(urlsplit(url).hostname or "")
        if hit:
            self.hits += 1
            return
        original = original_url(url)
        if urlsplit(original).path == ROBOTS_PATH:
            self.robots_absent += 1
            return
        if original in self._missed:
            return
        self._missed.add(original)
        self.misses += 1
        if len(self.missed_urls) < MAX_MISSED_URLS:
            self.missed_urls.setdefault(original)


_TALLIES: weakref.WeakKeyDictionary[Any, Tally] = weakref.WeakKeyDictionary()


def replay_outcome(crawler: Any) -> dict[str, Any]:
    """The result fields of a replayed crawl (empty for a crawl without replay)."""
    tally = _TALLIES.get(crawler)
    if tally is None:
        return {}
    return {"replay_hits": tally.hits, "replay_misses": tally.misses, "replay_missed_urls": tuple(tally.missed_urls),
            "replay_per_copy": tally.copies.per_copy(), "replay_rules": tally.copies.host_patterns()}


def offline_public_suffixes() -> None:
    """Make CookiesMiddleware's public-suffix check use tldextract's bundled list, not a download (once per process).

    Scrapy's module-level ``TLDExtract`` fetches publicsuffix.org on the first cookie with a
    Domain attribute; a replayed crawl reaches no network, so it reads the snapshot tldextract ships.
    """
    try:
        from scrapy.downloadermiddlewares import cookies
        from tldextract import TLDExtract
    except ImportError:  # pragma: no cover - both ship with Scrapy 2.19
        return
    current = getattr(cookies, "_split_domain", None)
    if isinstance(current, TLDExtract) and current.suffix_list_urls:
        cookies._split_domain = TLDExtract(suffix_list_urls=(), include_psl_private_domains=True)


class _ReplayHandlerBase(HTTP11DownloadHandler):
    """Downloads every http(s) request from the replay site (CRAWLMEM_REPLAY_URL) and counts hits and misses."""

    def __init__(self, *args: Any) -> None:  # (crawler) on Scrapy >= 2.14, (settings, crawler) on 2.13
        crawler = args[-1]
        base = crawler.settings.get(name_of("replay_url"))
        if not base:
            raise NotConfigured(f"ReplayDownloadHandler needs {name_of('replay_url')}")
        super().__init__(*args)
        self._base = str(base).rstrip("/")
        self._stats = crawler.stats
        self._tally = _TALLIES.setdefault(crawler, Tally())
        offline_public_suffixes()

    def _local(self, request: Request) -> Request:
        """``request`` addressed to the replay site (``http://127.0.0.1:PORT/<original URL>``), without a proxy."""
        meta = {k: v for k, v in request.meta.items() if k != "proxy"}  # the replay site is local: no proxy
        return request.replace(url=f"{self._base}/{request.url}", meta=meta)

    def _replayed(self, request: Request, response: Response) -> Response:
        """Count the replay site's answer as a hit or a miss; hand the spider a response with the original URL."""
        before = self._tally.misses, self._tally.robots_absent
        hit = response.headers.pop(MARKER_HEADER, None) == [b"hit"]
        self._tally.count(request.url, hit)
        if hit:
            self._stats.inc_value(STATS_HITS)
        elif self._tally.robots_absent > before[1]:
            self._stats.inc_value(STATS_ROBOTS_ABSENT)
        elif self._tally.misses > before[0]:
            self._stats.inc_value(STATS_MISSES)
        return response.replace(url=request.url)


def _copy_latency(local: Request, request: Request) -> None:
    latency = local.meta.get("download_latency")
    if latency is not None:
        request.meta["download_latency"] = latency


class _AsyncReplayHandler(_ReplayHandlerBase):
    """The replay handler for Scrapy >= 2.14, whose handlers are coroutines."""

    async def download_request(self, request: Request) -> Response:
        """Fetch ``request`` from the replay site; the response carries the original URL."""
        local = self._local(request)
        try:
            response = await super().download_request(local)
        finally:
            _copy_latency(local, request)
        return self._replayed(request, response)


class _DeferredReplayHandler(_ReplayHandlerBase):
    """The replay handler for Scrapy 2.13, whose handlers take the spider and return a Deferred."""

    def download_request(self, request: Request, spider: Any) -> Any:  # type: ignore[override]
        """Fetch ``request`` from the replay site; the response carries the original URL."""
        local = self._local(request)

        def done(result: Any) -> Any:
            _copy_latency(local, request)
            return self._replayed(request, result) if isinstance(result, Response) else result

        deferred: Any = super().download_request(local, spider)  # type: ignore[call-arg]
        return deferred.addBoth(done)


#: Scrapy's dotted path to the replay handler (core.replay.HANDLER_PATH), for this Scrapy's handler interface.
ReplayDownloadHandler: type[_ReplayHandlerBase] = (
    _AsyncReplayHandler if inspect.iscoroutinefunction(HTTP11DownloadHandler.download_request) else _DeferredReplayHandler
)


def original_host(url: str) -> tuple[int, str]:
    """Return the copy number of ``url``'s host and the host it copies (copy 0: the host itself)."""
    host = urlsplit(url).hostname or ""
    prefix, dot, rest = host.partition(".")
    if dot and prefix.startswith(COPY_PREFIX) and prefix[len(COPY_PREFIX):].isdigit():
        return int(prefix[len(COPY_PREFIX):]), rest
    return 0, host


def original_url(url: str) -> str:
    """``url`` on the host its copy copies (a URL of copy 0 is returned as is)."""
    copy, _ = original_host(url)
    if not copy:
        return url
    parts = urlsplit(url)
    return parts._replace(netloc=parts.netloc.replace(f"{COPY_PREFIX}{copy}.", "", 1)).geturl()


class ReplayCopiesMiddleware(BaseSpiderMiddleware):
    """Serves the recording as CRAWLMEM_REPLAY_COPIES copies: each start request also goes to ``crawlmem-copyK.<host>``.

    Copy K's pages link to copy K (the replay site rewrites absolute links), so the dupefilter
    sees distinct URLs; every copy shares its original host's download slot, so concurrency
    per domain is the original's. Also refuses a crawl whose http(s) handler is not the replay one.
    It counts each copy's items (yielded, through the pipelines, dropped), matches the spider's sitemap rules and
    link extractors' patterns on the recorded URL, and marks the item fields CRAWLMEM_REPLAY_ITEM_KEYS names per copy.
    """

    def __init__(self, crawler: Any) -> None:
        super().__init__(crawler)
        if not crawler.settings.get(name_of("replay_url")):
            raise NotConfigured
        handlers = crawler.settings.getdict("DOWNLOAD_HANDLERS")
        for scheme in ("http", "https"):
            if handlers.get(scheme) not in (HANDLER_PATH, ReplayDownloadHandler):
                raise RuntimeError(
                    f"replay: DOWNLOAD_HANDLERS[{scheme!r}] is {handlers.get(scheme)!r} (the spider's custom_settings?),"
                    " not the replay handler: refusing to crawl the network"
                )
        self.copies = crawler.settings.getint(name_of("replay_copies"), 1)
        keys = crawler.settings.get(name_of("replay_item_keys")) or ""
        self.item_keys = tuple(k.strip() for k in str(keys).split(",") if k.strip())
        self.tally = _TALLIES.setdefault(crawler, Tally()).copies
        self.tally.copies = self.copies
        crawler.signals.connect(self.spider_opened, signal=signals.spider_opened)
        crawler.signals.connect(self.item_scraped, signal=signals.item_scraped)
        crawler.signals.connect(self.item_dropped, signal=signals.item_dropped)

    def spider_opened(self, spider: Any) -> None:
        """With copies: match the spider's sitemap rules and link extractors on the recorded URL; note other patterns."""
        if self.copies > 1:
            self.tally.adapted = adapt_spider_rules(spider)
            self.tally.unadapted = attribute_patterns(type(spider))

    def item_scraped(self, item: Any, response: Any = None, **_: Any) -> None:
        """Count an item through every pipeline for its copy."""
        self.tally.count(copy_of_response(response), SCRAPED)

    def item_dropped(self, item: Any, response: Any = None, **_: Any) -> None:
        """Count an item a pipeline dropped for its copy."""
        self.tally.count(copy_of_response(response), DROPPED)

    def get_processed_item(self, item: Any, response: Response | None) -> Any:
        """Count an item the spider yielded for its copy; mark its CRAWLMEM_REPLAY_ITEM_KEYS fields per copy."""
        copy = copy_of_response(response)
        self.tally.count(copy, YIELDED)
        if copy and self.item_keys:
            mark_item(item, self.item_keys, copy)
        return item

    async def process_start(self, start: AsyncIterator[Any]) -> AsyncIterator[Any]:
        """Yield each start request, then its copies 1..N-1."""
        async for item in start:
            yield item
            if isinstance(item, Request) and item.url.startswith(("http://", "https://")):
                for copy in range(1, self.copies):
                    host = urlsplit(item.url).hostname or ""
                    yield item.replace(url=copy_url(item.url, copy), meta={**item.meta, "download_slot": host})

    def get_processed_request(self, request: Request, response: Response | None) -> Request | None:
        """A request to copy K shares the download slot of the host it copies."""
        copy, host = original_host(request.url)
        if copy and "download_slot" not in request.meta:
            request.meta["download_slot"] = host
        return request
