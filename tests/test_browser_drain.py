"""Browser checkpoints drain at realistic concurrency: no page opens while one drains, and what waits for a page is
parked (a real crawl of scrapy-playwright's published example, 32 in flight, in a pytester subprocess)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_crawlmem.browser.settings import BrowserNotFound, chromium_path

pytest.importorskip("scrapy_playwright", reason="the browser extra is not installed: pip install -e '.[browser]'")
try:
    chromium_path()
except BrowserNotFound as exc:  # pragma: no cover - CI installs chromium
    pytest.skip(str(exc), allow_module_level=True)

BOOKS_SOURCE = (Path(__file__).parents[1] / "examples" / "playwright_books.py").read_text()
#: Far above what a drained checkpoint takes (measured: under 1 s): a checkpoint that waits on parked downloads
#: never drains, whatever the timeout, so this can only fail for that reason or a machine 20x slower than ours.
DRAIN_TIMEOUT_SECONDS = 20


#: Counts, in the crawl's process, the page creations and navigations that passed scrapy-playwright's gate while a
#: checkpoint held it closed (patched on the handler's class, so the gate wraps the counters: each counts the moment the
#: gate let it through; a creation begun before the gate was installed counts when it began).
COUNTING_CONFTEST = """
from scrapy_playwright.handler import ScrapyPlaywrightDownloadHandler as Handler

from pytest_crawlmem.browser.slots import PageGate

COUNTS = {"closes": 0, "pages": 0, "navigations": 0, "pages_while_closed": 0, "navigations_while_closed": 0}
CLOSED = [False]
_close, _open = PageGate.close, PageGate.open
_create_page, _navigate = Handler._create_page, Handler._download_request_with_page


def close(self, crawler):
    COUNTS["closes"] += 1
    CLOSED[0] = True
    return _close(self, crawler)


def open_(self):
    CLOSED[0] = False
    return _open(self)


async def create_page(self, *args, **kwargs):
    COUNTS["pages"] += 1
    COUNTS["pages_while_closed"] += CLOSED[0]
    return await _create_page(self, *args, **kwargs)


async def navigate(self, *args, **kwargs):
    COUNTS["navigations"] += 1
    COUNTS["navigations_while_closed"] += CLOSED[0]
    return await _navigate(self, *args, **kwargs)


PageGate.close, PageGate.open = close, open_
Handler._create_page, Handler._download_request_with_page = create_page, navigate
"""


def test_checkpoints_of_the_published_example_at_32_in_flight_drain(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(playwright_books=BOOKS_SOURCE)
    pytester.makeconftest(COUNTING_CONFTEST)
    pytester.makepyfile(test_books=f"""
import json

import pytest
from conftest import COUNTS
from playwright_books import BooksSpider, books_settings, products_handled


@pytest.mark.crawl_memory(timeout=240)
def test_it(crawl, fixture_site):
    result = crawl(BooksSpider, settings=books_settings(32, CRAWLMEM_DRAIN_TIMEOUT_SECONDS={DRAIN_TIMEOUT_SECONDS}),
                   base_url=fixture_site.base_url, pages=3)
    assert products_handled(result) == 60  # an item each, unless Chromium refused its screenshot (the page closed)
    with open("counts.json", "w") as file:
        json.dump(COUNTS, file)
""")
    outcome = pytester.runpytest_subprocess("-p", "no:cacheprovider", timeout=400)
    outcome.assert_outcomes(passed=1)
    counts = json.loads((pytester.path / "counts.json").read_text())
    # every checkpoint closed the gate; the counters saw every page (one a book) and not one passed it while closed
    assert counts["closes"] >= 2 and counts["pages"] >= 60 and counts["navigations"] >= 60, counts
    assert counts["pages_while_closed"] == 0 and counts["navigations_while_closed"] == 0, counts
    report = json.loads((pytester.path / ".crawlmem" / "test_books.py__test_it" / "report.json").read_text())
    middle = report["result"]["growth"]["checkpoints"][1:-1]  # the opening and closing checkpoints always drain
    assert middle, report["result"]["growth"]["checkpoints"]
    undrained = [(c["responses"], c["cost_seconds"]) for c in middle if not c["drained"]]
    errors = report["result"]["errors"]
    assert not undrained, f"{len(undrained)} of {len(middle)} checkpoints did not drain: {undrained}; {errors}"
