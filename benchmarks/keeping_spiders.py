"""Spiders of benchmarks/keeping_line.py: one per holder shape, each storing on one line what it allocated on another.

A module of its own, free of side effects (no reactor is installed on import). The line each keeper stores on ends with
``# KEEPS <shape>``, the line it allocates on with ``# ALLOCATES <shape>``.
"""

from __future__ import annotations

import functools
import io
import logging
import queue
import threading
import time
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

from bench_spiders import Catalog
from scrapy import signals

#: What the signal receiver keeps (a module-level list).
RECEIVED: list[str] = []


class DepthTwo(Catalog):
    """Items grouped two levels below the spider."""

    name = "depth_two"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.groups: dict[str, dict[str, list[str]]] = {}

    def parse_product(self, response: Any) -> Iterator[Any]:
        """Keep the description, grouped by the URL's last digit."""
        text = response.css("div.description").get() * 8  # ALLOCATES depth2
        key = response.url[-1]
        self.groups.setdefault(key, {"items": []})
        self.groups[key]["items"].append(text)  # KEEPS depth2
        yield from super().parse_product(response)


class DepthThree(Catalog):
    """Three levels below the spider."""

    name = "depth_three"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.shop: dict[str, Any] = {"groups": {}, "name": "shop"}

    def parse_product(self, response: Any) -> Iterator[Any]:
        """Keep the description three levels down."""
        text = response.css("div.description").get() * 8  # ALLOCATES depth3
        key = response.url[-1]
        if key not in self.shop["groups"]:
            self.shop["groups"][key] = {"items": [], "key": key}
        self.shop["groups"][key]["items"].append(text)  # KEEPS depth3
        yield from super().parse_product(response)


class Page:
    """A project class whose instances register themselves on the class."""

    registry: ClassVar[dict[str, Page]] = {}

    def __init__(self, url: str, text: str) -> None:
        self.url = url
        self.text = text
        Page.registry[url] = self  # KEEPS class_attribute


class ClassAttribute(Catalog):
    """Builds a Page per product."""

    name = "class_attribute"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        Page.registry.clear()

    def parse_product(self, response: Any) -> Iterator[Any]:
        """Build the page (it registers itself)."""
        page = Page(response.url, response.css("div.description").get() * 8)  # ALLOCATES class_attribute
        yield {"url": page.url}


class PageStore:
    """A downloader middleware keeping every product body per URL."""

    def __init__(self) -> None:
        self.pages: dict[str, bytes] = {}

    def process_response(self, request: Any, response: Any, spider: Any = None) -> Any:
        """Keep the body of a product page."""
        if "/product/" in request.url:
            body = response.body * 8  # ALLOCATES component_dict
            self.pages[request.url] = body  # KEEPS component_dict
        return response


class StatsPerUrl(Catalog):
    """A stats key per URL."""

    name = "stats_per_url"

    def parse_product(self, response: Any) -> Iterator[Any]:
        """Store the description under a key of its own."""
        summary = response.css("div.description").get() * 8  # ALLOCATES stats_key
        self.crawler.stats.set_value(f"seen/{response.url}", summary)  # KEEPS stats_key
        yield from super().parse_product(response)


def on_page(response: Any, request: Any, spider: Any) -> None:
    """A response_received receiver keeping each product's description."""
    if "/product/" in response.url:
        page = response.css("div.description").get() * 8  # ALLOCATES signal
        RECEIVED.append(page)  # KEEPS signal


class SignalReceiver(Catalog):
    """Connects the keeping receiver."""

    name = "signal_receiver"

    @classmethod
    def from_crawler(cls, crawler: Any, *args: Any, **kwargs: Any) -> Any:
        """Connect ``on_page``."""
        spider = super().from_crawler(crawler, *args, **kwargs)
        RECEIVED.clear()
        crawler.signals.connect(on_page, signal=signals.response_received)
        return spider


class CachedMethod(Catalog):
    """An unbounded lru_cache on a method, keyed by the page text."""

    name = "cached_method"

    @functools.cache  # noqa: B019 (the leak under test)
    def details(self, url: str, html: str) -> int:  # KEEPS lru_cache
        """The cached computation."""
        return len(html)

    def parse_product(self, response: Any) -> Iterator[Any]:
        """Call through the cache."""
        self.details(response.url, response.css("div.description").get() * 8)  # ALLOCATES lru_cache
        yield from super().parse_product(response)


