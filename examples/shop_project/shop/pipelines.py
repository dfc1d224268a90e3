"""The shop's pipelines: parse prices, drop incomplete products, drop products seen before (crawl process)."""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation
from typing import Any

from itemadapter import ItemAdapter
from scrapy.exceptions import DropItem

_SYMBOLS = {"€": "EUR", "$": "USD", "£": "GBP"}
_NUMBER = re.compile(r"[\d.,]+")


class PricePipeline:
    """Turn a displayed price ("€1,234.50") into a Decimal and a currency code."""

    def process_item(self, item: Any) -> Any:
        adapter = ItemAdapter(item)
        text = (adapter.get("price") or "").strip()
        match = _NUMBER.search(text)
        if match is None:
            adapter["price"] = None
            return item
        try:
            adapter["price"] = Decimal(match[0].replace(",", ""))
        except InvalidOperation:
            adapter["price"] = None
        adapter["currency"] = _SYMBOLS.get(text[:1], adapter.get("currency"))
        return item


class RequiredFieldsPipeline:
    """Drop products without a SKU or a price."""

    def process_item(self, item: Any) -> Any:
        adapter = ItemAdapter(item)
        missing = [name for name in ("sku", "price") if adapter.get(name) in (None, "")]
        if missing:
            raise DropItem(f"missing {', '.join(missing)} on {adapter.get('url')}")
        return item


class DuplicatesPipeline:
    """Drop a product whose SKU was seen before in this crawl (a product listed in two categories, or twice)."""

    def __init__(self) -> None:
        self.ids_seen: set[str] = set()

    def process_item(self, item: Any) -> Any:
        sku = ItemAdapter(item).get("sku")
        if sku in self.ids_seen:
            raise DropItem(f"duplicate product {sku}")
        self.ids_seen.add(sku)
        return item
