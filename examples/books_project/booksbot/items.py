"""The items of the booksbot project (crawl process)."""

from __future__ import annotations

import scrapy


class BookItem(scrapy.Item):
    """One book of the catalog."""

    url = scrapy.Field()
    name = scrapy.Field()
    price = scrapy.Field()
