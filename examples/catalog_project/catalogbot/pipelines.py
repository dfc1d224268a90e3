"""Pipelines of the catalog project: what `scrapy crawl catalog` runs on every item."""

from __future__ import annotations

from typing import Any

from scrapy.exceptions import DropItem


class PricePipeline:
    """Turns the displayed price into integer cents; drops products without a price."""

    @classmethod
    def from_crawler(cls, crawler: Any) -> PricePipeline:
        pipeline = cls()
        pipeline.stats = crawler.stats
        return pipeline

    def process_item(self, item: Any) -> Any:
        if not item.get("price"):
            raise DropItem(f"no price on {item.get('url')}")
        item["price_cents"] = round(float(item["price"]) * 100)
        self.stats.inc_value("catalogbot/priced")
        return item


class DuplicatesPipeline:
    """Drops a product seen before (a set of SKUs: a few dozen bytes per product, by design)."""

    def __init__(self) -> None:
        self.seen: set[str] = set()

    def process_item(self, item: Any) -> Any:
        if item["sku"] in self.seen:
            raise DropItem(f"duplicate {item['sku']}")
        self.seen.add(item["sku"])
        return item
