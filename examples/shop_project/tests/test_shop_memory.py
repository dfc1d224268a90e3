"""The shop spider, unchanged, under its project's settings, replayed from its committed recording (crawl process).

The recording (``recordings/shop``, 48 responses, a Scrapy HTTP cache) was written by
``python record_origin.py --products 40 --output recordings/shop``; 13 copies make 611
responses, over the 170 a verdict needs: enough to judge the clean crawl and catch the injected leak.
The project's duplicates pipeline keys on the SKU read from each page: ``replay_item_keys=["sku"]`` makes each copy's
SKUs its own, so every copy's items go through the whole pipeline chain, as a shop 13 times as large would; its set of
SKUs grows by design, declared with ``expected_growth``.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from leaks import BodyCacheMiddleware
from shop.spiders.catalog import ShopSpider

RECORDING = Path(__file__).resolve().parents[1] / "recordings" / "shop"
RECORDED_RESPONSES, RECORDED_PRODUCTS = 48, 40  # robots.txt, home, the /sale redirect, 5 listings... and 40 products
COPIES = 13
LEAK = {"DOWNLOADER_MIDDLEWARES": {"leaks.BodyCacheMiddleware": 950}}
DECLARED = {"pipeline DuplicatesPipeline.ids_seen": "1 KiB"}  # a SKU a product: about 100 B a response


@pytest.mark.crawl_memory(leak="fail", max_replay_misses=0, timeout=300, expected_growth=DECLARED)
def test_the_shop_spider_replayed_13_times_is_steady(crawl):
    result = crawl(ShopSpider, replay=RECORDING, replay_copies=COPIES, replay_item_keys=["sku"])
    robots = int(result.stats.get("robotstxt/request_count", 0))
    assert robots == COPIES  # the project's ROBOTSTXT_OBEY = True (the plugin's default is False): one per copy's host
    assert result.replay_misses == 0
    assert result.replay_hits == COPIES * (RECORDED_RESPONSES - 1) + robots
    assert result.items_scraped == COPIES * RECORDED_PRODUCTS  # the project's pipelines ran: prices parsed, none dropped
    original, *copies = result.replay_per_copy  # each copy crawled what the original crawled, its items kept
    assert all(c.responses >= 0.9 * original.responses and c.items_scraped >= 0.9 * original.items_scraped
               for c in copies), result.replay_per_copy
    assert result.status_counts == {200: COPIES * (RECORDED_RESPONSES - 2) + robots, 301: COPIES}
    assert result.verdict == "steady", result.growth.reason
    assert "set aside as declared: pipeline DuplicatesPipeline.ids_seen " in result.growth.reason


@pytest.mark.crawl_memory(leak="off", max_replay_misses=0, timeout=300)  # asserts the verdict itself
def test_a_leak_injected_into_the_shop_crawl_is_caught(crawl):
    try:
        result = crawl(ShopSpider, replay=RECORDING, replay_copies=COPIES, settings=LEAK, replay_item_keys=["sku"])
    finally:
        BodyCacheMiddleware.kept.clear()
    assert result.items_scraped == COPIES * RECORDED_PRODUCTS
    assert result.verdict == "retained-objects", result.growth.reason
    # the middleware keeps each body and 8 KiB; the trend counts its largest steps at the typical one and credits the
    # draining queue, so it reads a little under what is kept (7.8-9.5 KiB/response seen): 6 KiB is the floor
    assert 6 * 1024 <= (result.growth.per_response_bytes or 0) <= 20 * 1024, result.growth.reason
