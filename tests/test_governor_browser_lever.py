"""The browser concurrency lever: once rotating contexts cannot free the tree's floor, cap the pages open.

The sizing rule (:mod:`pytest_crawlmem.governor.browser_concurrency`) is pure and seen alone first; then the browser
lever on the stand-in of scrapy-playwright's handler of tests/test_contextlever.py: it lowers concurrency only in the
floor case (a rotated context closed and the tree is still over the act share), on a PSS reading, and raises it
again after readings under the restore share. The real crawl is tests/test_governor_browser.py.
"""

from __future__ import annotations

import asyncio

import pytest
from browser_source import STORE_SPIDERS
from test_contextlever import Handler, request, run

from pytest_crawlmem.browser.settings import BrowserNotFound, chromium_path
from pytest_crawlmem.governor.browser_concurrency import RESTORE_READINGS, PageConcurrency, page_cost, pages_that_fit
from pytest_crawlmem.governor.contextlever import ContextLever

MIB = 2**20


def cap(base: int = 8) -> PageConcurrency:
    return PageConcurrency(budget_bytes=1000 * MIB, high_share=0.85, low_share=0.70, base=base)


def test_an_open_page_costs_the_tree_over_the_pages_open():
    assert page_cost(800 * MIB, 8) == 100 * MIB
    assert page_cost(800 * MIB, 0) is None  # no page open: nothing to learn
    assert pages_that_fit(100 * MIB, 1000 * MIB, 0.85) == 8  # 8 x 100 MiB fits under 850 MiB, 9 does not
    assert pages_that_fit(2000 * MIB, 1000 * MIB, 0.85) == 1  # never below one page
    assert pages_that_fit(2000 * MIB, 1000 * MIB, 0.85, least=2) == 2


def test_over_the_act_share_the_cap_is_the_pages_whose_cost_fits():
    lever = cap()
    change = lever.lower(900 * MIB, 6, concurrency=8)  # 150 MiB a page: 5 fit under 850 MiB
    assert change is not None and change.lowered and change.cap == 5 == lever.cap
    assert "concurrency 8 -> 5" in change.message and "6 page(s) open at 150 MiB each" in change.message
    again = lever.lower(860 * MIB, 5, concurrency=8)  # still over at 5 pages: 172 MiB a page, 4 fit
    assert again is not None and again.cap == 4 and "concurrency 5 -> 4" in again.message


def test_the_cap_only_goes_down_while_over_and_never_below_one():
    lever = cap()
    assert lever.lower(840 * MIB, 4, concurrency=8) is None  # under the act share: nothing
    assert lever.lower(900 * MIB, 0, concurrency=8) is None  # no page open: not the pages' memory
    first = lever.lower(900 * MIB, 8, concurrency=8)  # 112.5 MiB a page: 7 fit
    assert first is not None and first.cap == 7
    assert lever.lower(870 * MIB, 8, concurrency=8) is None  # 108.75 MiB: 7 fit, the cap stands (pages draining)
    second = lever.lower(880 * MIB, 7, concurrency=8)  # 125.7 MiB: 6 fit
    assert second is not None and second.cap == 6
    lowest = lever.lower(5000 * MIB, 6, concurrency=8)
    assert lowest is not None and lowest.cap == 1
    assert lever.lower(5000 * MIB, 1, concurrency=8) is None  # at one: nothing lower
    assert lever.cap == 1


def test_the_governors_own_lower_concurrency_is_where_the_cap_starts():
    lever = cap()
    change = lever.lower(900 * MIB, 3, concurrency=3)  # the governor already runs 3: 300 MiB a page, 2 fit
    assert change is not None and change.cap == 2 and "concurrency 3 -> 2" in change.message
    assert cap().lower(900 * MIB, 1, concurrency=1) is None  # one page: never below one


def test_the_cap_is_raised_after_readings_under_the_restore_share_and_lifted_at_the_base():
    lever = cap(base=8)
    assert lever.calm(100 * MIB, 1) is None  # no cap: nothing to raise
    lever.lower(1000 * MIB, 4, concurrency=8)  # 250 MiB a page: 3 fit
    assert lever.cap == 3
    for _ in range(RESTORE_READINGS - 1):
        assert lever.calm(600 * MIB, 3) is None
    assert lever.calm(750 * MIB, 3) is None  # between the shares: the count starts over
    for _ in range(RESTORE_READINGS - 1):
        assert lever.calm(600 * MIB, 3) is None
    raised = lever.calm(600 * MIB, 3)  # 200 MiB a page: 4 fit; doubling would be 6
    assert raised is not None and not raised.lowered and raised.cap == 4 == lever.cap
    assert "cap 3 -> 4" in raised.message
    for _ in range(RESTORE_READINGS - 1):
        lever.calm(300 * MIB, 4)
    lifted = lever.calm(300 * MIB, 4)  # 75 MiB a page: 11 fit, doubled to 8 = the base: lifted
    assert lifted is not None and lifted.cap is None and lever.cap is None and "8 (lifted)" in lifted.message


