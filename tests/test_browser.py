"""Browser crawls with scrapy-playwright on Debian's Chromium: the tree's memory, open pages, verdicts.

Every crawl runs in one inner pytest session (a test each, failing only itself; each case reads its own test's
outcome and failure section): a session per crawl cost a pytest and Scrapy start-up each. Skipped (with the reason)
only where Chromium or Playwright is missing.
"""

from __future__ import annotations

import json
from pathlib import Path

import psutil
import pytest
from browser_source import BROWSER_SPIDERS
from inner_session import inner_session

from pytest_crawlmem.browser.settings import BrowserNotFound, chromium_path

pytest.importorskip("scrapy_playwright", reason="the browser extra is not installed: pip install -e '.[browser]'")
try:
    chromium_path()
except BrowserNotFound as exc:  # pragma: no cover - CI installs chromium
    pytest.skip(str(exc), allow_module_level=True)


JOBS = '''
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

#: The inner session's tests: ``{name: (marker, fixture, body)}``; the cases below read their outcomes.
CASES = {
    "clean": ('@pytest.mark.crawl_memory(browser_pss="4 GiB", max_open_pages=8, leak="fail")', "crawl", """
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
"""),
    "context_per_request": ('@pytest.mark.crawl_memory(leak="fail")', "crawl", """
    result = crawl(ContextPerRequest, settings={**SETTINGS, "CRAWLMEM_CHECKPOINT_MIN_RESPONSES": 7},
                   base_url=fixture_site.base_url, pages=40)
    assert result.browser.max_open_contexts >= 40
"""),
    "never_closed": ("@pytest.mark.crawl_memory(timeout=120)", "crawl", """
    crawl(KeepsPages, settings={**SETTINGS, "CRAWLMEM_STALL_SECONDS": 3}, base_url=fixture_site.base_url, pages=40)
"""),
    "closed_in_callback": ("@pytest.mark.crawl_memory(max_open_pages=4)", "crawl", """
    result = crawl(ClosesPages, settings=SETTINGS, base_url=fixture_site.base_url, pages=30)
    assert result.items_scraped == 30
    assert result.browser.unclosed_pages == 0
"""),
    "kill_at": ('@pytest.mark.crawl_memory(kill_at="250 MiB", timeout=120)', "crawl", """
    crawl(ContextPerRequest, settings=SETTINGS, base_url=fixture_site.base_url, pages=60)
"""),
    "job": ('@pytest.mark.crawl_memory(browser_pss="4 GiB", max_open_pages=2, leak="fail")', "browser_job", """
    result = browser_job(capture)
    assert result.responses == 30
    assert result.verdict == "steady", result.growth.reason
    assert result.browser.max_open_pages == 1
    assert {"driver", "browser"} <= set(result.browser.pss_by_kind_at_peak)
    assert len([c for c in result.growth.checkpoints if c.browser_uss_bytes]) >= 6
"""),
    "job_keeps_pages": ('@pytest.mark.crawl_memory(leak="fail")', "browser_job", """
    browser_job(lambda job: capture(job, keep_open=True))
"""),
    "job_raises": ("", "browser_job", """
    async def broken(job):
        job.page_done()
        await job.checkpoint()
        raise LookupError("no such selector")

    browser_job(broken)
"""),
    "job_too_short": ('@pytest.mark.crawl_memory(leak="fail")', "browser_job", """
    browser_job(lambda job: capture(job, batches=1, size=3))
"""),
}
SUITE = "import pytest\nfrom browser_spiders import *\n" + JOBS + "".join(
    f"\n\n{marker}\ndef test_{name}({fixture}, fixture_site):{body}" for name, (marker, fixture, body) in CASES.items())
FAILING = {"context_per_request", "never_closed", "kill_at", "job_keeps_pages", "job_raises"}


@pytest.fixture
def inner(pytester: pytest.Pytester) -> tuple[pytest.RunResult, Path]:
    pytester.makepyfile(browser_spiders=BROWSER_SPIDERS)
    return inner_session(pytester, SUITE, "[pytest]\n", "-s", "-rA", "-W", "always", timeout=600)


def outcome_of(inner: tuple[pytest.RunResult, Path], name: str) -> str:
    """``passed`` or ``failed``: the inner test's own outcome, from the session's short summary (``-rA``)."""
    found = [line.split()[0] for line in inner[0].outlines if line.split()[1:2] == [f"test_suite.py::test_{name}"]]
    assert len(found) == 1, (name, inner[0].stdout.str()[-3000:])
    return found[0].lower()


def section_of(inner: tuple[pytest.RunResult, Path], name: str) -> pytest.LineMatcher:
    """The failure section of one inner test (up to the next section or the session's summary)."""
    text = inner[0].stdout.str()
    assert f"_ test_{name} _" in text, (name, text[-3000:])
    section = text.split(f"_ test_{name} _", 1)[1].split("\n___", 1)[0].split("\n===", 1)[0]
    return pytest.LineMatcher(section.splitlines())


def report_of(inner: tuple[pytest.RunResult, Path], name: str) -> dict:
    return json.loads((inner[1] / ".crawlmem" / f"test_suite.py__test_{name}" / "report.json").read_text())


def test_every_inner_test_has_its_expected_outcome(inner):
    assert {name: outcome_of(inner, name) for name in CASES} == {
        name: "failed" if name in FAILING else "passed" for name in CASES}
    inner[0].assert_outcomes(passed=len(CASES) - len(FAILING), failed=len(FAILING))


def test_a_clean_browser_crawl_measures_the_tree_apart_from_python(inner):
    assert outcome_of(inner, "clean") == "passed"
    assert report_of(inner, "clean")["result"]["browser"]["peak_pss_bytes"] > 0
    assert not [p for p in psutil.Process().children(recursive=True) if "chrom" in p.name()]


def test_a_context_per_request_is_browser_state_and_fails_the_leak_check(inner):
    assert outcome_of(inner, "context_per_request") == "failed"
    section_of(inner, "context_per_request").fnmatch_lines([
        "*browser-state: what the browser holds rose at every drained checkpoint (open browser contexts * -> *) and"
        " the browser process tree's private memory (USS) grew * KiB over * pages*Fix: close what each request opens*"])


def test_pages_never_closed_stop_the_crawl_instead_of_hanging_it(inner):
    assert outcome_of(inner, "never_closed") == "failed"
    section_of(inner, "never_closed").fnmatch_lines([
        "*4 pages handed to callbacks (playwright_include_page=True) were never closed*no free page slot*"])
    assert report_of(inner, "never_closed")["result"]["finish_reason"] == "crawlmem_unclosed_pages"


def test_pages_closed_in_the_callback_pass(inner):
    assert outcome_of(inner, "closed_in_callback") == "passed"


def test_a_browser_job_is_measured_like_a_crawl(inner):
    assert outcome_of(inner, "job") == "passed"
    inner[0].stdout.fnmatch_lines(["*test_suite.py::test_job *30*steady*passed*"])
    assert report_of(inner, "job")["result"]["browser"]["max_open_pages"] == 1


def test_a_job_that_keeps_its_pages_open_is_browser_state(inner):
    assert outcome_of(inner, "job_keeps_pages") == "failed"
    section_of(inner, "job_keeps_pages").fnmatch_lines([
        "*browser-state: what the browser holds rose at every drained checkpoint (open pages * -> 30)*"])


def test_a_job_that_raises_fails_with_its_error_and_keeps_the_report(inner):
    assert outcome_of(inner, "job_raises") == "failed"
    section_of(inner, "job_raises").fnmatch_lines(["*LookupError: no such selector*"])
    report = report_of(inner, "job_raises")
    assert report["result"]["finish_reason"] == "error"
    assert report["result"]["responses"] == 1


def test_a_browser_job_too_short_to_judge_says_pages_and_what_the_job_must_do(inner):
    assert outcome_of(inner, "job_too_short") == "passed"
    inner[0].stdout.fnmatch_lines(["*CrawlMemWarning: test_suite.py::test_job_too_short: leak=\"fail\" could not judge"
                                   " this crawl's memory: 3 pages gave 0 checkpoint intervals after the warm-up; 3 are"
                                   " needed to judge growth: call `await job.checkpoint()` after each batch of pages*"
                                   " about 160 pages*"])
    warning = next(line for line in inner[0].outlines if "test_job_too_short: leak" in line)
    assert "response" not in warning, warning


def test_kill_at_covers_the_browser_tree_so_a_growing_browser_is_stopped(inner):
    assert outcome_of(inner, "kill_at") == "failed"
    section_of(inner, "kill_at").fnmatch_lines([
        "*RSS of the crawl (* MiB) and PSS of its browser tree (* MiB) reached * MiB at * s, the hard ceiling kill_at*"])
    assert report_of(inner, "kill_at")["result"]["finish_reason"] == "crawlmem_kill_at"
