"""pytester tests of the plugin: real crawls against the real fixture site, each in a subprocess."""

from __future__ import annotations

import json

import pytest
from inner_session import inner_session
from spiders_source import SPIDERS

CATALOG = '"/catalog/?pages={pages}&per_page=20"'


@pytest.fixture
def suite(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makepyfile(spiders=SPIDERS)
    return pytester


def write_test(pytester: pytest.Pytester, marker: str, body: str, name: str = "test_crawl") -> None:
    pytester.makepyfile(**{name: f"""
import pytest
from spiders import *

{marker}
def test_it(crawl, fixture_site):
{body}
"""})


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest_subprocess("-p", "no:cacheprovider", *args, timeout=300)


def test_a_crawl_within_its_budgets_passes_and_writes_its_reports(suite):
    write_test(suite, '@pytest.mark.crawl_memory(peak_rss="2 GiB", rss_growth="200 MiB", max_inflight=16)', """
    result = crawl(Catalog, start_urls=[fixture_site.url("/catalog/?pages=5&per_page=20")])
    assert result.items_scraped == 100
    assert result.responses == 105
    assert result.peak_rss >= result.start_rss > 0
    assert result.status_counts == {200: 105}
    assert len(result.samples) >= 1
""")
    outcome = run(suite)
    outcome.assert_outcomes(passed=1)
    outcome.stdout.fnmatch_lines(["*crawl memory*", "*test_crawl.py::test_it*105*passed*", "reports: *.crawlmem"])
    report_dir = suite.path / ".crawlmem" / "test_crawl.py__test_it"
    report = json.loads((report_dir / "report.json").read_text())
    assert report["schema_version"] == 1
    assert report["result"]["responses"] == 105
    assert report["budgets"]["max_inflight"] == 16
    assert report["environment"]["scrapy"].startswith("2.")
    lines = (report_dir / "samples.jsonl").read_text().splitlines()
    kinds = {json.loads(line)["kind"] for line in lines}
    assert {"header", "sample", "checkpoint"} <= kinds


SMALL, MEDIUM = CATALOG.format(pages=2), CATALOG.format(pages=10)
BREACHES = {
    "peak_rss": ('peak_rss="1 MiB"', "Catalog", SMALL, "peak RSS was * MiB, over the budget peak_rss=1.0 MiB"),
    "rss_growth": ('rss_growth="16 MiB"', "Ballast", SMALL, "RSS growth was 6?.* MiB, over the budget rss_growth=16.0 MiB"),
    "traced_peak": ('traced_peak="1 KiB"', "Catalog", SMALL, "traced peak was *, over the budget traced_peak=1.0 KiB"),
    "max_scheduled": ("max_scheduled=5", "Catalog", MEDIUM, "the scheduler queue reached *, over the budget max_scheduled=5"),
    "max_active_size": (
        'max_active_size="64 KiB"', "SlowCallbacks", '"/"', "scraper active size was *, over the budget max_active_size=64.0 KiB"
    ),
    "max_inflight": ("max_inflight=2", "SlowPages", '"/"', "downloads in flight reached *, over the budget max_inflight=2"),
}


#: One inner session crawls every breach (a test each, failing only itself); a session per budget cost ~1.5 CPU-s of
#: start-up each.
BREACH_SUITE = "import pytest\n" + SPIDERS + "".join(
    f"""

@pytest.mark.crawl_memory({marker})
def test_{budget}(crawl, fixture_site):
    result = crawl({spider}, start_urls=[fixture_site.url({path})], base=fixture_site.base_url,
                   settings={{"CONCURRENT_REQUESTS": 8}})
    assert result.responses > 0
""" for budget, (marker, spider, path, _) in sorted(BREACHES.items()))


@pytest.fixture
def breaches(pytester: pytest.Pytester) -> pytest.RunResult:
    outcome, _ = inner_session(pytester, BREACH_SUITE, "[pytest]\n", timeout=300)
    return outcome


def test_every_budget_breach_fails_its_own_test(breaches):
    breaches.assert_outcomes(failed=len(BREACHES))


@pytest.mark.parametrize("budget", sorted(BREACHES))
def test_each_budget_breach_fails_the_test_with_one_sentence(breaches, budget):
    message = BREACHES[budget][3]
    section = breaches.stdout.str().split(f"_ test_{budget} _", 1)[1].split("\n___", 1)[0].split("\n===", 1)[0]
    lines = pytest.LineMatcher(section.splitlines())
    lines.fnmatch_lines([f"*crawl_memory budget broken: {message}*", "*report: *"])


def test_the_exact_peak_is_caught_even_when_a_blocking_callback_hides_it_from_samples(suite):
    write_test(suite, '@pytest.mark.crawl_memory(peak_rss="250 MiB")', """
    result = crawl(Spike, start_urls=[fixture_site.url("/catalog/?pages=2&per_page=5")])
    sampled = max(s.rss_bytes for s in result.samples)
    assert sampled - result.start_rss < 100 * 2**20, "the sampler should not have seen the spike"
    assert result.peak_rss - result.start_rss >= 290 * 2**20
""")
    outcome = run(suite, "--crawlmem-interval", "30")
    outcome.assert_outcomes(failed=1)
    outcome.stdout.fnmatch_lines(["*peak RSS was *, over the budget peak_rss=250.0 MiB*"])


#: Markers refused at collection: ``{test name: (marker, what its error says)}``. One inner session runs them all
#: (each errors only its own test at setup, naming it); a session per marker cost ~1.1 CPU-s of start-up each.
BAD_MARKERS = {
    "unknown_budget": ('crawl_memory(peak_rs="1 MiB")',
                       "unknown budget 'peak_rs' in crawl_memory marker of test_suite.py::test_unknown_budget"),
    "bad_size": ('crawl_memory(peak_rss="lots")',
                 "invalid size 'lots' for peak_rss in crawl_memory marker of test_suite.py::test_bad_size"),
    "positional": ('crawl_memory("1 MiB")', "crawl_memory marker of test_suite.py::test_positional takes keyword budgets only"),
    "bad_leak_mode": ('crawl_memory(leak="sometimes")', "invalid leak mode 'sometimes' for leak in crawl_memory marker"),
    "negative_pages": ("crawl_memory(max_open_pages=-3)",
                       "invalid max_open_pages -3 in crawl_memory marker of test_suite.py::test_negative_pages:"
                       " must not be negative"),
    "zero_timeout": ("crawl_memory(timeout=0)",
                     "invalid duration 0 for timeout in crawl_memory marker of test_suite.py::test_zero_timeout:"
                     " expected seconds > 0"),
}
BAD_MARKER_SUITE = "import pytest\n\n\ndef test_fine():\n    pass\n" + "".join(
    f"\n\n@pytest.mark.{marker}\ndef test_{name}(crawl, fixture_site):\n    pass\n"
    for name, (marker, _) in BAD_MARKERS.items()
)


@pytest.fixture
def bad_markers(pytester: pytest.Pytester) -> pytest.RunResult:
    outcome, _ = inner_session(pytester, BAD_MARKER_SUITE, "[pytest]\n", timeout=300)
    return outcome


def test_bad_markers_error_only_their_own_tests(bad_markers):
    bad_markers.assert_outcomes(passed=1, errors=len(BAD_MARKERS))


@pytest.mark.parametrize("name", list(BAD_MARKERS))
def test_a_bad_marker_errors_its_test_naming_value_and_test(bad_markers, name):
    _, expected = BAD_MARKERS[name]
    section = bad_markers.stdout.str().split(f" ERROR at setup of test_{name} ", 1)[1].split(" ERROR at setup of ", 1)[0]
    assert f"pytest-crawlmem usage error: {expected}" in section, section


def test_ini_budgets_apply_to_marked_tests_and_markers_override_them(suite):
    suite.makeini("[pytest]\ncrawlmem_peak_rss = 1 MiB\n")
    suite.makepyfile(test_ini="""
import pytest
from spiders import Catalog

@pytest.mark.crawl_memory()
def test_default_applies(crawl, fixture_site):
    crawl(Catalog, start_urls=[fixture_site.url("/catalog/?pages=1&per_page=5")])

@pytest.mark.crawl_memory(peak_rss="4 GiB")
def test_marker_overrides(crawl, fixture_site):
    crawl(Catalog, start_urls=[fixture_site.url("/catalog/?pages=1&per_page=5")])

@pytest.mark.parametrize("limit", [pytest.param("4 GiB", marks=pytest.mark.crawl_memory(peak_rss="4 GiB"))])
def test_param_marks(crawl, fixture_site, limit):
    crawl(Catalog, start_urls=[fixture_site.url("/catalog/?pages=1&per_page=5")])

def test_unmarked_crawls_are_measured_not_judged(crawl, fixture_site):
    crawl(Catalog, start_urls=[fixture_site.url("/catalog/?pages=1&per_page=5")])
""")
    outcome = run(suite)
    outcome.assert_outcomes(passed=3, failed=1)
    outcome.stdout.fnmatch_lines(["*_ test_default_applies _*", "*over the budget peak_rss=1.0 MiB*"])


@pytest.mark.parametrize(
    ("ini", "args", "expected"),
    [
        ("crawlmem_peak_rss = huge", (), "*invalid size 'huge' for peak_rss in ini crawlmem_peak_rss*"),
        ("crawlmem_interval = 0", (), "*invalid duration 0.0 for ini crawlmem_interval: expected seconds > 0*"),
        ("", ("--crawlmem-interval", "-1"), "*invalid duration -1.0 for command line --crawlmem-interval*"),
        ("crawlmem_tracemalloc_frames = deep", (), "*invalid count 'deep' for ini crawlmem_tracemalloc_frames*"),
    ],
)
def test_bad_options_are_usage_errors_naming_their_source(suite, ini, args, expected):
    suite.makeini(f"[pytest]\n{ini}\n")
    write_test(suite, "", "    pass")
    outcome = run(suite, *args)
    assert outcome.ret == pytest.ExitCode.USAGE_ERROR
    outcome.stderr.fnmatch_lines([expected])


def test_the_report_dir_comes_from_the_command_line_over_the_ini(suite):
    suite.makeini("[pytest]\ncrawlmem_report_dir = from-ini\n")
    write_test(suite, "", '    crawl(Catalog, start_urls=[fixture_site.url("/catalog/?pages=1&per_page=2")])')
    run(suite).assert_outcomes(passed=1)
    assert (suite.path / "from-ini" / "test_crawl.py__test_it" / "report.json").exists()
    run(suite, "--crawlmem-report-dir", "from-cli").assert_outcomes(passed=1)
    assert (suite.path / "from-cli" / "test_crawl.py__test_it" / "report.json").exists()


def test_debug_log_capture_does_not_pin_crawl_objects(suite):
    write_test(suite, "", """
    result = crawl(Catalog, start_urls=[fixture_site.url("/catalog/?pages=3&per_page=20")],
                   settings={"LOG_LEVEL": "DEBUG"})
    import logging
    assert result.live_refs.get("HtmlResponse", 0) == 0, result.live_refs
    assert result.live_refs.get("Catalog", 0) == 0, result.live_refs
""")
    run(suite, "--log-level=DEBUG").assert_outcomes(passed=1)


def test_a_leaking_spider_fails_with_the_leak_verdict(suite):
    write_test(suite, '@pytest.mark.crawl_memory(leak="fail")', """
    result = crawl(Hoarder, start_urls=[fixture_site.url("/catalog/?pages=30&per_page=20")])
    assert result.responses == 630  # 4 KiB kept a product: a 2 KiB keeper is caught at 600 (test_detection.py)
""")
    outcome = run(suite)
    outcome.assert_outcomes(failed=1)
    outcome.stdout.fnmatch_lines(
        ["*crawl_memory budget broken: retained-objects: * memory grew * KiB/response*top growth *spiders.py:*"
         "Fix: look for references kept after a response is processed*"]
    )


def test_leak_warn_reports_without_failing(suite):
    write_test(suite, '@pytest.mark.crawl_memory(leak="warn")', """
    result = crawl(Hoarder, start_urls=[fixture_site.url("/catalog/?pages=30&per_page=20")])
    assert result.verdict == "retained-objects"
""")
    outcome = run(suite)
    outcome.assert_outcomes(passed=1, warnings=1)
    outcome.stdout.fnmatch_lines(["*CrawlMemWarning*memory grew*"])


def test_calling_crawl_from_an_async_test_is_a_clear_error(suite):
    write_test(suite, "", "    pass")
    suite.makepyfile(test_async="""
from spiders import Catalog

async def test_it(crawl, fixture_site):
    crawl(Catalog, start_urls=[fixture_site.url("/catalog/?pages=1&per_page=2")])
""")
    outcome = run(suite, "test_async.py")
    outcome.assert_outcomes(failed=1)
    outcome.stdout.fnmatch_lines(["*crawl() blocks until the crawl ends: call it from a plain `def` test*"])


def test_the_summary_merges_crawls_from_xdist_workers(suite):
    suite.makepyfile(test_two="""
from spiders import Catalog

def test_a(crawl, fixture_site):
    crawl(Catalog, start_urls=[fixture_site.url("/catalog/?pages=1&per_page=3")])

def test_b(crawl, fixture_site):
    crawl(Catalog, start_urls=[fixture_site.url("/catalog/?pages=1&per_page=4")])
""")
    outcome = run(suite, "-n", "2")
    outcome.assert_outcomes(passed=2)
    outcome.stdout.fnmatch_lines(["*crawl memory*", "test_two.py::test_a*4*passed", "test_two.py::test_b*5*passed"])


def test_kill_at_stops_a_runaway_crawl_within_a_second_and_keeps_its_data(suite):
    write_test(suite, '@pytest.mark.crawl_memory(kill_at="400 MiB")', """
    result = crawl(Grower, base=fixture_site.base_url, settings={"CONCURRENT_REQUESTS": 4})
    crossing = next(s.t_seconds for s in result.samples if s.rss_bytes >= 400 * 2**20)
    assert result.finish_reason == "crawlmem_kill_at"
    assert result.samples[-1].t_seconds - crossing < 1.0
    assert result.responses < 3000
""")
    outcome = run(suite)
    outcome.assert_outcomes(failed=1)
    outcome.stdout.fnmatch_lines([
        "*crawl_memory budget broken: RSS reached * MiB at * s, the hard ceiling kill_at=400.0 MiB:"
        " the crawl was stopped after * responses*"
    ])
    report = json.loads((suite.path / ".crawlmem" / "test_crawl.py__test_it" / "report.json").read_text())
    assert report["result"]["finish_reason"] == "crawlmem_kill_at"
    assert "kill_at" in {v["budget"] for v in report["violations"]}  # a runaway crawl may also read as a leak


def test_timeout_ends_a_crawl_that_would_hang(suite):
    write_test(suite, "@pytest.mark.crawl_memory(timeout=2)", """
    result = crawl(NeverEnding, base=fixture_site.base_url)
    assert result.finish_reason == "crawlmem_timeout"  # stopped by the budget, whatever the machine's load
""")
    outcome = run(suite)
    outcome.assert_outcomes(failed=1)
    outcome.stdout.fnmatch_lines([
        "*crawl_memory budget broken: the crawl was still running after 2 s, the budget timeout=2 s:"
        " the crawl was stopped after 0 responses*"
    ])
