"""An inner test suite of leaks kept where the holder search looked past (run by test_keeping_reach.py, issue 54).

A list handed on in ``request.meta`` beside a middleware writing another key of the same dicts, groups created on one
line and filled on another, a ``queue.Queue`` whose writer thread died on its first row, a logger per product in the
logging registry, a ``defaultdict(list)`` on a pipeline. Each allocates what it keeps on one line (``# ALLOCATES``)
and stores it on another (``# KEEPS``).
"""

from spiders_source import CATALOG_SPIDER

SUITE = '''
import logging
import queue
import threading
import time
from collections import defaultdict

import pytest
import scrapy


''' + CATALOG_SPIDER + '''

class AuditStart:
    """A downloader middleware stamping when each request started: another key of the same meta dicts."""

    def process_request(self, request, spider=None):
        request.meta["audit_started"] = time.monotonic()
        return None


class MetaRows(Catalog):
    """Every row so far handed on from page to page in request.meta["rows"]."""

    name = "meta_rows"

    def parse(self, response):
        meta = {"rows": response.meta.get("rows", [])}
        yield from response.follow_all(css="a.product", callback=self.parse_product, meta=meta)
        yield from response.follow_all(css="a.next", meta=meta)

    def parse_product(self, response):
        row = response.css("div.description").get() * 16  # ALLOCATES meta_rows
        rows = response.meta["rows"]
        rows.append(row)  # KEEPS meta_rows
        yield {"name": response.css("h1.name::text").get()}


class FinishedGroups(Catalog):
    """Products filed by group two levels below the spider, the group made on one line and filled on another."""

    name = "finished_groups"

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.groups = {}

    def parse_product(self, response):
        product = {"name": response.css("h1.name::text").get(),
                   "text": response.css("div.description").get() * 16}  # ALLOCATES finished_groups
        key = response.url[-1]
        group = self.groups.get(key)
        if group is None:
            group = self.groups[key] = {"products": [], "opened": response.url}
        group["products"].append(product)  # KEEPS finished_groups
        yield {"name": product["name"]}


class Described(Catalog):
    """Items carrying the product's description (what the pipelines below keep)."""

    name = "described"

    def parse_product(self, response):
        yield {"name": response.css("h1.name::text").get(), "url": response.url,
               "description": response.css("div.description").get() * 16}  # ALLOCATES queue_writer


class QueueWriter:
    """A pipeline handing rows to a writer thread, which died on its first row: nobody drains the queue."""

    def open_spider(self, spider=None):
        self.rows = queue.Queue()
        self.writer = threading.Thread(target=self.write_rows, daemon=True)
        self.writer.start()

    def write_rows(self):
        row = self.rows.get()
        raise RuntimeError(f"cannot write {row['name']}: no such table")

    def process_item(self, item, spider=None):
        self.rows.put(dict(item))  # KEEPS queue_writer
        return item


class ProductFilter(logging.Filter):
    """A logging filter holding the product it was made for."""

    def __init__(self, item):
        super().__init__()
        self.item = item

    def filter(self, record):
        return True


class LoggerPerProduct(Catalog):
    """A logger per product: the logging module keeps every one, with its filter and the item it holds."""

    name = "logger_per_product"

    def parse_product(self, response):
        item = {"name": response.css("h1.name::text").get(),
                "text": response.css("div.description").get() * 16}  # ALLOCATES logger_per_product
        logger = logging.getLogger(f"shop.product.{response.url.rsplit('/', 1)[1]}")  # KEEPS logger_per_product
        logger.addFilter(ProductFilter(item))
        yield {"name": item["name"]}


class PriceHistory(Catalog):
    """Items carrying the product's description (the pipeline below keeps it per product)."""

    name = "price_history"

    def parse_product(self, response):
        yield {"name": response.url.rsplit("/", 1)[1],
               "description": response.css("div.description").get() * 16}  # ALLOCATES defaultdict_history


class PriceHistoryPipeline:
    """Every description seen, per product, in a defaultdict(list)."""

    def __init__(self):
        self.history = defaultdict(list)

    def process_item(self, item, spider=None):
        self.history[item["name"]].append(item["description"])  # KEEPS defaultdict_history
        return item


CATALOG = "/catalog/?pages=30&per_page=20"  # 630 responses, as in the leak suite: a verdict needs 170, the window 100
LEAKS = {
    "meta_rows": (MetaRows, {"DOWNLOADER_MIDDLEWARES": {"test_suite.AuditStart": 950}}),
    "finished_groups": (FinishedGroups, {}),
    "queue_writer": (Described, {"ITEM_PIPELINES": {"test_suite.QueueWriter": 300}}),
    "logger_per_product": (LoggerPerProduct, {}),
    "defaultdict_history": (PriceHistory, {"ITEM_PIPELINES": {"test_suite.PriceHistoryPipeline": 300}}),
}


@pytest.mark.crawl_memory(leak="fail")
@pytest.mark.parametrize("case", sorted(LEAKS))
def test_leak(crawl, fixture_site, case):
    spider, settings = LEAKS[case]
    crawl(spider, start_urls=[fixture_site.url(CATALOG)], settings=settings)
'''
