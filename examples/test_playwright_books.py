"""scrapy-playwright's published example under crawl_memory: pages closed pass, pages forgotten fail fast.

Needs the browser extra (``pip install -e '.[browser]'``) and Debian's ``chromium``.
"""

from __future__ import annotations

import pytest

pytest.importorskip("scrapy_playwright", reason="the browser extra is not installed: pip install -e '.[browser]'")

from pytest_crawlmem.browser import BrowserNotFound, chromium_path

try:
    chromium_path()
except BrowserNotFound as exc:  # pragma: no cover - CI installs chromium
    pytest.skip(str(exc), allow_module_level=True)

from playwright.async_api import Error as PlaywrightError
from playwright_books import BooksSpider, ForgetfulBooksSpider, books_settings, products_handled


# 63 responses are too few for a leak verdict (160 are needed): this test budgets the pages, and says so
@pytest.mark.crawl_memory(max_open_pages=40, timeout=120, leak="off")
def test_the_published_example_closes_its_pages(crawl, fixture_site):
    result = crawl(BooksSpider, settings=books_settings(), base_url=fixture_site.base_url, pages=3)
    assert products_handled(result) == 60  # an item each, unless Chromium refused its screenshot (the page closed)
    assert result.browser is not None and result.browser.unclosed_pages == 0
    assert result.stats.get("playwright/page_count") == 60  # every product rendered in Chromium, each on its page


class RefusedScreenshotsSpider(BooksSpider):
    """Chromium refuses every third product's screenshot, as it can under load: the page is closed all the same."""

    name = "refused_screenshots"

    async def parse_book(self, response):  # type: ignore[no-untyped-def]
        if int(response.url.rsplit("/", 1)[-1]) % 3 == 0:
            async def refuse(**kwargs):  # type: ignore[no-untyped-def]
                raise PlaywrightError("Page.screenshot: Protocol error (Page.captureScreenshot): Unable to capture")
            response.meta["playwright_page"].screenshot = refuse
        return await super().parse_book(response)


@pytest.mark.crawl_memory(max_open_pages=40, timeout=120, leak="off")
def test_a_refused_screenshot_still_closes_its_page(crawl, fixture_site):
    result = crawl(RefusedScreenshotsSpider, settings=books_settings(), base_url=fixture_site.base_url, pages=3)
    assert products_handled(result) == 60 and result.items_scraped == 40  # product ids 1-60: 20 refused
    assert result.browser is not None and result.browser.unclosed_pages == 0


@pytest.mark.xfail(strict=True, reason="pages never closed: the crawl is stopped at the stall, the cause named")
@pytest.mark.crawl_memory(timeout=60)
def test_the_published_example_without_page_close_is_stopped(crawl, fixture_site):
    crawl(ForgetfulBooksSpider, settings=books_settings(8, CRAWLMEM_STALL_SECONDS=3), base_url=fixture_site.base_url,
          pages=3)
