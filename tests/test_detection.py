"""Detection is monotonic on real crawls: short crawls with strong or proven leaks are judged (issue 21, issue 13 item 6).

One inner pytest session (pytester, a subprocess, in this venv with the plugin installed editable, pytest's log
capture at DEBUG) runs every crawl; the tests here read its reports and its output.
"""

from __future__ import annotations

import json
import os
import sysconfig
from dataclasses import replace
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest
from detection_suite_source import SUITE
from inner_session import inner_session

from pytest_crawlmem.core.evidence import WINDOW_RESIDUE_CAP, window_residue
from pytest_crawlmem.core.models import Checkpoint, heap_estimate


@pytest.fixture
def inner(pytester: pytest.Pytester) -> tuple[pytest.RunResult, Path]:
    # a loaded 2-core machine took over 600 s
    return inner_session(pytester, SUITE, "[pytest]\nlog_level = DEBUG\n", "-rA", "-v", timeout=1800)


def result_of(root: Path, test: str) -> dict[str, Any]:
    path = root / ".crawlmem" / ("test_suite.py__" + test.replace("[", "_").replace("]", "_")) / "report.json"
    return json.loads(path.read_text())["result"]  # type: ignore[no-any-return]


def leak_line(needle: str) -> str:
    line = next(i for i, text in enumerate(SUITE.splitlines(), 1) if needle in text and "# LEAK" in text)
    return f"test_suite.py:{line}"


def test_the_inner_suite_ran(inner):
    outcome, _ = inner
    outcome.assert_outcomes(passed=9)


@pytest.mark.parametrize("size", [150, 600])
def test_clean_crawls_with_debug_logging_are_not_leaks(inner, size):
    _, root = inner
    result = result_of(root, f"test_clean[{size}]")
    assert result["verdict"] in ("steady", "inconclusive"), result["growth"]["reason"]


def test_a_steady_crawl_states_the_leak_it_would_have_caught_in_the_report_and_the_summary(inner):
    """Issue 26: the power of a steady verdict is in report.json's growth and the -v summary row."""
    outcome, root = inner
    growth = result_of(root, "test_clean[600]")["growth"]
    assert growth["verdict"] == "steady", growth["reason"]
    stated = growth["detectable_per_response_bytes"]
    assert 1024 <= stated <= 8 * 1024, growth
    assert "KiB/response or more (95%)" in growth["reason"], growth["reason"]
    assert "leak caught (95%)" in outcome.stdout.str(), outcome.stdout.str()[-3000:]


@pytest.mark.parametrize(("case", "holder"), [("signal_requests", "module test_suite .KEPT -> list["),
                                              ("cached_requests", "module test_suite .priority_of")])
def test_retention_proven_after_the_crawl_decides_a_short_crawl(inner, case, holder):
    """300 responses keeping a Request each: too few intervals, too weak for the strong rule; proven retention decides."""
    _, root = inner
    result = result_of(root, f"test_short_keeper[{case}]")
    assert result["verdict"] == "retained-objects", result["growth"]["reason"]
    assert "still held after the crawl ended" in result["growth"]["reason"]
    assert holder in result["growth"]["reason"], result["growth"]["reason"]


def test_a_strong_leak_in_a_short_crawl_is_judged(inner):
    """Issue 13 item 6: 64 KiB kept of each of 160 one-MiB pages passed as inconclusive; now it is a leak."""
    _, root = inner
    result = result_of(root, "test_big_pages")
    assert result["responses"] == 160
    assert result["verdict"] == "retained-objects", result["growth"]["reason"]
    assert result["growth"]["per_response_bytes"] > 48 * 1024


def test_a_small_grid_is_monotonic(inner):
    """Flagged at (leak, length) implies flagged at every bigger leak and longer crawl of the grid.

    The weak short corner (2 KiB kept over 300 responses) is not crawled: the two points that must be flagged,
    (2 KiB, 600) and (32 KiB, 300), already imply every point above them, and whatever it read it could fail nothing.
    """
    _, root = inner
    grid = [(32768, 300), (2048, 600), (32768, 600)]
    flagged = {(leak, size): result_of(root, f"test_grid[{size}-{leak}]")["verdict"] == "retained-objects"
               for leak, size in grid}
    for (leak, size), hit in flagged.items():
        if hit:
            assert all(flagged[(l2, s2)] for l2, s2 in grid if l2 >= leak and s2 >= size), flagged
    assert flagged[(2048, 600)] and flagged[(32768, 300)], flagged


