"""A large Scrapy project written to disk: thousands of spider modules, each with its spider class, as big projects are.

Free of side effects on import (no reactor, no Scrapy): the benchmark (``large_project.py``) and the test
(``tests/test_large_project.py``) import it. :func:`write_project` writes a package whose ``spiders`` subpackage
holds ``modules`` generated spider modules (``site_00001.py`` ...) beside three spiders a benchmark crawls against
the fixture site's catalog: ``leaky`` (keeps ``leak`` bytes per product page), ``filling`` (a cache that fills for
the first ``fill`` products, then stops: it looks leaky, then levels off) and ``clean``. Scrapy's ``SpiderLoader``
imports every one of them when a crawler process starts (``SPIDER_MODULES``), as ``scrapy crawl`` does.
"""

from __future__ import annotations

from pathlib import Path

#: The generated package; its spiders are ``PACKAGE.spiders``.
PACKAGE = "bigproject"

_MODULE = '''"""Spider of shop {i} (generated: a large project has thousands like it)."""

import re
from urllib.parse import urljoin

import scrapy

PRICE = re.compile(r"[0-9]+(?:\\.[0-9]+)?")
FIELDS = ("name", "price", "sku", "brand", "stock")
HEADERS = {{"Accept": "text/html", "X-Shop": "{i}"}}
CATEGORIES = {{"books": 1, "music": 2, "games": 3, "tools": 4, "garden": 5, "toys": 6}}


def clean_text(value):
    """Strip and collapse whitespace."""
    return " ".join((value or "").split())


def parse_price(value):
    """The first number of a price text."""
    match = PRICE.search(value or "")
    return float(match.group()) if match else None


class Shop{i:05d}Spider(scrapy.Spider):
    """The catalog of shop {i}."""

    name = "shop_{i:05d}"
    allowed_domains = ["shop{i}.example"]
    start_urls = ["https://shop{i}.example/catalog/"]
    custom_settings = {{"DOWNLOAD_DELAY": 0.25, "CONCURRENT_REQUESTS_PER_DOMAIN": 2, "RETRY_TIMES": 3}}
    brands_seen = set()

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.pages = 0
        self.skus = {{}}
        self.errors = []

    def parse(self, response):
        self.pages += 1
        for href in response.css("a.product::attr(href)").getall():
            yield response.follow(href, callback=self.parse_product, headers=HEADERS)
        for category, rank in CATEGORIES.items():
            link = response.css(f"a.{{category}}::attr(href)").get()
            if link:
                yield response.follow(link, priority=rank)
        next_page = response.css("a.next::attr(href)").get()
        if next_page:
            yield response.follow(urljoin(response.url, next_page))

    def parse_product(self, response):
        item = {{field: clean_text(response.css(f".{{field}}::text").get()) for field in FIELDS}}
        item["price"] = parse_price(item["price"])
        item["url"] = response.url
        if item["sku"] in self.skus:
            self.errors.append(("duplicate", item["sku"]))
            return
        self.skus[item["sku"]] = response.url
        self.brands_seen.add(item["brand"])
        yield item

    def closed(self, reason):
        self.logger.info("shop {i}: %d pages, %d products, %d errors", self.pages, len(self.skus), len(self.errors))
'''

_LEAKY = '''"""Keeps a record per product page (the leak a benchmark attributes)."""

import scrapy


class LeakySpider(scrapy.Spider):
    """Follows every product and the next listing page, keeping ``leak`` bytes per product."""

    name = "leaky"
    leak = 8192

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.leak = int(self.leak)
        self.kept = []

    def parse(self, response):
        yield from response.follow_all(css="a.product", callback=self.parse_product)
        yield from response.follow_all(css="a.next")

    def parse_product(self, response):
        record = b"x" * self.leak  # ALLOCATES
        self.kept.append(record)  # KEEPS
        yield {"name": response.css("h1.name::text").get()}
'''

_FILLING = '''"""A cache that fills for the first products, then stops growing: it looks leaky, then levels off."""

import scrapy


class FillingSpider(scrapy.Spider):
    """Caches ``leak`` bytes for each of the first ``fill`` products."""

    name = "filling"
    leak = 8192
    fill = 250

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.leak, self.fill = int(self.leak), int(self.fill)
        self.cache = {}

    def parse(self, response):
        yield from response.follow_all(css="a.product", callback=self.parse_product)
        yield from response.follow_all(css="a.next")

    def parse_product(self, response):
        if len(self.cache) < self.fill:
            self.cache[response.url] = b"x" * self.leak
        yield {"name": response.css("h1.name::text").get()}
'''

_CLEAN = '''"""Keeps nothing."""

import scrapy


class CleanSpider(scrapy.Spider):
    """Follows every product and the next listing page."""

    name = "clean"

    def parse(self, response):
        yield from response.follow_all(css="a.product", callback=self.parse_product)
        yield from response.follow_all(css="a.next")

    def parse_product(self, response):
        yield {"name": response.css("h1.name::text").get(), "price": response.css("span.price::text").get()}
'''

#: The spiders a benchmark crawls: name -> module source.
CRAWLED = {"leaky": _LEAKY, "filling": _FILLING, "clean": _CLEAN}


def write_project(root: Path, modules: int) -> Path:
    """Write the package under ``root`` (put ``root`` on ``sys.path``) with ``modules`` generated spider modules."""
    spiders = root / PACKAGE / "spiders"
    spiders.mkdir(parents=True, exist_ok=True)
    (root / PACKAGE / "__init__.py").write_text("")
    (spiders / "__init__.py").write_text("")
    for i in range(1, modules + 1):
        (spiders / f"site_{i:05d}.py").write_text(_MODULE.format(i=i))
    for name, source in CRAWLED.items():
        (spiders / f"{name}.py").write_text(source)
    return spiders


def marked_line(name: str, mark: str) -> str:
    """``leaky.py:N``: the line of a crawled spider's module marked ``# MARK``."""
    lines = CRAWLED[name].splitlines()
    number = next(i for i, text in enumerate(lines, 1) if text.rstrip().endswith(f"# {mark}"))
    return f"{name}.py:{number}"
