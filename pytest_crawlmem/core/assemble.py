"""The one assembly of a CrawlResult from a run's recording and facts, and the one judgement of its growth (pure).

Every path builds its result here: an in-process crawl from the extension's :class:`Measurement`
(:func:`crawl_result`), a browser job (``browserjob``), an isolated crawl killed before it wrote its result
(``isolated``), a bare ``samples.jsonl`` read back (``loading``) and a cluster as one crawl (``cluster.summary_of``).
Runs in any process; imports neither pytest nor Scrapy.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import Field, dataclass, fields, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict

from pytest_crawlmem.core import verdicts
from pytest_crawlmem.core.declared import Declared
from pytest_crawlmem.core.defaults import DEFAULT_LEAK_PER_RESPONSE
from pytest_crawlmem.core.dropped import MEDIA_FAILED
from pytest_crawlmem.core.fingerprint import CodeReader, fingerprint_of, leak_basis
from pytest_crawlmem.core.growth import FIXES, Analysis, analyze
from pytest_crawlmem.core.libleaks import VersionReader, known_leak
from pytest_crawlmem.core.measurement import Measurement
from pytest_crawlmem.core.models import (
    AmplificationSummary,
    BrowserSummary,
    Checkpoint,
    CrawlResult,
    DangerSnapshot,
    DroppedResponse,
    Growth,
    GrowthSite,
    Holder,
    LatencyDistribution,
    MaxsizeSuggestion,
    MediaSummary,
    Peaks,
    RetentionPath,
    Sample,
    ShotSummary,
    SizeDistribution,
)
from pytest_crawlmem.core.replay_copies import CopyCount, HostPattern
from pytest_crawlmem.core.setaside import judge_declared, leak_evidence_of, ordered_holders
from pytest_crawlmem.core.sites import KeptEvidence, is_request_creation, leak_native_share, native_sentence
from pytest_crawlmem.core.tracebuild import build_trace

if TYPE_CHECKING:  # typing.Unpack is 3.11+; annotations only (the package supports 3.10)
    from typing_extensions import Unpack


@dataclass(frozen=True)
class RunFacts:
    """What a run knows besides its samples and checkpoints (bytes and seconds)."""

    spider: str
    duration_seconds: float
    finish_reason: str
    start_rss: int
    end_rss: int
    peak_rss: int
    responses: int
    items_scraped: int
    interval_seconds: float  # the sampling interval (the time in backout is counted in samples)
    traced_peak: int | None = None
    stopped_because: str = ""
    errors: tuple[str, ...] = ()
    report_dir: Path | None = None


class StreamedFacts(TypedDict, total=False):
    """The :class:`RunFacts` a path that read a stream knows besides it (each the field's type)."""

    stopped_because: str
    errors: tuple[str, ...]
    report_dir: Path | None


def stream_facts(
    spider: str, samples: Sequence[Sample], checkpoints: Sequence[Checkpoint], *, finish_reason: str,
    interval_seconds: float, duration_seconds: float | None = None, **facts: Unpack[StreamedFacts],
) -> RunFacts:
    """The facts of a run known only from what it streamed: start and end at its first and last checkpoint (else
    sample), the peak the highest reading (not the exact peak), the counts and duration of its last readings."""
    start = checkpoints[0].rss_bytes if checkpoints else (samples[0].rss_bytes if samples else 0)
    end = checkpoints[-1].rss_bytes if checkpoints else (samples[-1].rss_bytes if samples else 0)
    if duration_seconds is None:
        duration_seconds = max([s.t_seconds for s in samples] + [c.t_seconds for c in checkpoints], default=0.0)
    return RunFacts(
        spider=spider,
        duration_seconds=duration_seconds,
        finish_reason=finish_reason,
        start_rss=start,
        end_rss=end,
        peak_rss=max([s.rss_bytes for s in samples] + [c.rss_bytes for c in checkpoints], default=0),
        responses=max([s.responses for s in samples] + [c.responses for c in checkpoints], default=0),
        items_scraped=max((s.items for s in samples), default=0),
        interval_seconds=interval_seconds,
        traced_peak=max((s.traced_bytes for s in samples if s.traced_bytes is not None), default=None),
        **facts,
    )


def judge(
    checkpoints: Sequence[Checkpoint],
    samples: Sequence[Sample],
    *,
    leak_per_response: int | None,
    evidence: str | Callable[[Growth], str] = "",
    hint: str = "",
    kept: KeptEvidence | None = None,
    expected_growth: Declared = (),
    **analysis: Unpack[Analysis],
) -> Growth:
    """The growth verdict of a run, at the test's ``leak_per_response`` (the default when ``None``).

    ``evidence`` (what holds a leak) is added to a ``retained-objects`` reason, with the native share of the growth
    when the heap grew well beyond what the attribution window traced (``kept``); ``hint`` (how to get a judgement)
    to a ``too-few-checkpoints`` one; then the verdict's fix. ``analysis`` goes to :func:`growth.analyze`.
    ``expected_growth``: holders declared by design, set aside (core/setaside.py); ``evidence`` may then be a function
    of the verdict (which holders it may name depends on which declared ones grew beyond their declaration).
    """
    threshold = leak_per_response or DEFAULT_LEAK_PER_RESPONSE
    growth = judge_declared(checkpoints, expected_growth,
                            lambda points: analyze(points, samples, leak_per_response=threshold, **analysis))
    if callable(evidence):
        evidence = evidence(growth)
    if growth.verdict == verdicts.RETAINED_OBJECTS and (evidence or kept):
        native = ""
        if kept is not None and growth.signal in ("heap", "rss"):
            native = native_sentence(leak_native_share(growth.per_response_bytes, kept), kept)
        growth = replace(growth, reason=growth.reason + evidence + native)
    if growth.rule == "too-few-checkpoints" and hint:
        growth = replace(growth, reason=growth.reason + hint)
    if growth.verdict in FIXES:
        growth = replace(growth, reason=f"{growth.reason}. Fix: {FIXES[growth.verdict]}")
    return growth


class Details(TypedDict, total=False):
    """The CrawlResult fields only some paths measure, as :func:`assemble` takes them (each one the field's type)."""

    dropped: tuple[DroppedResponse, ...]
    status_counts: Mapping[int, int]
    top_growth: tuple[GrowthSite, ...]
    live_refs: Mapping[str, int]
    retention: tuple[RetentionPath, ...]
    holders: tuple[Holder, ...]
    stats: Mapping[str, Any]
    dropped_count: int
    warnsize_warnings: int
    response_sizes: SizeDistribution
    suggested_maxsize: MaxsizeSuggestion | None
    max_active_size_limit: int
    scheduled_per_response: float | None
    retries: int
    retries_max_reached: int
    download_latency: LatencyDistribution
    browser: BrowserSummary | None
    media: MediaSummary | None
    replay_hits: int
    replay_misses: int
    replay_missed_urls: tuple[str, ...]
    replay_copies: int
    replay_per_copy: tuple[CopyCount, ...]
    replay_rules: tuple[HostPattern, ...]
    shots: ShotSummary | None
    parse_amplification: AmplificationSummary | None
    danger: DangerSnapshot | None
    isolated: bool
    notes: tuple[str, ...]
    earlier_crawls: int | None


def assemble(
    facts: RunFacts, samples: Sequence[Sample], checkpoints: Sequence[Checkpoint], growth: Growth, *,
    peaks: Peaks | None = None, read_code: CodeReader | None = None, version_of: VersionReader | None = None,
    **details: Unpack[Details],
) -> CrawlResult:
    """The CrawlResult of a run: its facts (each :class:`RunFacts` field of the result's name), samples, queue peaks
    (read from the samples unless given) and verdict, plus what only its path measures (``details``, such as
    ``dropped`` or ``browser``)."""
    samples = tuple(samples)
    growth = fingerprinted(growth, facts.spider, details, read_code, version_of)
    return CrawlResult(
        **(_same_named(facts, _RESULT_FIELDS) | {"duration_seconds": round(facts.duration_seconds, 4)}),
        samples=samples,
        peaks=peaks if peaks is not None else peaks_of(samples, checkpoints, facts.interval_seconds),
        growth=growth,
        **details,
    )


def fingerprinted(
    growth: Growth, spider: str, details: Details, read_code: CodeReader | None = None,
    version_of: VersionReader | None = None,
) -> Growth:
    """``growth`` with its leak's fingerprint (core/fingerprint.py; ``read_code`` reads the keeping code), its trace
    (core/tracebuild.py) and the known library leak it is (core/libleaks.py; ``version_of`` reads a library's installed
    version), unchanged when its verdict is not a leak or it already has a fingerprint (read back from report.json: the
    source and the libraries may have changed since)."""
    if not verdicts.is_leak(growth.verdict) or growth.fingerprint:
        return growth
    holders, retention, sites = details.get("holders", ()), details.get("retention", ()), details.get("top_growth", ())
    basis = leak_basis(growth.verdict, spider, holders=holders, retention=retention, sites=sites, read=read_code)
    trace = build_trace(basis, holders=holders, retention=retention, sites=sites)
    known = known_leak(holders=holders, retention=retention, sites=sites, media=details.get("media"),
                       version_of=version_of)
    return replace(growth, fingerprint=fingerprint_of(basis), fingerprint_basis=basis, leak_trace=trace or None,
                   known_leak=known)


#: The fields of a CrawlResult, and the details only some paths measure: what a same-named field is copied into.
_RESULT_FIELDS = frozenset(f.name for f in fields(CrawlResult))
_DETAILS = frozenset(Details.__optional_keys__)
_FACTS = frozenset(f.name for f in fields(RunFacts))


def _same_named(record: object, names: frozenset[str]) -> dict[str, Any]:
    """The dataclass fields of ``record`` whose names are in ``names``, by name."""
    return {f.name: getattr(record, f.name) for f in fields(record) if f.name in names}  # type: ignore[arg-type]


def crawl_result(
    measured: Measurement, *, spider: str, duration_seconds: float, interval_seconds: float, stats: Mapping[str, Any],
    leak_per_response: int | None = None, max_active_size_limit: int = 0, replay_copies: int = 0,
    report_dir: Path | None = None, read_code: CodeReader | None = None, version_of: VersionReader | None = None,
    expected_growth: Declared = (),
) -> CrawlResult:
    """The CrawlResult of a measured Scrapy crawl: its :class:`Measurement` judged and assembled, with Scrapy's
    ``stats`` (status counts, retries), the crawl's SCRAPER_SLOT_MAX_ACTIVE_SIZE and the replay's copies (0: none).

    Every field of the measurement named like a fact or a detail of the result is copied by name; what is left here is
    what the crawl's settings and stats add.
    """
    samples, checkpoints, retention = measured.samples, measured.checkpoints, measured.retention

    def evidence(growth: Growth) -> str:  # holders within their declaration are not what a leak verdict names
        holders, sites = leak_evidence_of(measured.holders, measured.top_growth, growth.declared)
        return leak_evidence(sites, retention, holders, measured.media)

    growth = judge(
        checkpoints,
        samples,
        leak_per_response=leak_per_response,
        evidence=evidence,
        expected_growth=expected_growth,
        kept=measured.kept,
        max_active_size=max_active_size_limit,
        response_sizes=measured.response_sizes,
        media=measured.media,
        media_failure_body_bytes=media_failure_body_bytes(measured.dropped),
        held_after_close={r.class_name: r.count for r in retention if r.path},
        min_interval=measured.checkpoint_min_responses,
        download_excess=measured.download_excess,
        responses_per_copy=max(1, round(measured.responses / replay_copies)) if replay_copies else None,
    )
    facts = RunFacts(spider=spider, duration_seconds=duration_seconds, interval_seconds=interval_seconds,
                     report_dir=report_dir, **_same_named(measured, _FACTS))
    details: Details = {
        **_same_named(measured, _DETAILS),  # type: ignore[typeddict-item]
        "status_counts": status_counts(stats), "stats": stats, "max_active_size_limit": max_active_size_limit,
        "scheduled_per_response": scheduled_per_response(samples, checkpoints),
        "retries": int(stats.get("retry/count") or 0), "retries_max_reached": int(stats.get("retry/max_reached") or 0),
        "replay_copies": replay_copies, "holders": ordered_holders(measured.holders, growth.declared),
    }
    return assemble(facts, samples, checkpoints, growth, read_code=read_code, version_of=version_of, **details)


def peaks_of(samples: Sequence[Sample], checkpoints: Sequence[Checkpoint], interval_seconds: float) -> Peaks:
    """Return the queues' peaks over ``samples`` (and the checkpoints, for a field that names a checkpoint field)."""
    return Peaks(
        backout_seconds=round(sum(s.span for s in samples if s.backout) * interval_seconds, 3),  # span: timeline.py
        **{f.name: _peak(f, samples, checkpoints) for f in fields(Peaks) if "sample" in f.metadata},  # models.peak_of
    )


def _peak(spec: Field[Any], samples: Sequence[Sample], checkpoints: Sequence[Checkpoint]) -> Any:
    """The largest reading of a :class:`Peaks` field's sample (and checkpoint) field; its default when none was read."""
    readings = [getattr(s, spec.metadata["sample"]) for s in samples]
    if spec.metadata["checkpoint"]:
        readings += [getattr(c, spec.metadata["checkpoint"]) for c in checkpoints]
    return max((v for v in readings if v is not None), default=spec.default)


def scheduled_per_response(samples: Sequence[Sample], checkpoints: Sequence[Checkpoint] = ()) -> float | None:
    """How fast the scheduler's backlog grew: requests added per response, from the crawl's start to the backlog's peak.

    The start is the opening checkpoint (else the first sample); the peak is over samples and checkpoints.
    """
    readings = [(c.responses, c.scheduled) for c in checkpoints]
    readings += [(s.responses, s.scheduled) for s in samples if s.scheduled is not None]
    if not readings:
        return None
    start = (checkpoints[0].responses, checkpoints[0].scheduled) if checkpoints else readings[0]
    peak = max(readings, key=lambda r: (r[1], -r[0]))
    if peak[0] <= start[0]:
        return 0.0
    return round((peak[1] - start[1]) / (peak[0] - start[0]), 3)


def status_counts(stats: Mapping[str, Any]) -> dict[int, int]:
    """Response counts by HTTP status from Scrapy's stats (every attempt: ``downloader/response_status_count/*``)."""
    prefix = "downloader/response_status_count/"
    return {int(k[len(prefix):]): int(v) for k, v in stats.items() if k.startswith(prefix) and k[len(prefix):].isdigit()}


def media_failure_body_bytes(dropped: Sequence[DroppedResponse]) -> float:
    """Mean body size of the failed media downloads that had a response (0 when none had)."""
    sizes = [d.size_bytes for d in dropped if d.reason.startswith(MEDIA_FAILED) and d.size_bytes is not None]
    return sum(sizes) / len(sizes) if sizes else 0.0


def leak_evidence(
    sites: Sequence[GrowthSite], retention: Sequence[RetentionPath], holders: Sequence[Holder] = (),
    media: MediaSummary | None = None,
) -> str:
    """What keeps a leak, for its reason ('' when nothing is known): the line storing into a growing container first
    (with the container), then the allocation sites as evidence, a retention path, the media pipelines' cached failures.

    ``sites`` come led by the keeping line when one is known (``sites.keeping_first``); without one the top growth site
    is named first.
    """
    reason = ""
    holder = next((h for h in holders if h.line), holders[0] if holders else None)
    line = holder.line if holder is not None else None
    if holder is not None:
        reason += f"; held by {holder.describe()}"
    named = [s for s in sites[:1] if s.size_diff_bytes > 0 or s.location != line]  # the keeping line's site leads
    allocated = [s for s in sites[1:] if line is not None and s.location != line][:1]
    held_per = holder.entries_bytes_per_response if holder is not None and line is not None else None
    own_per = sites[0].bytes_per_response if sites and sites[0].location == line else 0.0
    if holder is not None and held_per is not None and held_per > own_per:
        # the storing line's own growth is the container's (a list's slots); what it keeps was allocated elsewhere
        allocator = next((s for s in sites[1:] if s.location != line and not is_request_creation(s)), None)
        at = f" allocated at {allocator.location}" if allocator is not None else ""
        reason += f"; top growth {line}: the {_kind_of(holder)} entries keep {held_per / 1024:,.1f} KiB/response{at}"
        named, allocated = [], []
    for label, site in [("top growth", s) for s in named] + [("allocated at", s) for s in allocated]:
        where = "" if site.in_user_code else " (no frame of your code on the allocating stack)"
        reason += (f"; {label} {site.location}{where} +{site.size_diff_bytes / 1024:,.1f} KiB"
                   f" ({site.bytes_per_response:,.0f} B/response)")
    held = next((r for r in retention if r.path), None)
    if held is not None:
        reason += f"; {held.describe()}"
    return reason + media_evidence(media)


def _kind_of(holder: Holder) -> str:
    """``list's`` of ``spider.kept -> list[907]``, ``lists'`` of ``spider.groups[…]['items'] -> 14 lists[101]``."""
    shown = holder.path.rpartition(" -> ")[2].partition("[")[0].split()
    kind = shown[-1] if shown else "container"
    return f"{kind}'" if kind.endswith("s") and len(shown) > 1 else f"{kind}'s"


def media_evidence(summary: MediaSummary | None) -> str:
    """The part of a leak verdict's reason naming what the media pipelines' cached failures keep alive ('' if nothing)."""
    if summary is None or not summary.retained:
        return ""
    counts = " and ".join(f"{r.count:,} {r.class_name}" for r in summary.retained)
    path = next((r.path for r in summary.retained if r.path), "")
    return (
        f"; {summary.failed_at_close:,} failed media downloads keep {counts} alive until the crawl ends"
        f" (Scrapy caches each failure with its traceback): {path}"
    )
