"""The bounded timeline: memory bounded, peaks and sample shares kept whatever the crawl length (pure)."""

from __future__ import annotations

from collections.abc import Callable
from itertools import pairwise

from hypothesis import given, settings
from hypothesis import strategies as st
from test_growth import BASE, series

from pytest_crawlmem.core.excess import EXCESS_BUCKET_BYTES, DrainedExcess, excess_of_samples
from pytest_crawlmem.core.growth import analyze
from pytest_crawlmem.core.models import Checkpoint, Sample, SizeDistribution
from pytest_crawlmem.core.timeline import PEAK_FIELDS, Timeline, merge, thin_checkpoints, weighted_share


def raw(i: int, rss: int, *, scheduled: int | None = None, backout: bool | None = None, inflight: int | None = None) -> Sample:
    return Sample(t_seconds=i / 10, responses=i * 3, items=i, rss_bytes=rss, scheduled=scheduled,
                  backout=backout, inflight=inflight)


def test_samples_are_kept_as_taken_until_the_bound():
    timeline = Timeline(max_samples=64)
    samples = [raw(i, 1000 + i) for i in range(63)]
    for s in samples:
        timeline.add(s)
    assert timeline.samples() == samples and timeline.span == 1


def test_at_the_bound_neighbours_are_merged_and_the_resolution_halves():
    timeline = Timeline(max_samples=16)
    for i in range(16):
        timeline.add(raw(i, 1000 + (i % 4) * 10, scheduled=i))
    kept = timeline.samples()
    assert len(kept) == 8 and timeline.span == 2
    assert [s.span for s in kept] == [2] * 8
    assert [s.scheduled for s in kept] == [1, 3, 5, 7, 9, 11, 13, 15]
    assert [s.rss_bytes for s in kept] == [1010, 1030] * 4


def test_a_merged_sample_takes_the_time_and_counts_of_its_higher_rss_and_the_peak_of_every_figure():
    a = Sample(t_seconds=1.0, responses=10, items=5, rss_bytes=500, scheduled=90, inflight=None, jobdir_bytes=7)
    b = Sample(t_seconds=2.0, responses=20, items=9, rss_bytes=400, scheduled=10, inflight=3, jobdir_bytes=None)
    m = merge(a, b)
    assert (m.t_seconds, m.responses, m.items, m.rss_bytes) == (1.0, 10, 5, 500)
    assert (m.scheduled, m.inflight, m.jobdir_bytes, m.span, m.backout) == (90, 3, 7, 2, None)


@settings(max_examples=60, deadline=None)
@given(
    rss=st.lists(st.integers(min_value=0, max_value=2**40), min_size=1, max_size=3000),
    bound=st.integers(min_value=16, max_value=200),
)
def test_a_thinned_timeline_keeps_every_peak_and_stays_bounded(rss, bound):
    timeline = Timeline(max_samples=bound)
    samples = [raw(i, r, scheduled=(r * 7) % 1001, inflight=(r * 3) % 17, backout=bool(r % 3)) for i, r in enumerate(rss)]
    for s in samples:
        timeline.add(s)
    kept = timeline.samples()
    assert len(kept) <= bound
    assert sum(s.span for s in kept) == len(samples) == timeline.raw_samples
    assert max(s.rss_bytes for s in kept) == max(rss)
    for name in ("scheduled", "inflight"):
        assert max(getattr(s, name) for s in kept) == max(getattr(s, name) for s in samples)
    assert [s.t_seconds for s in kept] == sorted(s.t_seconds for s in kept)
    peak = max(kept, key=lambda s: s.rss_bytes)
    assert any(s.t_seconds == peak.t_seconds and s.rss_bytes == peak.rss_bytes for s in samples)


@settings(max_examples=60, deadline=None)
@given(flags=st.lists(st.booleans(), min_size=64, max_size=3000), bound=st.integers(min_value=16, max_value=64))
def test_the_backout_share_of_a_thinned_timeline_is_within_half_a_kept_sample_of_the_truth(flags, bound):
    timeline = Timeline(max_samples=bound)
    for i, flag in enumerate(flags):
        timeline.add(raw(i, 100, backout=flag))
    kept = timeline.samples()
    share = weighted_share(kept)
    assert share is not None
    widest = max(s.span for s in kept)
    assert abs(share - sum(flags) / len(flags)) <= widest / 2 / len(flags) + 1e-12


