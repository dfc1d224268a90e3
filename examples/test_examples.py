"""The examples a newcomer runs first: `pytest examples/` writes reports under .crawlmem/."""

from __future__ import annotations

import pytest
from spiders import CatalogSpider, FrontierSpider, HoardingSpider


@pytest.mark.crawl_memory(peak_rss="1 GiB", rss_growth="150 MiB", max_inflight=16, leak="fail")
def test_catalog_crawl_stays_within_budget(crawl, fixture_site):
    result = crawl(
        CatalogSpider,
        start_urls=[fixture_site.url("/catalog/?pages=50&per_page=40")],
        settings={"CONCURRENT_REQUESTS": 16},
    )
    assert result.items_scraped == 2000
    assert result.verdict == "steady", result.growth.reason


@pytest.mark.xfail(strict=True, reason="shows a leak failure: its report is .crawlmem/examples_test_examples.py__test_hoarding*")
@pytest.mark.crawl_memory(leak="fail")
def test_hoarding_spider_fails_with_the_leak_verdict(crawl, fixture_site):
    HoardingSpider.seen_pages.clear()
    try:
        result = crawl(HoardingSpider, start_urls=[fixture_site.url("/catalog/?pages=50&per_page=40")])
    finally:
        HoardingSpider.seen_pages.clear()
    assert result.verdict == "retained-objects", result.growth.reason  # the budget check then fails the test


@pytest.mark.crawl_memory(leak="fail")
def test_unbounded_frontier_is_a_backlog_not_a_leak(crawl, fixture_site):
    result = crawl(
        FrontierSpider,
        start_urls=[fixture_site.url("/explode/0?fanout=20")],
        settings={"CLOSESPIDER_PAGECOUNT": 1500, "CONCURRENT_REQUESTS": 8},
    )
    assert result.max_scheduled > 10_000
    assert result.verdict == "scheduler-backlog", result.growth.reason
