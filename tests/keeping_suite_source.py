"""An inner test suite of leaks whose holder is not a list on the spider (run by test_keeping_line.py, issue 27).

Each keeper allocates what it keeps on one line (``# ALLOCATES``) and stores it on another (``# KEEPS``): the
line the verdict must name first is the storing one. Pillow (the ``test`` extra) decodes the pipeline's thumbnails.
"""

from spiders_source import CATALOG_SPIDER

SUITE = '''
import functools
import io

import pytest
import scrapy
from scrapy import signals

RECEIVED = []


''' + CATALOG_SPIDER + '''

class DeepGroups(Catalog):
    """Items grouped two levels below the spider: self.groups[key]["items"]."""

    name = "deep_groups"

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.groups = {}

    def parse_product(self, response):
        text = response.css("div.description").get() * 16  # ALLOCATES deep_groups
        key = response.url[-1]
        self.groups.setdefault(key, {"items": []})
        self.groups[key]["items"].append(text)  # KEEPS deep_groups
        yield from super().parse_product(response)


class DeeperGroups(Catalog):
    """Three levels below the spider: self.shop["groups"][key]["items"]."""

    name = "deeper_groups"

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.shop = {"groups": {}, "name": "shop"}

    def parse_product(self, response):
        text = response.css("div.description").get() * 16  # ALLOCATES deeper_groups
        key = response.url[-1]
        if key not in self.shop["groups"]:
            self.shop["groups"][key] = {"items": [], "key": key}
        self.shop["groups"][key]["items"].append(text)  # KEEPS deeper_groups
        yield from super().parse_product(response)


class Page:
    """Every page the project builds registers itself on the class."""

    registry = {}

    def __init__(self, url, text):
        self.url = url
        self.text = text
        Page.registry[url] = self  # KEEPS class_registry


class ClassRegistry(Catalog):
    name = "class_registry"

    def parse_product(self, response):
        page = Page(response.url, response.css("div.description").get() * 16)  # ALLOCATES class_registry
        yield {"url": page.url}


class CachedDetails(Catalog):
    """An unbounded lru_cache on a method, keyed by the page text."""

    name = "cached_details"

    @functools.lru_cache(maxsize=None)
    def details(self, url, html):  # KEEPS cached_details
        return len(html)

    def parse_product(self, response):
        self.details(response.url, response.css("div.description").get() * 16)  # ALLOCATES cached_details
        yield from super().parse_product(response)


def on_page(response, request, spider):
    if "/product/" in response.url:
        page = response.css("div.description").get() * 16  # ALLOCATES signal_list
        RECEIVED.append(page)  # KEEPS signal_list


class SignalList(Catalog):
    """A module-level response_received receiver appending to a module-level list."""

    name = "signal_list"

    @classmethod
    def from_crawler(cls, crawler, *args, **kwargs):
        spider = super().from_crawler(crawler, *args, **kwargs)
        crawler.signals.connect(on_page, signal=signals.response_received)
        return spider


class PageStore:
    """A downloader middleware keeping every product body, per URL."""

    def __init__(self):
        self.pages = {}

    def process_response(self, request, response, spider=None):
        if "/product/" in request.url:
            body = response.body * 16  # ALLOCATES component_dict
            self.pages[request.url] = body  # KEEPS component_dict
        return response


class StatsPerUrl(Catalog):
    """A stats key per URL."""

    name = "stats_per_url"

    def parse_product(self, response):
        summary = response.css("div.description").get() * 16  # ALLOCATES stats_per_url
        self.crawler.stats.set_value(f"seen/{response.url}", summary)  # KEEPS stats_per_url
        yield from super().parse_product(response)


class KeptElements(Catalog):
    """One lxml element per page: each keeps its whole libxml2 document (native memory)."""

    name = "kept_elements"

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.nodes = []

    def parse_product(self, response):
        node = response.xpath("//main")[0].root  # ALLOCATES kept_elements
        self.nodes.append(node)  # KEEPS kept_elements
        yield from super().parse_product(response)


def product_png():
    """The PNG a product image download would return (made once)."""
    from PIL import Image

    out = io.BytesIO()
    Image.new("RGB", (128, 128), (200, 30, 30)).save(out, format="PNG")
    return out.getvalue()


class Thumbnails:
    """An item pipeline keeping a decoded Pillow thumbnail per item: Pillow's pixels are native memory."""

    def __init__(self):
        self.thumbnails = {}
        self.png = product_png()

    def process_item(self, item, spider=None):
        from PIL import Image

        thumbnail = Image.open(io.BytesIO(self.png)).resize((64, 64))  # ALLOCATES kept_thumbnails
        self.thumbnails[f"{item['name']}-{len(self.thumbnails)}"] = thumbnail  # KEEPS kept_thumbnails
        return item


CATALOG = "/catalog/?pages=30&per_page=20"  # 630 responses, as in the leak suite: a verdict needs 170, the window 100
LEAKS = {
    "deep_groups": (DeepGroups, {}),
    "deeper_groups": (DeeperGroups, {}),
    "class_registry": (ClassRegistry, {}),
    "cached_details": (CachedDetails, {}),
    "signal_list": (SignalList, {}),
    "component_dict": (Catalog, {"DOWNLOADER_MIDDLEWARES": {"test_suite.PageStore": 950}}),
    "stats_per_url": (StatsPerUrl, {}),
    "kept_elements": (KeptElements, {}),
    "kept_thumbnails": (Catalog, {"ITEM_PIPELINES": {"test_suite.Thumbnails": 300}}),
}


@pytest.mark.crawl_memory(leak="fail")
@pytest.mark.parametrize("case", sorted(LEAKS))
def test_leak(crawl, fixture_site, case):
    spider, settings = LEAKS[case]
    crawl(spider, start_urls=[fixture_site.url(CATALOG)], settings=settings)
'''
