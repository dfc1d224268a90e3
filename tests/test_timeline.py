"""The bounded timeline: memory bounded, peaks and sample shares kept whatever the crawl length (pure)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_crawlmem.models import Checkpoint, Sample
from pytest_crawlmem.timeline import PEAK_FIELDS, Timeline, merge, thin_checkpoints, weighted_share


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
