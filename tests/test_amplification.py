"""Parse amplification: memory a callback holds while parsing, against its body (``result.parse_amplification``)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Coroutine
from typing import Any, cast

import lxml.html
import pytest
from hypothesis import given
from hypothesis import strategies as st

from fixture_sites.nested import nested_chunks
from pytest_crawlmem.core.budgets import BudgetError, Budgets, check_budgets, parse_budget
from pytest_crawlmem.core.models import CrawlResult, Growth, Peaks
from pytest_crawlmem.core.settings import ini_budgets
from pytest_crawlmem.probes.amplification import AmplificationMeter, StepClock, amplification_ratio

PARSE_SPIDER = '''
import scrapy


class Links(scrapy.Spider):
    """Parses each page with a CSS selector (the lxml tree) and yields its link count."""

    name = "links"

    async def start(self):
        for url in self.start_urls:
            yield scrapy.Request(url)

    def parse(self, response):
        yield {"url": response.url, "links": len(response.css("a::attr(href)").getall())}


class AsyncLinks(Links):
    """The same, as an async callback (not measured: its awaits let other work run inside its steps)."""

    name = "async_links"

    async def parse(self, response):
        yield {"url": response.url, "links": len(response.css("a::attr(href)").getall())}
'''

PAGES = ", ".join(f'fixture_site.url("/large/{i}?kb=512")' for i in range(1, 4)) + ", " + ", ".join(
    f'fixture_site.url("/nested/{i}?depth=50&kb=512")' for i in range(1, 4)
)


@pytest.fixture
def suite(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makepyfile(parse_spiders=PARSE_SPIDER)
    return pytester


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest_subprocess("-p", "no:cacheprovider", *args, timeout=300)


def test_nested_pages_amplify_more_than_large_pages_of_the_same_size(suite):
    suite.makepyfile(test_crawl=f"""
from parse_spiders import Links

def test_it(crawl, fixture_site):
    result = crawl(Links, start_urls=[{PAGES}])
    amp = result.parse_amplification
    assert amp.count == 6 and amp.unmeasured == 0
    by_kind = {{"nested": [], "large": []}}
    for page in amp.worst:
        by_kind["nested" if "/nested/" in page.url else "large"].append(page.ratio)
    # lxml keeps a node per element: 512 KiB of nested divs hold far more than 512 KiB of paragraphs
    assert len(by_kind["nested"]) == 3, amp.worst
    assert min(by_kind["nested"]) > 1.5 * max(by_kind["large"]), amp.worst
    assert max(by_kind["large"]) > 1.5, amp.worst  # a tree is bigger than its text
    assert amp.max_held_bytes > 512 * 1024 * 3
    assert amp.p50_ratio <= amp.p95_ratio <= amp.max_ratio * 1.07
    print("AMP", amp.describe())
""")
    outcome = run(suite, "-s", "-v")
    outcome.assert_outcomes(passed=1)
    report = json.loads((suite.path / ".crawlmem" / "test_crawl.py__test_it" / "report.json").read_text())
    assert report["result"]["parse_amplification"]["count"] == 6
    assert "parse amplification" in (suite.path / ".crawlmem" / "test_crawl.py__test_it" / "report.html").read_text()
    outcome.stdout.fnmatch_lines(["*parse amp p95/max*", "*test_crawl.py::test_it*x/*x*passed*"])


def test_max_amplification_fails_naming_the_worst_page(suite):
    suite.makepyfile(test_crawl=f"""
import pytest
from parse_spiders import Links

@pytest.mark.crawl_memory(max_amplification=2)
def test_it(crawl, fixture_site):
    crawl(Links, start_urls=[{PAGES}])
""")
    outcome = run(suite)
    outcome.assert_outcomes(failed=1)
    outcome.stdout.fnmatch_lines([
        "*crawl_memory budget broken: parse amplification reached *x, over the budget max_amplification=2x:"
        " http://127.0.0.1:*/nested/*depth=50&kb=512 (512.0 KiB body) held * MiB while its callback parsed*"
    ])


def test_async_callbacks_are_counted_as_unmeasured(suite):
    suite.makepyfile(test_crawl="""
from parse_spiders import AsyncLinks

