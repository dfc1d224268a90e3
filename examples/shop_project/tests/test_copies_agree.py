"""Copies of a small recording judge the shop spider as a recording of that many distinct pages does (crawl process).

The original: the stand-in origin with 576 products, recorded into a temporary directory
(627 responses). The copies: the committed 48-response recording served 13 times
(611 responses). Both crawls run the unchanged shop spider, clean and with the same
injected leak; verdicts must match and growth per response must agree. 600 responses are
plenty: a verdict needs 170, and the injected leak keeps 8 KiB and more per response.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from leaks import BodyCacheMiddleware
from record_origin import record
from shop.spiders.catalog import ShopSpider

COMMITTED = Path(__file__).resolve().parents[1] / "recordings" / "shop"
LEAK = {"DOWNLOADER_MIDDLEWARES": {"leaks.BodyCacheMiddleware": 950}}


@pytest.fixture(scope="module")
def large_recording(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The shop with 576 products, recorded the way the committed recording was."""
    output = tmp_path_factory.mktemp("shop-576") / "recording"
    assert record(576, output) == 0
    return output


def crawl_both(crawl, large_recording, settings=None):
    try:
        original = crawl(ShopSpider, replay=large_recording, settings=settings)
        copies = crawl(ShopSpider, replay=COMMITTED, replay_copies=13, settings=settings, replay_item_keys=["sku"])
    finally:
        BodyCacheMiddleware.kept.clear()
    assert original.replay_misses == copies.replay_misses == 0
    assert original.responses >= 600 and copies.responses >= 600
    return original, copies


@pytest.mark.crawl_memory(leak="fail", timeout=300)
def test_clean_copies_and_the_original_are_both_steady(crawl, large_recording):
    original, copies = crawl_both(crawl, large_recording)
    assert original.verdict == copies.verdict == "steady", (original.growth.reason, copies.growth.reason)
    per_response = [r.growth.per_response_bytes or 0.0 for r in (original, copies)]
    assert abs(per_response[0] - per_response[1]) <= 2048, per_response  # both inside the steady band (+-1 KiB)


@pytest.mark.crawl_memory(leak="off", timeout=300)  # the test asserts the leak verdict itself: no warning
def test_a_leak_grows_as_much_per_response_on_copies_as_on_the_original(crawl, large_recording):
    original, copies = crawl_both(crawl, large_recording, settings=LEAK)
    assert original.verdict == copies.verdict == "retained-objects"
    per_response = [r.growth.per_response_bytes or 0.0 for r in (original, copies)]
    assert per_response[1] == pytest.approx(per_response[0], rel=0.2), per_response
