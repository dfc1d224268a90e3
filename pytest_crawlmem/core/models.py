"""Frozen records shared by every module: samples, checkpoints, results (all sizes in bytes)."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, ClassVar

from pytest_crawlmem.core.declared import DeclaredGrowth
from pytest_crawlmem.core.known_leaks import KnownLeakMatch
from pytest_crawlmem.core.leaktrace import LeakTrace
from pytest_crawlmem.core.replay_copies import CopyCount, HostPattern
from pytest_crawlmem.core.serial import COUNT_ONLY, NOT_WRITTEN, JsonRecord, record_json
from pytest_crawlmem.core.serial import from_json as record_from_json
from pytest_crawlmem.core.units import format_size
from pytest_crawlmem.core.verdicts import INCONCLUSIVE

SCHEMA_VERSION = 1


def json_value(value: Any) -> Any:
    """Return ``value`` with non-finite floats replaced by ``None`` (JSON has no NaN)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


#: A Sample figure a thinned timeline keeps the maximum of (core/timeline.py's merge): every memory, queue and disk one.
PEAK: Mapping[str, Any] = {"peak": True}


def peak_of(sample_field: str, checkpoint_field: str | None = None) -> Mapping[str, Any]:
    """The metadata of a :class:`Peaks` field that is the largest reading of ``sample_field`` over the samples (and of
    ``checkpoint_field`` over the checkpoints); the field's default when nothing was read."""
    return {"sample": sample_field, "checkpoint": checkpoint_field}


@dataclass(frozen=True, slots=True)
class Sample:
    """One periodic reading of the crawl process, taken by the sampler thread."""

    t_seconds: float
    responses: int
    items: int
    rss_bytes: int
    traced_bytes: int | None = field(default=None, metadata=PEAK)
    scheduled: int | None = field(default=None, metadata=PEAK)
    inflight: int | None = field(default=None, metadata=PEAK)
    slot_queued: int | None = field(default=None, metadata=PEAK)
    active_size_bytes: int | None = field(default=None, metadata=PEAK)
    backout: bool | None = None
    disk_scheduled: int | None = field(default=None, metadata=PEAK)
    # summed RSS of the browser process tree (double counts shared pages)
    browser_rss_bytes: int | None = field(default=None, metadata=PEAK)
    # summed PSS of the tree: its footprint (read less often; the last reading)
    browser_pss_bytes: int | None = field(default=None, metadata=PEAK)
    browser_uss_bytes: int | None = field(default=None, metadata=PEAK)  # summed USS of the tree: memory only it holds
    open_pages: int | None = field(default=None, metadata=PEAK)
    open_contexts: int | None = field(default=None, metadata=PEAK)
    jobdir_bytes: int | None = field(default=None, metadata=PEAK)  # sum of the file sizes under JOBDIR (None without JOBDIR)
    # entries in the media pipelines' per-spider cache (None without a media pipeline)
    media_cached: int | None = field(default=None, metadata=PEAK)
    open_fds: int | None = field(default=None, metadata=PEAK)  # file descriptors the process holds (None without /proc)
    span: int = 1  # raw samples this one stands for (more than 1 once a long crawl's timeline is thinned: timeline.py)

    def to_json(self) -> dict[str, Any]:
        """Return the sample as a JSON-ready dict (``span`` only when it is not 1)."""
        data = {name: json_value(getattr(self, name)) for name in _SAMPLE_FIELDS}  # asdict() costs 5x more, every sample
        if self.span == 1:
            del data["span"]
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Sample:
        """Build a sample from a dict written by :meth:`to_json` (unknown keys are ignored)."""
        return cls(**{k: v for k, v in data.items() if k in _SAMPLE_NAMES})


_SAMPLE_FIELDS = tuple(f.name for f in fields(Sample))
#: The figures of a Sample merged by their maximum when the timeline is thinned.
PEAK_FIELDS = tuple(f.name for f in fields(Sample) if f.metadata.get("peak"))
_SAMPLE_NAMES = frozenset(_SAMPLE_FIELDS)


