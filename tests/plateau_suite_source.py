"""An inner test suite: a native page cache that fills and levels off, and the same with a leak on top (run by
test_plateau_crawls.py)."""

from spiders_source import CATALOG_SPIDER

SUITE = '''
import sqlite3

import pytest
import scrapy


''' + CATALOG_SPIDER + '''

class PageCache(Catalog):
    """Every response's body (six times over, ~4 KiB a row) into an SQLite file with a 2 MiB page cache: SQLite's
    own memory, which fills over the first ~450 responses and stays flat after; the database is closed with the spider.
    (At 1 MiB the knot sat within the checkpoints' noise: 3 of 10 runs under heavy load missed the plateau.)"""

    name = "page_cache"

    def __init__(self, *args, folder="", **kwargs):
        super().__init__(*args, **kwargs)
        self.db = sqlite3.connect(folder + "/pages.db")
        self.db.execute("PRAGMA cache_size=-2048")
        self.db.execute("CREATE TABLE pages (url TEXT PRIMARY KEY, body BLOB)")

    def store(self, response):
        with self.db:
            self.db.execute("INSERT OR REPLACE INTO pages VALUES (?, ?)", (response.url, response.body * 6))

    def parse(self, response):
        self.store(response)
        yield from super().parse(response)

    def parse_product(self, response):
        self.store(response)
        yield from super().parse_product(response)

    def closed(self, reason):
        self.db.close()


class PageCacheAndLeak(PageCache):
    """The same page cache, and a list keeping 4 KiB per product page to the end: a leak of ~2 KiB per response."""

    name = "page_cache_and_leak"
    kept = []

    def parse_product(self, response):
        self.kept.append(b"x" * 4096 + response.url.encode())  # LEAK
        yield from super().parse_product(response)


CATALOG = "/catalog/?pages=57&per_page=20"  # 1,197 responses: the cache is full after ~450 of them


@pytest.mark.crawl_memory(leak="fail")
def test_page_cache(crawl, fixture_site, tmp_path):
    result = crawl(PageCache, start_urls=[fixture_site.url(CATALOG)], folder=str(tmp_path))
    assert result.verdict == "steady", result.growth.reason
    assert "levelled off at response" in result.growth.reason, result.growth.reason


@pytest.mark.crawl_memory(leak="warn")
def test_page_cache_and_leak(crawl, fixture_site, tmp_path):
    PageCacheAndLeak.kept.clear()
    result = crawl(PageCacheAndLeak, start_urls=[fixture_site.url(CATALOG)], folder=str(tmp_path))
    assert result.verdict == "retained-objects", result.growth.reason
    assert "levelled off" not in result.growth.reason, result.growth.reason
'''
