"""A spider's own component settings (custom_settings, update_settings) run under test as declared, plus the plugin's.

Scrapy replaces a dict setting set at a higher priority wholesale, so a spider that sets
``EXTENSIONS`` in ``custom_settings`` used to drop the plugin's extension and counters.
"""

from __future__ import annotations

import pytest
from spiders_source import CATALOG_SPIDER

AUDIT = '''
import scrapy
from scrapy import signals

''' + CATALOG_SPIDER + '''

class AuditExtension:
    @classmethod
    def from_crawler(cls, crawler):
        ext = cls()
        ext.stats = crawler.stats
        crawler.signals.connect(ext.spider_opened, signal=signals.spider_opened)
        return ext

    def spider_opened(self, spider):
        self.stats.inc_value("audit/EXTENSIONS")


class AuditDownloader:
    @classmethod
    def from_crawler(cls, crawler):
        obj = cls()
        obj.stats = crawler.stats
        return obj

    def process_request(self, request):
        self.stats.inc_value("audit/DOWNLOADER_MIDDLEWARES")
        return None


class AuditSpiderMiddleware:
    @classmethod
    def from_crawler(cls, crawler):
        obj = cls()
        obj.stats = crawler.stats
        return obj

    async def process_spider_output(self, response, result):
        self.stats.inc_value("audit/SPIDER_MIDDLEWARES")
        async for x in result:
            yield x


class AuditPipeline:
    @classmethod
    def from_crawler(cls, crawler):
        obj = cls()
        obj.stats = crawler.stats
        return obj

    def process_item(self, item):
        self.stats.inc_value("audit/ITEM_PIPELINES")
        return item


COMPONENTS = {
    "EXTENSIONS": "audit.AuditExtension",
    "DOWNLOADER_MIDDLEWARES": "audit.AuditDownloader",
    "SPIDER_MIDDLEWARES": "audit.AuditSpiderMiddleware",
    "ITEM_PIPELINES": "audit.AuditPipeline",
}


def spider_with(setting, how):
    """A Catalog spider declaring one audit component in ``setting`` through ``how``."""
    name = setting + "_BASE" if how == "base" else setting
    value = {COMPONENTS[setting]: 500}
    if how == "base":  # a *_BASE dict replaces Scrapy's built-ins: keep them, as a real project would
        from scrapy.settings import default_settings
        value = {**getattr(default_settings, name), **value}
    attrs = {"name": f"audit_{setting.lower()}_{how}"}
    if how == "update_settings":
        attrs["update_settings"] = classmethod(lambda cls, settings: (
            scrapy.Spider.update_settings.__func__(cls, settings), settings.set(name, value, priority="spider")))
    else:
        attrs["custom_settings"] = {name: value}
    return type(f"Audit{setting}{how}", (Catalog,), attrs)
'''

TEST = '''
import pytest
from audit import COMPONENTS, spider_with

CASES = [(s, how) for s in COMPONENTS for how in ("custom_settings", "update_settings", "base")]


@pytest.mark.parametrize("setting,how", CASES)
def test_user_components_and_the_plugin_both_run(crawl, fixture_site, setting, how):
    spider = spider_with(setting, how)
    urls = [fixture_site.url(p) for p in ("/catalog/?pages=2&per_page=5", "/oversized/1?kb=2048&mode=declared", "/bomb/2?mb=8")]
    result = crawl(spider, start_urls=urls, settings={"DOWNLOAD_MAXSIZE": 2**20})
    assert result.responses == 12  # the plugin's extension measured the crawl (the bomb and the oversized page are dropped)
    assert result.items_scraped == 10
    # the plugin's downloader middleware and its counting HttpCompressionMiddleware both ran
    assert sorted(d.reason for d in result.dropped) == ["decompression limit", "download_maxsize (declared)"]
    assert result.stats.get(f"audit/{setting}", 0) >= 1, f"the spider's own {setting} component did not run"
    assert result.stats.get("crawlmem/peak_rss", 0) > 0
    assert not result.stats.get("memusage/startup"), "MEMUSAGE must stay off under test"


def test_spider_settings_cannot_switch_the_plugin_off(crawl, fixture_site):
    spider = type("Sneaky", (spider_with("EXTENSIONS", "custom_settings"),), {"name": "sneaky", "custom_settings": {
        "EXTENSIONS": {"audit.AuditExtension": 500}, "CRAWLMEM_ENABLED": False, "MEMUSAGE_ENABLED": True}})
    result = crawl(spider, start_urls=[fixture_site.url("/catalog/?pages=1&per_page=5")])
    assert result.responses == 6
    assert result.stats.get("audit/EXTENSIONS") == 1
'''


def test_a_spider_declaring_its_own_components_is_measured_with_them(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(audit=AUDIT, test_audit=TEST)
    outcome = pytester.runpytest_subprocess("-p", "no:cacheprovider", timeout=600)
    outcome.assert_outcomes(passed=13)


@pytest.mark.parametrize("named", ["pytest_crawlmem.measure.extension.CrawlMemExtension", "class"])
def test_the_plugins_components_are_built_once_whichever_path_names_them(named):
    """Scrapy keys components by the written path: the internal path or the class beside the stable one builds two."""
    from scrapy.settings import Settings
    from scrapy.utils.conf import build_component_list
    from scrapy.utils.misc import load_object

    from pytest_crawlmem.measure.extension import CrawlMemExtension
    from pytest_crawlmem.measure.middleware import CrawlMemDownloaderMiddleware
    from pytest_crawlmem.measure.runner import CrawlOptions, add_measuring_components

    extension = CrawlMemExtension if named == "class" else named
    settings = Settings({"EXTENSIONS": {extension: 500},
                         "DOWNLOADER_MIDDLEWARES": {"pytest_crawlmem.measure.middleware.CrawlMemDownloaderMiddleware": 940}})
    add_measuring_components(settings, CrawlOptions())

    def built(name: str) -> list[object]:
        return [load_object(path) for path in build_component_list(settings.getwithbase(name))]

    assert built("EXTENSIONS").count(CrawlMemExtension) == 1
    assert built("DOWNLOADER_MIDDLEWARES").count(CrawlMemDownloaderMiddleware) == 1
    assert settings.getdict("DOWNLOADER_MIDDLEWARES")["pytest_crawlmem.middleware.CrawlMemDownloaderMiddleware"] == 940
