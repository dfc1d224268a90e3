"""Whether the scraper is the crawl's bottleneck, read outside the plugin's own pauses and refills (pure).

A sample taken while a checkpoint holds the engine, or while the scraper refills after it, carries no backout reading
(``Sample.backout is None``; measure/refill.py): only the others are counted. Two readings decide:

- the scraper was over ``SCRAPER_SLOT_MAX_ACTIVE_SIZE`` in at least :data:`OVER_SHARE` of them (sustained backout), or
- it held responses in at least :data:`BUSY_SHARE` of them and was over its limit in at least :data:`REACHED_SHARE`:
  it never caught up between checkpoints, and what piled up reached the limit. Each drained checkpoint empties the
  scraper, so under the plugin a crawl whose callbacks or pipelines fall behind reaches its limit less often than it
  does without the plugin (a pipeline serializing 50 ms writes behind 256 KiB pages: over its limit in 27-57% of
  samples under plain Scrapy, 12-14% under the plugin, holding responses in ~96%).

A scraper that keeps up is empty between landings; one that is busy but never reaches its limit holds too little
for backout to matter. The backout share is weighted by ``Sample.span`` (a thinned sample stands for several; its
flag is diffused from exact counts, core/timeline.py). A thinned sample's active size is the largest of those it
stands for, so the busy share is read from unthinned samples only: a crawl long enough to be thinned (over
CRAWLMEM_TIMELINE_SAMPLES samples) is judged by the share over its limit alone.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pytest_crawlmem.core.models import Sample

#: Share of samples over the limit that alone is sustained backout.
OVER_SHARE = 0.25
#: Share of samples holding responses that says the scraper never caught up between checkpoints.
BUSY_SHARE = 0.9
#: Share of samples over the limit that a scraper which never caught up must also show.
REACHED_SHARE = 0.05
#: Samples with a backout reading needed before either is judged.
MIN_SAMPLES = 10


@dataclass(frozen=True)
class Pressure:
    """The scraper's readings outside the plugin's pauses: shares of samples over its limit and holding responses."""

    over_share: float
    busy_share: float
    peak_bytes: int

    @property
    def sustained(self) -> bool:
        """Over its limit often enough on its own (else: busy throughout, and it reached its limit)."""
        return self.over_share >= OVER_SHARE

    def describe(self, limit_bytes: int | None) -> str:
        """One clause for the verdict's reason, both figures named."""
        limit = f" (limit {_kib(limit_bytes)})" if limit_bytes else ""
        over = (f"the scraper was over its active-size limit in {self.over_share:.0%} of samples, peaking at"
                f" {_kib(self.peak_bytes)}{limit}")
        if self.sustained:
            return f"{over}: responses arrive faster than callbacks and pipelines finish"
        return (f"{over}, and held responses in {self.busy_share:.0%} of the samples taken outside the plugin's"
                " pauses and refills: it never caught up between checkpoints, which empty it (without them it would"
                " stay at its limit longer): responses arrive faster than callbacks and pipelines finish")


def pressure(samples: Sequence[Sample], max_active_size: int | None) -> Pressure | None:
    """The scraper's pressure when it decides ``response-processing``, else ``None``."""
    read = [s for s in samples if s.backout is not None]
    total = sum(s.span for s in read)
    if len(read) < MIN_SAMPLES or not total:
        return None
    over = sum(s.span for s in read if s.backout) / total
    raw = [s for s in read if s.span == 1]
    busy = sum(1 for s in raw if (s.active_size_bytes or 0) > 0) / len(raw) if len(raw) >= MIN_SAMPLES else 0.0
    if over < OVER_SHARE and (busy < BUSY_SHARE or over < REACHED_SHARE):
        return None
    return Pressure(over, busy, max((s.active_size_bytes or 0) for s in samples))


def _kib(num_bytes: float) -> str:
    return f"{num_bytes / 1024:,.1f} KiB"
