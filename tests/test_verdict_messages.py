"""Every verdict's message is consistent with itself: the one piece of evidence that decided is named, and the figures
beside the verdict agree with it or say why not (the reason, the production status line, report.html's glance)."""

from __future__ import annotations

from dataclasses import replace

from test_growth import META_CHAIN_294, recorded, series, window_series
from test_html import synthetic_crawl, synthetic_document, typed
from test_plateau import SQLITE_1200

from pytest_crawlmem.core import verdicts as V
from pytest_crawlmem.core.growth import analyze
from pytest_crawlmem.core.rules import decided_by
from pytest_crawlmem.measure.status import Status
from pytest_crawlmem.reports.html import glance


def rising_objects_while_memory_fell():
    """Responses kept at every checkpoint (a few, small) while the heap gave back 6 KiB a response: the issue's shape."""
    refs = lambda n: {"HtmlResponse": n // 10}
    return analyze(series(2000, lambda n: 20 * 2**20 - 6 * 1024 * n, refs=refs))


def status_line(growth) -> str:
    return Status(t_seconds=1.0, rss_bytes=2**20, peak_rss_bytes=2**20, scheduled=0, inflight=0, active_size_bytes=0,
                  backout=False, responses=2000, items=0, retries=0, verdict=growth.verdict,
                  growth_per_response_bytes=growth.per_response_bytes, decided_by=decided_by(growth)).line()


def glance_text(growth) -> str:
    result = replace(synthetic_crawl(), growth=growth)
    return str(glance(typed(synthetic_document(result))))


def test_a_verdict_the_live_objects_decided_says_the_falling_memory_did_not():
    growth = rising_objects_while_memory_fell()
    assert growth.verdict == V.RETAINED_OBJECTS and (growth.per_response_bytes or 0) < 0, growth.reason
    assert decided_by(growth) == "live-objects"
    assert "the objects decide, not the bytes" in growth.reason and "memory itself fell 6.0 KiB/response" in growth.reason
    assert " verdict=retained-objects by=live-objects growth=-6.0KiB/response" in status_line(growth)
    page = glance_text(growth)
    assert "not what decided: live Scrapy objects rising at every drained checkpoint did (retained-objects)" in page, page
    assert page.index("not what decided") < page.index("would have caught a leak of")


def test_a_verdict_memory_decided_names_memory_and_its_figures_stand_alone():
    leak = analyze(series(2000, lambda n: 3000 * n))
    assert decided_by(leak) == "memory" and "the objects decide" not in leak.reason
    assert " verdict=retained-objects by=memory growth=" in status_line(leak)
    assert "not what decided" not in glance_text(leak)
    steady = analyze(series(2000, lambda n: 0))
    assert decided_by(steady) == "memory" and " by=memory " in status_line(steady)


def test_a_plateau_says_where_its_figure_was_measured():
    growth = analyze(recorded(SQLITE_1200))
    assert decided_by(growth) == "plateau"
    assert " verdict=steady by=plateau growth=" in status_line(growth)
    assert "of heap memory net of the scheduler&#x27;s share after response 412, where it levelled off" in glance_text(growth)


def test_a_close_left_out_of_the_trend_does_not_say_what_held_the_leak():
    """After a timeout stop the close lets go of the requests still queued: the note said the crawl's own requests kept
    the leak, beside a holder on the spider. It says what the end may have let go of, never what holds the leak."""
    growth = analyze(window_series(META_CHAIN_294))
    assert growth.verdict == V.RETAINED_OBJECTS, growth.reason
    assert "left out of the trend" in growth.reason and "request.meta" in growth.reason
    assert "kept it" not in growth.reason and "requests still queued or in flight when it was stopped" in growth.reason