class LxmlElements(Catalog):
    """One lxml element per page: each keeps its libxml2 document (native memory)."""

    name = "lxml_elements"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.nodes: list[Any] = []

    def parse_product(self, response: Any) -> Iterator[Any]:
        """Keep the page's main element."""
        node = response.xpath("//main")[0].root  # ALLOCATES lxml
        self.nodes.append(node)  # KEEPS lxml
        yield from super().parse_product(response)


def _png(size: int = 128) -> bytes:
    """A PNG of ``size`` x ``size`` (what a product image download returns), made once."""
    from PIL import Image

    out = io.BytesIO()
    Image.new("RGB", (size, size), (200, 30, 30)).save(out, format="PNG")
    return out.getvalue()


class Thumbnails:
    """An item pipeline keeping a decoded Pillow thumbnail per item (native memory: Pillow's image cores)."""

    def __init__(self) -> None:
        self.thumbnails: dict[str, Any] = {}
        self.png = _png()

    def process_item(self, item: Any, spider: Any = None) -> Any:
        """Decode the product's image and keep its 64x64 thumbnail by product name."""
        from PIL import Image

        thumbnail = Image.open(io.BytesIO(self.png)).resize((64, 64))  # ALLOCATES pillow
        self.thumbnails[f"{item['name']}-{len(self.thumbnails)}"] = thumbnail  # KEEPS pillow
        return item


class Arrays(Catalog):
    """One numpy array per product (numpy reports its buffers to tracemalloc: this growth is not native)."""

    name = "numpy_arrays"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.features: list[Any] = []

    def parse_product(self, response: Any) -> Iterator[Any]:
        """Keep a float64 feature vector of the page's bytes."""
        import numpy

        vector = numpy.frombuffer(response.body[:512].ljust(512), dtype=numpy.uint8).astype(numpy.float64)  # ALLOCATES numpy
        self.features.append(vector)  # KEEPS numpy
        yield from super().parse_product(response)


class AuditStart:
    """A downloader middleware stamping when each request started: another key of the same meta dicts."""

    def process_request(self, request: Any, spider: Any = None) -> None:
        """Stamp the request."""
        request.meta["audit_started"] = time.monotonic()


class MetaRows(Catalog):
    """Every row so far handed on from page to page in ``request.meta["rows"]``."""

    name = "meta_rows"

    def parse(self, response: Any) -> Iterator[Any]:
        """Hand the rows on to the products and the next listing page."""
        meta = {"rows": response.meta.get("rows", [])}
        yield from response.follow_all(css="a.product", callback=self.parse_product, meta=meta)
        yield from response.follow_all(css="a.next", meta=meta)

    def parse_product(self, response: Any) -> Iterator[Any]:
        """Add this product's row."""
        row = response.css("div.description").get() * 8  # ALLOCATES meta_rows
        rows = response.meta["rows"]
        rows.append(row)  # KEEPS meta_rows
        yield {"name": response.css("h1.name::text").get()}


class FinishedGroups(Catalog):
    """Products filed by group two levels below the spider, the group made on one line and filled on another."""

    name = "finished_groups"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.groups: dict[str, dict[str, Any]] = {}

    def parse_product(self, response: Any) -> Iterator[Any]:
        """File the product in its group."""
        product = {"name": response.css("h1.name::text").get(),
                   "text": response.css("div.description").get() * 8}  # ALLOCATES finished_groups
        key = response.url[-1]
        group = self.groups.get(key)
        if group is None:
            group = self.groups[key] = {"products": [], "opened": response.url}
        group["products"].append(product)  # KEEPS finished_groups
        yield {"name": product["name"]}


class Described(Catalog):
    """Items carrying the product's description (what the pipelines below keep)."""

    name = "described"

    def parse_product(self, response: Any) -> Iterator[Any]:
        """One item with its description."""
        yield {"name": response.url.rsplit("/", 1)[1],
               "description": response.css("div.description").get() * 8}  # ALLOCATES items


