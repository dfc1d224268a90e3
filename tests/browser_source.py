"""Browser spiders used by the pytester tests of browser crawls, written into each test's directory."""

BROWSER_SPIDERS = '''
import scrapy

from pytest_crawlmem.browser.settings import playwright_settings

SETTINGS = playwright_settings({"CONCURRENT_REQUESTS": 4, "LOG_LEVEL": "INFO"})


class JsPages(scrapy.Spider):
    """Renders N /js/ pages in Chromium and counts the products their script built."""

    name = "js_pages"
    pages = 60

    def meta(self, number):
        return {"playwright": True}

    async def start(self):
        for number in range(int(self.pages)):
            yield scrapy.Request(f"{self.base_url}/js/{number}", meta=self.meta(number))

    def parse(self, response):
        products = len(response.css("div.product"))
        if products == 20:  # the page's script built the DOM: Chromium really rendered it
            self.crawler.stats.inc_value("js/rendered_pages")
        yield {"products": products}


class ContextPerRequest(JsPages):
    """Names a new browser context per request: scrapy-playwright keeps every one open."""

    name = "context_per_request"

    def meta(self, number):
        return {"playwright": True, "playwright_context": f"ctx-{number}"}


class KeepsPages(JsPages):
    """Asks for the page and never closes it: the crawl runs out of page slots and hangs."""

    name = "keeps_pages"

    def meta(self, number):
        return {"playwright": True, "playwright_include_page": True}


class ClosesPages(KeepsPages):
    """Asks for the page and closes it in the callback: what scrapy-playwright's docs ask for."""

    name = "closes_pages"

    async def parse(self, response):
        page = response.meta["playwright_page"]
        title = await page.title()
        await page.close()
        yield {"title": title, "products": len(response.css("div.product"))}
'''

FORGETFUL_SPIDERS = '''
import scrapy

from pytest_crawlmem.browser.settings import playwright_settings


def forgetful_settings(concurrency):
    """The issue's reproduction: more requests in flight than one context has page slots."""
    return playwright_settings({"CONCURRENT_REQUESTS": concurrency, "PLAYWRIGHT_MAX_PAGES_PER_CONTEXT": 4,
                                "LOG_LEVEL": "INFO", "CRAWLMEM_STALL_SECONDS": 3})


class ForgetsPages(scrapy.Spider):
    """Opens /js/<id>?mode=render pages with playwright_include_page=True and never closes them."""

    name = "forgets_pages"
    pages = 40

    async def start(self):
        for number in range(int(self.pages)):
            yield scrapy.Request(f"{self.base_url}/js/{number}?mode=render",
                                 meta={"playwright": True, "playwright_include_page": True})

    async def parse(self, response):
        yield {"title": response.css("title::text").get()}
'''

#: The governor's browser crawls (tests/test_governor_browser.py, tests/test_governor_browser_lever.py): /js/ pages
#: that each keep KB KiB in the context's IndexedDB, which an incognito context holds after the page closes.
STORE_SPIDERS = '''
import scrapy
from scrapy_playwright.page import PageMethod

from pytest_crawlmem.browser.settings import playwright_settings

SETTINGS = playwright_settings({"CONCURRENT_REQUESTS": 2, "LOG_LEVEL": "INFO"})


class Stores(scrapy.Spider):
    """Renders N /js/ pages that each keep KB KiB in the context's IndexedDB before rendering 20 products, and keep
    them open HOLD ms more."""

    name = "stores"
    pages = 40
    kb = 16384
    hold = 0

    async def start(self):
        for number in range(int(self.pages)):
            methods = [PageMethod("wait_for_selector", "body[data-rendered]")]
            if int(self.hold):
                methods.append(PageMethod("wait_for_timeout", int(self.hold)))
            yield scrapy.Request(f"{self.base_url}/js/{number}?mode=store&kb={self.kb}",
                                 meta={"playwright": True, "playwright_page_methods": methods})

    def parse(self, response):
        products = len(response.css("div.product"))
        if products == 20:
            self.crawler.stats.inc_value("js/rendered_pages")
        yield {"page": int(response.url.split("/js/")[1].split("?")[0]), "products": products}


class Held(Stores):
    """24 pages of 4 MiB, each held open 1.5 s: many pages open at once."""

    name = "held"
    pages = 24
    kb = 4096
    hold = 1500
'''
