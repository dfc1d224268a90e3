"""The crawl's status while it runs: one log line, ``crawlmem/status/*`` stats, the figures Prometheus reads.

Runs in the crawl process. :func:`read_status` builds a :class:`Status` from the extension's counters
and Scrapy's stats, from the reactor thread (status lines, stats) or the metrics server's thread (a
scrape: every read there is of an int, a copied dict or a sorted copy of a histogram's keys, so it
never sees a half-made value). :class:`StatusTicker` emits a status every ``interval_seconds`` on the
reactor, so the stats it writes never race Scrapy's own.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pytest_crawlmem.core.assemble import status_counts
from pytest_crawlmem.core.distribution import Histogram
from pytest_crawlmem.core.units import format_size

logger = logging.getLogger("pytest_crawlmem.extension")

STATUS_PREFIX = "crawlmem/status/"


@dataclass(frozen=True)
class Status:
    """The crawl's figures now (bytes, seconds, counts)."""

    t_seconds: float
    rss_bytes: int
    peak_rss_bytes: int
    scheduled: int | None
    inflight: int | None
    active_size_bytes: int | None
    backout: bool | None
    responses: int
    items: int
    retries: int
    status_counts: Mapping[int, int] = field(default_factory=dict)
    response_p50_bytes: int | None = None
    response_p95_bytes: int | None = None
    response_max_bytes: int | None = None
    latency_p50_seconds: float | None = None
    latency_p95_seconds: float | None = None
    jobdir_bytes: int | None = None
    stream_bytes: int = 0
    checkpoints: int = 0
    checkpoint_pause_max_seconds: float = 0.0
    checkpoint_pause_total_seconds: float = 0.0
    timeline_samples: int = 0
    timeline_span: int = 1
    self_cpu_seconds: float = 0.0
    process_cpu_seconds: float = 0.0
    undrained_checkpoints: int = 0
    verdict: str = ""  # the verdict of the drained checkpoints so far ("" before one was judged)
    growth_per_response_bytes: float | None = None
    leak_suspected: bool | None = None
    decided_by: str = ""  # the evidence the verdict rests on (growth.decided_by: memory, live-objects, plateau, ...)
    browser_pss_bytes: int | None = None  # the last PSS reading of the browser tree (browser crawls)
    open_pages: int | None = None
    open_contexts: int | None = None

    def line(self) -> str:
        """The status as one log line of ``name=value`` tokens (sizes in core.units' units, times in ms)."""
        codes = ",".join(f"{code}:{n}" for code, n in sorted(self.status_counts.items())) or "-"
        return (
            f"crawlmem: rss={_size(self.rss_bytes)} peak={_size(self.peak_rss_bytes)}"
            f" scheduled={self.scheduled} inflight={self.inflight} active={_size(self.active_size_bytes)}"
            f" backout={self.backout} items={self.items} responses={self.responses} retries={self.retries}"
            f" status={codes} size_p50={_size(self.response_p50_bytes)} size_p95={_size(self.response_p95_bytes)}"
            f" size_max={_size(self.response_max_bytes)} latency_p50={_ms(self.latency_p50_seconds)}"
            f" latency_p95={_ms(self.latency_p95_seconds)} jobdir={_size(self.jobdir_bytes)}"
            f" stream={_size(self.stream_bytes)} checkpoints={self.checkpoints}"
            f" pause_max={self.checkpoint_pause_max_seconds * 1000:.0f}ms"
            f" timeline={self.timeline_samples}x{self.timeline_span}"
            + self._judged() + self._browser()
        )

    def _judged(self) -> str:
        if not self.verdict:
            return ""
        per_response = self.growth_per_response_bytes
        growth = "" if per_response is None else f" growth={_size(round(per_response))}/response"
        # which evidence decided, so a memory figure beside a verdict the live objects decided is read as what it is
        by = f" by={self.decided_by}" if self.decided_by else ""
        return f" verdict={self.verdict}{by}{growth}"

    def _browser(self) -> str:
        if self.browser_pss_bytes is None and self.open_pages is None:
            return ""
        pss = _size(self.browser_pss_bytes)
        return f" browser_pss={pss} pages={self.open_pages} contexts={self.open_contexts}"

    def stats(self) -> dict[str, int | float]:
        """The status as Scrapy stats (``crawlmem/status/<figure>``; unknown figures left out)."""
        values: dict[str, int | float | bool | None] = {
            "rss_bytes": self.rss_bytes, "scheduled": self.scheduled, "inflight": self.inflight,
            "active_size_bytes": self.active_size_bytes, "responses": self.responses, "items": self.items,
            "retries": self.retries, "response_p50_bytes": self.response_p50_bytes,
            "response_p95_bytes": self.response_p95_bytes, "response_max_bytes": self.response_max_bytes,
            "latency_p50_seconds": self.latency_p50_seconds, "latency_p95_seconds": self.latency_p95_seconds,
            "jobdir_bytes": self.jobdir_bytes, "stream_bytes": self.stream_bytes,
            "timeline_samples": self.timeline_samples, "timeline_span": self.timeline_span,
            "self_cpu_seconds": round(self.self_cpu_seconds, 4), "process_cpu_seconds": round(self.process_cpu_seconds, 3),
            "browser_pss_bytes": self.browser_pss_bytes, "open_pages": self.open_pages, "open_contexts": self.open_contexts,
        }
        return {STATUS_PREFIX + k: v for k, v in values.items() if v is not None and not isinstance(v, bool)}


