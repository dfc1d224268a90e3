"""What one crawl measured, handed back by the measuring extension in one typed record (any process, pure).

The extension fills it once the spider closed (``CrawlMemExtension.measurement()``, crawl process); the result is
assembled from it in one place (``core.assemble.crawl_result``). All sizes in bytes, times in seconds.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from pytest_crawlmem.core.distribution import Histogram
from pytest_crawlmem.core.excess import ExcessSummary
from pytest_crawlmem.core.models import (
    AmplificationSummary,
    BrowserSummary,
    Checkpoint,
    DangerSnapshot,
    DroppedResponse,
    GrowthSite,
    Holder,
    LatencyDistribution,
    MaxsizeSuggestion,
    MediaSummary,
    RetentionPath,
    Sample,
    ShotSummary,
    SizeDistribution,
)
from pytest_crawlmem.core.replay_copies import CopyCount, HostPattern
from pytest_crawlmem.core.sites import KeptEvidence


@dataclass(frozen=True)
class Measurement:
    """Everything a crawl measured that its CrawlResult needs: readings, close figures, attribution, ledgers, summaries.

    A field named like a field of :class:`~.models.CrawlResult` (or :class:`~.assemble.RunFacts`) is that field:
    ``assemble.crawl_result`` copies it by name.
    """

    samples: tuple[Sample, ...] = ()
    checkpoints: tuple[Checkpoint, ...] = ()
    errors: tuple[str, ...] = ()
    finish_reason: str = ""
    stopped_because: str = ""  # why the harness stopped the crawl ('' when it did not)
    start_rss: int = 0
    end_rss: int = 0
    peak_rss: int = 0
    traced_peak: int | None = None  # None: tracemalloc did not trace the whole crawl
    responses: int = 0
    items_scraped: int = 0
    checkpoint_min_responses: int = 0  # the shortest interval judged (CRAWLMEM_CHECKPOINT_MIN_RESPONSES)
    # -- the attribution window (attribution.py) and what is alive after the crawl
    top_growth: tuple[GrowthSite, ...] = ()  # the attribution window's growth sites, the keeping line first
    holders: tuple[Holder, ...] = ()
    kept: KeptEvidence | None = None
    retention: tuple[RetentionPath, ...] = ()
    live_refs: Mapping[str, int] = field(default_factory=dict)
    # -- the dropped-data ledger and the responses' sizes and latency
    dropped: tuple[DroppedResponse, ...] = ()
    dropped_count: int = 0
    warnsize_warnings: int = 0
    response_sizes: SizeDistribution = field(default_factory=SizeDistribution)
    suggested_maxsize: MaxsizeSuggestion | None = None
    download_latency: LatencyDistribution = field(default_factory=LatencyDistribution)
    download_excess: ExcessSummary | None = None  # sampled RSS above the drained level (timeline.py)
    # -- summaries of what only some crawls have
    browser: BrowserSummary | None = None
    media: MediaSummary | None = None
    shots: ShotSummary | None = None
    parse_amplification: AmplificationSummary | None = None
    danger: DangerSnapshot | None = None  # the extension's snapshot at snapshot_at, else the governor's at its close
    # -- the replay site's tally (replay_scrapy.py; 0 without replay)
    replay_hits: int = 0
    replay_misses: int = 0
    replay_missed_urls: tuple[str, ...] = ()
    replay_per_copy: tuple[CopyCount, ...] = ()
    replay_rules: tuple[HostPattern, ...] = ()


def size_distribution(sizes: Histogram) -> SizeDistribution:
    """Count, p50, p95, p99 and max of response body sizes (bytes)."""
    return SizeDistribution(sizes.count, sizes.percentile(50), sizes.percentile(95), sizes.percentile(99),
                            sizes.max_value if sizes.count else None, sizes.total)


def latency_distribution(latency_us: Histogram) -> LatencyDistribution:
    """Count, p50, p95, p99 and max of download latency (seconds, from microseconds)."""
    def seconds(value: int | None) -> float | None:
        return None if value is None else value / 1_000_000

    return LatencyDistribution(latency_us.count, seconds(latency_us.percentile(50)), seconds(latency_us.percentile(95)),
                               seconds(latency_us.percentile(99)), seconds(latency_us.max_value if latency_us.count else None))
