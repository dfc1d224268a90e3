"""How benchmarks/overhead_profile.py sorts py-spy samples of the reactor thread: idle, the plugin's own, the crawl's."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))

from overhead_profile import classify, shares

REACTOR = "AsyncioSelectorReactor.run (twisted/internet/asyncioreactor.py:257)"
CHECKPOINT = "CrawlMemExtension._wait_for_drain (/x/pytest_crawlmem/measure/extension.py:449)"
WRAPPER = "ParseAmplificationMiddleware.process_spider_output (/x/pytest_crawlmem/probes/amplification.py:238)"
PARSE = "Catalog.parse_product (/x/benchmarks/bench_spiders.py:40)"


def test_a_callback_the_plugin_wraps_is_the_crawls_and_its_own_frames_are_the_plugins() -> None:
    assert classify([REACTOR, "Scraper.call (scrapy/core/scraper.py:1)", WRAPPER, PARSE]) == ("crawl", "")
    assert classify([REACTOR, WRAPPER, "read_malloc_in_use_bytes (/x/pytest_crawlmem/probes/readings.py:104)"]) == (
        "plugin", "ParseAmplificationMiddleware.process_spider_output (probes/amplification.py)")
    assert classify([REACTOR, "select (selectors.py:468)"]) == ("idle", "")
    assert classify(["Thread._bootstrap (threading.py:1002)", CHECKPOINT]) == ("other", "")


def test_the_share_is_the_plugins_samples_over_the_busy_ones() -> None:
    raw = "\n".join([f"{REACTOR};{CHECKPOINT} 6", f"{REACTOR};{PARSE} 94", f"{REACTOR};select (selectors.py:468) 25"])
    result = shares(raw)
    assert result["busy"] == 100
    assert result["plugin_share"] == 0.06
    assert result["idle_share"] == 0.2
    assert result["plugin_sites"] == {"CrawlMemExtension._wait_for_drain (measure/extension.py)": 0.06}
