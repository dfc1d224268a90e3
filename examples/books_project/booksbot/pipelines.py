"""The booksbot project's item pipeline (crawl process)."""

from __future__ import annotations

from typing import Any

from scrapy.exceptions import DropItem


class PricePipeline:
    """Parses the price text into a float; drops a book without one."""

    def process_item(self, item: Any, spider: Any = None) -> Any:
        """Return the item with ``price`` as a number (``spider``: Scrapy 2.13 passes it, later versions do not)."""
        text = (item.get("price") or "").strip().lstrip("$")
        if not text:
            raise DropItem(f"no price: {item.get('url')}")
        item["price"] = float(text)
        return item