def test_a_raise_is_at_least_one_page_even_when_the_last_cost_says_fewer():
    lever = cap(base=8)
    lever.lower(1000 * MIB, 2, concurrency=2)  # 500 MiB a page: 1 fits
    assert lever.cap == 1
    for _ in range(RESTORE_READINGS - 1):
        lever.calm(690 * MIB, 1)
    raised = lever.calm(690 * MIB, 1)  # one page at 690 MiB: 1 fits, but under the restore share it may try 2
    assert raised is not None and raised.cap == 2


# -- the lever on the stand-in handler ----------------------------------------------------------------------------


def floor_lever(readings: list[tuple[int, int | None]]) -> tuple[ContextLever, list[bool]]:
    """A lever whose tree reads ``readings`` in turn: (estimate, PSS when a PSS reading is asked for)."""
    lever = ContextLever(1000 * MIB, 0.85, 0.70, read_seconds=0.0, base_concurrency=8)
    details: list[bool] = []
    queue = list(readings)

    def read(now: float, detail: bool | None = None) -> int:
        estimate, pss = queue[0] if len(queue) == 1 else queue.pop(0)
        details.append(bool(detail))
        lever.tree_bytes = pss if detail and pss is not None else estimate
        if detail:
            lever._last_detail, lever._last_pss = now, lever.tree_bytes
        return lever.tree_bytes

    lever._read = read  # type: ignore[method-assign]
    return lever, details


def test_the_lever_caps_concurrency_only_once_a_rotation_left_the_tree_over_the_act_share():
    async def scenario() -> None:
        handler = Handler()
        lever, _ = floor_lever([(900 * MIB, 900 * MIB)])
        lever.install(handler)
        old = [await handler._create_page(request(), None) for _ in range(4)]
        [rotated] = lever.tick([handler], now=1.0, concurrency=8)  # over: rotation first, never a cap
        assert rotated.action == "rotate"
        for page in old:
            page.closed = True
        fresh = [await handler._create_page(request(), None) for _ in range(3)]  # 3 pages open in default#2
        events = lever.tick([handler], now=2.0, concurrency=8)
        assert [e.action for e in events] == ["close"]  # closed this tick: judged at the next reading
        await asyncio.sleep(0)
        events = lever.tick([handler], now=3.0, concurrency=8)
        assert [e.action for e in events] == ["floor", "lower"], events
        floor, lowered = events
        assert "caps concurrency at the open pages that fit" in floor.message
        assert lowered.cap == 2 and "3 page(s) open at 300 MiB each" in lowered.message  # 850 // 300
        assert lever.pages is not None and lever.pages.cap == 2
        assert len(fresh) == 3

    run(scenario)


def test_without_a_rotation_that_closed_nothing_is_capped():
    async def scenario() -> None:
        handler = Handler()
        lever, _ = floor_lever([(900 * MIB, 900 * MIB)])
        lever.install(handler)
        for _ in range(3):  # too few pages for a rotation: not the floor case
            await handler._create_page(request(), None)
        for tick in range(1, 20):
            assert lever.tick([handler], now=float(tick), concurrency=8) == []
        assert lever.pages is not None and lever.pages.cap is None

    run(scenario)


def test_the_lever_lowers_on_a_pss_reading_not_on_an_estimate():
    async def scenario() -> None:
        handler = Handler()
        lever, details = floor_lever([(900 * MIB, 800 * MIB)])  # the estimate is over, PSS under
        lever.install(handler)
        lever.at_floor = True
        for _ in range(3):
            await handler._create_page(request(), None)
        assert lever.tick([handler], now=10.0, concurrency=8) == []  # PSS under the act share: no cap
        assert details == [False, True]
        assert lever.tick([handler], now=11.0, concurrency=8) == []  # and the next PSS reading waits (3 s)
        assert details == [False, True, False]
        assert lever.pages is not None and lever.pages.cap is None

    run(scenario)


def test_without_a_base_concurrency_the_lever_only_rotates():
    lever = ContextLever(1000 * MIB, 0.85, 0.70)
    assert lever.pages is None


def test_at_high_concurrency_the_fresh_context_is_not_fresh_by_its_count_and_the_cap_still_comes_first():
    async def scenario() -> None:
        handler = Handler()
        lever, _ = floor_lever([(900 * MIB, 900 * MIB)])
        lever.install(handler)
        old = [await handler._create_page(request(), None) for _ in range(6)]
        [rotated] = lever.tick([handler], now=1.0, concurrency=6)
        assert rotated.action == "rotate"
        for page in old:
            page.closed = True
        for _ in range(6):  # 6 pages open in default#2 before the old context closed: it served more than 4
            await handler._create_page(request(), None)
        assert [e.action for e in lever.tick([handler], now=2.0, concurrency=6)] == ["close"]
        await asyncio.sleep(0)
        events = lever.tick([handler], now=3.0, concurrency=6)
        assert [e.action for e in events] == ["lower"], events  # no rotation of default#2 this tick
        assert events[0].cap == 5  # 900 / 6 = 150 MiB a page: 5 fit under 850 MiB
        assert not lever.floor_said and lever.min_served == 4  # not only fresh contexts: no back-off

    run(scenario)


# -- a real browser crawl -----------------------------------------------------------------------------------------