@dataclass(frozen=True, slots=True)
class Checkpoint(JsonRecord):
    """Figures read at a drained point of the crawl (no download or callback in progress)."""

    #: Written after the fields (report.json, samples.jsonl) for readers; computed from the fields, never read back.
    DERIVED: ClassVar[tuple[str, ...]] = ("python_heap_bytes",)

    responses: int
    t_seconds: float
    rss_bytes: int
    heap_bytes: int | None
    traced_bytes: int | None
    scheduled: int
    allocated_blocks: int | None = None
    tracer_bytes: int = 0
    live_refs: Mapping[str, int] = field(default_factory=dict)
    drained: bool = True
    held_by: str = ""  # an undrained checkpoint's downloads still in flight when its pause timed out, in words
    cost_seconds: float = 0.0
    browser_pss_bytes: int | None = None  # browser tree, read after a renderer GC on every open page
    browser_uss_bytes: int | None = None
    open_pages: int | None = None
    unclosed_pages: int | None = None  # pages handed to callbacks (playwright_include_page) and still open
    open_contexts: int | None = None
    disk_scheduled: int = 0  # of ``scheduled``, the requests in JOBDIR's disk queue (pickled: no memory held)
    plugin_bytes: int = 0  # heap the plugin's closed attribution window left behind, measured when it closed
    jobdir_bytes: int | None = None  # JOBDIR's size on disk, read at the checkpoint (None without JOBDIR)
    #: each declared holder's deep size (expected_growth; core/setaside.py), as tracemalloc counts it, and as the heap
    #: estimate does (a small object at pymalloc's mean block); a holder not found is absent
    declared_bytes: Mapping[str, int] = field(default_factory=dict)
    declared_heap_bytes: Mapping[str, int] = field(default_factory=dict)

    @property
    def python_heap_bytes(self) -> int | None:
        """The heap estimate report.html draws as "Python memory" (and verdicts judge when the crawl is not traced whole):
        ``heap_bytes`` (glibc's bytes in use) plus pymalloc's blocks at their mean size, less tracemalloc's own tables
        and the plugin's residue (``heap_estimate``); ``None`` without ``heap_bytes``."""
        return heap_estimate(self)


#: Mean size of a pymalloc block in a Scrapy process (sys._debugmallocstats: 95.7 B).
BLOCK_BYTES = 96


def heap_estimate(checkpoint: Checkpoint) -> int | None:
    """malloc's bytes in use plus pymalloc's blocks at their mean size, less tracemalloc's tables and the plugin's residue."""
    if checkpoint.heap_bytes is None:
        return None
    return (checkpoint.heap_bytes + BLOCK_BYTES * (checkpoint.allocated_blocks or 0) - checkpoint.tracer_bytes
            - checkpoint.plugin_bytes)


@dataclass(frozen=True, slots=True)
class DroppedResponse(JsonRecord):
    """A response the crawl lost on purpose or by failure, with the reason and size seen."""

    url: str
    reason: str
    size_bytes: int | None = None


@dataclass(frozen=True, slots=True)
class SizeDistribution(JsonRecord):
    """Response body sizes of a crawl (after decompression): count and percentiles, in bytes.

    Percentiles come from a histogram with 16 buckets per octave: at most 6.25% high; ``max_bytes`` is exact.
    """

    count: int = 0
    p50_bytes: int | None = None
    p95_bytes: int | None = None
    p99_bytes: int | None = None
    max_bytes: int | None = None
    total_bytes: int = 0


@dataclass(frozen=True, slots=True)
class LatencyDistribution(JsonRecord):
    """Download latency of a crawl's responses (``download_latency``): count and percentiles, in seconds."""

    count: int = 0
    p50_seconds: float | None = None
    p95_seconds: float | None = None
    p99_seconds: float | None = None
    max_seconds: float | None = None


