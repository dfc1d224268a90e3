"""A real crawl whose pipeline serializes its writes behind 256 KiB pages reads ``response-processing`` (issue 54).

An inner pytest session (``runpytest_subprocess``): 400 pages of 256 KiB trickling in over 650 ms, 16 at once, one
item each, through a pipeline holding one lock for 100 ms a write (a database with one connection), with
SCRAPER_SLOT_MAX_ACTIVE_SIZE at 2 MiB. Its scraper was over that limit in 55-60% of the samples taken outside the
plugin's pauses and refills (four such crawls at once on 2 cores), twice the 25% the rule asks. The shape at the
edge of the rule is not a test: 600 pages at 50 ms a write and the default 5 MB limit were over it in 11% of the
samples, and read ``steady`` in 1 of 2 crawls under that load; it (and 400 pages of it) read ``steady`` in
fresh-clone CI runs (docs/verdicts.md says so in its limits).
"""

from __future__ import annotations

import json

import pytest

SUITE = '''
import asyncio

import pytest
import scrapy


class LargePages(scrapy.Spider):
    name = "large_pages"

    async def start(self):
        for i in range(400):
            yield scrapy.Request(f"{self.base}/drip/{i}?kb=256&ms=650")

    def parse(self, response):
        yield {"url": response.url, "size": len(response.body)}


class SerializedWrites:
    def __init__(self):
        self.lock = None

    async def process_item(self, item, spider=None):
        if self.lock is None:
            self.lock = asyncio.Lock()
        async with self.lock:
            await asyncio.sleep(0.1)
        return item


@pytest.mark.crawl_memory(leak="warn")
def test_serialized_writes(crawl, fixture_site):
    result = crawl(LargePages, base=fixture_site.base_url, settings={
        "ITEM_PIPELINES": {"test_suite.SerializedWrites": 300},
        "CONCURRENT_REQUESTS": 16, "CONCURRENT_REQUESTS_PER_DOMAIN": 16, "SCRAPER_SLOT_MAX_ACTIVE_SIZE": 2097152})
    assert result.responses == 400
'''


def test_a_pipeline_that_serializes_its_writes_is_response_processing(pytester: pytest.Pytester):
    (pytester.path / "test_suite.py").write_text(SUITE)
    pytester.makeini("[pytest]\n")
    outcome = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-p", "no:xdist", "test_suite.py", timeout=600)
    outcome.assert_outcomes(passed=1)
    result = json.loads(
        (pytester.path / ".crawlmem" / "test_suite.py__test_serialized_writes" / "report.json").read_text())["result"]
    reason = result["growth"]["reason"]
    assert result["verdict"] == "response-processing", reason
    assert "over its active-size limit in" in reason and "Fix:" in reason, reason
