"""Spiders of benchmarks/keeping_line.py: one per holder shape, each storing on one line what it allocated on another.

A module of its own, free of side effects (no reactor is installed on import). The line each keeper stores on ends with
``# KEEPS <shape>``, the line it allocates on with ``# ALLOCATES <shape>``.
"""

from __future__ import annotations

import functools
import io
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
}
#: Shapes whose growth is mostly native memory (the reason must say so).
NATIVE = frozenset({"lxml", "pillow"})
#: Shapes that need a package beyond Scrapy's (the ``test`` extra installs them): shape -> module.
NEEDS = {"pillow": "PIL", "numpy": "numpy"}
