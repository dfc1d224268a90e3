"""Backpressure read outside the plugin's pauses: a scraper that never catches up between checkpoints is
response-processing though the checkpoints keep it under its limit most of the time (core/backpressure.py)."""

from __future__ import annotations

from dataclasses import replace

from pytest_crawlmem.core.backpressure import BUSY_SHARE, pressure
from pytest_crawlmem.core.growth import analyze
from pytest_crawlmem.core.models import Checkpoint, Sample

BASE = 50_000_000
LIMIT = 5_000_000


def samples(n: int, *, over_every: int, empty_every: int, held_every: int = 0) -> list[Sample]:
    """``n`` samples; every ``over_every``-th over the limit, every ``empty_every``-th with an empty scraper, every
    ``held_every``-th taken during a pause or refill (no backout reading)."""
    out = []
    for i in range(n):
        held = bool(held_every) and i % held_every == 0
        empty = i % empty_every == 0
        over = not empty and i % over_every == 1
        active = 0 if empty else 6_000_000 if over else 3_000_000
        out.append(Sample(t_seconds=i / 10, responses=i, items=i, rss_bytes=BASE, active_size_bytes=active,
                          backout=None if held else over))
    return out


def flat(total: int = 2000) -> list[Checkpoint]:
    return [Checkpoint(n, n / 10, BASE, None, BASE, 0) for n in range(0, total + 1, 100)]


def test_a_scraper_that_never_catches_up_between_checkpoints_is_response_processing():
    # the serialized-pipeline shape under the plugin: over the limit in 14% of the free samples, holding responses in 96%
    shape = samples(400, over_every=7, empty_every=25, held_every=2)
    growth = analyze(flat(), shape, max_active_size=LIMIT)
    assert growth.verdict == "response-processing", growth.reason
    assert "held responses in 96%" in growth.reason and "over its active-size limit in 14%" in growth.reason


def test_a_scraper_that_catches_up_is_not_response_processing_for_a_few_bursts_over_its_limit():
    shape = samples(400, over_every=7, empty_every=3)  # empty a third of the time: it keeps up
    assert analyze(flat(), shape, max_active_size=LIMIT).verdict == "steady"
    assert pressure(shape, LIMIT) is None


def test_a_busy_scraper_that_never_reaches_its_limit_is_not_response_processing():
    shape = samples(400, over_every=10**9, empty_every=50)  # busy, but under its limit: nothing piles up to it
    assert pressure(shape, LIMIT) is None
    assert analyze(flat(), shape, max_active_size=LIMIT).verdict == "steady"


def test_sustained_backout_alone_still_decides():
    shape = samples(400, over_every=2, empty_every=3)  # over in a third, empty in a third
    found = pressure(shape, LIMIT)
    assert found is not None and found.over_share >= 0.25 and found.busy_share < BUSY_SHARE


def test_samples_taken_during_pauses_and_refills_are_not_counted():
    shape = [Sample(t_seconds=i / 10, responses=i, items=i, rss_bytes=BASE, active_size_bytes=0, backout=None)
             for i in range(400)]
    assert pressure(shape, LIMIT) is None


def test_a_thinned_timeline_is_judged_by_the_share_over_the_limit_alone():
    thinned = [replace(s, span=2) for s in samples(400, over_every=7, empty_every=25)]  # merged peaks read busy
    assert pressure(thinned, LIMIT) is None
