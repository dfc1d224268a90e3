"""The catalog spider: listing pages, then every product page."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import scrapy
from scrapy.http import Response

from catalogbot.items import Product


class CatalogSpider(scrapy.Spider):
    """Run with `scrapy crawl catalog -a start_url=URL`."""

    name = "catalog"

    def __init__(self, start_url: str = "", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.start_url = start_url

    async def start(self) -> AsyncIterator[Any]:
        yield scrapy.Request(self.start_url)

    def parse(self, response: Response) -> Any:
        yield from response.follow_all(css="a.product", callback=self.parse_product)
        yield from response.follow_all(css="a.next")

    def parse_product(self, response: Response) -> Any:
        yield Product(
            url=response.url,
            sku=response.url.rsplit("/", 1)[-1],
            name=response.css("h1.name::text").get(),
            price=response.css("span.price::text").get(),
        )
