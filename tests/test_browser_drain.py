"""Browser checkpoints drain at realistic concurrency: no page opens while one drains, and what waits for a page is
parked (a real crawl of scrapy-playwright's published example, 32 in flight, in a pytester subprocess)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_crawlmem.crawl.browser import BrowserNotFound, chromium_path

pytest.importorskip("scrapy_playwright", reason="the browser extra is not installed: pip install -e '.[browser]'")
try:
    chromium_path()
except BrowserNotFound as exc:  # pragma: no cover - CI installs chromium
    pytest.skip(str(exc), allow_module_level=True)

BOOKS_SOURCE = (Path(__file__).parents[1] / "examples" / "playwright_books.py").read_text()
#: Far above what a drained checkpoint takes (measured: under 1 s): a checkpoint that waits on parked downloads
#: never drains, whatever the timeout, so this can only fail for that reason or a machine 20x slower than ours.
DRAIN_TIMEOUT_SECONDS = 20


def test_checkpoints_of_the_published_example_at_32_in_flight_drain(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(playwright_books=BOOKS_SOURCE)
    pytester.makepyfile(test_books=f"""
import pytest
from playwright_books import BooksSpider, books_settings


@pytest.mark.crawl_memory(timeout=240)
def test_it(crawl, fixture_site):
    result = crawl(BooksSpider, settings=books_settings(32, CRAWLMEM_DRAIN_TIMEOUT_SECONDS={DRAIN_TIMEOUT_SECONDS}),
                   base_url=fixture_site.base_url, pages=3)
    assert result.items_scraped == 60
""")
    outcome = pytester.runpytest_subprocess("-p", "no:cacheprovider", timeout=400)
    outcome.assert_outcomes(passed=1)
    report = json.loads((pytester.path / ".crawlmem" / "test_books.py__test_it" / "report.json").read_text())
    middle = report["result"]["growth"]["checkpoints"][1:-1]  # the opening and closing checkpoints always drain
    assert middle, report["result"]["growth"]["checkpoints"]
    undrained = [(c["responses"], c["cost_seconds"]) for c in middle if not c["drained"]]
    errors = report["result"]["errors"]
    assert not undrained, f"{len(undrained)} of {len(middle)} checkpoints did not drain: {undrained}; {errors}"