@dataclass(frozen=True, slots=True)
class MaxsizeSuggestion(JsonRecord):
    """A DOWNLOAD_MAXSIZE derived from this crawl's sizes, and what it would have dropped here."""

    download_maxsize: int
    would_drop: int
    rule: str = "next power of two at or above p99 x 2"


@dataclass(frozen=True, slots=True)
class GrowthSite(JsonRecord):
    """One allocation site whose retained memory grew between tracemalloc snapshots."""

    location: str
    size_diff_bytes: int
    count_diff: int
    bytes_per_response: float
    traceback: tuple[str, ...] = ()
    in_user_code: bool = True  # False: no frame of the user's code on the allocating stack (a library's line)

    def describe(self) -> str:
        """Return ``file:line +N bytes`` for messages."""
        return f"{self.location} +{self.size_diff_bytes:,} B"


@dataclass(frozen=True, slots=True)
class Holder(JsonRecord):
    """A container of the crawl (on the spider, a component or a module) that grew with the responses."""

    path: str  # "spider.kept -> list[907]"
    gained: int  # entries added over ``responses``
    responses: int
    line: str | None = None  # the line of the user's code that stores into it
    #: what the entries it gained hold, per response (their deep size, wherever they were allocated)
    entries_bytes_per_response: float | None = None

    def describe(self) -> str:
        """``spider.kept -> list[907] gained 480 entries in 500 responses, stored at spiders/x.py:31``."""
        stored = f", stored at {self.line}" if self.line else ""
        return f"{self.path} gained {self.gained:,} entries in {self.responses:,} responses{stored}"


@dataclass(frozen=True, slots=True)
class RetentionPath(JsonRecord):
    """Live Scrapy objects of one class after the crawl, and what keeps the oldest alive."""

    ALIASES: ClassVar[Mapping[str, str]] = {"class": "class_name"}  # the key report.json had before it named fields

    class_name: str
    count: int
    path: str | None

    def describe(self) -> str:
        """``12 HtmlResponse held by class spiders.Hoarder .kept -> list[12] [0] -> HtmlResponse``."""
        held = f"held by {self.path}" if self.path else "no module or class holds it within the search bounds"
        return f"{self.count:,} {self.class_name} alive after the crawl, {held}"


@dataclass(frozen=True, slots=True)
class Growth(JsonRecord):
    """Growth per response and the evidence behind the verdict."""

    FILL: ClassVar[Mapping[str, Any]] = {"verdict": INCONCLUSIVE}  # read from any record: nothing judged

    verdict: str
    reason: str
    rule: str = ""
    per_response_bytes: float | None = None
    checkpoints: tuple[Checkpoint, ...] = ()
    deltas_per_response: tuple[float, ...] = ()
    signal: str = ""
    #: The smallest leak per response this crawl would have caught in 95% of runs like it (None: not judged).
    detectable_per_response_bytes: float | None = None
    #: Responses a crawl like this one needs for a verdict (``inconclusive`` only; None when it had enough).
    responses_needed: int | None = None
    #: A leak verdict's id, the same for the same leak across runs, line moves and machines ('' when not a leak).
    fingerprint: str = ""
    #: What the fingerprint hashes (``holder spider.kept -> list``, ``function Spider.parse``, ``code ...``).
    fingerprint_basis: tuple[str, ...] = ()
    #: A leak verdict's path from its root to what grows, one reference a line (core/leaktrace.py; None: not a leak).
    leak_trace: LeakTrace | None = None
    #: The known library leak this leak is (core/known_leaks.py), with its upstream issue (None: the team's own).
    known_leak: KnownLeakMatch | None = None
    #: The holders declared by design (expected_growth): each one's growth against its declaration (core/setaside.py).
    declared: tuple[DeclaredGrowth, ...] = ()