def test_growth_sites_lead_with_the_users_line_never_the_stdlib_or_the_plugin(inner):
    _, root = inner
    result = result_of(root, "test_grid[600-2048]")
    sites = [s["location"] for s in result["top_growth"]]
    assert sites and sites[0] == leak_line("self.kept.append"), sites
    stdlib = os.path.realpath(sysconfig.get_paths()["stdlib"])
    for site in result["top_growth"]:
        assert not site["location"].startswith(stdlib) and "pytest_crawlmem" not in site["location"], site
    in_user_code = [s["in_user_code"] for s in result["top_growth"]]
    assert in_user_code == sorted(in_user_code, reverse=True), sites  # the user's sites first


def test_the_holder_and_the_line_that_stores_into_it_are_named_while_the_crawl_is_alive(inner):
    """Issue 14 item 1: the spider is freed when the crawl ends, so its list is found at the confirming checkpoint."""
    _, root = inner
    for test in ("test_grid[600-2048]", "test_big_pages"):
        result = result_of(root, test)
        holder = result["holders"][0]
        expected = "spider.kept -> list[" if "grid" in test else "module test_suite.KEPT -> list["
        assert holder["path"].startswith(expected), result["holders"]
        assert holder["line"] == leak_line("self.kept.append" if "grid" in test else "KEPT.append(bytes"), holder
        assert f"held by {expected}" in result["growth"]["reason"], result["growth"]["reason"]


def test_a_leak_fail_crawl_that_cannot_be_judged_says_so_everywhere(inner):
    outcome, root = inner
    result = result_of(root, "test_unjudged_leak_fail")
    assert result["verdict"] == "inconclusive"
    report = json.loads((root / ".crawlmem" / "test_suite.py__test_unjudged_leak_fail" / "report.json").read_text())
    assert any("could not judge" in v["message"] for v in report["violations"]), report["violations"]
    out = outcome.stdout.str()
    assert "could not judge this crawl's memory" in out  # the pytest warning
    assert "crawl at least" in out
    assert "passed, leak not judged" in out  # the summary row


def test_rss_growth_is_end_minus_start_never_minus_start(inner):
    _, root = inner
    for test in ("test_unjudged_leak_fail", "test_grid[300-32768]", "test_big_pages"):
        result = result_of(root, test)
        assert result["end_rss"] > 0 and result["rss_growth"] != -result["start_rss"], result


def _at(responses: int, heap: int) -> Checkpoint:
    return Checkpoint(responses=responses, t_seconds=float(responses), rss_bytes=heap, heap_bytes=heap,
                      traced_bytes=None, scheduled=0, allocated_blocks=0)


def test_the_attribution_windows_residue_is_what_the_crawl_did_not_grow():
    """Measured on a clean catalog: ~500 KiB stays in use after tracemalloc stops (a false 3 KiB/response step)."""
    opening = [_at(240, 50_000_000), _at(350, 50_011_000)]  # the crawl grew 100 B/response before the window
    # 90 responses later, tracing stopped: 9 KB of crawl growth (the rate before) and 500 KB left by the window
    assert window_residue(opening, 50_011_000 + 9_000 + 500_000, traced=400_000, responses=90) == 500_000
    # a leak of 2 KB/response grows as much in the window as before it: none of it is taken for the residue
    leaking = [_at(240, 50_000_000), _at(350, 50_220_000)]
    assert window_residue(leaking, 50_220_000 + 180_000 + 500_000, traced=700_000, responses=90) == 500_000
    # what the window traced bounds the crawl's growth in it: heap growth beyond it is the window's
    assert window_residue(leaking, 50_220_000 + 180_000, traced=90_000, responses=90) == 90_000
    assert window_residue(opening, 50_011_000, traced=0, responses=90) == 0  # never negative
    assert window_residue(opening, 60_000_000, traced=0, responses=90) == WINDOW_RESIDUE_CAP
    assert window_residue(opening[-1:], 60_000_000, traced=0, responses=90) == 0  # no interval before the window