def _size(value: int | None) -> str:
    """A size in the status line: ``15.0KiB``, ``512B``, ``1.2GiB`` (core.units' units, one token: no space)."""
    return "-" if value is None else format_size(value).replace(" ", "")


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value * 1000:.0f}ms"


def _seconds(latency_us: Histogram, q: float) -> float | None:
    value = latency_us.percentile(q)
    return None if value is None else value / 1_000_000


def read_status(ext: Any) -> Status:
    """The status of the crawl ``ext`` (a CrawlMemExtension) measures, now."""
    recording = ext.recording
    last = recording.last_sample
    crawler = ext.crawler
    stats: dict[str, Any] = dict(crawler.stats.get_stats()) if crawler is not None else {}
    sizes: Histogram = ext.response_sizes
    latency: Histogram = ext.latency_us
    cpu = os.times()
    return Status(
        t_seconds=round(time.monotonic() - ext.started_at, 3) if ext.started_at else 0.0,
        rss_bytes=last.rss_bytes if last else ext.start_rss,
        peak_rss_bytes=max(recording.peak_rss_bytes, ext.start_rss),
        scheduled=last.scheduled if last else None,
        inflight=last.inflight if last else None,
        active_size_bytes=last.active_size_bytes if last else None,
        backout=last.backout if last else None,
        responses=ext.responses,
        items=ext.items,
        retries=int(stats.get("retry/count") or 0),
        status_counts=status_counts(stats),
        response_p50_bytes=sizes.percentile(50),
        response_p95_bytes=sizes.percentile(95),
        response_max_bytes=sizes.max_value if sizes.count else None,
        latency_p50_seconds=_seconds(latency, 50),
        latency_p95_seconds=_seconds(latency, 95),
        jobdir_bytes=last.jobdir_bytes if last else None,
        stream_bytes=recording.stream_bytes,
        checkpoints=recording.timeline.checkpoints_added,
        checkpoint_pause_max_seconds=recording.checkpoint_pause_max_seconds,
        checkpoint_pause_total_seconds=recording.checkpoint_pause_total_seconds,
        timeline_samples=len(recording.timeline),
        timeline_span=recording.timeline.span,
        self_cpu_seconds=ext.sampler_cpu_seconds + (ext.ticker.cpu_seconds if ext.ticker is not None else 0.0)
        + getattr(ext, "checkpoint_cpu_seconds", 0.0),
        process_cpu_seconds=cpu.user + cpu.system,
        undrained_checkpoints=ext.undrained_checkpoints,
        verdict=ext.leaks.verdict,
        growth_per_response_bytes=ext.leaks.per_response_bytes,
        decided_by=ext.leaks.decided_by,
        leak_suspected=ext.leaks.leak_suspected if ext.leaks.verdict else None,
        browser_pss_bytes=ext.last_browser_pss_bytes,
        open_pages=last.open_pages if last else None,
        open_contexts=last.open_contexts if last else None,
    )


class StatusTicker:
    """Logs the status line and writes the status stats every ``interval_seconds`` (reactor thread)."""

    def __init__(self, ext: Any, interval_seconds: float) -> None:
        self.ext = ext
        self.interval_seconds = interval_seconds
        self.emitted = 0
        self.cpu_seconds = 0.0  # this thread's CPU time spent building and emitting statuses
        self._call: Any = None

    def start(self) -> None:
        """Start ticking (no-op when the interval is 0)."""
        if not self.interval_seconds:
            return
        from twisted.internet import task

        self._call = task.LoopingCall(self.emit)
        self._call.start(self.interval_seconds, now=False)

    def emit(self, *, log: bool = True) -> Status | None:
        """Emit one status; a failure is recorded, never raised (a LoopingCall that raises stops for good)."""
        started = time.thread_time()
        try:
            status = read_status(self.ext)
            if log:
                logger.info(status.line())
            crawler = self.ext.crawler
            if crawler is not None:
                for key, value in status.stats().items():
                    crawler.stats.set_value(key, value)
            self.emitted += 1
            return status
        except Exception as exc:
            self.ext.recording.add_error(f"status failed: {exc!r}")
            return None
        finally:
            self.cpu_seconds += time.thread_time() - started

    def stop(self) -> None:
        """Stop ticking."""
        if self._call is not None and self._call.running:
            self._call.stop()
        self._call = None
