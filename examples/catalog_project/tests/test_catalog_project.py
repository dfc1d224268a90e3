"""Memory tests of a real Scrapy project's spider, under the project's own settings (scrapy.cfg)."""

from __future__ import annotations

import pytest
from catalogbot.spiders.catalog import CatalogSpider

CATALOG = "/catalog/?pages=25&per_page=40"  # 25 listing pages, 1,000 products


@pytest.mark.crawl_memory(peak_rss="1 GiB", leak="fail")
def test_catalog_spider_under_project_settings_is_steady(crawl, fixture_site):
    result = crawl(CatalogSpider, start_url=fixture_site.url(CATALOG))
    assert result.stats["catalogbot/requests"] >= 1025  # the project's downloader middleware ran
    assert result.stats["catalogbot/priced"] == 1000  # and its pipelines
    assert result.items_scraped == 1000
    assert result.verdict == "steady", result.growth.reason


def test_a_tests_settings_go_on_top_of_the_projects(crawl, fixture_site):
    result = crawl(CatalogSpider, start_url=fixture_site.url("/catalog/?pages=1&per_page=5"),
                   settings={"ITEM_PIPELINES": {}})  # like `scrapy crawl catalog -s ITEM_PIPELINES={}`
    assert result.stats["catalogbot/requests"] >= 6
    assert "catalogbot/priced" not in result.stats
    assert result.items_scraped == 5


def test_project_settings_can_be_left_out(crawl, fixture_site):
    result = crawl(CatalogSpider, start_url=fixture_site.url("/catalog/?pages=1&per_page=5"), project_settings=False)
    assert "catalogbot/requests" not in result.stats
    assert result.items_scraped == 5
