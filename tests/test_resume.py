"""A drained checkpoint resumes the crawl in two steps, and leaves the crawl's concurrency as it found it (the plugin
must not change the program it measures).

On Scrapy's asyncio reactor a download slot counts a request as transferring only once its download task starts, a
loop iteration after the slot hands it out, so requests that reach an idle slot in one iteration all start:
CONCURRENT_REQUESTS of them (16), not the slot's concurrency (8). A crawl meets that cold start once, at its start. A
drained checkpoint leaves the downloader idle, and resuming the engine at once met it again at every checkpoint: 8
connections opened and 8 dropped each time (128-133 in this crawl, 17-18 for Scrapy alone, 23 with the two-step
resume, on an idle machine). The effect is not asserted here: Scrapy alone also starts a slot's whole queue when one
of its downloads finishes, which a loaded machine makes common (30-84 connections in this crawl for Scrapy alone
beside two CPU-bound processes). What is asserted is the mechanism: after each checkpoint the engine first hands the
downloader one slot's concurrency, and the total concurrency is back at CONCURRENT_REQUESTS once those downloads started.
"""

from __future__ import annotations

import pytest
from spiders_source import CATALOG_SPIDER

AUDIT = '''
import scrapy
from scrapy import signals

''' + CATALOG_SPIDER + '''

class ConcurrencyAudit:
    """The downloader's total concurrency as each request reaches it, and at the close."""

    @classmethod
    def from_crawler(cls, crawler):
        audit = cls()
        audit.crawler = crawler
        crawler.signals.connect(audit.reached, signal=signals.request_reached_downloader)
        crawler.signals.connect(audit.closed, signal=signals.spider_closed)
        return audit

    def reached(self, request, spider):
        downloader = self.crawler.engine.downloader
        stats = self.crawler.stats
        stats.inc_value(f"audit/reached_at_total_{downloader.total_concurrency}")
        stats.max_value("audit/peak_active", len(downloader.active))

    def closed(self, spider):
        self.crawler.stats.set_value("audit/total_at_close", self.crawler.engine.downloader.total_concurrency)
'''

TEST = '''
from audit import Catalog

AUDITED = {"EXTENSIONS": {"audit.ConcurrencyAudit": 500}}


def test_checkpoints_resume_one_slot_first_and_restore_the_concurrency(crawl, fixture_site):
    result = crawl(Catalog, start_urls=[fixture_site.url("/catalog/?pages=12&per_page=40")], settings=AUDITED)
    assert result.responses == 492
    stats = result.stats
    checkpoints = stats["crawlmem/checkpoints"]
    assert checkpoints >= 12, checkpoints
    # the first step: up to 8 requests (CONCURRENT_REQUESTS_PER_DOMAIN) reach the downloader after each mid-crawl
    # checkpoint, with the total concurrency lowered to 8
    first_step = stats.get("audit/reached_at_total_8", 0)
    assert checkpoints - 2 <= first_step <= 8 * (checkpoints - 2), (first_step, checkpoints)
    # the rest at CONCURRENT_REQUESTS, which the crawl reaches and ends with
    assert stats["audit/reached_at_total_16"] + first_step == 492
    assert stats["audit/peak_active"] == 16
    assert stats["audit/total_at_close"] == 16
'''


def test_a_checkpoint_resumes_one_slot_first_and_restores_the_concurrency(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(audit=AUDIT, test_audit=TEST)
    outcome = pytester.runpytest_subprocess("-p", "no:cacheprovider", timeout=600)
    outcome.assert_outcomes(passed=1)
