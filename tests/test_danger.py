"""The danger snapshot: the crawl's state when RSS crosses ``snapshot_at``, written to danger.json and danger-diff.txt."""

from __future__ import annotations

import json
import tracemalloc

import pytest
from spiders_source import CATALOG_SPIDER

from pytest_crawlmem.core.budgets import Budgets, Violation, _with_danger, snapshot_threshold
from pytest_crawlmem.core.models import CrawlResult, DangerSnapshot, Growth, Peaks, Sample
from pytest_crawlmem.probes.danger import DangerWatch, danger_from_json, window_sites

DANGER_SPIDERS = '''
import psutil
import scrapy

#: RSS of the test process before any crawl: the budgets below are set above it.
BASE = psutil.Process().memory_info().rss
''' + CATALOG_SPIDER + '''

class Creeper(Catalog):
    """Keeps 64 KiB per product page: memory creeps up with every response."""

    name = "creeper"
    kept = []

    def parse_product(self, response):
        self.kept.append(bytes(65536) + response.url.encode())  # KEPT-LINE
        yield {"url": response.url}


class HugePages(scrapy.Spider):
    """Small catalog pages, then three 8 MiB pages parsed whole: memory spikes."""

    name = "huge_pages"

    async def start(self):
        for url in self.start_urls:
            yield scrapy.Request(url)

    def parse(self, response):
        yield {"url": response.url, "links": len(response.css("a::attr(href)").getall())}
'''


