"""Copies that are checked, on the shop project: its sitemap spider, whose rules name the shop's host, and its
duplicates pipeline, keyed on the SKU read from each page (crawl process).

Each replayed with copies: every copy crawls what the original crawls (responses and items within 10% of copy 0's),
or the test sees the warning that says why not. The sitemap spider's recording (robots.txt, the sitemap and 40
products: 42 responses) is recorded here from the stand-in origin, as ``python record_origin.py --spider shop_sitemap``
records it; the shop spider's is the committed one (test_shop_memory.py has it with ``replay_item_keys``).
"""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest
from record_origin import record
from shop.spiders.catalog import ShopSpider
from shop.spiders.sitemap import ShopSitemapSpider

COMMITTED = Path(__file__).resolve().parents[1] / "recordings" / "shop"
PRODUCTS = 40
SITEMAP_RESPONSES = PRODUCTS + 2  # robots.txt, sitemap.xml and the products
COPIES = 13  # 13 x 42 = 546 responses: enough for a verdict
#: The duplicates pipeline's set of SKUs grows by design: about 100 B a product, declared with room to spare.
DECLARED = {"pipeline DuplicatesPipeline.ids_seen": "1 KiB"}


def agree(per_copy) -> bool:
    """Whether every copy got at least 90% of the original's responses and of its items through the pipelines."""
    original = per_copy[0]
    return all(c.responses >= 0.9 * original.responses and c.items_scraped >= 0.9 * original.items_scraped
               for c in per_copy[1:])


@pytest.fixture(scope="module")
def sitemap_recording(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The sitemap spider's crawl of the 40-product shop, recorded with ``crawlmem record``."""
    output = tmp_path_factory.mktemp("shop-sitemap") / "recording"
    assert record(PRODUCTS, output, spider="shop_sitemap") == 0
    return output


@pytest.mark.crawl_memory(leak="fail", max_replay_misses=0, timeout=300, expected_growth=DECLARED)
def test_the_sitemap_spider_whose_rules_name_the_host_crawls_every_copy(crawl, sitemap_recording):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = crawl(ShopSitemapSpider, replay=sitemap_recording, replay_copies=COPIES, replay_item_keys=["sku"])
    assert not [w for w in caught if "replay copies fell short" in str(w.message)]  # a copy short would warn
    per_copy = result.replay_per_copy
    assert len(per_copy) == COPIES
    assert (per_copy[0].responses, per_copy[0].items_scraped) == (SITEMAP_RESPONSES, PRODUCTS)
    assert agree(per_copy), per_copy
    assert result.items_scraped == COPIES * PRODUCTS and result.replay_misses == 0
    (rule,) = result.replay_rules  # the sitemap rule names www.acme-shop.example; copies test the URL they copy
    assert rule.host == "www.acme-shop.example" and rule.adapted, rule
    assert result.verdict == "steady", result.growth.reason
    assert "set aside as declared: pipeline DuplicatesPipeline.ids_seen " in result.growth.reason


@pytest.mark.crawl_memory(leak="off", max_replay_misses=0, timeout=300)  # a few copies: the warning, not a verdict
def test_without_item_keys_the_duplicates_pipeline_drops_the_copies_items_and_says_so(crawl):
    with pytest.warns(UserWarning, match="a duplicates filter keyed on a field read from the page"):
        result = crawl(ShopSpider, replay=COMMITTED, replay_copies=3)
    per_copy = result.replay_per_copy
    # one copy's worth of items went through, whichever copy reached each SKU first; the rest were dropped as duplicates
    assert sum(c.items_scraped for c in per_copy) == PRODUCTS, per_copy
    assert sum(c.items_dropped for c in per_copy) == 2 * PRODUCTS, per_copy
    # (how the 40 split between the copies varies from run to run, e.g. 11, 11 and 18: `agree` may hold or not)