@dataclass(frozen=True, slots=True)
class Peaks(JsonRecord):
    """Peak values of the engine's queues over the samples; a field with :func:`peak_of` metadata is the largest
    reading of its sample field (``core.assemble.peaks_of`` fills it)."""

    max_scheduled: int = field(default=0, metadata=peak_of("scheduled", "scheduled"))
    max_inflight: int = field(default=0, metadata=peak_of("inflight"))
    max_active_size_bytes: int = field(default=0, metadata=peak_of("active_size_bytes"))
    backout_seconds: float = 0.0  # the sampled time the scraper spent over its limit (a sum, not a peak)
    max_disk_scheduled: int = field(default=0, metadata=peak_of("disk_scheduled"))
    max_jobdir_bytes: int | None = field(default=None, metadata=peak_of("jobdir_bytes"))  # None without JOBDIR
    max_media_cached: int | None = field(default=None, metadata=peak_of("media_cached"))  # None without a media pipeline
    max_open_fds: int | None = field(default=None, metadata=peak_of("open_fds"))


@dataclass(frozen=True, slots=True)
class BrowserSummary(JsonRecord):
    """What the browser process tree (Playwright's driver and Chromium) used during a crawl or job."""

    DERIVED: ClassVar[tuple[str, ...]] = ("rss_overcount",)

    peak_pss_bytes: int
    peak_rss_sum_bytes: int
    end_pss_bytes: int | None
    end_uss_bytes: int | None
    pss_by_kind_at_peak: Mapping[str, int] = field(default_factory=dict)
    max_processes: int = 0
    max_open_pages: int = 0
    max_open_contexts: int = 0
    unclosed_pages: int = 0
    readings: int = 0
    cost_seconds: float = 0.0

    @property
    def rss_overcount(self) -> float | None:
        """Summed RSS over summed PSS at their peaks: how much summing RSS overstates the tree."""
        return self.peak_rss_sum_bytes / self.peak_pss_bytes if self.peak_pss_bytes else None


@dataclass(frozen=True, slots=True)
class MediaSummary(JsonRecord):
    """A crawl's media pipelines (FilesPipeline, ImagesPipeline...): their in-memory cache, and what its failures keep alive.

    Read when the spider closes, while the pipelines still hold their per-spider cache (``SpiderInfo.downloaded``).
    """

    pipelines: tuple[str, ...] = ()
    cached_at_close: int = 0  # cache entries: one per media URL downloaded or failed
    failed_at_close: int = 0  # of which failures (Twisted Failures)
    retained: tuple[RetentionPath, ...] = ()  # Scrapy objects those failures keep alive, and through what


# -- issue 19: screenshot accounting, parse amplification, the danger snapshot ----------------


@dataclass(frozen=True, slots=True)
class ShotMismatch(JsonRecord):
    """A capture whose billing disagrees with its verdict (billed and not clean, or clean and not billed)."""

    url: str
    verdict: str
    billed: bool


@dataclass(frozen=True, slots=True)
class ShotSummary(JsonRecord):
    """Captures of a screenshot API seen by a crawl (responses with ``X-Page-Verdict``): counts, billing, bytes.

    Responses replayed from Scrapy's HTTP cache are counted in ``replayed`` only: nobody bills them twice.
    """

    DERIVED: ClassVar[tuple[str, ...]] = ("billed_mismatch",)

    captures: int = 0
    by_verdict: Mapping[str, int] = field(default_factory=dict)
    billed: int = 0
    billed_by_verdict: Mapping[str, int] = field(default_factory=dict)
    bytes_total: int = 0
    max_bytes: int = 0
    replayed: int = 0
    unreadable_billing: int = 0  # X-Billed missing or neither true nor false: counted as not billed
    mismatches: tuple[ShotMismatch, ...] = ()  # the first few

    @property
    def billed_not_clean(self) -> int:
        """Captures billed although their verdict was not ``clean``."""
        return sum(n for verdict, n in self.billed_by_verdict.items() if verdict != "clean")

    @property
    def clean_not_billed(self) -> int:
        """Clean captures that were not billed."""
        return self.by_verdict.get("clean", 0) - self.billed_by_verdict.get("clean", 0)

    @property
    def billed_mismatch(self) -> int:
        """Captures whose billing is not exactly "billed when clean"."""
        return self.billed_not_clean + self.clean_not_billed