SPIDERS = STORE_SPIDERS

TESTS = '''
import json
import logging

from spiders import SETTINGS, Held

#: Acts over 60% of 800 MiB (480 MiB): under the tree's floor with 8 pages open (Playwright's driver, Chromium and a
#: renderer a page: 620-630 MiB measured, docs/governor.md), so a rotated context's close leaves the tree over it.
SHARES = {"CRAWLMEM_GOVERNOR_HIGH_SHARE": 0.6, "CRAWLMEM_GOVERNOR_LOW_SHARE": 0.4}


def test_the_browser_lever_lowers_concurrency_at_the_floor_and_loses_no_request(crawl, fixture_site, caplog):
    caplog.set_level(logging.INFO, logger="pytest_crawlmem.governor")
    result = crawl(Held, governor="800 MiB", settings={**SETTINGS, "CONCURRENT_REQUESTS": 8, **SHARES},
                   base_url=fixture_site.base_url)
    stats = result.stats
    print("LEVER", stats.get("crawlmem/governor/browser_peak_pss_bytes"), stats.get("crawlmem/governor/browser_rotations"),
          stats.get("crawlmem/governor/decisions/browser_concurrency"), stats.get("crawlmem/governor/browser_min_concurrency"),
          stats.get("crawlmem/governor/decisions/restore"), result.duration_seconds)
    assert result.finish_reason == "finished"
    assert result.items_scraped == 24 and stats.get("js/rendered_pages") == 24  # every page, rendered: none lost
    assert stats.get("crawlmem/governor/decisions/browser_concurrency", 0) >= 1, stats
    assert 1 <= stats["crawlmem/governor/browser_min_concurrency"] < 8
    assert 1 <= stats["crawlmem/governor/min_concurrency"] < 8
    record = json.loads((result.report_dir / "governor.json").read_text())
    lowered = [d for d in record["decisions"] if d["kind"] == "browser_concurrency"]
    assert lowered and all(1 <= d["concurrency"] < 8 and d["browser_pss_bytes"] > 0 for d in lowered)
    # at the floor, after a rotated context closed; or sooner, over the close share while it waits for its pages
    reasons = ("rotating cannot free the browser's floor", "while a rotated context waits for its pages")
    assert any(reason in lowered[0]["message"] for reason in reasons), lowered[0]["message"]
    logged = [r.getMessage() for r in caplog.records if r.name == "pytest_crawlmem.governor"]
    assert any("concurrency 8 ->" in line and any(reason in line for reason in reasons) for line in logged), logged
'''


def test_the_browser_concurrency_lever_on_a_real_browser_crawl(pytester: pytest.Pytester) -> None:
    pytest.importorskip("scrapy_playwright", reason="the browser extra is not installed: pip install -e '.[browser]'")
    try:
        chromium_path()
    except BrowserNotFound as exc:  # pragma: no cover - CI installs chromium
        pytest.skip(str(exc))
    pytester.makepyfile(spiders=SPIDERS, test_lever=TESTS)
    outcome = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-s", "-W", "ignore::DeprecationWarning",
                                            timeout=300)
    print(*[line for line in outcome.outlines if "LEVER" in line])
    outcome.assert_outcomes(passed=1)


def test_no_pss_reading_is_taken_when_the_estimate_would_not_lower_the_cap():
    async def scenario() -> None:
        handler = Handler()
        lever, details = floor_lever([(900 * MIB, 900 * MIB)])
        lever.install(handler)
        lever.at_floor = True
        for _ in range(3):
            (await handler._create_page(request(), None)).closed = True  # served, none open: not the pages' memory
        for tick in range(10, 20):
            assert lever.tick([handler], now=float(tick), concurrency=8) == []
        assert details.count(True) == 0  # over the act share on the estimate, and no PSS reading asked for

    run(scenario)


def test_over_the_close_share_while_a_rotated_context_still_closes_concurrency_is_capped_at_once():
    """The rotated context closes when its open pages finish; meanwhile the fresh one's pages grow the tree. At
    concurrency 4 that wait took a 768 MiB budget's tree from 699 to 825 MiB. Over the close share fewer pages open
    at once; under it the rotation is left to work."""
    async def scenario(footprint: int, expected: list[str]) -> None:
        handler = Handler()
        lever, _ = floor_lever([(footprint, footprint)])
        lever.install(handler)
        old = [await handler._create_page(request(), None) for _ in range(4)]
        [rotated] = lever.tick([handler], now=1.0, concurrency=4)
        assert rotated.action == "rotate"
        for _ in range(3):
            await handler._create_page(request(), None)  # the fresh context's pages; the old one's are still open
        events = lever.tick([handler], now=2.0, concurrency=4)
        assert [e.action for e in events] == expected, events
        assert len(old) == 4 and lever.retiring == 1
        if events:
            assert events[0].cap == 2 and "waits for its pages, with 3 page(s) open in the fresh one" in events[0].message

    run(lambda: scenario(900 * MIB, []))  # over the act share only: the rotation works
    run(lambda: scenario(960 * MIB, ["lower"]))  # 3 fresh pages at 320 MiB: 2 fit under 850 MiB
