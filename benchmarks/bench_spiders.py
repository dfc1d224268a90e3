"""Spiders and crawl scenarios shared by the benchmark scripts.

A module of its own, free of side effects (no reactor is installed on import), so that an
isolated crawl's child process (``python -m pytest_crawlmem.harness.isolated``) can import the spider
classes by name. Every URL is built against a running fixture site.
"""

from __future__ import annotations

import functools
from collections import OrderedDict
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import scrapy
from scrapy import signals

#: Listing pages of the catalog carry this many product links (plus one ``a.next``).
PER_PAGE = 40
#: Settings every benchmark crawl gets, bare or measured (the plugin's defaults and forced settings).
BASE_SETTINGS: dict[str, Any] = {
    "LOG_LEVEL": "ERROR",
    "ROBOTSTXT_OBEY": False,
    "COOKIES_ENABLED": False,
    "MEMUSAGE_ENABLED": False,
    "TELNETCONSOLE_ENABLED": False,
    "REMOTE_CONTROL_ENABLED": False,
}


def catalog_path(responses: int, per_page: int = PER_PAGE) -> str:
    """Path of a catalog crawl of about ``responses`` responses (listing pages plus their products)."""
    pages = max(1, round(responses / (per_page + 1)))
    return f"/catalog/?pages={pages}&per_page={per_page}"


class Catalog(scrapy.Spider):
    """Follows every product and the next listing page; one item per product."""

    name = "catalog"

    def parse(self, response: Any) -> Iterator[Any]:
        """A listing page: its products and the next page."""
        yield from response.follow_all(css="a.product", callback=self.parse_product)
        yield from response.follow_all(css="a.next")

    def parse_product(self, response: Any) -> Iterator[Any]:
        """A product page: one item."""
        yield {"name": response.css("h1.name::text").get(), "price": response.css("span.price::text").get()}


class Leaky(Catalog):
    """The catalog spider keeping ``leak`` bytes per product response (a spider argument)."""

    name = "leaky"
    leak = 0

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.leak = int(self.leak)
        self.kept: list[bytes] = []

    def parse_product(self, response: Any) -> Iterator[Any]:
        """Keep ``leak`` bytes, then scrape the product."""
        self.kept.append(b"x" * self.leak)
        yield from super().parse_product(response)


#: What SignalKeeper's receiver keeps (module level: a signal handler appending to a global list).
RECEIVED: list[bytes] = []


class SignalKeeper(Catalog):
    """The catalog spider with a response_received receiver that keeps ``leak`` bytes per product response."""

    name = "signal_keeper"
    leak = 0

    @classmethod
    def from_crawler(cls, crawler: Any, *args: Any, **kwargs: Any) -> Any:
        """Connect the keeping receiver (a closure, held by the signal manager and the module list)."""
        spider = super().from_crawler(crawler, *args, **kwargs)
        size = int(spider.leak)
        RECEIVED.clear()

        def on_response(response: Any, request: Any, spider: Any) -> None:
            if "/product/" in response.url:
                RECEIVED.append(b"x" * size)

        crawler.signals.connect(on_response, signal=signals.response_received, weak=False)
        return spider


@functools.cache
def _render(url: str, size: int) -> bytes:
    """An unbounded cache keyed by URL: every product adds an entry."""
    return b"x" * size


class CacheKeeper(Catalog):
    """The catalog spider memoizing ``leak`` bytes per product URL in an unbounded ``lru_cache``."""

    name = "cache_keeper"
    leak = 0

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        _render.cache_clear()

    def parse_product(self, response: Any) -> Iterator[Any]:
        """Render through the cache, then scrape the product."""
        _render(response.url, int(self.leak))
        yield from super().parse_product(response)


class BufferPipeline:
    """An item pipeline that buffers every item for a bulk write it never flushes (a database buffer never emptied)."""

    def __init__(self) -> None:
        self.buffer: list[Any] = []

    def process_item(self, item: Any) -> Any:
        """Buffer the item (the flush that should empty the buffer is missing)."""
        self.buffer.append(item)
        return item


class BlobItems(Catalog):
    """The catalog spider whose items carry ``leak`` bytes of text; kept by BufferPipeline."""

    name = "blob_items"
    leak = 0
    custom_settings: ClassVar[dict[str, Any]] = {"ITEM_PIPELINES": {f"{__name__}.BufferPipeline": 300}}

    def parse_product(self, response: Any) -> Iterator[Any]:
        """One item with a text field of ``leak`` bytes."""
        yield {"name": response.css("h1.name::text").get(), "blob": "x" * int(self.leak)}


class CookiejarPerRequest(Catalog):
    """Gives every product request a cookie jar of its own (``meta['cookiejar']``, a new id per request) and a session
    cookie of ``leak`` bytes: CookiesMiddleware keeps one jar per id, with its cookies, until the crawl ends."""

    name = "cookiejar_per_request"
    leak = 0
    def parse(self, response: Any) -> Iterator[Any]:
        """A listing page: each product in a session of its own, then the next page."""
        for link in response.css("a.product::attr(href)").getall():
            token = f"{link}:" + "x" * int(self.leak)
            yield response.follow(link, self.parse_product, meta={"cookiejar": link}, cookies={"session": token})  # LEAK
        yield from response.follow_all(css="a.next")


