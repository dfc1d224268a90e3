"""Dropped data, backpressure and politeness: size limits counted by URL, SlowPipeline backout, retries, latency."""

from __future__ import annotations

import json

import pytest

from pytest_crawlmem.core.assemble import scheduled_per_response
from pytest_crawlmem.core.budgets import Budgets, check_budgets
from pytest_crawlmem.core.distribution import Histogram, bucket_upper_bound, next_power_of_two
from pytest_crawlmem.core.dropped import (
    DECOMPRESSION,
    MAXSIZE_DECLARED,
    MAXSIZE_STREAMED,
    DropLedger,
    declared_size,
    suggest_maxsize,
)
from pytest_crawlmem.core.models import Checkpoint, CrawlResult, Growth, Peaks, Sample
from pytest_crawlmem.measure.runner import counting_middlewares

SPIDERS = '''
import scrapy


class Paths(scrapy.Spider):
    """Requests each path of ``paths`` once (with ``repeat`` copies made distinct by a query)."""

    name = "paths"
    paths = ()
    repeat = 1

    async def start(self):
        for path in self.paths:
            for i in range(int(self.repeat)):
                sep = "&" if "?" in path else "?"
                yield scrapy.Request(self.base + path + (f"{sep}copy={i}" if int(self.repeat) > 1 else ""))

    def parse(self, response):
        yield {"url": response.url, "size": len(response.body)}
'''

LIMITS = '{"DOWNLOAD_MAXSIZE": 2**20, "DOWNLOAD_WARNSIZE": 256 * 1024}'
SIZE_PATHS = ["/oversized/1?kb=2048&mode=declared", "/oversized/2?kb=2048&mode=chunked", "/bomb/3?mb=8",
              "/large/4?kb=300", "/large/5?kb=16", "/large/6?kb=8"]


