"""Browser spiders used by the pytester tests of browser crawls, written into each test's directory."""

BROWSER_SPIDERS = '''
import scrapy

from pytest_crawlmem.crawl.browser import playwright_settings

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

from pytest_crawlmem.crawl.browser import playwright_settings


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
