"""Screenshot accounting: the fixture site's ``/shot`` route, the crawl's ``result.shots`` and the ``billed_mismatch`` budget."""

from __future__ import annotations

import http.client
import json
from collections.abc import Iterator
from types import SimpleNamespace
from urllib.parse import quote, urlsplit

import pytest

from fixture_sites.params import BadParameter
from fixture_sites.shots import parse_shot_query
from pytest_crawlmem.core.budgets import Budgets, check_budgets
from pytest_crawlmem.core.shots import ShotLedger, parse_billed
from pytest_crawlmem.harness.site import RunningSite, start_site

SHOT_SPIDER = '''
from urllib.parse import urlencode

import scrapy

#: (page, format, timeout_ms): one capture per verdict the site can give, clean in every format.
CAPTURES = [
    ("/catalog/product/1", "png", 30000),
    ("/large/1?kb=64", "jpeg", 30000),
    ("/large/2?kb=64", "webp", 30000),
    ("/catalog/product/2", "pdf", 30000),
    ("/blank/1", "png", 30000),
    ("/botcheck/1", "png", 30000),
    ("/slow/1?ms=8000", "png", 1000),
    ("/status/500", "png", 30000),
]


class Shots(scrapy.Spider):
    """Sends pages of the fixture site to its screenshot API; asks for the first one again once it is captured."""

    name = "shots"
    custom_settings = {"RETRY_ENABLED": False, "HTTPERROR_ALLOW_ALL": True}

    def shot(self, page, image_format, timeout_ms):
        query = urlencode({"url": page, "format": image_format, "timeout_ms": timeout_ms, "bill": self.bill})
        return scrapy.Request(f"{self.base}/shot?{query}", dont_filter=True, meta={"page": page})

    async def start(self):
        for capture in CAPTURES:
            yield self.shot(*capture)

    def parse(self, response):
        verdict = response.headers.get("X-Page-Verdict", b"").decode()
        if response.meta["page"] == "/catalog/product/1" and verdict == "clean":
            yield self.shot("/catalog/product/1", "png", 30000)  # the same capture again: served from the cache
        yield {"page": response.meta["page"], "verdict": verdict, "bytes": len(response.body)}
'''


@pytest.fixture
def suite(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makepyfile(shot_spiders=SHOT_SPIDER)
    return pytester


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest_subprocess("-p", "no:cacheprovider", *args, timeout=300)


def test_a_crawl_counts_captures_by_verdict_billing_and_bytes(suite):
    suite.makepyfile(test_crawl="""
import pytest
from shot_spiders import Shots

@pytest.mark.crawl_memory(billed_mismatch=0)
def test_it(crawl, fixture_site):
    result = crawl(Shots, base=fixture_site.base_url, bill="clean")
    shots = result.shots
    assert shots.by_verdict == {"blank": 1, "bot-check": 1, "cached": 1, "clean": 4, "failed": 1, "timeout": 1}
    assert shots.captures == 9 == result.responses
    assert shots.billed == 4 and shots.billed_by_verdict == {"clean": 4}
    assert shots.billed_mismatch == 0 and shots.mismatches == ()
    assert shots.max_bytes > 10_000 and shots.bytes_total > 4 * 10_000
    # screenshot bodies are responses like any other: they are in the size distribution
    assert result.response_sizes.total_bytes == shots.bytes_total
    assert result.response_sizes.max_bytes == shots.max_bytes
""")
    outcome = run(suite)
    outcome.assert_outcomes(passed=1)
    report = json.loads((suite.path / ".crawlmem" / "test_crawl.py__test_it" / "report.json").read_text())
    assert report["result"]["shots"]["by_verdict"]["clean"] == 4
    assert report["result"]["shots"]["billed_mismatch"] == 0


def test_billing_that_is_not_exactly_the_clean_captures_breaks_billed_mismatch(suite):
    suite.makepyfile(test_crawl="""
import pytest
from shot_spiders import Shots

@pytest.mark.crawl_memory(billed_mismatch=0)
def test_it(crawl, fixture_site):
    result = crawl(Shots, base=fixture_site.base_url, bill="clean,blank,cached")
    assert result.shots.billed_by_verdict == {"blank": 1, "cached": 1, "clean": 4}
    assert result.shots.billed_mismatch == 2
""")
    outcome = run(suite)
    outcome.assert_outcomes(failed=1)
    outcome.stdout.fnmatch_lines([
        "*crawl_memory budget broken: 2 of 9 screenshot captures were billed wrongly, over the budget billed_mismatch=0:"
        " 2 captures billed without a clean verdict (1 blank, 1 cached): http://127.0.0.1:*/shot?url=*blank*"
    ])


# -- the fixture site's /shot route, over HTTP --------------------------------------------------


@pytest.fixture(scope="module")
def site() -> Iterator[RunningSite]:
    with start_site(seed=0) as running:
        yield running


def fetch(site: RunningSite, path: str) -> tuple[int, dict[str, str], bytes]:
    parts = urlsplit(site.base_url)
    assert parts.hostname is not None
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=60)
    try:
        connection.request("GET", path)
        response = connection.getresponse()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()
    finally:
        connection.close()


