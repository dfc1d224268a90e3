"""Browser crawls that never hang: pages never closed end the crawl by its timeout or sooner, the cause named.

Each test runs a real crawl in a pytester subprocess with a subprocess timeout, so a hang fails the test
instead of the CI job. Skipped (with the reason) only where Chromium or Playwright is missing.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from browser_source import FORGETFUL_SPIDERS
from inner_session import side_by_side

from pytest_crawlmem.browser.settings import BrowserNotFound, chromium_path
from pytest_crawlmem.core.budgets import Budgets

pytest.importorskip("scrapy_playwright", reason="the browser extra is not installed: pip install -e '.[browser]'")
try:
    chromium_path()
except BrowserNotFound as exc:  # pragma: no cover - CI installs chromium
    pytest.skip(str(exc), allow_module_level=True)

TIMEOUT_SECONDS = 25
#: The crawl with the stall check off waits for its whole timeout: long enough for Chromium to start and the pages to
#: fill beside a CPU hog, short enough not to hold a worker (at 25 s this test took 27 s of the suite's wall time).
STALL_OFF_TIMEOUT_SECONDS = 12
#: What the issue promises: the crawl ends within its timeout + 10 s; the rest is pytest's start and teardown.
GUARD_SECONDS = TIMEOUT_SECONDS + 10 + 60


BOOKS_SOURCE = (Path(__file__).parents[1] / "examples" / "playwright_books.py").read_text()


def session(call: str, *, timeout: int = TIMEOUT_SECONDS) -> dict[str, str]:
    """The files of an inner session whose one test runs ``call`` under ``crawl_memory(timeout=...)``."""
    return {"forgetful.py": FORGETFUL_SPIDERS, "playwright_books.py": BOOKS_SOURCE, "test_forgetful.py": f"""
import time

import pytest
from forgetful import *
from playwright_books import *


@pytest.mark.crawl_memory(timeout={timeout})
def test_it(crawl, fixture_site):
    started = time.monotonic()
    try:
        {call}
    finally:
        print("CRAWL_SECONDS", round(time.monotonic() - started, 1))
"""}


def forgets_pages(concurrency: int, isolate: bool = False) -> str:
    """The issue's reproduction: /js/<id>?mode=render pages kept by the callback."""
    return (f"crawl(ForgetsPages, settings=forgetful_settings({concurrency}), base_url=fixture_site.base_url,"
            f" isolate={isolate})")


def forgetful_books(concurrency: int) -> str:
    """scrapy-playwright's published example (a context per listing page, a screenshot per book), pages kept."""
    return (f"crawl(ForgetfulBooksSpider, settings=books_settings({concurrency}, CRAWLMEM_STALL_SECONDS=3),"
            " base_url=fixture_site.base_url, pages=3)")


def crawl_seconds(outcome: pytest.RunResult) -> float:
    found = re.search(r"CRAWL_SECONDS (\d+(?:\.\d+)?)", outcome.stdout.str())
    assert found, outcome.stdout.str()
    return float(found.group(1))


def report_of(directory: Path) -> dict:
    return json.loads((directory / ".crawlmem" / "test_forgetful.py__test_it" / "report.json").read_text())


#: Every crawl of this module that never closes its pages: ``{name: (call, its timeout)}``. They run side by side, each
#: in its own pytest session, since each mostly waits (for its stall check, or for its timeout): one after the other
#: they held a worker for 55 s, 25 s of it CPU (at most PARALLEL at a time: 22 s).
HANGS = {
    "stall-off": ("crawl(ForgetfulBooksSpider, settings=books_settings(8, CRAWLMEM_STALL_SECONDS=3600),"
                  " base_url=fixture_site.base_url, pages=3)", STALL_OFF_TIMEOUT_SECONDS),
    **{f"books-{concurrency}": (forgetful_books(concurrency), TIMEOUT_SECONDS) for concurrency in (4, 8, 32)},
    "forgets-pages": (forgets_pages(8), TIMEOUT_SECONDS),
    "forgets-pages-isolated": (forgets_pages(8, isolate=True), TIMEOUT_SECONDS),
}
#: Sessions at a time: the waits overlap, and a crawl's own time (what the tests bound) stays near its time alone.
PARALLEL = 3