def test_a_uniform_30_percent_backout_stays_30_percent_when_thinned_not_0_by_majority():
    timeline = Timeline(max_samples=16)
    flags = [i % 10 < 3 for i in range(10_000)]
    for i, flag in enumerate(flags):
        timeline.add(raw(i, 100, backout=flag))
    share = weighted_share(timeline.samples())
    assert share is not None and abs(share - 0.3) < 0.05


def test_a_steady_backout_share_survives_thinning_exactly_when_it_is_uniform():
    timeline = Timeline(max_samples=16)
    for i in range(1024):
        timeline.add(raw(i, 100, backout=True))
    assert weighted_share(timeline.samples()) == 1.0
    assert all(getattr(s, name) is None for s in timeline.samples() for name in PEAK_FIELDS if name != "inflight")


def test_unbounded_is_todays_behaviour():
    timeline = Timeline()
    for i in range(5000):
        timeline.add(raw(i, i))
    assert len(timeline) == 5000 and timeline.span == 1


def test_checkpoints_are_thinned_keeping_the_first_and_the_last_four():
    checkpoints = [Checkpoint(responses=i * 100, t_seconds=i, rss_bytes=1, heap_bytes=None, traced_bytes=None, scheduled=0)
                   for i in range(20)]
    thinned = thin_checkpoints(checkpoints)
    assert thinned[0] == checkpoints[0] and thinned[-4:] == checkpoints[-4:]
    assert len(thinned) < len(checkpoints)
    timeline = Timeline(max_checkpoints=8)
    for c in checkpoints:
        timeline.add_checkpoint(c)
    assert len(timeline.checkpoints) <= 8 and timeline.checkpoints_added == 20
    assert timeline.checkpoints[-1] == checkpoints[-1]


# -- downloader-activity on a thinned timeline ----------------------------------------------------------------

MiB = 2**20


def downloading_crawl(bound: int, excess_of: Callable[[int], int], per_gap: int = 60) -> Timeline:
    """A 100,000-response crawl fed through a timeline in time order: drained checkpoints at a flat level, between
    them samples with 32 downloads in flight and RSS ``excess_of(i)`` above that level (i: the sample's number)."""
    timeline = Timeline(max_samples=bound)
    points = series(100_000, lambda n: 0)
    i = 0
    for a, b in pairwise(points):
        timeline.add_checkpoint(a)
        for k in range(1, per_gap + 1):
            t = a.t_seconds + (b.t_seconds - a.t_seconds) * k / (per_gap + 1)
            timeline.add(Sample(t_seconds=t, responses=a.responses, items=0, rss_bytes=BASE + excess_of(i), inflight=32))
            i += 1
    timeline.add_checkpoint(points[-1])
    return timeline


def spiky(i: int) -> int:
    """20 MiB above the drained level, one sample in four 90 MiB above: median 20 MiB, every pair's maximum 90."""
    return 90 * MiB if i % 4 == 0 else 20 * MiB


def one_mib_bodies() -> SizeDistribution:
    return SizeDistribution(2000, MiB, MiB, MiB, MiB, 2000 * MiB)


def test_the_downloader_activity_median_of_a_thinned_timeline_is_that_of_the_full_one():
    full, thinned = downloading_crawl(0, spiky), downloading_crawl(64, spiky)
    assert thinned.span >= 16 and full.span == 1
    exact = excess_of_samples(full.checkpoints, full.samples())
    assert exact is not None and exact.median_bytes == 20 * MiB
    # the bias: the median of kept samples (each the maximum of its span) reads 90 MiB, and the verdict flips
    biased = excess_of_samples(thinned.checkpoints, thinned.samples())
    assert biased is not None and biased.median_bytes == 90 * MiB
    assert analyze(thinned.checkpoints, thinned.samples(), response_sizes=one_mib_bodies()).verdict == "downloader-activity"
    # the running aggregate is fed every raw sample: thinning cannot bias it
    summary = thinned.excess_summary()
    assert summary is not None and summary == full.excess_summary()
    assert summary.samples == exact.samples
    assert abs(summary.median_bytes - exact.median_bytes) <= EXCESS_BUCKET_BYTES
    assert (summary.median_inflight, summary.max_inflight) == (32, 32)
    growth = analyze(thinned.checkpoints, thinned.samples(), response_sizes=one_mib_bodies(), download_excess=summary)
    assert growth.verdict == analyze(full.checkpoints, full.samples(), response_sizes=one_mib_bodies()).verdict == "steady"


