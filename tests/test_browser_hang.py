"""Browser crawls that never hang: pages never closed end the crawl by its timeout or sooner, the cause named.

Each test runs a real crawl in a pytester subprocess with a subprocess timeout, so a hang fails the test
instead of the CI job. Skipped (with the reason) only where Chromium or Playwright is missing.
"""

from __future__ import annotations

import json
import re
import time

import pytest
from browser_source import FORGETFUL_SPIDERS

from pytest_crawlmem.crawl.browser import BrowserNotFound, chromium_path

pytest.importorskip("scrapy_playwright", reason="the browser extra is not installed: pip install -e '.[browser]'")
try:
    chromium_path()
except BrowserNotFound as exc:  # pragma: no cover - CI installs chromium
    pytest.skip(str(exc), allow_module_level=True)

TIMEOUT_SECONDS = 25
#: What the issue promises: the crawl ends within its timeout + 10 s; the rest is pytest's start and teardown.
GUARD_SECONDS = TIMEOUT_SECONDS + 10 + 60


def write_test(pytester: pytest.Pytester, concurrency: int, *, isolate: bool = False) -> None:
    pytester.makepyfile(forgetful=FORGETFUL_SPIDERS)
    pytester.makepyfile(test_forgetful=f"""
import time

import pytest
from forgetful import *


@pytest.mark.crawl_memory(timeout={TIMEOUT_SECONDS})
def test_it(crawl, fixture_site):
    started = time.monotonic()
    try:
        crawl(ForgetsPages, settings=forgetful_settings({concurrency}), base_url=fixture_site.base_url,
              isolate={isolate})
    finally:
        print("CRAWL_SECONDS", round(time.monotonic() - started, 1))
""")


def run(pytester: pytest.Pytester) -> tuple[pytest.RunResult, float]:
    started = time.monotonic()
    outcome = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-s", timeout=GUARD_SECONDS)
    return outcome, time.monotonic() - started


def crawl_seconds(outcome: pytest.RunResult) -> float:
    found = re.search(r"CRAWL_SECONDS (\d+(?:\.\d+)?)", outcome.stdout.str())
    assert found, outcome.stdout.str()
    return float(found.group(1))


def report_of(pytester: pytest.Pytester) -> dict:
    return json.loads((pytester.path / ".crawlmem" / "test_forgetful.py__test_it" / "report.json").read_text())


@pytest.mark.parametrize("concurrency", [4, 8, 32])
def test_a_crawl_that_never_closes_its_pages_ends_by_its_timeout_and_names_the_callback(pytester, concurrency):
    write_test(pytester, concurrency)
    outcome, _ = run(pytester)
    outcome.assert_outcomes(failed=1)
    assert crawl_seconds(outcome) <= TIMEOUT_SECONDS + 10
    outcome.stdout.fnmatch_lines(["*pages handed to callbacks (playwright_include_page=True) were never closed*"
                                  "ForgetsPages.parse*"])
    assert report_of(pytester)["result"]["finish_reason"] == "crawlmem_unclosed_pages"


def test_an_isolated_crawl_that_never_closes_its_pages_ends_by_its_timeout_and_names_the_callback(pytester):
    write_test(pytester, 8, isolate=True)
    outcome, _ = run(pytester)
    outcome.assert_outcomes(failed=1)
    assert crawl_seconds(outcome) <= TIMEOUT_SECONDS + 10
    outcome.stdout.fnmatch_lines(["*pages handed to callbacks (playwright_include_page=True) were never closed*"
                                  "ForgetsPages.parse*"])