class QueueWriter:
    """A pipeline handing rows to a writer thread, which died on its first row: nobody drains the queue."""

    def open_spider(self, spider: Any = None) -> None:
        """Start the writer."""
        self.rows: queue.Queue[dict[str, Any]] = queue.Queue()
        self.writer = threading.Thread(target=self.write_rows, daemon=True)
        self.writer.start()

    def write_rows(self) -> None:
        """Fail on the first row."""
        row = self.rows.get()
        raise RuntimeError(f"cannot write {row['name']}: no such table")

    def process_item(self, item: Any, spider: Any = None) -> Any:
        """Queue the row for the writer."""
        self.rows.put(dict(item))  # KEEPS queue_writer
        return item


class ProductFilter(logging.Filter):
    """A logging filter holding the product it was made for."""

    def __init__(self, item: dict[str, Any]) -> None:
        super().__init__()
        self.item = item

    def filter(self, record: logging.LogRecord) -> bool:
        """Let every record through."""
        return True


class LoggerPerProduct(Catalog):
    """A logger per product: the logging module keeps every one, with its filter and the item it holds (named per crawl:
    a later crawl of the benchmark's process makes loggers of its own, as the first does)."""

    name = "logger_per_product"

    def parse_product(self, response: Any) -> Iterator[Any]:
        """Log through the product's own logger."""
        item = {"name": response.css("h1.name::text").get(),
                "text": response.css("div.description").get() * 8}  # ALLOCATES logger_per_product
        logger = logging.getLogger(f"shop.{id(self)}.{response.url.rsplit('/', 1)[1]}")  # KEEPS logger_per_product
        logger.addFilter(ProductFilter(item))
        yield {"name": item["name"]}


class PriceHistoryPipeline:
    """Every description seen, per product, in a ``defaultdict(list)``."""

    def __init__(self) -> None:
        self.history: defaultdict[str, list[str]] = defaultdict(list)

    def process_item(self, item: Any, spider: Any = None) -> Any:
        """Keep the description under the product."""
        self.history[item["name"]].append(item["description"])  # KEEPS defaultdict_history
        return item


def marked(shape: str, what: str) -> str:
    """``keeping_spiders.py:N``: the line ending with ``# KEEPS shape`` (or ``# ALLOCATES shape``)."""
    lines = Path(__file__).read_text().splitlines()
    number = next(i for i, line in enumerate(lines, 1) if line.rstrip().endswith(f"# {what} {shape}"))
    return f"{Path(__file__).name}:{number}"


#: shape -> (spider, settings beyond the benchmark's base settings)
SHAPES: dict[str, tuple[type, dict[str, Any]]] = {
    "depth2": (DepthTwo, {}),
    "depth3": (DepthThree, {}),
    "class_attribute": (ClassAttribute, {}),
    "component_dict": (Catalog, {"DOWNLOADER_MIDDLEWARES": {"keeping_spiders.PageStore": 950}}),
    "stats_key": (StatsPerUrl, {}),
    "signal": (SignalReceiver, {}),
    "lru_cache": (CachedMethod, {}),
    "lxml": (LxmlElements, {}),
    "pillow": (Catalog, {"ITEM_PIPELINES": {"keeping_spiders.Thumbnails": 300}}),
    "numpy": (Arrays, {}),
    "meta_rows": (MetaRows, {"DOWNLOADER_MIDDLEWARES": {"keeping_spiders.AuditStart": 950}}),
    "finished_groups": (FinishedGroups, {}),
    "queue_writer": (Described, {"ITEM_PIPELINES": {"keeping_spiders.QueueWriter": 300}}),
    "logger_per_product": (LoggerPerProduct, {}),
    "defaultdict_history": (Described, {"ITEM_PIPELINES": {"keeping_spiders.PriceHistoryPipeline": 300}}),
}
#: Shapes whose growth is mostly native memory (the reason must say so).
NATIVE = frozenset({"lxml", "pillow"})
#: Shapes that need a package beyond Scrapy's (the ``test`` extra installs them): shape -> module.
NEEDS = {"pillow": "PIL", "numpy": "numpy"}
