"""The Scrapy internals the probes read, on the Scrapy installed (CI runs this on the lowest declared Scrapy too).

Each probe returns ``None`` rather than raise when Scrapy moves what it reads, so a moved internal shows up as
a figure that stays at zero or a verdict that cannot be judged: these tests make that a failure.
"""

from __future__ import annotations

import pytest
from spiders_source import CATALOG_SPIDER, HOARDER_SPIDER

from pytest_crawlmem.probes import readings as probes

SPIDERS = "import scrapy\n" + CATALOG_SPIDER + HOARDER_SPIDER


def test_the_maxsize_cancellation_type_is_what_this_scrapy_raises():
    from scrapy import exceptions
    from twisted.internet.defer import CancelledError

    expected = getattr(exceptions, "DownloadCancelledError", CancelledError)
    assert (expected,) == probes.DOWNLOAD_CANCELLED
    message = ("Cancelling download of http://x/: expected response size (2097152) larger than download max size"
               " (1048576).")
    assert probes.legacy_declared_size(message) == 2097152


def test_every_probe_reads_a_real_crawl_and_checkpoints_judge_it(pytester: pytest.Pytester):
    pytester.makepyfile(spiders=SPIDERS)
    pytester.makepyfile(test_probed='''
import pytest
from spiders import Catalog, Hoarder

URL = "/catalog/?pages=30&per_page=20"

def test_clean(crawl, fixture_site):
    result = crawl(Catalog, start_urls=[fixture_site.url(URL)],
                   settings={"CONCURRENT_REQUESTS": 8, "SCRAPER_SLOT_MAX_ACTIVE_SIZE": 10**6})
    assert result.responses == 630 and result.items_scraped == 600
    assert result.peaks.max_scheduled > 0, "the scheduler probe read nothing (engine.scheduler / engine._slot)"
    assert result.peaks.max_inflight > 0, "the downloader probe read nothing (downloader.active)"
    assert result.peaks.max_active_size_bytes > 0, "the scraper probe read nothing (scraper.slot.active_size)"
    assert len(result.growth.checkpoints) >= 3, "no drained checkpoint: the idle/in-progress probes read nothing"
    assert result.verdict == "steady", result.growth.reason
    assert not [e for e in result.errors if "probe" in e], result.errors

@pytest.mark.crawl_memory(leak="warn")
def test_leaky(crawl, fixture_site):
    result = crawl(Hoarder, start_urls=[fixture_site.url(URL)])
    assert result.verdict == "retained-objects", result.growth.reason
''')
    outcome = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-W", "ignore::UserWarning", timeout=300)
    outcome.assert_outcomes(passed=2)