@dataclass(frozen=True, slots=True)
class AmplifiedPage(JsonRecord):
    """One response's parse: memory its callback held at most against the body size."""

    url: str
    body_bytes: int
    held_bytes: int
    ratio: float


@dataclass(frozen=True, slots=True)
class AmplificationSummary(JsonRecord):
    """Parse amplification of a crawl: memory held while callbacks parsed, over body size (p50, p95, max), worst pages.

    ``held`` is the most malloc-backed memory (libxml2 trees, decoded text, large Python objects) a
    callback's own steps had allocated and not freed; the ratio divides it by max(body, 1 KiB).
    Percentiles come from histograms: at most 6.25% high; maxima are exact.
    """

    count: int = 0
    p50_ratio: float | None = None
    p95_ratio: float | None = None
    max_ratio: float | None = None
    p50_held_bytes: int | None = None
    p95_held_bytes: int | None = None
    max_held_bytes: int | None = None
    worst: tuple[AmplifiedPage, ...] = ()
    unmeasured: int = 0  # async callbacks: their steps await, so other work would count as theirs
    skipped: int = 0  # callbacks not measured to keep the mallinfo2 reads within CRAWLMEM_AMPLIFICATION_SHARE

    def describe(self) -> str:
        """``p50 2.1x, p95 4.0x, max 11.3x (https://.../nested/1, 512.0 KiB body held 5.6 MiB)``."""
        if not self.count or self.max_ratio is None:
            return "no callback was measured"
        text = f"p50 {self.p50_ratio:.1f}x, p95 {self.p95_ratio:.1f}x, max {self.max_ratio:.1f}x"
        if self.worst:
            top = self.worst[0]
            text += f" ({top.url}: {top.body_bytes:,} B body, {top.held_bytes:,} B held)"
        if self.skipped:
            text += f"; {self.count:,} of {self.count + self.skipped:,} callbacks measured (the reads' time share)"
        return text


@dataclass(frozen=True, slots=True)
class DangerSnapshot(JsonRecord):
    """The crawl's state when RSS first crossed ``snapshot_at``, and what was allocated in the traced window after it."""

    DERIVED: ClassVar[tuple[str, ...]] = ("summary",)

    threshold_bytes: int
    t_seconds: float
    rss_bytes: int
    start_rss_bytes: int
    responses: int
    items: int
    scheduled: int | None = None
    inflight: int | None = None
    slot_queued: int | None = None
    active_size_bytes: int | None = None
    backout: bool | None = None
    live_refs: Mapping[str, int] = field(default_factory=dict)
    window_seconds: float = 0.0  # how long the traced window lasted (0 if it never closed)
    window_responses: int = 0
    window_rss_bytes: int | None = None  # RSS when the window closed
    sites: tuple[GrowthSite, ...] = ()  # top allocation sites of the window (live at its end, allocated in it)
    note: str = ""  # why the window has no sites, if it has none

    def describe(self) -> str:
        """One line: when, how high, the queues, the most numerous live objects and the top site."""
        text = (
            f"danger snapshot at {self.t_seconds:.1f} s: RSS {format_size(self.rss_bytes)} crossed"
            f" snapshot_at={format_size(self.threshold_bytes)} after {self.responses:,} responses"
        )
        queues = [f"{v:,} {name}" for name, v in (("scheduled", self.scheduled), ("in flight", self.inflight)) if v is not None]
        if self.active_size_bytes is not None:
            queues.append(f"active {format_size(self.active_size_bytes)}{' (backout)' if self.backout else ''}")
        if queues:
            text += " with " + ", ".join(queues)
        alive = sorted(self.live_refs.items(), key=lambda pair: -pair[1])[:2]
        if alive:
            text += "; alive: " + ", ".join(f"{count:,} {name}" for name, count in alive)
        if self.sites:
            top = self.sites[0]
            text += f"; top site in the next {self.window_seconds:.1f} s: {top.location} +{format_size(top.size_diff_bytes)}"
        return text

    @property
    def summary(self) -> str:
        """:meth:`describe`'s line (danger.json and report.json hold it as ``summary``)."""
        return self.describe()


