"""Browser crawls with scrapy-playwright on Debian's Chromium: the tree's memory, open pages, verdicts.

Each test runs a real crawl in a pytester subprocess. Skipped (with the reason) only where
Chromium or Playwright is missing.
"""

from __future__ import annotations

import json

import psutil
import pytest
from browser_source import BROWSER_SPIDERS

from pytest_crawlmem.crawl.browser import BrowserNotFound, chromium_path

pytest.importorskip("scrapy_playwright", reason="the browser extra is not installed: pip install -e '.[browser]'")
try:
    chromium_path()
except BrowserNotFound as exc:  # pragma: no cover - CI installs chromium
    pytest.skip(str(exc), allow_module_level=True)


@pytest.fixture
def suite(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makepyfile(browser_spiders=BROWSER_SPIDERS)
    return pytester


def write_test(pytester: pytest.Pytester, marker: str, body: str) -> None:
    pytester.makepyfile(test_browser_crawl=f"""
import pytest
from browser_spiders import *

{marker}
def test_it(crawl, fixture_site):
{body}
""")


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest_subprocess("-p", "no:cacheprovider", *args, timeout=300)


def report_of(pytester: pytest.Pytester) -> dict:
    return json.loads((pytester.path / ".crawlmem" / "test_browser_crawl.py__test_it" / "report.json").read_text())


def test_a_clean_browser_crawl_measures_the_tree_apart_from_python(suite):
    write_test(suite, '@pytest.mark.crawl_memory(browser_pss="4 GiB", max_open_pages=8, leak="fail")', """
    result = crawl(JsPages, settings=SETTINGS, base_url=fixture_site.base_url, pages=100)
    assert result.items_scraped == 100
    assert result.stats.get("js/rendered_pages") == 100
    browser = result.browser
    assert browser is not None
    kinds = set(browser.pss_by_kind_at_peak)
    assert {"driver", "browser", "renderer"} <= kinds, kinds
    assert 50 * 2**20 < browser.peak_pss_bytes < 4 * 2**30
    assert browser.peak_rss_sum_bytes > browser.peak_pss_bytes  # summing RSS double counts shared pages
    assert 1 <= browser.max_open_pages <= 4
    assert browser.unclosed_pages == 0
    assert result.peak_rss < browser.peak_pss_bytes  # Python's own memory, reported apart: the browser holds most
    assert result.verdict == "steady", result.growth.reason
    assert result.growth.signal == "browser-uss"
    assert any(s.browser_rss_bytes for s in result.samples)  # the sampler found the tree (its PSS: within its share)
    assert any(c.browser_pss_bytes for c in result.growth.checkpoints)
    print("BROWSER", browser.peak_pss_bytes, browser.peak_rss_sum_bytes, result.growth.deltas_per_response,
          dict(browser.pss_by_kind_at_peak), browser.cost_seconds, result.duration_seconds)
""")
    outcome = run(suite, "-s")
    outcome.assert_outcomes(passed=1)
    report = report_of(suite)
    assert report["result"]["browser"]["peak_pss_bytes"] > 0
    assert not [p for p in psutil.Process().children(recursive=True) if "chrom" in p.name()]


def test_a_context_per_request_is_browser_state_and_fails_the_leak_check(suite):
    write_test(suite, '@pytest.mark.crawl_memory(leak="fail")', """
    result = crawl(ContextPerRequest, settings={**SETTINGS, "CRAWLMEM_CHECKPOINT_MIN_RESPONSES": 7},
                   base_url=fixture_site.base_url, pages=40)
    assert result.browser.max_open_contexts >= 40
""")
    outcome = run(suite, "-s")
    outcome.assert_outcomes(failed=1)
    outcome.stdout.fnmatch_lines(["*browser-state: what the browser holds rose at every drained checkpoint"
                                  " (open browser contexts * -> *) and the browser process tree's private memory (USS)"
                                  " grew * KiB over * pages*Fix: close what each request opens*"])


def test_pages_never_closed_stop_the_crawl_instead_of_hanging_it(suite):
    write_test(suite, '@pytest.mark.crawl_memory(timeout=120)', """
    result = crawl(KeepsPages, settings={**SETTINGS, "CRAWLMEM_STALL_SECONDS": 3},
                   base_url=fixture_site.base_url, pages=40)
""")
    outcome = run(suite)
    outcome.assert_outcomes(failed=1)
    outcome.stdout.fnmatch_lines(["*4 pages handed to callbacks (playwright_include_page=True) were never closed*"
                                  "no free page slot*"])
    report = report_of(suite)
    assert report["result"]["finish_reason"] == "crawlmem_unclosed_pages"


def test_pages_closed_in_the_callback_pass(suite):
    write_test(suite, '@pytest.mark.crawl_memory(max_open_pages=4)', """
    result = crawl(ClosesPages, settings=SETTINGS, base_url=fixture_site.base_url, pages=30)
    assert result.items_scraped == 30
    assert result.browser.unclosed_pages == 0
""")
    run(suite).assert_outcomes(passed=1)


JOBS = '''
import pytest

async def capture(job, keep_open=False, batches=6, size=5):
    context = await job.browser.new_context()
    kept = []
    for batch in range(batches):
        for number in range(size):
            page = await context.new_page()
            await page.goto(job.url(f"/js/{batch * size + number}"))
            await page.wait_for_selector("body[data-rendered=true]")
            if keep_open:
                kept.append(page)
            else:
                await page.close()
            job.page_done()
        await job.checkpoint()
    await context.close()
'''


def write_job_test(pytester: pytest.Pytester, marker: str, body: str) -> None:
    pytester.makepyfile(test_browser_crawl=JOBS + f"""

{marker}
def test_it(browser_job, fixture_site):
{body}
""")


def test_a_browser_job_is_measured_like_a_crawl(pytester):
    write_job_test(pytester, '@pytest.mark.crawl_memory(browser_pss="4 GiB", max_open_pages=2, leak="fail")', """
    result = browser_job(capture)
    assert result.responses == 30
    assert result.verdict == "steady", result.growth.reason
    assert result.browser.max_open_pages == 1
    assert {"driver", "browser"} <= set(result.browser.pss_by_kind_at_peak)
    assert len([c for c in result.growth.checkpoints if c.browser_uss_bytes]) >= 6
""")
    outcome = run(pytester)
    outcome.assert_outcomes(passed=1)
    outcome.stdout.fnmatch_lines(["*test_browser_crawl.py::test_it*30*steady*passed*"])
    assert report_of(pytester)["result"]["browser"]["max_open_pages"] == 1


def test_a_job_that_keeps_its_pages_open_is_browser_state(pytester):
    write_job_test(pytester, '@pytest.mark.crawl_memory(leak="fail")', """
    browser_job(lambda job: capture(job, keep_open=True))
""")
    outcome = run(pytester)
    outcome.assert_outcomes(failed=1)
    outcome.stdout.fnmatch_lines(["*browser-state: what the browser holds rose at every drained checkpoint"
                                  " (open pages * -> 30)*"])


def test_a_job_that_raises_fails_with_its_error_and_keeps_the_report(pytester):
    write_job_test(pytester, "", """
    async def broken(job):
        job.page_done()
        await job.checkpoint()
        raise LookupError("no such selector")

    browser_job(broken)
""")
    outcome = run(pytester)
    outcome.assert_outcomes(failed=1)
    outcome.stdout.fnmatch_lines(["*LookupError: no such selector*"])
    report = report_of(pytester)
    assert report["result"]["finish_reason"] == "error"
    assert report["result"]["responses"] == 1


def test_a_browser_job_too_short_to_judge_says_pages_and_what_the_job_must_do(pytester):
    write_job_test(pytester, '@pytest.mark.crawl_memory(leak="fail")', """
    browser_job(lambda job: capture(job, batches=1, size=3))
""")
    outcome = run(pytester, "-W", "always")
    outcome.assert_outcomes(passed=1)
    outcome.stdout.fnmatch_lines(["*CrawlMemWarning: test_browser_crawl.py::test_it: leak=\"fail\" could not judge this"
                                  " crawl's memory: 3 pages gave 0 checkpoint intervals after the warm-up; 3 are needed"
                                  " to judge growth: call `await job.checkpoint()` after each batch of pages*"
                                  " about 160 pages*"])
    warning = next(line for line in outcome.stdout.lines if "could not judge" in line)
    assert "response" not in warning, warning


def test_kill_at_covers_the_browser_tree_so_a_growing_browser_is_stopped(suite):
    write_test(suite, '@pytest.mark.crawl_memory(kill_at="250 MiB", timeout=120)', """
    result = crawl(ContextPerRequest, settings=SETTINGS, base_url=fixture_site.base_url, pages=60)
""")
    outcome = run(suite)
    outcome.assert_outcomes(failed=1)
    outcome.stdout.fnmatch_lines(["*RSS of the crawl (* MiB) and PSS of its browser tree (* MiB) reached * MiB at * s,"
                                  " the hard ceiling kill_at*"])
    assert report_of(suite)["result"]["finish_reason"] == "crawlmem_kill_at"
