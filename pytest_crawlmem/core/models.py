"""Frozen records shared by every module: samples, checkpoints, results (all sizes in bytes)."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from .units import format_size
from .verdicts import INCONCLUSIVE

SCHEMA_VERSION = 1


def json_value(value: Any) -> Any:
    """Return ``value`` with non-finite floats replaced by ``None`` (JSON has no NaN)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


@dataclass(frozen=True, slots=True)
class Sample:
    """One periodic reading of the crawl process, taken by the sampler thread."""

    t_seconds: float
    responses: int
    items: int
    rss_bytes: int
    traced_bytes: int | None = None
    scheduled: int | None = None
    inflight: int | None = None
    slot_queued: int | None = None
    active_size_bytes: int | None = None
    backout: bool | None = None
    disk_scheduled: int | None = None
    browser_rss_bytes: int | None = None  # summed RSS of the browser process tree (double counts shared pages)
    browser_pss_bytes: int | None = None  # summed PSS of the tree: its footprint (read less often; the last reading)
    browser_uss_bytes: int | None = None  # summed USS of the tree: memory only it holds
    open_pages: int | None = None
    open_contexts: int | None = None
    jobdir_bytes: int | None = None  # sum of the file sizes under JOBDIR (None without JOBDIR)
    media_cached: int | None = None  # entries in the media pipelines' per-spider cache (None without a media pipeline)
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
_SAMPLE_NAMES = frozenset(_SAMPLE_FIELDS)


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """Figures read at a drained point of the crawl (no download or callback in progress)."""

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
    cost_seconds: float = 0.0
    browser_pss_bytes: int | None = None  # browser tree, read after a renderer GC on every open page
    browser_uss_bytes: int | None = None
    open_pages: int | None = None
    unclosed_pages: int | None = None  # pages handed to callbacks (playwright_include_page) and still open
    open_contexts: int | None = None
    disk_scheduled: int = 0  # of ``scheduled``, the requests in JOBDIR's disk queue (pickled: no memory held)
    plugin_bytes: int = 0  # heap the plugin's closed attribution window left behind, measured when it closed

    def to_json(self) -> dict[str, Any]:
        """Return the checkpoint as a JSON-ready dict."""
        data = asdict(self)
        data["live_refs"] = dict(self.live_refs)
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Checkpoint:
        """Build a checkpoint from a dict written by :meth:`to_json` (unknown keys ignored, missing optional ones defaulted)."""
        values = {k: v for k, v in data.items() if k in _CHECKPOINT_FIELDS}
        values.setdefault("heap_bytes", None)
        values.setdefault("traced_bytes", None)
        values["tracer_bytes"] = values.get("tracer_bytes") or 0
        values["cost_seconds"] = values.get("cost_seconds") or 0.0
        values["drained"] = values.get("drained") is not False
        values["live_refs"] = {str(k): int(v) for k, v in dict(values.get("live_refs") or {}).items()}
        return cls(**values)


_CHECKPOINT_FIELDS = frozenset(f.name for f in fields(Checkpoint))


def _known(cls: type, data: Mapping[str, Any], *skip: str) -> dict[str, Any]:
    """The items of ``data`` that are fields of the dataclass ``cls`` (minus ``skip``): read back what to_json wrote."""
    names = {f.name for f in fields(cls)} - set(skip)
    return {k: v for k, v in data.items() if k in names}


@dataclass(frozen=True, slots=True)
class DroppedResponse:
    """A response the crawl lost on purpose or by failure, with the reason and size seen."""

    url: str
    reason: str
    size_bytes: int | None = None


@dataclass(frozen=True, slots=True)
class SizeDistribution:
    """Response body sizes of a crawl (after decompression): count and percentiles, in bytes.

    Percentiles come from a histogram with 16 buckets per octave: at most 6.25% high; ``max_bytes`` is exact.
    """

    count: int = 0
    p50_bytes: int | None = None
    p95_bytes: int | None = None
    p99_bytes: int | None = None
    max_bytes: int | None = None
    total_bytes: int = 0

    def to_json(self) -> dict[str, Any]:
        """Return the distribution as a JSON-ready dict."""
        return asdict(self)