@pytest.fixture
def suite(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makepyfile(danger_spiders=DANGER_SPIDERS)
    return pytester


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest_subprocess("-p", "no:cacheprovider", "-s", *args, timeout=300)


def kept_line() -> int:
    return next(i for i, line in enumerate(DANGER_SPIDERS.lstrip("\n").splitlines(), 1) if "KEPT-LINE" in line)


def test_a_creeping_crawl_stopped_at_kill_at_names_what_grew_after_the_snapshot(suite):
    suite.makepyfile(test_crawl=f"""
import json
import pytest
from danger_spiders import BASE, Creeper

KILL_AT = BASE + 60 * 2**20

@pytest.mark.crawl_memory(kill_at=KILL_AT, leak="off")
def test_it(crawl, fixture_site):
    result = crawl(Creeper, start_urls=[fixture_site.url("/catalog/?pages=40&per_page=40")])
    danger = result.danger
    assert danger.threshold_bytes == int(KILL_AT * 0.8)  # the default: 80% of kill_at
    assert danger.rss_bytes >= danger.threshold_bytes and danger.responses < result.responses
    assert danger.window_responses >= 10 and danger.window_seconds >= 1.0  # the window waits for 10 responses
    assert danger.sites[0].location == "danger_spiders.py:{kept_line()}", danger.sites
    assert danger.sites[0].size_diff_bytes >= 65536 and danger.sites[0].count_diff >= 1
    saved = json.loads((result.report_dir / "danger.json").read_text())
    assert saved["summary"] == danger.describe() and saved["sites"][0]["location"] == danger.sites[0].location
    assert (result.report_dir / "danger-diff.txt").read_text().startswith(danger.describe())
    print("DANGER-CHECKED")
""")
    outcome = run(suite)
    outcome.assert_outcomes(failed=1)
    outcome.stdout.fnmatch_lines([
        "*DANGER-CHECKED*",
        "*crawl_memory budget broken: RSS reached * MiB at * s, the hard ceiling kill_at=*; danger snapshot at * s:"
        f" RSS * MiB crossed snapshot_at=* MiB after * responses*; top site in the next * s: danger_spiders.py:{kept_line()}"
        " +* (danger.json)*",
    ])
    report_dir = suite.path / ".crawlmem" / "test_crawl.py__test_it"
    report = json.loads((report_dir / "report.json").read_text())
    assert report["result"]["danger"]["sites"][0]["location"] == f"danger_spiders.py:{kept_line()}"
    page = (report_dir / "report.html").read_text()
    assert 'class="marker danger"' in page and "Parse, captures, danger" in page  # on the timeline, and in a table


def test_a_spike_on_a_few_huge_pages_is_caught_and_named_in_the_peak_rss_failure(suite):
    suite.makepyfile(test_crawl="""
import pytest
from danger_spiders import BASE, HugePages

@pytest.mark.crawl_memory(snapshot_at=BASE + 30 * 2**20, peak_rss=BASE + 40 * 2**20)
def test_it(crawl, fixture_site):
    small = [fixture_site.url(f"/catalog/product/{i}") for i in range(1, 41)]
    huge = [fixture_site.url(f"/large/{i}?kb=8192") for i in range(1, 4)]
    result = crawl(HugePages, start_urls=small + huge, settings={"CONCURRENT_REQUESTS": 4})
    danger = result.danger
    assert danger.threshold_bytes == BASE + 30 * 2**20 <= danger.rss_bytes <= result.peak_rss
    assert danger.t_seconds <= result.duration_seconds
    assert (result.report_dir / "danger.json").is_file() and (result.report_dir / "danger-diff.txt").is_file()
    print("DANGER-CHECKED")
""")
    outcome = run(suite)
    outcome.assert_outcomes(failed=1)
    outcome.stdout.fnmatch_lines([
        "*DANGER-CHECKED*",
        "*crawl_memory budget broken: peak RSS was * MiB, over the budget peak_rss=* MiB (* above the * the process held"
        " when the crawl began); danger snapshot at * s:"
        " RSS * MiB crossed snapshot_at=* MiB after * responses* (danger.json)*",
    ])


def test_an_isolated_crawl_brings_its_danger_snapshot_back(suite):
    suite.makepyfile(test_crawl="""
import pytest
from danger_spiders import BASE, Creeper

@pytest.mark.crawl_memory(snapshot_at=BASE + 8 * 2**20, leak="off")
def test_it(crawl, fixture_site):
    result = crawl(Creeper, start_urls=[fixture_site.url("/catalog/?pages=8&per_page=40")], isolate=True)
    assert result.danger is not None and result.danger.threshold_bytes == BASE + 8 * 2**20
    assert result.danger.window_seconds > 0
    assert (result.report_dir / "danger.json").is_file()
""")
    run(suite).assert_outcomes(passed=1)


# -- pure parts and the window, in this process ---------------------------------------------------


def sample(rss: int, responses: int = 10) -> Sample:
    return Sample(t_seconds=1.5, responses=responses, items=3, rss_bytes=rss, scheduled=7, inflight=2, slot_queued=0,
                  active_size_bytes=4096, backout=False)


def test_no_snapshot_below_the_threshold_and_exactly_one_above_it(tmp_path):
    watch = DangerWatch(1000, report_dir=tmp_path, window_seconds=60.0)
    assert not watch.observe(sample(999), start_rss=500, live_refs=dict)
    assert watch.snapshot is None and not (tmp_path / "danger.json").exists()
    try:
        watch.observe(sample(1000), start_rss=500, live_refs=lambda: {"HtmlResponse": 3})
        first = watch.snapshot
        watch.observe(sample(5000, responses=20), start_rss=500, live_refs=dict)
        assert watch.snapshot is first and first is not None
        assert (first.rss_bytes, first.responses, first.scheduled, first.live_refs) == (1000, 10, 7, {"HtmlResponse": 3})
        saved = json.loads((tmp_path / "danger.json").read_text())
        assert saved["summary"] == first.describe() and saved["window_seconds"] == 0.0
        watch.close(responses=30, rss_bytes=6000)
        assert watch.snapshot is not None and watch.snapshot.window_responses == 20
        assert danger_from_json(json.loads((tmp_path / "danger.json").read_text())) == watch.snapshot
    finally:
        if watch.started_tracing:
            tracemalloc.stop()


def test_the_window_names_the_line_that_allocated_in_it():
    tracemalloc.start(4)
    try:
        first = tracemalloc.take_snapshot()
        kept = [bytes(10_000) for _ in range(20)]  # WINDOW-LINE
        last = tracemalloc.take_snapshot()
    finally:
        tracemalloc.stop()
    sites = window_sites(first, last, responses=4)
    assert sites[0].location.endswith(f"test_danger.py:{window_line()}")
    assert sites[0].size_diff_bytes >= 200_000 and sites[0].bytes_per_response >= 50_000
    assert len(kept) == 20


def test_an_attribution_window_ending_first_hands_its_tracing_to_the_open_danger_window(tmp_path):
    """The order CI met: the attribution window starts tracing, the danger window opens on it, the attribution window
    ends first. Stopping tracing then left the danger window no sites; it now takes the tracing over and stops it."""
    from pytest_crawlmem.attribution.window import AttributionWindow
    from pytest_crawlmem.probes.recording import Recording

    assert not tracemalloc.is_tracing()
    window = AttributionWindow(Recording(None), frames=4, max_responses=100, enabled=True, leak_per_response=1024)
    watch = DangerWatch(1000, report_dir=tmp_path, window_seconds=60.0)
    window.handoff = watch.adopt_tracing
    tracemalloc.start(4)
    window.started_tracing, window._snapshots = True, [None]  # the window as at_checkpoint opens it on no tracing
    try:
        watch.observe(sample(1000), start_rss=500, live_refs=dict)  # the danger window opens on that tracing
        assert not watch.started_tracing
        window.end()
        assert tracemalloc.is_tracing() and watch.started_tracing
        kept = [bytes(10_000) for _ in range(20)]  # HANDOFF-LINE
        watch.close(responses=30, rss_bytes=6000)
        assert watch.snapshot is not None and watch.snapshot.sites, watch.snapshot
        assert watch.snapshot.sites[0].location.endswith(f"test_danger.py:{marked_line('# HANDOFF-LINE')}")
        assert len(kept) == 20
    finally:
        if tracemalloc.is_tracing():
            tracemalloc.stop()


def window_line() -> int:
    return marked_line("# WINDOW-LINE")


def marked_line(mark: str) -> int:
    with open(__file__, encoding="utf-8") as source:
        return next(i for i, line in enumerate(source, 1) if mark in line and "bytes(10_000)" in line)


@pytest.mark.parametrize(
    ("budgets", "expected"),
    [(Budgets(), None), (Budgets(peak_rss=1000), 800), (Budgets(kill_at=2000, peak_rss=1000), 1600),
     (Budgets(snapshot_at=123, kill_at=2000), 123)],
)
def test_snapshot_at_defaults_to_80_percent_of_kill_at_else_of_peak_rss(budgets, expected):
    assert snapshot_threshold(budgets) == expected


def test_only_peak_rss_and_kill_at_failures_carry_the_danger_summary():
    danger = DangerSnapshot(threshold_bytes=2**20, t_seconds=2.0, rss_bytes=2 * 2**20, start_rss_bytes=0, responses=5, items=0)
    result = CrawlResult("s", (), 0, 0, 0, None, 1, 0, 0.1, "finished", Peaks(), Growth("steady", ""), danger=danger)
    peak = _with_danger(Violation("peak_rss", 1, 0, "peak RSS was high"), result)
    other = _with_danger(Violation("rss_growth", 1, 0, "RSS grew"), result)
    assert peak.message == f"peak RSS was high; {danger.describe()} (danger.json)"
    assert other.message == "RSS grew"
    assert danger.describe().startswith("danger snapshot at 2.0 s: RSS 2.0 MiB crossed snapshot_at=1.0 MiB after 5 responses")