@pytest.mark.parametrize(
    ("page", "image_format", "magic"),
    [("/catalog/product/3", "png", b"\x89PNG"), ("/catalog/product/3", "jpeg", b"\xff\xd8\xff"),
     ("/catalog/product/3", "webp", b"RIFF"), ("/catalog/product/3", "pdf", b"%PDF")],
)
def test_the_shot_route_renders_each_format_in_chromium(site, page, image_format, magic):
    status, headers, body = fetch(site, f"/shot?url={quote(page)}&format={image_format}")
    assert status == 200
    assert headers["x-page-verdict"] in ("clean", "cached")
    assert headers["content-type"] == {"png": "image/png", "jpeg": "image/jpeg", "webp": "image/webp",
                                       "pdf": "application/pdf"}[image_format]
    assert body.startswith(magic) and len(body) > 1000


def test_the_shot_route_answers_a_timeout_with_504_and_a_failed_page_with_502_unbilled(site):
    status, headers, body = fetch(site, "/shot?url=" + quote("/slow/9?ms=5000", safe="") + "&timeout_ms=500")
    assert (status, headers["x-page-verdict"], headers["x-billed"]) == (504, "timeout", "false")
    assert b"did not load within 500 ms" in body
    status, headers, body = fetch(site, "/shot?url=/media/missing/1.jpg&bill=all")
    assert (status, headers["x-page-verdict"], headers["x-billed"]) == (502, "failed", "true")
    assert b"answered 404" in body


@pytest.mark.parametrize(
    ("query", "message"),
    [({}, "url is required"), ({"url": "http://example.com/"}, "url must be a path on this site"),
     ({"url": "/shot?url=/"}, "cannot be the /shot endpoint"), ({"url": "/", "format": "gif"}, "format must be one of"),
     ({"url": "/", "bill": "clean,free"}, "bill must be 'all' or verdicts"), ({"url": "/", "timeout_ms": "5"}, "timeout_ms")],
)
def test_a_bad_shot_query_is_a_400_naming_the_value(query, message):
    with pytest.raises(BadParameter, match=message):
        parse_shot_query(query)


# -- the ledger (pure) ----------------------------------------------------------------------


@pytest.mark.parametrize(("value", "billed"), [("true", True), (" TRUE ", True), ("1", True), ("false", False),
                                               ("0", False), ("maybe", None), (None, None)])
def test_x_billed_values_are_read_leniently(value, billed):
    assert parse_billed(value) is billed


def test_the_ledger_counts_mismatches_both_ways_and_unreadable_billing_as_not_billed():
    ledger = ShotLedger()
    ledger.add("u1", "clean", True, 100)
    ledger.add("u2", "clean", False, 200)  # clean, not billed
    ledger.add("u3", "Blank", True, 50)  # billed, not clean
    ledger.add("u4", "timeout", None, 10)
    summary = ledger.summary()
    assert summary is not None
    assert summary.by_verdict == {"blank": 1, "clean": 2, "timeout": 1}
    assert (summary.billed, summary.billed_not_clean, summary.clean_not_billed, summary.billed_mismatch) == (2, 1, 1, 2)
    assert summary.unreadable_billing == 1
    assert [m.url for m in summary.mismatches] == ["u2", "u3"]
    assert (summary.bytes_total, summary.max_bytes) == (360, 200)
    assert ShotLedger().summary() is None


def test_replayed_captures_from_the_http_cache_are_not_billed_again():
    replayed = SimpleNamespace(url="http://x/shot?url=/", headers={"X-Page-Verdict": b"clean", "X-Billed": b"true"},
                               flags=["cached"], body=b"png")
    ledger = ShotLedger()
    ledger.response_received(replayed, None, None)
    summary = ledger.summary()
    assert summary is not None and summary.replayed == 1 and summary.captures == 0 and summary.billed == 0


def test_billed_mismatch_passes_a_crawl_without_captures():
    from pytest_crawlmem.core.models import CrawlResult, Growth, Peaks

    result = CrawlResult("s", (), 0, 0, 0, None, 1, 0, 0.1, "finished", Peaks(), Growth("steady", ""))
    assert check_budgets(Budgets(billed_mismatch=0), result) == []