class ErrbackKeeper(Catalog):
    """Each product also fetches its reviews, which fail (404, and 500 for every 5th: retried, then failed); the
    errback keeps every Failure (and through it the error response and its request). The size is a Failure's own."""

    name = "errback_keeper"
    leak = 0

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.failures: list[Any] = []

    def parse(self, response: Any) -> Iterator[Any]:
        """A listing page: each product and its (failing) reviews, then the next page."""
        for i, link in enumerate(response.css("a.product::attr(href)").getall()):
            yield response.follow(link, self.parse_product)
            status = 500 if i % 5 == 0 else 404
            yield response.follow(f"/status/{status}?reviews={link}", self.parse_product, errback=self.on_error)
        yield from response.follow_all(css="a.next")

    def on_error(self, failure: Any) -> None:
        """Keep the failure for a report at the end (the list is never emptied)."""
        self.failures.append(failure)


class MediaFailures(Catalog):
    """Every product item wants a file that is missing (404): FilesPipeline caches each failed download, and Scrapy 2.19
    keeps its Request and Response alive through the cached failure until the crawl ends (no user code keeps them)."""

    name = "media_failures"
    leak = 0

    def parse_product(self, response: Any) -> Iterator[Any]:
        """One item per product, with a file URL that 404s."""
        product = response.url.rsplit("/", 1)[1]
        yield {"id": product, "file_urls": [response.urljoin(f"/media/missing/{product}.jpg")]}


def _line_of(text: str) -> str:
    return f"{Path(__file__).name}:" + str(
        next(i for i, line in enumerate(Path(__file__).read_text().splitlines(), 1) if text in line)
    )


#: Where Leaky allocates what it keeps: a leak is attributed when the top growth site is this line.
LEAK_SITE = _line_of('b"x" * self.leak')
#: The keepers of the detection grid: name -> (spider, the line that allocates or keeps what it keeps).
KEEPERS: dict[str, tuple[type, str]] = {
    "list": (Leaky, LEAK_SITE),
    "signal": (SignalKeeper, _line_of("RECEIVED.append(")),
    "cache": (CacheKeeper, _line_of("def _render(")),  # a cache's keeping line is its decorated def (issue 27)
    "pipeline": (BlobItems, _line_of("self.buffer.append(item)")),
    "cookiejar": (CookiejarPerRequest, _line_of('meta={"cookiejar": link}')),
    "errback": (ErrbackKeeper, _line_of("self.failures.append(failure)")),
    "media": (MediaFailures, _line_of('"file_urls": [response.urljoin')),
}
#: Settings a keeper's crawl needs beyond BASE_SETTINGS (the benchmarks turn cookies off).
KEEPER_SETTINGS: dict[str, dict[str, Any]] = {
    "cookiejar": {"COOKIES_ENABLED": True},
    "media": {"ITEM_PIPELINES": {"scrapy.pipelines.files.FilesPipeline": 1}, "FILES_STORE": "/tmp/crawlmem-bench-files"},
}
#: What a Scrapy expert names for a keeper whose structure is a library's (in the first holder or the verdict's reason).
KEEPER_NAMES: dict[str, str] = {"cookiejar": "CookiesMiddleware.jars", "media": "FilesPipeline"}
#: The verdict a keeper's crawl should get (``retained-objects`` unless named here).
KEEPER_VERDICTS: dict[str, str] = {"media": "media-disk"}


class BoundedCache(Catalog):
    """Keeps the text of the last 150 products three times over: fills, then plateaus."""

    name = "bounded_cache"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.cache: OrderedDict[str, str] = OrderedDict()

    def parse_product(self, response: Any) -> Iterator[Any]:
        """Cache the page's text (bounded), then scrape the product."""
        self.cache[response.url] = response.text * 3
        while len(self.cache) > 150:
            self.cache.popitem(last=False)
        yield from super().parse_product(response)


class LargePages(scrapy.Spider):
    """Downloads ``count`` legitimate pages of ``kb`` KiB each."""

    name = "large_pages"
    base = ""
    count = 700
    kb = 128

    async def start(self) -> Any:
        """One request per large page."""
        for i in range(int(self.count)):
            yield scrapy.Request(f"{self.base}/large/{i}?kb={self.kb}")

    def parse(self, response: Any) -> Iterator[Any]:
        """One item per page: how many links it has."""
        yield {"links": len(response.css("a::attr(href)").getall())}


class Frontier(scrapy.Spider):
    """Follows every link of /explode/: an unbounded frontier, the scheduler's backlog grows."""

    name = "frontier"

    def parse(self, response: Any) -> Iterator[Any]:
        """Follow every link."""
        yield from response.follow_all(css="a")


#: A scenario: spider class, spider arguments (``start_urls`` included), settings.
Scenario = tuple[type, dict[str, Any], dict[str, Any]]


def clean_scenarios(base_url: str) -> dict[str, Scenario]:
    """Crawls that keep nothing per response: none may be called ``retained-objects``."""
    catalog = {"start_urls": [base_url + catalog_path(1050, per_page=20)]}
    slow = {
        "ITEM_PIPELINES": {"pytest_crawlmem.testing.SlowPipeline": 300},
        "CRAWLMEM_SLOW_PIPELINE_DELAY_MS": 50,
        "CRAWLMEM_SLOW_PIPELINE_CPU_MS": 1,
    }
    return {
        "catalog": (Catalog, catalog, {}),
        "large_pages": (LargePages, {"base": base_url}, {"CONCURRENT_REQUESTS": 8}),
        "bounded_cache": (BoundedCache, catalog, {}),
        "slow_pipeline": (Catalog, catalog, slow),
        "backlog": (Frontier, {"start_urls": [base_url + "/explode/0?fanout=20"]}, {"CLOSESPIDER_PAGECOUNT": 1500}),
        # the root logger at DEBUG with pytest's capture handler and a file handler, as `pytest --log-level=DEBUG
        # --log-file=...` runs a crawl (detection.py installs them for a crawl whose LOG_LEVEL is DEBUG)
        "debug_logging": (Catalog, catalog, {"LOG_LEVEL": "DEBUG"}),
    }
