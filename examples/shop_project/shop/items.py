"""The shop's item (crawl process)."""

from __future__ import annotations

import scrapy


class ProductItem(scrapy.Item):
    """One product page."""

    url = scrapy.Field()
    sku = scrapy.Field()
    name = scrapy.Field()
    category = scrapy.Field()
    price = scrapy.Field()
    currency = scrapy.Field()
    in_stock = scrapy.Field()
    description = scrapy.Field()
    image_urls = scrapy.Field()
    specs = scrapy.Field()
