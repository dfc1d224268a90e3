"""An inner test suite: a set that grows by design, declared or not, beside a leak, over its declaration, and in a
duplicates pipeline (run by test_declared_crawls.py)."""

from spiders_source import CATALOG_SPIDER

#: The inner session's ini: the set declared for every test (the marker overrides it).
INI = "[pytest]\ncrawlmem_expected_growth = spider.seen_ids=2 KiB\n"

SUITE = '''
import pytest
import scrapy
from scrapy.exceptions import DropItem


''' + CATALOG_SPIDER + '''

class DesignSet(Catalog):
    """Keeps a first-seen key of ~1.7 KiB per product page in a set: ~1.6 KiB a response, by design."""

    name = "design_set"

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.seen_ids = set()

    def parse_product(self, response):
        self.seen_ids.add(response.url + "|" + "i" * 1650)  # BY DESIGN
        yield from super().parse_product(response)


class DesignSetAndLeak(DesignSet):
    """The same set, and 5 KiB per product page kept in a list nobody declared: a leak of ~4.8 KiB a response."""

    name = "design_set_and_leak"

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.kept = []

    def parse_product(self, response):
        self.kept.append(b"k" * 5000 + response.url.encode())  # LEAK
        yield from super().parse_product(response)


class DuplicatesPipeline:
    """Drops an item whose name it saw before; keeps a ~1.7 KiB key per item: ~1.6 KiB a response, by design."""

    def __init__(self):
        self.ids_seen = set()

    def process_item(self, item, spider=None):
        key = f"{item['name']}|{item['price']}|" + "p" * 1650
        if key in self.ids_seen:
            raise DropItem(f"duplicate {item['name']}")
        self.ids_seen.add(key)  # BY DESIGN
        return item


CATALOG = "/catalog/?pages=30&per_page=20"  # 630 responses


@pytest.mark.crawl_memory(leak="warn", expected_growth={})
def test_undeclared(crawl, fixture_site):
    crawl(DesignSet, start_urls=[fixture_site.url(CATALOG)])


@pytest.mark.crawl_memory(leak="fail")
def test_declared_in_the_ini(crawl, fixture_site):
    result = crawl(DesignSet, start_urls=[fixture_site.url(CATALOG)])
    assert result.verdict == "steady", result.growth.reason


@pytest.mark.crawl_memory(leak="warn", expected_growth={"spider.seen_ids": "2 KiB"})
def test_declared_beside_a_leak(crawl, fixture_site):
    crawl(DesignSetAndLeak, start_urls=[fixture_site.url(CATALOG)])


@pytest.mark.crawl_memory(leak="warn", expected_growth={"spider.seen_ids": "400 B"})
def test_declared_too_small(crawl, fixture_site):
    crawl(DesignSet, start_urls=[fixture_site.url(CATALOG)])


@pytest.mark.crawl_memory(leak="fail", expected_growth={"pipeline DuplicatesPipeline.ids_seen": "2 KiB"})
def test_declared_pipeline(crawl, fixture_site):
    result = crawl(Catalog, start_urls=[fixture_site.url(CATALOG)],
                   settings={"ITEM_PIPELINES": {"test_suite.DuplicatesPipeline": 300}})
    assert result.items_scraped == 600
    assert result.verdict == "steady", result.growth.reason
'''
