"""An inner test suite of leaks that issue 21 and issue 13 item 6 found unjudged (run by test_detection.py)."""

from spiders_source import CATALOG_SPIDER

SUITE = '''
import functools

import pytest
import scrapy
from scrapy import signals

KEPT = []


''' + CATALOG_SPIDER + '''

class SignalRequests(Catalog):
    """A response_received receiver keeping every Request in a module-level list (~1-2 KiB each)."""

    name = "signal_requests"

    @classmethod
    def from_crawler(cls, crawler, *args, **kwargs):
        spider = super().from_crawler(crawler, *args, **kwargs)

        def on_response(response, request, spider):
            KEPT.append(request)  # LEAK

        crawler.signals.connect(on_response, signal=signals.response_received, weak=False)
        return spider


@functools.lru_cache(maxsize=None)
def priority_of(request):
    return request.priority


class CachedRequests(Catalog):
    """An unbounded lru_cache keyed by the request: every product request stays alive."""

    name = "cached_requests"

    def parse_product(self, response):
        priority_of(response.request)  # LEAK
        yield from super().parse_product(response)


class BigPageSlices(scrapy.Spider):
    """Keeps 64 KiB of each of 160 one-MiB pages (10 MiB kept)."""

    name = "big_page_slices"

    async def start(self):
        for i in range(160):
            yield scrapy.Request(self.base + f"/large/{i}?kb=1024")

    def parse(self, response):
        KEPT.append(bytes(response.body[:65536]))  # LEAK
        yield {"size": len(response.body)}


class Keeper(Catalog):
    """Keeps ``leak`` bytes per product page in a list on the spider."""

    name = "keeper"
    leak = 2048

    def parse_product(self, response):
        self.kept.append(b"x" * int(self.leak))  # LEAK
        yield from super().parse_product(response)

    kept = []


def catalog(site, responses):
    return site.url(f"/catalog/?pages={round(responses / 21)}&per_page=20")


@pytest.fixture(autouse=True)
def _forget():
    yield
    KEPT.clear()
    Keeper.kept = []
    priority_of.cache_clear()


@pytest.mark.crawl_memory(leak="warn")
@pytest.mark.parametrize("case", ["signal_requests", "cached_requests"])
def test_short_keeper(crawl, fixture_site, case):
    spider = {"signal_requests": SignalRequests, "cached_requests": CachedRequests}[case]
    crawl(spider, start_urls=[catalog(fixture_site, 300)])


@pytest.mark.crawl_memory(leak="warn")
def test_big_pages(crawl, fixture_site):
    crawl(BigPageSlices, base=fixture_site.base_url, settings={"CONCURRENT_REQUESTS": 8})


@pytest.mark.crawl_memory(leak="warn")
@pytest.mark.parametrize(("size", "leak"), [(300, 32768), (600, 2048), (600, 32768)])  # (300, 2048) could fail nothing
def test_grid(crawl, fixture_site, leak, size):
    crawl(Keeper, start_urls=[catalog(fixture_site, size)], leak=leak)


@pytest.mark.crawl_memory(leak="fail")
def test_unjudged_leak_fail(crawl, fixture_site):
    crawl(Catalog, start_urls=[catalog(fixture_site, 100)])  # 3 drained checkpoints after 50 responses: 4 are needed


@pytest.mark.crawl_memory(leak="fail")
@pytest.mark.parametrize("size", [150, 600])
def test_clean(crawl, fixture_site, size):
    crawl(Catalog, start_urls=[catalog(fixture_site, size)])
'''
