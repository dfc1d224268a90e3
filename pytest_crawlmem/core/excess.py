"""Sampled RSS above the drained level around it, summarized so that thinning cannot bias it (pure: no pytest, no Scrapy).

The ``downloader-activity`` verdict compares every sample taken between two checkpoints with the higher
RSS of the two (drained: nothing in flight, after gc.collect() and malloc_trim) and reads the median of
that excess. A thinned timeline cannot give it: a merged sample holds the maximum RSS of the raw samples
it stands for, so the median of a long crawl's kept samples reads high. :class:`DrainedExcess` is fed
every raw sample and checkpoint in the crawl process (by :class:`pytest_crawlmem.core.timeline.Timeline`) and
keeps the excess as counts by bucket, whatever the timeline keeps; :func:`excess_of_samples` computes the
same summary exactly from a list of samples (an unthinned timeline, a test's series).
"""

from __future__ import annotations

import statistics
from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import dataclass

from pytest_crawlmem.core.models import Checkpoint, Sample

#: Width of the running aggregate's RSS buckets to start with (an excess is within one width of the exact one).
EXCESS_BUCKET_BYTES = 64 * 1024
#: Buckets an aggregate may hold (pending and folded, each) before it doubles its width: its memory is bounded.
EXCESS_MAX_BUCKETS = 1024


@dataclass(frozen=True, slots=True)
class ExcessSummary:
    """The excess of the raw samples taken between two checkpoints with a known count of downloads in flight."""

    samples: int
    median_bytes: float
    p90_bytes: float
    median_inflight: float
    max_inflight: int


def excess_of_samples(checkpoints: Sequence[Checkpoint], samples: Sequence[Sample]) -> ExcessSummary | None:
    """The exact summary from samples, each read against the checkpoints around it (``None``: no sample between two)."""
    times = [c.t_seconds for c in checkpoints]
    excess, inflight = [], []
    for sample in samples:
        at = bisect_right(times, sample.t_seconds)
        if sample.inflight is None or at == 0 or at == len(times):
            continue
        level = max(checkpoints[at - 1].rss_bytes, checkpoints[at].rss_bytes)
        excess.append(sample.rss_bytes - level)
        inflight.append(sample.inflight)
    if not excess:
        return None
    return ExcessSummary(len(excess), statistics.median(excess), sorted(excess)[int(0.9 * (len(excess) - 1))],
                         statistics.median(inflight), max(inflight))


class DrainedExcess:
    """The running aggregate: RSS by bucket since the last checkpoint, folded into excess by bucket at each one.

    Memory is bounded: past ``max_buckets`` buckets the width doubles (neighbouring buckets are added up).
    Not thread-safe by itself (the timeline's owner holds a lock around it).
    """

    __slots__ = ("_excess", "_inflight", "_level", "_pending", "_pending_inflight", "bucket_bytes", "max_buckets")

    def __init__(self, bucket_bytes: int = EXCESS_BUCKET_BYTES, max_buckets: int = EXCESS_MAX_BUCKETS) -> None:
        if bucket_bytes < 1 or max_buckets < 2:
            raise ValueError(f"invalid bucket_bytes {bucket_bytes} or max_buckets {max_buckets}: expected >= 1 and >= 2")
        self.bucket_bytes = bucket_bytes
        self.max_buckets = max_buckets
        self._level: int | None = None  # RSS of the last checkpoint (None before the first)
        self._pending: dict[int, int] = {}  # RSS bucket -> raw samples since the last checkpoint
        self._pending_inflight: dict[int, int] = {}
        self._excess: dict[int, int] = {}  # excess bucket -> raw samples, over the intervals closed so far
        self._inflight: dict[int, int] = {}

    def add_sample(self, rss_bytes: int, inflight: int | None) -> None:
        """Count one raw sample (ignored before the first checkpoint or without an in-flight count)."""
        if inflight is None or self._level is None:
            return
        bucket = rss_bytes // self.bucket_bytes
        self._pending[bucket] = self._pending.get(bucket, 0) + 1
        self._pending_inflight[inflight] = self._pending_inflight.get(inflight, 0) + 1
        while len(self._pending) > self.max_buckets:
            self._coarsen()

    def add_checkpoint(self, rss_bytes: int) -> None:
        """Close the interval since the last checkpoint: its samples' excess is over the higher of the two levels."""
        if self._level is not None and self._pending:
            width = self.bucket_bytes
            level = max(self._level, rss_bytes)
            for bucket, count in self._pending.items():
                key = (bucket * width + width // 2 - level) // width
                self._excess[key] = self._excess.get(key, 0) + count
            for inflight, count in self._pending_inflight.items():
                self._inflight[inflight] = self._inflight.get(inflight, 0) + count
            while len(self._excess) > self.max_buckets:
                self._coarsen()
        self._pending, self._pending_inflight = {}, {}
        self._level = rss_bytes

    def _coarsen(self) -> None:
        """Double the bucket width, adding up neighbouring buckets."""
        self.bucket_bytes *= 2
        for name in ("_pending", "_excess"):
            merged: dict[int, int] = {}
            for bucket, count in getattr(self, name).items():
                merged[bucket // 2] = merged.get(bucket // 2, 0) + count
            setattr(self, name, merged)

    def summary(self) -> ExcessSummary | None:
        """The summary of the intervals closed so far (``None`` before any sample fell between two checkpoints)."""
        count = sum(self._excess.values())
        if not count:
            return None
        width = self.bucket_bytes
        excess = [(bucket * width + width // 2, n) for bucket, n in sorted(self._excess.items())]
        inflight = sorted(self._inflight.items())
        median = (_at_rank(excess, (count - 1) // 2) + _at_rank(excess, count // 2)) / 2
        median_inflight = (_at_rank(inflight, (count - 1) // 2) + _at_rank(inflight, count // 2)) / 2
        return ExcessSummary(count, median, _at_rank(excess, int(0.9 * (count - 1))), median_inflight, inflight[-1][0])


def _at_rank(counts: Sequence[tuple[int, int]], rank: int) -> int:
    """The value at 0-based ``rank`` of sorted (value, count) pairs."""
    seen = 0
    for value, n in counts:
        seen += n
        if seen > rank:
            return value
    return counts[-1][0]