@dataclass(frozen=True)
class CrawlResult:
    """What one crawl measured; returned by the ``crawl`` fixture.

    report.json's ``result`` is :meth:`to_json`: one key per field, by its name, then the figures of ``DERIVED``.
    """

    #: Written after the fields for readers of report.json; computed from the fields, never read back.
    DERIVED: ClassVar[tuple[str, ...]] = ("verdict", "rss_growth", "peak_rss_above_start", "active_size_ratio")
    #: Keys of the reports written before report.json named fields (schema_version 1 until this writer): read as these.
    ALIASES: ClassVar[Mapping[str, str]] = {
        "max_scheduled": "peaks.max_scheduled", "max_inflight": "peaks.max_inflight",
        "max_active_size": "peaks.max_active_size_bytes", "backout_seconds": "peaks.backout_seconds",
        "max_disk_scheduled": "peaks.max_disk_scheduled", "jobdir_disk": "peaks.max_jobdir_bytes",
        "max_media_cached": "peaks.max_media_cached",
    }
    FILL: ClassVar[Mapping[str, Any]] = {}  # any record reads: a field it lacks is empty (0, "", ...)

    spider: str
    samples: tuple[Sample, ...] = field(metadata=COUNT_ONLY)  # report.json: their count (samples.jsonl holds them)
    start_rss: int
    end_rss: int
    peak_rss: int
    traced_peak: int | None
    responses: int
    items_scraped: int
    duration_seconds: float
    finish_reason: str
    peaks: Peaks
    growth: Growth
    dropped: tuple[DroppedResponse, ...] = ()
    status_counts: Mapping[int, int] = field(default_factory=dict)
    top_growth: tuple[GrowthSite, ...] = ()
    live_refs: Mapping[str, int] = field(default_factory=dict)
    retention: tuple[RetentionPath, ...] = ()
    holders: tuple[Holder, ...] = ()  # containers that grew with the responses while the crawl ran
    stats: Mapping[str, Any] = field(default_factory=dict)
    errors: tuple[str, ...] = ()
    stopped_because: str = field(default="", metadata=NOT_WRITTEN)  # not in report.json: samples.jsonl's stop record
    report_dir: Path | None = field(default=None, metadata=NOT_WRITTEN)
    dropped_count: int = 0
    warnsize_warnings: int = 0
    response_sizes: SizeDistribution = field(default_factory=SizeDistribution)
    suggested_maxsize: MaxsizeSuggestion | None = None
    max_active_size_limit: int = 0
    scheduled_per_response: float | None = None
    retries: int = 0
    retries_max_reached: int = 0
    download_latency: LatencyDistribution = field(default_factory=LatencyDistribution)
    browser: BrowserSummary | None = None
    media: MediaSummary | None = None
    replay_hits: int = 0  # responses the replay site found in the recording (0 without replay)
    replay_misses: int = 0  # requests it did not find: answered 404, never fetched
    replay_missed_urls: tuple[str, ...] = ()  # the first 1,000 distinct missed URLs
    replay_copies: int = 0  # copies of the recording served (0 without replay); what replay_copies="auto" chose
    replay_per_copy: tuple[CopyCount, ...] = ()  # responses and items of each copy, copy 0 (the original) first
    replay_rules: tuple[HostPattern, ...] = ()  # the spider's URL patterns that name a recorded host (with copies)
    shots: ShotSummary | None = None  # screenshot API captures (None when no response had X-Page-Verdict)
    parse_amplification: AmplificationSummary | None = None  # None when no callback was measured
    danger: DangerSnapshot | None = None  # None when RSS never crossed snapshot_at
    isolated: bool = False  # ran in a fresh process (crawl(isolate=True), --crawlmem-isolate): nothing before it there
    notes: tuple[str, ...] = ()  # what earlier crawls in this process left that changed this one (class-level state)
    earlier_crawls: int | None = None  # in-process crawls the pytest process ran before this one (None: not counted)

    @property
    def verdict(self) -> str:
        """The growth verdict (``steady``, ``retained-objects``, ...)."""
        return self.growth.verdict

    @property
    def leak_fingerprint(self) -> str | None:
        """The leak verdict's fingerprint (``growth.fingerprint``; ``None`` when the verdict is not a leak)."""
        return self.growth.fingerprint or None

    @property
    def rss_growth(self) -> int:
        """RSS at the end of the crawl minus RSS at its start."""
        return self.end_rss - self.start_rss

    @property
    def peak_rss_above_start(self) -> int:
        """How far the peak rose above the RSS the process held when the crawl began: what the crawl itself added."""
        return self.peak_rss - self.start_rss

    @property
    def max_scheduled(self) -> int:
        """Most requests waiting in the scheduler at any sample."""
        return self.peaks.max_scheduled

    @property
    def max_inflight(self) -> int:
        """Most downloads in flight at any sample."""
        return self.peaks.max_inflight

    @property
    def max_active_size(self) -> int:
        """Largest scraper ``active_size`` (bytes of responses being processed)."""
        return self.peaks.max_active_size_bytes

    @property
    def max_disk_scheduled(self) -> int:
        """Most requests waiting in JOBDIR's disk queue at any sample (0 without JOBDIR)."""
        return self.peaks.max_disk_scheduled

    @property
    def jobdir_disk(self) -> int | None:
        """Most bytes JOBDIR held on disk at any sample (file sizes summed; ``None`` without JOBDIR)."""
        return self.peaks.max_jobdir_bytes

    @property
    def max_media_cached(self) -> int | None:
        """Most entries in the media pipelines' cache at any sample (``None`` without a media pipeline)."""
        return self.peaks.max_media_cached

    @property
    def backout_seconds(self) -> float:
        """Time the scraper spent in backout (active size over its limit), summed over the samples."""
        return self.peaks.backout_seconds

    @property
    def active_size_ratio(self) -> float | None:
        """Peak scraper ``active_size`` relative to SCRAPER_SLOT_MAX_ACTIVE_SIZE (``None`` when the limit is unknown)."""
        return self.max_active_size / self.max_active_size_limit if self.max_active_size_limit else None

    @property
    def browser_pss(self) -> int | None:
        """Peak summed PSS of the browser process tree (``None`` without a browser)."""
        return self.browser.peak_pss_bytes if self.browser else None

    @property
    def max_open_pages(self) -> int:
        """Most browser pages open at once (0 without a browser)."""
        return self.browser.max_open_pages if self.browser else 0

    def to_json(self) -> dict[str, Any]:
        """The measured figures as report.json's ``result`` object (samples stay in samples.jsonl: only their count)."""
        return record_json(self)

    @classmethod
    def from_json(
        cls, data: Mapping[str, Any], *, samples: tuple[Sample, ...] = (), report_dir: Path | None = None
    ) -> CrawlResult:
        """Rebuild a result from report.json's ``result`` object (any schema_version 1 report, older ones too).

        report.json keeps the samples' count only: pass ``samples`` (read from samples.jsonl) to have them back.
        Figures computed from others (``DERIVED``: ``rss_growth``, ``verdict``, ``active_size_ratio``) are not read.
        """
        return record_from_json(cls, data, samples=samples, report_dir=report_dir)


def format_sites(sites: Iterable[GrowthSite]) -> str:
    """Render growth sites as the text of ``tracemalloc-diff.txt``."""
    lines = []
    for rank, site in enumerate(sites, 1):
        lines.append(
            f"#{rank} {site.location}: +{site.size_diff_bytes:,} B in {site.count_diff:+,} blocks"
            f" ({site.bytes_per_response:,.1f} B/response)"
        )
        lines.extend(f"    {frame}" for frame in site.traceback)
        lines.append("")
    return "\n".join(lines) or "no allocation site grew in every traced interval\n"
