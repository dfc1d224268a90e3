"""The books-css spider: a catalog's listing pages and each book's page, with CSS selectors (crawl process).

Its module name has a hyphen, as many public Scrapy projects' do: it cannot be imported with an
``import`` statement, so tests name it as ``scrapy crawl`` does: ``crawl("books-css")``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import scrapy

from booksbot.items import BookItem


class BooksCssSpider(scrapy.Spider):
    """Follows every book of every listing page of https://books.example/catalog/."""

    name = "books-css"
    allowed_domains = ["books.example"]  # noqa: RUF012 - Scrapy's spider attributes are plain lists
    start_urls = ["https://books.example/catalog/?pages=6&per_page=10"]  # noqa: RUF012

    def parse(self, response: Any) -> Iterator[Any]:
        """A listing page: its books, then the next page."""
        yield from response.follow_all(css="a.product", callback=self.parse_book)
        yield from response.follow_all(css="a.next")

    def parse_book(self, response: Any) -> Iterator[BookItem]:
        """A book's page."""
        yield BookItem(url=response.url, name=response.css("h1.name::text").get(),
                       price=response.css("span.price::text").get())
