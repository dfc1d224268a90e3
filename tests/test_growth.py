"""Verdict rules on synthetic checkpoint series (pure, no crawl)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_crawlmem.growth import (
    REQUEST_ALLOWANCE,
    analyze,
    judged_checkpoints,
    next_checkpoint_at,
    warmup_responses,
)
from pytest_crawlmem.models import Checkpoint, Sample

BASE = 50 * 2**20


def schedule(total: int, min_interval: int = 100) -> list[int]:
    """Response counts at which the extension takes checkpoints, plus start and close."""
    points = [0]
    at = min_interval
    while at < total:
        points.append(at)
        at = next_checkpoint_at(at, min_interval)
    return [*points, total]


def series(total, memory, scheduled=lambda n: 0, refs=lambda n: {}):
    return [
        Checkpoint(responses=n, t_seconds=n / 100, rss_bytes=BASE + memory(n), heap_bytes=None,
                   traced_bytes=BASE + memory(n), scheduled=scheduled(n), live_refs=refs(n))
        for n in schedule(total)
    ]


def test_checkpoints_cost_logarithmic_count_and_leave_three_judged_intervals():
    for total in (600, 1000, 2000, 5000, 20000, 100000):
        points = schedule(total)
        judged = [n for n in points if n >= warmup_responses(total)]
        assert len(judged) - 1 >= 3, (total, points)
        assert len(points) <= 4 + 2 * (total.bit_length()), (total, points)


def test_a_flat_crawl_is_steady():
    growth = analyze(series(2000, lambda n: 0))
    assert growth.verdict == "steady"
    assert growth.per_response_bytes == 0


def test_a_short_crawl_is_inconclusive_not_steady():
    growth = analyze(series(300, lambda n: 0))
    assert growth.verdict == "inconclusive"
    assert "600 responses" in growth.reason


@given(st.integers(1000, 20000), st.floats(1100, 20000))
def test_a_steady_few_kib_per_response_is_a_leak(total, per_response):
    growth = analyze(series(total, lambda n: int(n * per_response)))
    assert growth.verdict == "retained-objects"
    assert abs(growth.per_response_bytes - per_response) < 2
    assert "KiB/response" in growth.reason


@given(st.integers(1000, 20000), st.lists(st.integers(0, 64 * 2**20), min_size=1, max_size=2), st.data())
def test_allocator_ratchets_are_never_a_leak(total, steps, data):
    """One or two one-off steps of any size, anywhere, never make every interval grow."""
    points = schedule(total)
    judged = [n for n in points if n >= warmup_responses(total)]
    at = [data.draw(st.sampled_from(judged[1:])) for _ in steps]
    memory = lambda n: sum(step for step, when in zip(steps, at, strict=True) if n >= when)
    if len(set(at)) == len(judged) - 1:  # steps landing in every interval would be a real trend
        return
    assert analyze(series(total, memory)).verdict != "retained-objects"


@given(st.integers(1000, 20000), st.integers(50_000, 5_000_000))
def test_a_bounded_cache_that_plateaus_is_not_a_leak(total, cache_bytes):
    fill_until = warmup_responses(total)
    memory = lambda n: min(n, fill_until) * cache_bytes // fill_until
    assert analyze(series(total, memory)).verdict == "steady"


@settings(max_examples=50)
@given(st.integers(1000, 20000), st.integers(5, 50))
def test_growth_that_tracks_the_scheduler_is_a_backlog(total, requests_per_response):
    queued = lambda n: n * requests_per_response
    memory = lambda n: queued(n) * REQUEST_ALLOWANCE
    growth = analyze(series(total, memory, scheduled=queued))
    assert growth.verdict == "scheduler-backlog"


def test_a_leak_on_top_of_a_backlog_is_still_a_leak():
    queued = lambda n: n * 10
    memory = lambda n: queued(n) * REQUEST_ALLOWANCE + n * 3000
    assert analyze(series(2000, memory, scheduled=queued)).verdict == "retained-objects"


def test_rising_live_responses_are_retained_objects_even_below_the_byte_threshold():
    refs = lambda n: {"HtmlResponse": n // 10, "Request": 3}
    growth = analyze(series(2000, lambda n: n * 100, refs=refs))
    assert growth.verdict == "retained-objects"
    assert "HtmlResponse +" in growth.reason


def test_a_leak_below_a_raised_tolerance_passes():
    memory = lambda n: n * 1500
    assert analyze(series(2000, memory)).verdict == "retained-objects"
    assert analyze(series(2000, memory), leak_per_response=2048).verdict == "steady"


def test_short_final_intervals_are_merged():
    points = [Checkpoint(n, 0.0, BASE, None, BASE, 0) for n in (0, 200, 300, 450, 675, 690)]
    assert [c.responses for c in judged_checkpoints(points)] == [200, 300, 450, 690]


def test_sustained_backout_is_response_processing():
    samples = [Sample(t_seconds=i / 10, responses=i, items=0, rss_bytes=BASE, backout=i % 2 == 0,
                      active_size_bytes=6_000_000) for i in range(40)]
    growth = analyze(series(2000, lambda n: 0), samples, max_active_size=5_000_000)
    assert growth.verdict == "response-processing"
    assert "50% of samples" in growth.reason


@given(st.integers(1000, 20000), st.integers(1, 20), st.integers(1024, 8192))
def test_a_draining_queue_never_makes_a_clean_crawl_leak(total, peak_per_response, request_cost):
    """Memory that falls exactly as the queue drains (any real request cost >= 1 KiB) is no leak."""
    top = total // 2
    queued = lambda n: n * peak_per_response if n <= top else max(0, top * peak_per_response - (n - top) * 3)
    memory = lambda n: queued(n) * request_cost
    assert analyze(series(total, memory, scheduled=queued)).verdict != "retained-objects"


def test_suspicion_needs_two_leaky_intervals_after_150_responses():
    from pytest_crawlmem.growth import suspicious

    leaky = series(2000, lambda n: n * 3000)
    assert not suspicious(leaky[:3])  # 0, 100, 200: one interval after 150
    assert suspicious([c for c in leaky if c.responses <= 450])
    assert not suspicious([c for c in series(2000, lambda n: 0) if c.responses <= 1000])


def test_native_growth_that_tracemalloc_cannot_see_is_caught_by_the_heap_signal():
    native = [
        Checkpoint(responses=c.responses, t_seconds=c.t_seconds, rss_bytes=c.rss_bytes,
                   heap_bytes=BASE + c.responses * 4000, traced_bytes=BASE, scheduled=0, allocated_blocks=0)
        for c in series(2000, lambda n: 0)
    ]
    growth = analyze(native)
    assert growth.verdict == "retained-objects"
    assert growth.signal == "heap"
    assert "native memory that tracemalloc cannot see" in growth.reason


def test_flat_native_and_traced_memory_is_steady_when_both_are_measured():
    flat = [
        Checkpoint(responses=c.responses, t_seconds=c.t_seconds, rss_bytes=c.rss_bytes,
                   heap_bytes=BASE, traced_bytes=BASE, scheduled=0, allocated_blocks=0)
        for c in series(2000, lambda n: 0)
    ]
    assert analyze(flat).verdict == "steady"
