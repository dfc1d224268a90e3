"""scrapy-playwright's published example (its ``examples/books.py``), on the fixture site's catalog.

The shape: listing pages downloaded plainly, every product rendered in Chromium with
``playwright_include_page=True`` in a browser context per listing page, a full-page
screenshot per product, the page closed in the callback; ``CONCURRENT_REQUESTS=32`` and
``PLAYWRIGHT_MAX_PAGES_PER_CONTEXT=4``. The page is closed in a ``finally``: Chromium under load
can refuse a screenshot, and a page left open then is what crawl_memory fails.
``ForgetfulBooksSpider`` is the same crawl with the ``await page.close()`` forgotten: every
context fills with pages nobody closes.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import scrapy
from scrapy.http import Response

from pytest_crawlmem.browser import playwright_settings

#: The published example's settings, on the installed Chromium (Playwright downloads no browser).
BOOKS_SETTINGS = playwright_settings({
    "CONCURRENT_REQUESTS": 32,
    "PLAYWRIGHT_MAX_PAGES_PER_CONTEXT": 4,
    "LOG_LEVEL": "INFO",
})


def books_settings(concurrency: int = 32, **more: Any) -> dict[str, Any]:
    """The example's settings at another concurrency (and any other setting on top)."""
    return {**BOOKS_SETTINGS, "CONCURRENT_REQUESTS": concurrency, **more}


class BooksSpider(scrapy.Spider):
    """Every product of ``pages`` listing pages of ``per_page``, rendered, screenshotted, its page closed."""

    name = "books"
    pages = 3
    per_page = 20

    async def start(self) -> AsyncIterator[Any]:
        yield scrapy.Request(f"{self.base_url}/catalog/?pages={self.pages}&per_page={self.per_page}&page=1")

    def parse(self, response: Response, current_page: int | None = None) -> Any:
        if current_page is None:  # the first listing page says how many there are
            page_count = int(response.css(".pager::text").re_first(r"Page \d+ of (\d+)") or 1)
            for page in range(2, page_count + 1):
                url = f"/catalog/?pages={self.pages}&per_page={self.per_page}&page={page}"
                yield response.follow(url, cb_kwargs={"current_page": page})
        current_page = current_page or 1
        for product in response.css("a.product"):
            yield response.follow(product, callback=self.parse_book, meta={
                "playwright": True,
                "playwright_include_page": True,
                "playwright_context": f"page-{current_page}",
            })

    async def parse_book(self, response: Response) -> dict[str, Any]:
        page = response.meta["playwright_page"]
        try:
            screenshot = await page.screenshot(full_page=True)
        finally:  # closed also when Chromium refuses the screenshot ("Unable to capture screenshot", seen at 32 in flight)
            await page.close()
        return {"url": response.url, "name": response.css("h1.name::text").get(), "screenshot_bytes": len(screenshot)}


def products_handled(result: Any) -> int:
    """Products scraped, and those whose screenshot Chromium refused (the callback raised Playwright's ``Error``)."""
    return int(result.items_scraped) + int(result.stats.get("spider_exceptions/Error", 0))


class ForgetfulBooksSpider(BooksSpider):
    """The same crawl, the page never closed: the contexts' page slots run out and the crawl would hang."""

    name = "forgetful_books"

    async def parse_book(self, response: Response) -> dict[str, Any]:
        page = response.meta["playwright_page"]
        screenshot = await page.screenshot(full_page=True)
        return {"url": response.url, "name": response.css("h1.name::text").get(), "screenshot_bytes": len(screenshot)}