@dataclass(frozen=True, slots=True)
class LatencyDistribution:
    """Download latency of a crawl's responses (``download_latency``): count and percentiles, in seconds."""

    count: int = 0
    p50_seconds: float | None = None
    p95_seconds: float | None = None
    p99_seconds: float | None = None
    max_seconds: float | None = None

    def to_json(self) -> dict[str, Any]:
        """Return the distribution as a JSON-ready dict."""
        return asdict(self)


@dataclass(frozen=True, slots=True)
class MaxsizeSuggestion:
    """A DOWNLOAD_MAXSIZE derived from this crawl's sizes, and what it would have dropped here."""

    download_maxsize: int
    would_drop: int
    rule: str = "next power of two at or above p99 x 2"

    def to_json(self) -> dict[str, Any]:
        """Return the suggestion as a JSON-ready dict."""
        return asdict(self)


@dataclass(frozen=True, slots=True)
class GrowthSite:
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

    def to_json(self) -> dict[str, Any]:
        """Return the site as a JSON-ready dict."""
        return {"location": self.location, "size_diff_bytes": self.size_diff_bytes, "count_diff": self.count_diff,
                "bytes_per_response": json_value(self.bytes_per_response), "traceback": list(self.traceback),
                "in_user_code": self.in_user_code}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> GrowthSite:
        """Rebuild a site from :meth:`to_json`'s dict (or ``asdict``'s)."""
        per = data.get("bytes_per_response")
        return cls(**{**_known(cls, data), "traceback": tuple(data.get("traceback") or ()),
                      "bytes_per_response": math.nan if per is None else per})


@dataclass(frozen=True, slots=True)
class Holder:
    """A container of the crawl (on the spider, a component or a module) that grew with the responses."""

    path: str  # "spider.kept -> list[907]"
    gained: int  # entries added over ``responses``
    responses: int
    line: str | None = None  # the line of the user's code that stores into it

    def describe(self) -> str:
        """``spider.kept -> list[907] gained 480 entries in 500 responses, stored at spiders/x.py:31``."""
        stored = f", stored at {self.line}" if self.line else ""
        return f"{self.path} gained {self.gained:,} entries in {self.responses:,} responses{stored}"


@dataclass(frozen=True, slots=True)
class RetentionPath:
    """Live Scrapy objects of one class after the crawl, and what keeps the oldest alive."""

    class_name: str
    count: int
    path: str | None

    def describe(self) -> str:
        """``12 HtmlResponse held by class spiders.Hoarder .kept -> list[12] [0] -> HtmlResponse``."""
        held = f"held by {self.path}" if self.path else "no module or class holds it within the search bounds"
        return f"{self.count:,} {self.class_name} alive after the crawl, {held}"


