"""Example spiders for the fixture site: a healthy catalog crawl and two that misbehave."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any, ClassVar

import scrapy
from scrapy.http import Response


class CatalogSpider(scrapy.Spider):
    """Walks /catalog/ listing pages and scrapes every product page."""

    name = "catalog"

    async def start(self) -> AsyncIterator[Any]:
        for url in self.start_urls:
            yield scrapy.Request(url)

    def parse(self, response: Response) -> Any:
        yield from response.follow_all(css="a.product", callback=self.parse_product)
        yield from response.follow_all(css="a.next")

    def parse_product(self, response: Response) -> Any:
        yield {
            "url": response.url,
            "name": response.css("h1.name::text").get(),
            "price": float(response.css("span.price::text").get("0")),
        }


class HoardingSpider(CatalogSpider):
    """A catalog spider that keeps every product page body: the classic callback leak."""

    name = "hoarding"
    seen_pages: ClassVar[list[bytes]] = []

    def parse_product(self, response: Response) -> Any:
        self.seen_pages.append(response.body + b" " * 2048)  # retained for the whole crawl
        yield from super().parse_product(response)


class FrontierSpider(scrapy.Spider):
    """Follows every link of /explode/: requests are discovered far faster than downloaded."""

    name = "frontier"

    async def start(self) -> AsyncIterator[Any]:
        for url in self.start_urls:
            yield scrapy.Request(url)

    def parse(self, response: Response) -> Any:
        yield from response.follow_all(css="a")


class LargePagesSpider(scrapy.Spider):
    """Fetches ``pages`` large pages (1 MiB, every tenth 4 MiB) from ``base``: one item per page."""

    name = "large_pages"
    pages = 40

    async def start(self) -> AsyncIterator[Any]:
        for i in range(int(self.pages)):
            kb = 4096 if i % 10 == 5 else 1024
            yield scrapy.Request(f"{self.base}/large/{i}?kb={kb}")

    def parse(self, response: Response) -> Any:
        yield {"url": response.url, "bytes": len(response.body)}