def test_it(crawl, fixture_site):
    result = crawl(AsyncLinks, start_urls=[fixture_site.url("/large/1?kb=64"), fixture_site.url("/large/2?kb=64")])
    assert result.items_scraped == 2
    assert result.parse_amplification.count == 0 and result.parse_amplification.unmeasured == 2
    assert result.parse_amplification.describe() == "no callback was measured"
""")
    run(suite).assert_outcomes(passed=1)


RECOVERY = '''
import scrapy


class Recover:
    """A user spider middleware that turns a callback's exception into an item."""

    def process_spider_exception(self, response, exception):
        return [{"recovered": type(exception).__name__}]


class Raising(scrapy.Spider):
    name = "raising"
    custom_settings = {"SPIDER_MIDDLEWARES": {"recovery.Recover": 500}}

    async def start(self):
        yield scrapy.Request(self.url)

    def parse(self, response):
        yield {"first": response.url}
        raise ValueError("broken page")


def collected(result):
    return result.items_scraped, result.stats.get("spider_exceptions/ValueError")
'''


def test_the_meter_changes_nothing_the_spider_sees_items_exceptions_and_recovery(pytester):
    pytester.makepyfile(recovery=RECOVERY)
    pytester.makepyfile(test_crawl="""
from recovery import Raising, collected

def test_it(crawl, fixture_site):
    url = fixture_site.url("/catalog/product/1")
    measured = crawl(Raising, url=url)
    plain = crawl(Raising, url=url, settings={"CRAWLMEM_AMPLIFICATION": False})
    assert collected(measured) == collected(plain) == (2, None)  # the first item and the recovered one; no unhandled error
    assert measured.parse_amplification.count == 1 and plain.parse_amplification is None
""")
    run(pytester).assert_outcomes(passed=1)


# -- pure parts ------------------------------------------------------------------------------


def test_the_ratio_floors_bodies_at_one_kib():
    assert amplification_ratio(10_240, 100) == 10.0
    assert amplification_ratio(10_240, 5_120) == 2.0
    assert amplification_ratio(-5, 5_120) == 0.0


def test_the_meter_keeps_the_worst_pages_in_order_and_exact_maxima():
    meter = AmplificationMeter(worst_kept=2)
    for index, (body, held) in enumerate([(4096, 4096), (4096, 40_960), (2048, 2048), (8192, 81_920 * 2)]):
        meter.add(f"u{index}", body, held)
    summary = meter.summary()
    assert summary is not None
    assert [page.url for page in summary.worst] == ["u3", "u1"]
    assert summary.max_ratio == 20.0 and summary.max_held_bytes == 163_840 and summary.count == 4
    assert AmplificationMeter().summary() is None


@given(st.lists(st.tuples(st.integers(0, 10**7), st.integers(-1000, 10**8)), min_size=1, max_size=60))
def test_percentiles_are_ordered_and_the_max_is_the_worst_page(pairs):
    meter = AmplificationMeter()
    for index, (body, held) in enumerate(pairs):
        meter.add(f"u{index}", body, held)
    summary = meter.summary()
    assert summary is not None
    exact_max = max(amplification_ratio(held, body) for body, held in pairs)
    assert summary.max_ratio == pytest.approx(round(exact_max, 2), abs=0.006)
    assert summary.p50_ratio is not None and summary.p95_ratio is not None
    assert summary.p50_ratio <= summary.p95_ratio <= exact_max * 1.0625 + 0.01


def test_the_step_clock_counts_a_callbacks_own_steps_and_not_what_the_gc_freed_inside_them():
    reading = [0]
    clock = StepClock(lambda: reading[0])

    async def callback() -> AsyncIterator[str]:
        reading[0] += 5000  # parses: builds a tree
        yield "item"
        reading[0] += 100
        clock.gc_callback("start", {})
        reading[0] -= 3000  # a collection frees other responses' garbage
        clock.gc_callback("stop", {})
        yield "item"
        reading[0] -= 5100  # drops its tree

    async def consume() -> list[int]:
        held = [0, 0]
        async for _ in clock.measure(callback(), held):
            reading[0] += 777  # work outside the callback's steps (other responses) is not counted
        return held

    running, peak = run_to_end(consume())
    assert peak == 5100 and running == 0


def run_to_end(coroutine: Coroutine[Any, Any, list[int]]) -> list[int]:
    """Drive a coroutine that never waits (pytest-twisted's loop is already running here)."""
    try:
        coroutine.send(None)
    except StopIteration as done:
        return cast(list[int], done.value)
    raise AssertionError("the coroutine waited")


def test_max_amplification_passes_when_nothing_was_measured():
    result = CrawlResult("s", (), 0, 0, 0, None, 1, 0, 0.1, "finished", Peaks(), Growth("steady", ""))
    assert check_budgets(Budgets(max_amplification=1.0), result) == []


def test_max_amplification_from_the_ini_file_and_bad_values_name_their_source():
    assert ini_budgets({"crawlmem_max_amplification": "12x", "crawlmem_billed_mismatch": "0",
                        "crawlmem_snapshot_at": "300 MiB"}.get) == {
        "max_amplification": 12.0, "billed_mismatch": 0, "snapshot_at": 300 * 2**20}
    with pytest.raises(ValueError, match="invalid ratio 'lots' for max_amplification in ini crawlmem_max_amplification"):
        ini_budgets({"crawlmem_max_amplification": "lots"}.get)
    with pytest.raises(BudgetError, match=r"invalid ratio 0 for max_amplification in crawl_memory marker of t\.py::t"):
        parse_budget("max_amplification", 0, source="crawl_memory marker of t.py::t")


@given(st.integers(1, 60), st.integers(1, 40))
def test_nested_pages_have_the_exact_size_and_depth_asked(depth, kb):
    body = b"".join(nested_chunks(3, depth, kb * 1024, 4096))
    assert len(body) == kb * 1024
    root = lxml.html.fromstring(body)
    leaves = root.xpath("//a[@class='leaf']")
    if leaves:  # a block fits: the leaf sits under exactly `depth` nested divs
        assert len(leaves[0].xpath("ancestor::div[@class='n']")) == depth


# -- the reads' time share ------------------------------------------------------------------


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_the_step_clock_is_within_its_share_until_its_reads_take_more_and_again_when_time_passes():
    fake = FakeClock()

    def slow_read() -> int:
        fake.now += 0.002  # each read costs 2 ms
        return 0

    clock = StepClock(slow_read, share=0.01, clock=fake)
    clock.start()
    fake.now += 1.0
    assert clock.within_share()  # no read yet
    for _ in range(15):
        clock._read()
    assert clock.reads == 15 and clock.read_seconds == pytest.approx(0.030)
    assert clock.within_share()  # 30 ms of reads: 1% of 1.03 s and the 2 s head start (BURST_SECONDS)
    clock._read()
    assert not clock.within_share()  # 32 ms over 3.032 s: 1.06%
    fake.now += 0.2
    assert clock.within_share()  # 32 ms over 3.232 s: 0.99%
    unbounded = StepClock(slow_read, share=0.0, clock=fake)
    unbounded.start()
    for _ in range(100):
        unbounded._read()
    assert unbounded.within_share()  # share 0: no bound


SHARE_TESTS = """
import pytest
from parse_spiders import Links

def urls(fixture_site):
    return [fixture_site.url(f"/catalog/product/{i}") for i in range(1, 261)]

TINY = {"CRAWLMEM_AMPLIFICATION_SHARE": 1e-9}

def test_past_its_share_callbacks_go_unmeasured_and_are_counted(crawl, fixture_site):
    result = crawl(Links, start_urls=urls(fixture_site), settings=TINY)
    amp = result.parse_amplification
    assert result.items_scraped == 260  # skipped callbacks' output passes unchanged
    # the first callback (no read yet), then every read is over a 1e-9 share
    assert amp.count == 1 and amp.skipped == 259, amp
    assert "1 of 260 callbacks measured" in amp.describe()

@pytest.mark.crawl_memory(max_amplification=1000)
def test_a_max_amplification_budget_measures_every_callback(crawl, fixture_site):
    result = crawl(Links, start_urls=urls(fixture_site), settings=TINY)
    assert result.parse_amplification.count == 260 and result.parse_amplification.skipped == 0
"""


def test_the_share_skips_callbacks_unless_a_budget_needs_every_one(suite):
    suite.makepyfile(test_crawl=SHARE_TESTS)
    run(suite).assert_outcomes(passed=2)
    report = json.loads((suite.path / ".crawlmem" / "test_crawl.py__test_past_its_share_callbacks_go_unmeasured_and_are_counted"
                         / "report.json").read_text())
    assert report["result"]["parse_amplification"]["skipped"] == 259
