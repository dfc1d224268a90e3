"""An inner test suite: one spider per retention cause and per clean case (run by test_leaks.py)."""

from spiders_source import CATALOG_SPIDER

SUITE = '''
import time
from collections import OrderedDict

import pytest
import scrapy
from scrapy import signals

RETAINED = []


''' + CATALOG_SPIDER + '''

class ModuleList(Catalog):
    name = "module_list"

    def parse_product(self, response):
        RETAINED.append(response.text * 3)  # LEAK
        yield from super().parse_product(response)


class MetaResponses(Catalog):
    name = "meta_responses"
    kept = []

    def parse(self, response):
        for href in response.css("a.product::attr(href)").getall():
            yield response.follow(href, callback=self.parse_product, cb_kwargs={"listing": response})
        yield from response.follow_all(css="a.next")

    def parse_product(self, response, listing):
        self.kept.append(response)  # LEAK
        yield {"name": response.css("h1.name::text").get(), "listing": listing.url}


class UnboundedCache(Catalog):
    name = "unbounded_cache"
    cache = {}

    def parse_product(self, response):
        self.cache[response.url] = response.text * 3  # LEAK
        yield from super().parse_product(response)


class SignalClosure(Catalog):
    name = "signal_closure"

    @classmethod
    def from_crawler(cls, crawler, *args, **kwargs):
        spider = super().from_crawler(crawler, *args, **kwargs)
        bucket = []

        def on_response(response, request, spider):
            bucket.append(response.body * 3)  # LEAK

        crawler.signals.connect(on_response, signal=signals.response_received, weak=False)
        return spider


class StatsKeeper:
    def __init__(self, stats):
        self.stats = stats

    @classmethod
    def from_crawler(cls, crawler):
        return cls(crawler.stats)

    def process_request(self, request, spider=None):
        self.stats._stats.setdefault("debug/requests", []).append(request.replace(body=b"x" * 3000))  # LEAK
        return None


class DedupSet(Catalog):
    name = "dedup_set"
    seen = set()

    def parse_product(self, response):
        self.seen.add(response.text + response.url * 40)  # LEAK
        yield from super().parse_product(response)


class KeptSelectors(Catalog):
    name = "kept_selectors"
    trees = []

    def parse_product(self, response):
        self.trees.append(response.css("div.description"))  # LEAK
        yield from super().parse_product(response)


class LargePages(scrapy.Spider):
    name = "large_pages"

    async def start(self):
        for i in range(700):
            yield scrapy.Request(self.base + f"/large/{i}?kb=128")

    def parse(self, response):
        yield {"links": len(response.css("a::attr(href)").getall())}


class BoundedCache(Catalog):
    name = "bounded_cache"

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.cache = OrderedDict()

    def parse_product(self, response):
        self.cache[response.url] = response.text * 3
        while len(self.cache) > 150:
            self.cache.popitem(last=False)
        yield from super().parse_product(response)


class SlowPipeline:
    def process_item(self, item, spider=None):
        time.sleep(0.002)
        return item


CATALOG = "/catalog/?pages=30&per_page=20"  # 630 responses: a verdict needs 170, a 2 KiB leak is caught at 600
LEAKS = {
    "module_list": (ModuleList, {}),
    "meta_responses": (MetaResponses, {}),
    "unbounded_cache": (UnboundedCache, {}),
    "signal_closure": (SignalClosure, {}),
    "stats_requests": (Catalog, {"DOWNLOADER_MIDDLEWARES": {"test_suite.StatsKeeper": 500}}),
    "dedup_set": (DedupSet, {}),
    "kept_selectors": (KeptSelectors, {}),
}
CLEAN = {
    "bounded_cache": (BoundedCache, {}),
    "slow_pipeline": (Catalog, {"ITEM_PIPELINES": {"test_suite.SlowPipeline": 100}}),
}


@pytest.mark.crawl_memory(leak="warn")
@pytest.mark.parametrize("case", sorted(LEAKS))
def test_leak(crawl, fixture_site, case):
    spider, settings = LEAKS[case]
    crawl(spider, start_urls=[fixture_site.url(CATALOG)], settings=settings)


@pytest.mark.crawl_memory(leak="fail")
@pytest.mark.parametrize("case", sorted(CLEAN))
def test_clean(crawl, fixture_site, case):
    spider, settings = CLEAN[case]
    crawl(spider, start_urls=[fixture_site.url(CATALOG)], settings=settings)


@pytest.mark.crawl_memory(leak="fail")
def test_clean_large_pages(crawl, fixture_site):
    crawl(LargePages, base=fixture_site.base_url, settings={"CONCURRENT_REQUESTS": 8})
'''
