"""Items of the catalog project."""

import scrapy


class Product(scrapy.Item):
    """A product page of the shop."""

    url = scrapy.Field()
    sku = scrapy.Field()
    name = scrapy.Field()
    price = scrapy.Field()
    price_cents = scrapy.Field()