@pytest.fixture
def hangs(pytester: pytest.Pytester) -> dict[str, tuple[pytest.RunResult, Path]]:
    return side_by_side(pytester, {name: session(call, timeout=timeout) for name, (call, timeout) in HANGS.items()},
                        "-s", parallel=PARALLEL, timeout=GUARD_SECONDS)


@pytest.mark.parametrize("concurrency", [4, 8, 32])
def test_the_published_example_without_page_close_ends_by_its_timeout_and_names_the_callback(hangs, concurrency):
    outcome, directory = hangs[f"books-{concurrency}"]
    outcome.assert_outcomes(failed=1)
    assert crawl_seconds(outcome) <= TIMEOUT_SECONDS + 10
    outcome.stdout.fnmatch_lines(["*pages handed to callbacks (playwright_include_page=True) were never closed by"
                                  " ForgetfulBooksSpider.parse_book*"])
    assert report_of(directory)["result"]["finish_reason"] == "crawlmem_unclosed_pages"


def test_a_crawl_that_never_closes_its_pages_ends_by_its_timeout_and_names_the_callback(hangs):
    outcome, directory = hangs["forgets-pages"]
    outcome.assert_outcomes(failed=1)
    assert crawl_seconds(outcome) <= TIMEOUT_SECONDS + 10
    outcome.stdout.fnmatch_lines(["*pages handed to callbacks (playwright_include_page=True) were never closed by"
                                  " ForgetsPages.parse*request(s) waited for one*"])
    assert report_of(directory)["result"]["finish_reason"] == "crawlmem_unclosed_pages"


def test_an_isolated_crawl_that_never_closes_its_pages_ends_by_its_timeout_and_names_the_callback(hangs):
    outcome, _ = hangs["forgets-pages-isolated"]
    outcome.assert_outcomes(failed=1)
    assert crawl_seconds(outcome) <= TIMEOUT_SECONDS + 10
    outcome.stdout.fnmatch_lines(["*pages handed to callbacks (playwright_include_page=True) were never closed by"
                                  " ForgetsPages.parse*"])


def test_a_killed_isolated_crawl_names_the_stop_it_was_carrying_out(tmp_path):
    from pytest_crawlmem.core import stops
    from pytest_crawlmem.harness.isolated import IsolatedSpec, result_from_stream
    from pytest_crawlmem.measure.runner import CrawlOptions
    from pytest_crawlmem.probes.recording import Recording

    recording = Recording(tmp_path / "samples.jsonl")
    recording.header(spider="forgets_pages", interval_seconds=0.1, crawl_id="x", started_at=0.0)
    recording.add_stop(stops.UNCLOSED_PAGES, "4 pages handed to callbacks were never closed by ForgetsPages.parse")
    recording.close()
    options = CrawlOptions(report_dir=tmp_path, budgets=Budgets(timeout=25))
    spec = IsolatedSpec("forgetful", "ForgetsPages", None, None, {}, options)
    killed = stops.killed_at_timeout_message(25, 2)
    result = result_from_stream(spec, killed, 27.0, (), stops.TIMEOUT)
    assert result.finish_reason == stops.TIMEOUT
    assert "killed at the budget timeout; it had been stopping since: 4 pages handed to callbacks" in result.stopped_because
    assert "ForgetsPages.parse" in result.stopped_because


def test_with_the_stall_check_off_the_timeout_alone_ends_a_crawl_that_never_closes_its_pages(hangs):
    """No stall to stop it: the timeout's stop escalates (pages, contexts, the browser) and the crawl still ends in
    time, the pages left open named."""
    outcome, directory = hangs["stall-off"]
    outcome.assert_outcomes(failed=1)
    assert crawl_seconds(outcome) <= STALL_OFF_TIMEOUT_SECONDS + 10
    outcome.stdout.fnmatch_lines(["*pages handed to callbacks (playwright_include_page=True) were still open when the"
                                  " spider closed*", f"*still running after {STALL_OFF_TIMEOUT_SECONDS} s, the budget timeout*"])
    assert report_of(directory)["result"]["finish_reason"] == "crawlmem_timeout"