@dataclass(frozen=True, slots=True)
class Growth:
    """Growth per response and the evidence behind the verdict."""

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

    def to_json(self) -> dict[str, Any]:
        """Return the growth evidence as a JSON-ready dict."""
        return {
            "verdict": self.verdict,
            "reason": self.reason,
            "rule": self.rule,
            "per_response_bytes": json_value(self.per_response_bytes),
            "detectable_per_response_bytes": json_value(self.detectable_per_response_bytes),
            "responses_needed": self.responses_needed,
            "signal": self.signal,
            "deltas_per_response": [json_value(d) for d in self.deltas_per_response],
            "checkpoints": [c.to_json() for c in self.checkpoints],
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Growth:
        """Rebuild the evidence from :meth:`to_json`'s dict (a ``null`` delta was a non-finite one)."""
        return cls(
            verdict=str(data.get("verdict") or INCONCLUSIVE), reason=str(data.get("reason") or ""),
            rule=str(data.get("rule") or ""), per_response_bytes=data.get("per_response_bytes"),
            checkpoints=tuple(Checkpoint.from_json(c) for c in data.get("checkpoints") or ()),
            deltas_per_response=tuple(math.nan if d is None else d for d in data.get("deltas_per_response") or ()),
            signal=str(data.get("signal") or ""),
            detectable_per_response_bytes=data.get("detectable_per_response_bytes"),
            responses_needed=data.get("responses_needed"),
        )


@dataclass(frozen=True, slots=True)
class Peaks:
    """Peak values of the engine's queues over the samples."""

    max_scheduled: int = 0
    max_inflight: int = 0
    max_active_size_bytes: int = 0
    backout_seconds: float = 0.0
    max_disk_scheduled: int = 0
    max_jobdir_bytes: int | None = None  # None without JOBDIR
    max_media_cached: int | None = None  # None without a media pipeline


@dataclass(frozen=True, slots=True)
class BrowserSummary:
    """What the browser process tree (Playwright's driver and Chromium) used during a crawl or job."""

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

    def to_json(self) -> dict[str, Any]:
        """Return the summary as a JSON-ready dict."""
        data = asdict(self)
        data["pss_by_kind_at_peak"] = dict(self.pss_by_kind_at_peak)
        data["rss_overcount"] = json_value(self.rss_overcount)
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> BrowserSummary:
        """Rebuild the summary from :meth:`to_json`'s dict."""
        return cls(**{**_known(cls, data), "pss_by_kind_at_peak": dict(data.get("pss_by_kind_at_peak") or {})})


@dataclass(frozen=True, slots=True)
class MediaSummary:
    """A crawl's media pipelines (FilesPipeline, ImagesPipeline...): their in-memory cache, and what its failures keep alive.

    Read when the spider closes, while the pipelines still hold their per-spider cache (``SpiderInfo.downloaded``).
    """

    pipelines: tuple[str, ...] = ()
    cached_at_close: int = 0  # cache entries: one per media URL downloaded or failed
    failed_at_close: int = 0  # of which failures (Twisted Failures)
    retained: tuple[RetentionPath, ...] = ()  # Scrapy objects those failures keep alive, and through what

    def to_json(self) -> dict[str, Any]:
        """Return the summary as a JSON-ready dict."""
        return {
            "pipelines": list(self.pipelines),
            "cached_at_close": self.cached_at_close,
            "failed_at_close": self.failed_at_close,
            "retained": [{"class": r.class_name, "count": r.count, "path": r.path} for r in self.retained],
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> MediaSummary:
        """Rebuild the summary from :meth:`to_json`'s dict."""
        return cls(tuple(data.get("pipelines") or ()), int(data.get("cached_at_close") or 0),
                   int(data.get("failed_at_close") or 0), _retention(data.get("retained")))

# -- issue 19: screenshot accounting, parse amplification, the danger snapshot ----------------


@dataclass(frozen=True, slots=True)
class ShotMismatch:
    """A capture whose billing disagrees with its verdict (billed and not clean, or clean and not billed)."""

    url: str
    verdict: str
    billed: bool


@dataclass(frozen=True, slots=True)
class ShotSummary:
    """Captures of a screenshot API seen by a crawl (responses with ``X-Page-Verdict``): counts, billing, bytes.

    Responses replayed from Scrapy's HTTP cache are counted in ``replayed`` only: nobody bills them twice.
    """

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

    def to_json(self) -> dict[str, Any]:
        """Return the summary as a JSON-ready dict."""
        return {
            "captures": self.captures,
            "by_verdict": dict(self.by_verdict),
            "billed": self.billed,
            "billed_by_verdict": dict(self.billed_by_verdict),
            "billed_mismatch": self.billed_mismatch,
            "bytes_total": self.bytes_total,
            "max_bytes": self.max_bytes,
            "replayed": self.replayed,
            "unreadable_billing": self.unreadable_billing,
            "mismatches": [asdict(m) for m in self.mismatches],
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ShotSummary:
        """Rebuild the summary from :meth:`to_json`'s dict."""
        mismatches = tuple(ShotMismatch(**m) for m in data.get("mismatches") or ())
        return cls(**{**_known(cls, data, "mismatches"), "mismatches": mismatches})


@dataclass(frozen=True, slots=True)
class AmplifiedPage:
    """One response's parse: memory its callback held at most against the body size."""

    url: str
    body_bytes: int
    held_bytes: int
    ratio: float


@dataclass(frozen=True, slots=True)
class AmplificationSummary:
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

    def describe(self) -> str:
        """``p50 2.1x, p95 4.0x, max 11.3x (https://.../nested/1, 512.0 KiB body held 5.6 MiB)``."""
        if not self.count or self.max_ratio is None:
            return "no callback was measured"
        text = f"p50 {self.p50_ratio:.1f}x, p95 {self.p95_ratio:.1f}x, max {self.max_ratio:.1f}x"
        if self.worst:
            top = self.worst[0]
            text += f" ({top.url}: {top.body_bytes:,} B body, {top.held_bytes:,} B held)"
        return text

    def to_json(self) -> dict[str, Any]:
        """Return the summary as a JSON-ready dict."""
        data = asdict(self)
        data["worst"] = [asdict(page) for page in self.worst]
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> AmplificationSummary:
        """Rebuild the summary from :meth:`to_json`'s dict."""
        return cls(**{**_known(cls, data, "worst"), "worst": tuple(AmplifiedPage(**p) for p in data.get("worst") or ())})


@dataclass(frozen=True, slots=True)
class DangerSnapshot:
    """The crawl's state when RSS first crossed ``snapshot_at``, and what was allocated in the traced window after it."""

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

    def to_json(self) -> dict[str, Any]:
        """Return the snapshot as a JSON-ready dict (``danger.json``)."""
        data = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "sites"}
        data["live_refs"] = dict(self.live_refs)
        data["sites"] = [asdict(site) for site in self.sites]
        data["summary"] = self.describe()
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> DangerSnapshot:
        """Rebuild a snapshot from :meth:`to_json`'s dict (``danger.json``, or report.json's ``danger``)."""
        return cls(**_known(cls, data, "sites"), sites=tuple(GrowthSite.from_json(site) for site in data.get("sites", ())))


@dataclass(frozen=True)
class CrawlResult:
    """What one crawl measured; returned by the ``crawl`` fixture."""

    spider: str
    samples: tuple[Sample, ...]
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
    stopped_because: str = ""
    report_dir: Path | None = None
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
    shots: ShotSummary | None = None  # screenshot API captures (None when no response had X-Page-Verdict)
    parse_amplification: AmplificationSummary | None = None  # None when no callback was measured
    danger: DangerSnapshot | None = None  # None when RSS never crossed snapshot_at

    @property
    def verdict(self) -> str:
        """The growth verdict (``steady``, ``retained-objects``, ...)."""
        return self.growth.verdict

    @property
    def rss_growth(self) -> int:
        """RSS at the end of the crawl minus RSS at its start."""
        return self.end_rss - self.start_rss

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
        return {
            "spider": self.spider,
            "responses": self.responses,
            "items_scraped": self.items_scraped,
            "duration_seconds": self.duration_seconds,
            "finish_reason": self.finish_reason,
            "start_rss": self.start_rss,
            "end_rss": self.end_rss,
            "peak_rss": self.peak_rss,
            "rss_growth": self.rss_growth,
            "traced_peak": self.traced_peak,
            "max_scheduled": self.max_scheduled,
            "max_inflight": self.max_inflight,
            "max_active_size": self.max_active_size,
            "backout_seconds": self.peaks.backout_seconds,
            "verdict": self.verdict,
            "growth": self.growth.to_json(),
            "top_growth": [s.to_json() for s in self.top_growth],
            "dropped": [{"url": d.url, "reason": d.reason, "size_bytes": d.size_bytes} for d in self.dropped],
            "dropped_count": self.dropped_count,
            "warnsize_warnings": self.warnsize_warnings,
            "response_sizes": self.response_sizes.to_json(),
            "suggested_maxsize": self.suggested_maxsize.to_json() if self.suggested_maxsize else None,
            "max_active_size_limit": self.max_active_size_limit,
            "active_size_ratio": json_value(self.active_size_ratio),
            "max_disk_scheduled": self.max_disk_scheduled,
            "jobdir_disk": self.jobdir_disk,
            "max_media_cached": self.max_media_cached,
            "media": self.media.to_json() if self.media else None,
            "scheduled_per_response": json_value(self.scheduled_per_response),
            "retries": self.retries,
            "retries_max_reached": self.retries_max_reached,
            "download_latency": self.download_latency.to_json(),
            "browser": self.browser.to_json() if self.browser else None,
            "replay_hits": self.replay_hits,
            "replay_misses": self.replay_misses,
            "replay_missed_urls": list(self.replay_missed_urls),
            "replay_copies": self.replay_copies,
            "status_counts": {str(k): v for k, v in sorted(self.status_counts.items())},
            "live_refs": dict(self.live_refs),
            "samples": len(self.samples),
            "errors": list(self.errors),
            "retention": [{"class": r.class_name, "count": r.count, "path": r.path} for r in self.retention],
            "holders": [{"path": h.path, "gained": h.gained, "responses": h.responses, "line": h.line} for h in self.holders],
            "stats": dict(self.stats),
            "shots": self.shots.to_json() if self.shots else None,
            "parse_amplification": self.parse_amplification.to_json() if self.parse_amplification else None,
            "danger": self.danger.to_json() if self.danger else None,
        }

    @classmethod
    def from_json(
        cls, data: Mapping[str, Any], *, samples: tuple[Sample, ...] = (), report_dir: Path | None = None
    ) -> CrawlResult:
        """Rebuild a result from report.json's ``result`` object (any schema_version 1 report, older ones too).

        report.json keeps the samples' count only: pass ``samples`` (read from samples.jsonl) to have them back.
        Figures computed from others (``rss_growth``, ``verdict``, ``active_size_ratio``) are not read.
        """
        def made(key: str, build: Any) -> Any:
            value = data.get(key)
            return build(value) if isinstance(value, Mapping) else None

        suggested = data.get("suggested_maxsize")
        return cls(
            spider=str(data.get("spider") or ""),
            samples=samples,
            start_rss=int(data.get("start_rss") or 0),
            end_rss=int(data.get("end_rss") or 0),
            peak_rss=int(data.get("peak_rss") or 0),
            traced_peak=data.get("traced_peak"),
            responses=int(data.get("responses") or 0),
            items_scraped=int(data.get("items_scraped") or 0),
            duration_seconds=float(data.get("duration_seconds") or 0.0),
            finish_reason=str(data.get("finish_reason") or ""),
            peaks=Peaks(
                max_scheduled=int(data.get("max_scheduled") or 0), max_inflight=int(data.get("max_inflight") or 0),
                max_active_size_bytes=int(data.get("max_active_size") or 0),
                backout_seconds=float(data.get("backout_seconds") or 0.0),
                max_disk_scheduled=int(data.get("max_disk_scheduled") or 0),
                max_jobdir_bytes=data.get("jobdir_disk"), max_media_cached=data.get("max_media_cached"),
            ),
            growth=Growth.from_json(data.get("growth") or {}),
            dropped=tuple(DroppedResponse(**d) for d in data.get("dropped") or ()),
            status_counts={int(k): int(v) for k, v in dict(data.get("status_counts") or {}).items()},
            top_growth=tuple(GrowthSite.from_json(s) for s in data.get("top_growth") or ()),
            live_refs=dict(data.get("live_refs") or {}),
            retention=_retention(data.get("retention")),
            holders=tuple(Holder(**h) for h in data.get("holders") or ()),
            stats=dict(data.get("stats") or {}),
            errors=tuple(data.get("errors") or ()),
            report_dir=report_dir,
            dropped_count=int(data.get("dropped_count") or 0),
            warnsize_warnings=int(data.get("warnsize_warnings") or 0),
            response_sizes=SizeDistribution(**_known(SizeDistribution, data.get("response_sizes") or {})),
            suggested_maxsize=MaxsizeSuggestion(**suggested) if isinstance(suggested, Mapping) else None,
            max_active_size_limit=int(data.get("max_active_size_limit") or 0),
            scheduled_per_response=data.get("scheduled_per_response"),
            retries=int(data.get("retries") or 0),
            retries_max_reached=int(data.get("retries_max_reached") or 0),
            download_latency=LatencyDistribution(**_known(LatencyDistribution, data.get("download_latency") or {})),
            browser=made("browser", BrowserSummary.from_json),
            media=made("media", MediaSummary.from_json),
            replay_hits=int(data.get("replay_hits") or 0),
            replay_misses=int(data.get("replay_misses") or 0),
            replay_missed_urls=tuple(data.get("replay_missed_urls") or ()),
            replay_copies=int(data.get("replay_copies") or 0),
            shots=made("shots", ShotSummary.from_json),
            parse_amplification=made("parse_amplification", AmplificationSummary.from_json),
            danger=made("danger", DangerSnapshot.from_json),
        )


def _retention(records: Any) -> tuple[RetentionPath, ...]:
    """Retention paths from their JSON form (``{"class", "count", "path"}``)."""
    return tuple(RetentionPath(str(r.get("class")), int(r.get("count") or 0), r.get("path")) for r in records or ())


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
