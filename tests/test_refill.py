"""The scraper's backout is read outside the plugin's own pauses and refills (measure/refill.py; a clock of the test's own,
no crawl)."""

from __future__ import annotations

import pytest

from pytest_crawlmem.measure import refill
from pytest_crawlmem.measure.refill import PauseRefill


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    fake = Clock()
    monkeypatch.setattr(refill.time, "monotonic", fake)
    return fake


def test_samples_while_paused_and_while_the_scraper_refills_are_held(clock):
    state = PauseRefill(interval_seconds=0.1)
    for _ in range(20):  # the crawl's regime: the scraper typically holds 4 MB
        assert not state.held(4_000_000, False, 100)
    state.paused(inflight=16)
    assert state.held(0, False, 100)
    clock.now += 2.0
    state.resumed(responses=110, pause_seconds=2.0)
    assert state.held(500_000, False, 115)  # the downloads started after the pause have not all landed
    assert state.held(1_000_000, False, 126)  # they have, but the scraper holds less than it typically does
    assert not state.held(4_200_000, False, 130)  # back where the crawl keeps it
    assert not state.held(100_000, False, 131)  # from then on every reading counts


def test_a_scraper_over_its_limit_again_ends_the_refill(clock):
    state = PauseRefill(interval_seconds=0.1)
    state.paused(inflight=16)
    state.resumed(responses=10, pause_seconds=1.0)
    assert not state.held(6_000_000, True, 11)


def test_the_refill_ends_after_twice_the_pause_at_most(clock):
    state = PauseRefill(interval_seconds=0.1)
    for _ in range(5):
        state.held(4_000_000, False, 0)
    state.paused(inflight=16)
    state.resumed(responses=10, pause_seconds=1.5)
    clock.now += 2.9
    assert state.held(0, False, 10)
    clock.now += 0.2
    assert not state.held(0, False, 10)
