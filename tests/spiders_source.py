"""Spiders used by the pytester tests, written into each test's temporary directory."""

CATALOG_SPIDER = '''
class Catalog(scrapy.Spider):
    name = "catalog"
    # Scrapy 2.19 starts CONCURRENT_ITEMS (100) asyncio tasks for every response to process its callback's output,
    # and an attribution window traces each: at 4 (a product page yields one item, a listing page 21 requests) the
    # leak suites' inner sessions spend about a third less CPU (measured on the suite, git history of benchmarks/results)
    custom_settings = {"CONCURRENT_ITEMS": 4}

    async def start(self):
        for url in self.start_urls:
            yield scrapy.Request(url)

    def parse(self, response):
        yield from response.follow_all(css="a.product", callback=self.parse_product)
        yield from response.follow_all(css="a.next")

    def parse_product(self, response):
        yield {"name": response.css("h1.name::text").get(), "price": response.css("span.price::text").get()}
'''

#: The catalog spider yielding each product's id only: for tests that check every product was scraped once.
PRODUCT_IDS_SPIDER = '''
class ProductIds(Catalog):
    def parse_product(self, response):
        yield {"id": int(response.url.rsplit("/", 1)[1])}
'''

#: The leaky catalog spider, shared by every suite that writes spiders (tests/test_cluster.py too).
HOARDER_SPIDER = '''
class Hoarder(Catalog):
    """Keeps 4 KiB per product page: a leak of about 2 KiB per response."""

    name = "hoarder"
    kept = []

    def parse_product(self, response):
        self.kept.append(b"x" * 4096 + response.url.encode())
        yield from super().parse_product(response)
'''

SPIDERS = '''
import gc
import time

import scrapy


''' + CATALOG_SPIDER + HOARDER_SPIDER + '''

class Ballast(Catalog):
    """Allocates 64 MiB at its first response and keeps it to the end of the crawl."""

    name = "ballast"
    ballast = None

    def parse(self, response):
        if Ballast.ballast is None:
            Ballast.ballast = bytearray(b"1" * (64 * 2**20))
        yield from super().parse(response)


class Spike(Catalog):
    """Allocates 300 MiB in one callback and frees it before returning, while blocking the reactor."""

    name = "spike"

    def parse(self, response):
        if not getattr(self, "spiked", False):
            self.spiked = True
            blob = bytearray(b"1" * (300 * 2**20))
            time.sleep(0.5)
            del blob
        yield from super().parse(response)


class SlowCallbacks(scrapy.Spider):
    """Large pages and slow callbacks: responses pile up in the scraper."""

    name = "slow_callbacks"

    async def start(self):
        for i in range(40):
            yield scrapy.Request(self.base + f"/large/{i}?kb=256")

    def parse(self, response):
        time.sleep(0.05)
        yield {"size": len(response.body)}


class SlowPages(scrapy.Spider):
    """Pages that take 300 ms each: downloads stay in flight."""

    name = "slow_pages"

    async def start(self):
        for i in range(24):
            yield scrapy.Request(self.base + f"/slow/{i}?ms=300")

    def parse(self, response):
        yield {"url": response.url}


class Grower(scrapy.Spider):
    """Keeps 1 MiB per response, about 100 MiB/s: a runaway crawl."""

    name = "grower"
    kept = []

    async def start(self):
        for i in range(3000):
            yield scrapy.Request(self.base + f"/slow/{i}?ms=20")

    def parse(self, response):
        self.kept.append(b"x" * 2**20)
        yield {"url": response.url}


class NeverEnding(scrapy.Spider):
    """One response that takes ten minutes."""

    name = "never_ending"

    async def start(self):
        yield scrapy.Request(self.base + "/slow/1?ms=600000")

    def parse(self, response):
        yield {"url": response.url}
'''