def test_downloads_that_hold_memory_most_of_the_time_are_still_found_on_a_thinned_timeline():
    thinned = downloading_crawl(64, lambda i: 70 * MiB + (i % 3) * MiB)
    growth = analyze(thinned.checkpoints, thinned.samples(), response_sizes=one_mib_bodies(),
                     download_excess=thinned.excess_summary())
    assert growth.verdict == "downloader-activity"
    assert "RSS ran 71.0 MiB above the drained level" in growth.reason, growth.reason


@settings(max_examples=40, deadline=None)
@given(
    excess=st.lists(st.integers(min_value=-8 * MiB, max_value=200 * MiB), min_size=10, max_size=600),
    gap=st.integers(min_value=1, max_value=50),
    bound=st.integers(min_value=16, max_value=64),
)
def test_the_running_excess_is_within_a_bucket_of_the_exact_median_whatever_the_thinning(excess, gap, bound):
    timeline = Timeline(max_samples=bound)
    for i, value in enumerate(excess):
        if i % gap == 0:
            timeline.add_checkpoint(Checkpoint(responses=i, t_seconds=i - 0.5, rss_bytes=BASE + (i % 7) * MiB,
                                               heap_bytes=None, traced_bytes=None, scheduled=0))
        timeline.add(Sample(t_seconds=i, responses=i, items=0, rss_bytes=BASE + value, inflight=i % 5))
    timeline.add_checkpoint(Checkpoint(responses=len(excess), t_seconds=len(excess), rss_bytes=BASE, heap_bytes=None,
                                       traced_bytes=None, scheduled=0))
    raw_samples = [Sample(t_seconds=i, responses=i, items=0, rss_bytes=BASE + value, inflight=i % 5)
                   for i, value in enumerate(excess)]
    raw_checkpoints = [Checkpoint(responses=i, t_seconds=i - 0.5, rss_bytes=BASE + (i % 7) * MiB, heap_bytes=None,
                                  traced_bytes=None, scheduled=0) for i in range(0, len(excess), gap)]
    raw_checkpoints.append(Checkpoint(responses=len(excess), t_seconds=len(excess), rss_bytes=BASE, heap_bytes=None,
                                      traced_bytes=None, scheduled=0))
    exact = excess_of_samples(raw_checkpoints, raw_samples)
    summary = timeline.excess_summary()
    assert exact is not None and summary is not None
    assert summary.samples == exact.samples
    assert (summary.median_inflight, summary.max_inflight) == (exact.median_inflight, exact.max_inflight)
    assert abs(summary.median_bytes - exact.median_bytes) <= EXCESS_BUCKET_BYTES
    assert abs(summary.p90_bytes - exact.p90_bytes) <= EXCESS_BUCKET_BYTES


def test_the_running_excess_stays_bounded_by_widening_its_buckets():
    aggregate = DrainedExcess(bucket_bytes=1024, max_buckets=64)
    aggregate.add_checkpoint(0)
    for i in range(10_000):
        aggregate.add_sample(i * 4096, 1)
        if i % 1000 == 999:
            aggregate.add_checkpoint(0)
    summary = aggregate.summary()
    assert summary is not None and summary.samples == 10_000
    assert len(aggregate._pending) <= 64 and len(aggregate._excess) <= 64
    assert abs(summary.median_bytes - 5000 * 4096) <= aggregate.bucket_bytes


def test_sparse_buckets_are_widened_until_the_bound_holds():
    aggregate = DrainedExcess(bucket_bytes=1024, max_buckets=8)
    aggregate.add_checkpoint(0)
    for i in range(20):
        aggregate.add_sample(i * 3 * 2**20, 1)  # 3 MiB apart: one widening of 1 KiB buckets merges none of them
        assert len(aggregate._pending) <= 8
    aggregate.add_checkpoint(0)
    assert len(aggregate._excess) <= 8 and len(aggregate._pending) == 0
    summary = aggregate.summary()
    assert summary is not None and summary.samples == 20
