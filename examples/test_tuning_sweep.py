"""A tuning sweep: change the concurrency controls, compare, keep the fastest settings that fit.

Each variant crawls the same 40 large pages through a slow item pipeline (300 ms per item),
each in its own process, so their peak RSS can be compared. The table is in the terminal
summary and in .crawlmem/examples_test_tuning_sweep.py__test_*/sweep.json and sweep.html.
"""

from __future__ import annotations

import pytest
from spiders import LargePagesSpider

MiB = 2**20
SLOW_PIPELINE = {
    "ITEM_PIPELINES": {"pytest_crawlmem.testing.SlowPipeline": 300},
    "CRAWLMEM_SLOW_PIPELINE_DELAY_MS": 300,  # each item waits 300 ms without blocking the reactor
}
VARIANTS = {
    "frugal": {"CONCURRENT_REQUESTS": 4, "SCRAPER_SLOT_MAX_ACTIVE_SIZE": 1 * MiB},
    "balanced": {"CONCURRENT_REQUESTS": 8, "SCRAPER_SLOT_MAX_ACTIVE_SIZE": 4 * MiB},
    "greedy": {"CONCURRENT_REQUESTS": 32, "SCRAPER_SLOT_MAX_ACTIVE_SIZE": 64 * MiB},
    # greedy, but the 4 MiB pages are thrown away: usually leaner, and it loses data
    "greedy-capped": {"CONCURRENT_REQUESTS": 32, "SCRAPER_SLOT_MAX_ACTIVE_SIZE": 64 * MiB, "DOWNLOAD_MAXSIZE": 2 * MiB},
}
#: The memory budget: what the crawl may add to the peak RSS of its leanest settings. (An absolute
#: figure, such as a container's limit, works the same way: ``best(max_peak_rss="512 MiB")``; this
#: example uses a relative one because a bare interpreter's RSS differs between builds.)
HEADROOM = 36 * MiB


# Every variant is also checked against the marker. 40 pages are too few for a leak verdict (leak="fail" would
# warn that it could not judge each variant): the sweep compares peaks and speed, so the leak check is off.
@pytest.mark.crawl_memory(peak_rss="1 GiB", leak="off")
def test_pick_the_fastest_settings_within_the_memory_budget(crawl_sweep, fixture_site):
    sweep = crawl_sweep(LargePagesSpider, VARIANTS, settings=SLOW_PIPELINE, base=fixture_site.base_url)
    budget = sweep["frugal"].peak_rss + HEADROOM

    best = sweep.best(max_peak_rss=budget)  # the fastest variant within the budget that dropped nothing
    why_not = sweep.rejections(max_peak_rss=budget)  # {variant: why it was passed over}
    assert best is not None, why_not
    assert best.peak_rss <= budget and best.dropped == 0 and best.items == 40
    assert "dropped" in why_not["greedy-capped"]  # fast, but it lost the 4 MiB pages
    faster = {row.variant for row in sweep if row.responses_per_second > best.responses_per_second}
    assert faster <= set(why_not)  # each faster variant broke the budget or lost data (usually: greedy's peak)