@pytest.fixture
def suite(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makepyfile(spiders=SPIDERS)
    return pytester


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest_subprocess("-p", "no:cacheprovider", *args, timeout=300)


def test_size_limits_are_counted_by_url_reason_and_size_and_max_dropped_names_them(suite):
    suite.makepyfile(test_sizes=f"""
import json
import pytest
from spiders import Paths

PATHS = {SIZE_PATHS!r}

def test_counted(crawl, fixture_site):
    result = crawl(Paths, paths=PATHS, base=fixture_site.base_url, settings={LIMITS})
    by_path = {{d.url.split(fixture_site.base_url, 1)[1]: d for d in result.dropped}}
    assert sorted(by_path) == sorted(PATHS[:3]), result.dropped
    declared, chunked, bomb = (by_path[p] for p in PATHS[:3])
    assert (declared.reason, declared.size_bytes) == ("download_maxsize (declared)", 2 * 2**20)
    assert chunked.reason == "download_maxsize (streamed)" and 2**20 < chunked.size_bytes <= 2 * 2**20
    assert bomb.reason == "decompression limit" and bomb.size_bytes > 2**20
    assert result.dropped_count == 3
    assert result.warnsize_warnings == 1  # /large/4 (300 KiB): kept, counted
    assert result.responses == 3
    sizes = result.response_sizes
    assert sizes.count == 3 and sizes.max_bytes == 300 * 1024
    assert sizes.p50_bytes <= sizes.p95_bytes <= sizes.p99_bytes <= sizes.max_bytes
    assert result.suggested_maxsize.download_maxsize == 1024 * 1024  # next power of two >= 2 x 300 KiB
    assert result.suggested_maxsize.would_drop == 0

def test_warned_after_decompression(crawl, fixture_site):
    settings = {{"DOWNLOAD_WARNSIZE": 256 * 1024, "DOWNLOAD_MAXSIZE": 4 * 2**20}}
    result = crawl(Paths, paths=["/bomb/1?mb=1"], base=fixture_site.base_url, settings=settings)
    assert result.warnsize_warnings == 1 and result.dropped == () and result.response_sizes.max_bytes == 2**20

@pytest.mark.crawl_memory(max_dropped=0)
def test_budget(crawl, fixture_site):
    crawl(Paths, paths=PATHS, base=fixture_site.base_url, settings={LIMITS})
""")
    outcome = run(suite)
    outcome.assert_outcomes(passed=2, failed=1)
    outcome.stdout.fnmatch_lines([
        "*crawl_memory budget broken: 3 responses were dropped, over the budget max_dropped=0: http://127.0.0.1:*/oversized/*"
    ])
    line = next(x for x in outcome.stdout.lines if "max_dropped=0" in x)
    assert all(p in line for p in SIZE_PATHS[:3]), line
    report_dir = suite.path / ".crawlmem" / "test_sizes.py__test_counted"
    result = json.loads((report_dir / "report.json").read_text())["result"]
    assert result["dropped_count"] == 3
    assert {d["reason"] for d in result["dropped"]} == {MAXSIZE_DECLARED, MAXSIZE_STREAMED, DECOMPRESSION}
    assert result["response_sizes"]["max_bytes"] == 300 * 1024
    assert result["suggested_maxsize"]["download_maxsize"] == 2**20
    page = (report_dir / "report.html").read_text()
    assert "Dropped responses" in page and "/oversized/2?kb=2048&amp;mode=chunked" in page
    assert "Suggested <code>DOWNLOAD_MAXSIZE = 1,048,576</code>" in page


def test_a_slow_pipeline_holds_responses_in_the_scraper_until_it_backs_out(suite):
    suite.makepyfile(test_slow="""
from spiders import Paths

def test_it(crawl, fixture_site):
    settings = {"ITEM_PIPELINES": {"pytest_crawlmem.testing.SlowPipeline": 300},
                "CRAWLMEM_SLOW_PIPELINE_DELAY_MS": 300, "CRAWLMEM_SLOW_PIPELINE_CPU_MS": 1,
                "SCRAPER_SLOT_MAX_ACTIVE_SIZE": 128 * 1024, "CONCURRENT_REQUESTS": 16}
    result = crawl(Paths, paths=["/large/1?kb=64"], repeat=48, base=fixture_site.base_url, settings=settings)
    assert result.items_scraped == 48
    assert result.max_active_size_limit == 128 * 1024
    assert result.peaks.backout_seconds > 0
    assert result.active_size_ratio > 1
""")
    outcome = run(suite)
    outcome.assert_outcomes(passed=1)
    result = json.loads((suite.path / ".crawlmem" / "test_slow.py__test_it" / "report.json").read_text())["result"]
    assert result["peaks"]["backout_seconds"] > 0 and result["active_size_ratio"] > 1
    assert "Backpressure and politeness" in (suite.path / ".crawlmem" / "test_slow.py__test_it" / "report.html").read_text()


def test_retries_of_429_and_503_and_latency_percentiles_are_reported(suite):
    suite.makepyfile(test_polite="""
from spiders import Paths

def test_it(crawl, fixture_site):
    paths = ["/status/503?retry_after=0", "/status/429?retry_after=0", "/slow/1?ms=50", "/catalog/product/1"]
    result = crawl(Paths, paths=paths, repeat=3, base=fixture_site.base_url, settings={"RETRY_TIMES": 2})
    assert result.status_counts[503] == 9 and result.status_counts[429] == 9
    assert result.retries == 12 and result.retries_max_reached == 6
    latency = result.download_latency
    assert latency.count == result.responses == 12  # retried attempts never reach the engine
    assert 0 < latency.p50_seconds <= latency.p95_seconds <= latency.p99_seconds <= latency.max_seconds
    assert latency.max_seconds >= 0.05
""")
    outcome = run(suite)
    outcome.assert_outcomes(passed=1)
    result = json.loads((suite.path / ".crawlmem" / "test_polite.py__test_it" / "report.json").read_text())["result"]
    assert (result["retries"], result["retries_max_reached"]) == (12, 6)
    assert set(result["download_latency"]) == {"count", "p50_seconds", "p95_seconds", "p99_seconds", "max_seconds"}


# -- pure ---------------------------------------------------------------------------------


def test_histogram_percentiles_are_exact_for_small_values_and_at_most_one_sixteenth_high():
    hist = Histogram(range(1, 101))
    assert hist.percentile(50) == 50 and hist.max_value == 100
    big = Histogram([10_000 * i for i in range(1, 1001)])
    p99 = big.percentile(99)
    assert p99 is not None and 9_900_000 <= p99 <= 9_900_000 * 17 / 16
    assert Histogram().percentile(50) is None


@pytest.mark.parametrize("value", [0, 1, 16, 17, 33, 1000, 2**20, 2**20 + 1, 10**9])
def test_a_value_lies_in_its_bucket_and_powers_of_two_are_bucket_edges(value):
    bound = bucket_upper_bound(value)
    assert value <= bound <= max(value, 16) * 17 / 16
    assert bucket_upper_bound(2**value.bit_length()) == 2**value.bit_length()


def test_the_suggested_maxsize_is_the_next_power_of_two_above_twice_p99_and_counts_what_it_drops():
    sizes = Histogram([1000] * 99 + [5000] * 1)
    suggestion = suggest_maxsize(sizes)
    assert suggestion is not None and suggestion.download_maxsize == 2048 and suggestion.would_drop == 1
    assert next_power_of_two(2048) == 2048 and next_power_of_two(2049) == 4096
    assert suggest_maxsize(Histogram()) is None


def test_the_ledger_keeps_the_first_responses_and_counts_all():
    ledger = DropLedger(keep=2)
    for i in range(5):
        ledger.drop(f"http://x/{i}", MAXSIZE_DECLARED, i)
    assert ledger.count == 5 and [d.url for d in ledger.dropped] == ["http://x/0", "http://x/1"]
    assert declared_size("Expected to receive 2097152 bytes which is larger than download max size") == 2097152
    assert declared_size("") is None


def _result(ledger: DropLedger) -> CrawlResult:
    return CrawlResult(spider="s", samples=(), start_rss=0, end_rss=0, peak_rss=0, traced_peak=None, responses=1,
                       items_scraped=0, duration_seconds=1.0, finish_reason="finished", peaks=Peaks(),
                       growth=Growth("steady", ""), dropped=tuple(ledger.dropped), dropped_count=ledger.count)


def test_max_dropped_names_the_first_urls_and_how_many_more():
    ledger = DropLedger(keep=4)
    for i in range(6):
        ledger.drop(f"http://x/{i}", MAXSIZE_STREAMED, 2**21)
    (violation,) = check_budgets(Budgets(max_dropped=1), _result(ledger))
    assert violation.message == (
        "6 responses were dropped, over the budget max_dropped=1: http://x/0 (download_maxsize (streamed), 2.0 MiB),"
        " http://x/1 (download_maxsize (streamed), 2.0 MiB), http://x/2 (download_maxsize (streamed), 2.0 MiB) and 3 more"
    )
    assert check_budgets(Budgets(max_dropped=6), _result(ledger)) == []


def test_the_counting_compression_middleware_replaces_scrapys_unless_the_user_configured_it():
    ours = counting_middlewares(None)
    assert ours["scrapy.downloadermiddlewares.httpcompression.HttpCompressionMiddleware"] is None
    assert ours["pytest_crawlmem.middleware.CrawlMemHttpCompressionMiddleware"] == 590
    assert ours["pytest_crawlmem.middleware.CrawlMemDownloaderMiddleware"] == 950
    user = counting_middlewares({"scrapy.downloadermiddlewares.httpcompression.HttpCompressionMiddleware": 591})
    assert user["scrapy.downloadermiddlewares.httpcompression.HttpCompressionMiddleware"] == 591
    assert "pytest_crawlmem.middleware.CrawlMemHttpCompressionMiddleware" not in user


def test_the_backlog_growth_rate_runs_from_the_opening_checkpoint_to_the_peak():
    opening = Checkpoint(responses=0, t_seconds=0.0, rss_bytes=1, heap_bytes=None, traced_bytes=None, scheduled=1)
    samples = [Sample(t_seconds=i / 10, responses=10 * i, items=0, rss_bytes=1, scheduled=90 * i if i < 5 else 0)
               for i in range(1, 8)]
    assert scheduled_per_response(samples, [opening]) == round((360 - 1) / 40, 3)
    assert scheduled_per_response([]) is None
    assert scheduled_per_response(samples[-1:]) == 0.0
