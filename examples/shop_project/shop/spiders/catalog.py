"""The shop spider: categories, paginated listings, product pages (crawl process)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import scrapy
from scrapy.http import Response

from shop.items import ProductItem


class ShopSpider(scrapy.Spider):
    """Crawls https://www.acme-shop.example: every category, every listing page, every product."""

    name = "shop"
    allowed_domains = ["acme-shop.example"]  # noqa: RUF012 - Scrapy's spider attributes are plain lists
    start_urls = ["https://www.acme-shop.example/"]  # noqa: RUF012

    def parse(self, response: Response) -> Iterator[Any]:
        """Home page: follow every category, and the sale banner (a redirect)."""
        for href in response.css("nav.categories a::attr(href)").getall():
            yield response.follow(href, callback=self.parse_listing)
        sale = response.css("a.sale-banner::attr(href)").get()
        if sale:
            yield response.follow(sale, callback=self.parse_listing)

    def parse_listing(self, response: Response) -> Iterator[Any]:
        """A category page: its products, then the next page."""
        for href in response.css("ul.products li a.product-link::attr(href)").getall():
            yield response.follow(href, callback=self.parse_product)
        next_page = response.css("a[rel=next]::attr(href)").get()
        if next_page:
            yield response.follow(next_page, callback=self.parse_listing)

    def parse_product(self, response: Response) -> Iterator[Any]:
        """A product page: one item."""
        specs = {
            row.css("th::text").get("").strip(): row.css("td::text").get("").strip()
            for row in response.css("table.specs tr")
        }
        yield ProductItem(
            url=response.url,
            sku=response.css("[itemprop=sku]::text").get(),
            name=response.css("h1.product-title::text").get("").strip(),
            category=response.css("nav.breadcrumbs a::text").getall()[-1:] or None,
            price=response.css("span.price::text").get(),
            currency=response.css("meta[itemprop=priceCurrency]::attr(content)").get(),
            in_stock=bool(response.css("link[itemprop=availability][href$=InStock]")),
            description=" ".join(response.css("div.description p::text").getall()),
            image_urls=[response.urljoin(src) for src in response.css("div.gallery img::attr(src)").getall()],
            specs=specs,
        )