def test_the_rate_before_the_window_comes_from_several_dense_checkpoints_not_the_last_noisy_interval():
    """Issue 26's schedule puts checkpoints 25 responses apart: one flat interval must not make a leak's growth in
    the window read as the window's residue."""
    heaps = [50_000_000, 50_050_000, 50_100_000, 50_150_000, 50_150_000]  # 2 KB/response, the last interval flat
    opening = [_at(100 + 25 * i, heap) for i, heap in enumerate(heaps)]
    residue = window_residue(opening, heaps[-1] + 80_000 + 500_000, traced=700_000, responses=40)
    assert 480_000 <= residue <= 520_000, residue  # the two-point rate (0) would have taken 580 KB


def test_a_window_residue_is_taken_off_the_heap_signal():
    after = replace(_at(500, 51_000_000), plugin_bytes=500_000)
    assert heap_estimate(after) == 50_500_000


COOKIEJAR_SUITE = '''
import pytest
import scrapy


class SessionPerProduct(scrapy.Spider):
    """A new meta['cookiejar'] per request with a login cookie: CookiesMiddleware keeps one jar per id."""

    name = "session_per_product"
    custom_settings = {"COOKIES_ENABLED": True}

    def parse(self, response):
        for link in response.css("a.product::attr(href)").getall():
            token = link + ":" + "t" * 8192  # TOKEN
            yield response.follow(link, self.parse_product, meta={"cookiejar": link}, cookies={"session": token})
        yield from response.follow_all(css="a.next")

    def parse_product(self, response):
        yield {"url": response.url}


@pytest.mark.crawl_memory(leak="warn")
def test_cookiejar_per_request(crawl, fixture_site):
    crawl(SessionPerProduct, start_urls=[fixture_site.url("/catalog/?pages=15&per_page=40")])
'''


def test_a_growing_queue_does_not_outrank_the_cookie_jars_that_keep_the_leak(pytester: pytest.Pytester) -> None:
    """Issue 14 item 4: the queue grows while the window traces (40 products per page, LIFO), and each queued
    request carries its own 8 KiB session cookie; the leak is the jar kept per processed request."""
    (pytester.path / "test_cookiejar.py").write_text(COOKIEJAR_SUITE)  # as written: its line numbers are asserted
    outcome = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-p", "no:xdist", "test_cookiejar.py", timeout=1800)
    outcome.assert_outcomes(passed=1)
    report_dir = pytester.path / ".crawlmem" / "test_cookiejar.py__test_cookiejar_per_request"
    report = json.loads((report_dir / "report.json").read_text())
    result = report["result"]
    assert result["verdict"] == "retained-objects", result["growth"]["reason"]
    assert result["holders"] and "CookiesMiddleware.jars -> defaultdict[" in result["holders"][0]["path"], result["holders"]
    checkpoints = result["growth"]["checkpoints"]
    window = [i for i, c in enumerate(checkpoints) if c["tracer_bytes"]]
    assert window and checkpoints[window[0]]["scheduled"] > checkpoints[window[0] - 1]["scheduled"]  # it grew in the window
    # after the window the checkpoints come every 50 responses for 200 (each lands up to CONCURRENT_REQUESTS late), also
    # past the 300 responses where the schedule turns sparse (a third of the responses so far: 312 -> 416 -> 555 before)
    closed_at = checkpoints[window[-1]]["responses"]
    running = [c["responses"] for c in checkpoints[window[-1] + 1:] if c["responses"] < checkpoints[-1]["responses"]]
    sparse = [n for n in running if 300 <= n <= closed_at + 200 + 16]
    assert len(sparse) >= 2 and all(b - a <= 50 + 16 for a, b in pairwise(sparse)), (closed_at, running)
    token_line = next(i for i, line in enumerate(COOKIEJAR_SUITE.splitlines(), 1) if line.endswith("# TOKEN"))
    sites = [s["location"] for s in result["top_growth"]]
    # unnetted, the queued requests' tokens led by far (18.8 KB/response against 1.5 KB for the keeping line)
    assert sites and not sites[0].endswith(f"test_cookiejar.py:{token_line}"), sites
