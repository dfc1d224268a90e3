"""The Scrapy extension that measures a crawl: samples, drained checkpoints, exact peak.

Enable it in any crawl (tests or production) with::

    EXTENSIONS = {"pytest_crawlmem.extension.CrawlMemExtension": 0}
    CRAWLMEM_ENABLED = True

Runs in the crawl process: a sampler thread reads RSS and the engine's queues every
``CRAWLMEM_INTERVAL_SECONDS`` (a thread, so a callback that blocks the reactor cannot
hide a peak); drained checkpoints run on the reactor.
"""

from __future__ import annotations

import gc
import logging
import sys
import threading
import time
import tracemalloc
from pathlib import Path
from typing import Any, cast

from scrapy import signals
from scrapy.exceptions import NotConfigured

from . import probes
from .distribution import Histogram
from .dropped import DropLedger
from .growth import DEFAULT_LEAK_PER_RESPONSE, next_checkpoint_at, suspicious
from .models import Checkpoint, GrowthSite, Sample
from .recording import Recording
from .snapshots import growing_sites, take_snapshot

logger = logging.getLogger(__name__)

_DRAIN_POLL_SECONDS = 0.005


class CrawlMemExtension:
    """Measures one crawl; the result is left in :attr:`recording` and :attr:`summary`."""

    def __init__(
        self,
        crawler: Any,
        *,
        interval_seconds: float = 0.1,
        jsonl_path: Path | None = None,
        checkpoints: bool = True,
        checkpoint_min_responses: int = 100,
        drain_timeout_seconds: float = 5.0,
        tracemalloc_frames: int = 0,
        log_interval_seconds: float = 0.0,
        attribution_frames: int = 8,
        attribution_responses: int = 100,
        kill_at_bytes: int = 0,
        timeout_seconds: float = 0.0,
        leak_per_response: int = DEFAULT_LEAK_PER_RESPONSE,
    ) -> None:
        self.crawler = crawler
        self.interval_seconds = interval_seconds
        self.checkpoints_enabled = checkpoints
        self.checkpoint_min_responses = checkpoint_min_responses
        self.drain_timeout_seconds = drain_timeout_seconds
        self.tracemalloc_frames = tracemalloc_frames
        self.log_interval_seconds = log_interval_seconds
        self.attribution_frames = attribution_frames
        self.attribution_responses = attribution_responses
        self.kill_at_bytes = kill_at_bytes
        self.timeout_seconds = timeout_seconds
        self.stopped_because = ""  # why the harness stopped the crawl, if it did
        self._timeout_call: Any = None
        self.leak_per_response = leak_per_response
        self.growth_sites: list[GrowthSite] = []
        self._window: list[tracemalloc.Snapshot | None] = []
        self._window_responses: list[int] = []
        self._window_done = False
        self._window_started_tracing = False
        self._traced_whole = False
        self.recording = Recording(jsonl_path)
        self.epoch = probes.Epoch.now()  # Scrapy objects created before the crawl are not its own
        self.responses = 0
        self.items = 0
        self.ledger = DropLedger()  # filled by pytest_crawlmem.middleware's downloader middlewares
        self.response_sizes = Histogram()  # body bytes (after decompression) of every response
        self.latency_us = Histogram()  # download_latency of every response, in microseconds
        self.start_rss = 0
        self.end_rss = 0
        self.peak_rss = 0
        self.traced_peak: int | None = None
        self.started_at = 0.0
        self.finish_reason = ""
        self._exact_peak = False
        self._started_tracing = False
        self._next_checkpoint = checkpoint_min_responses
        self._checkpointing = False
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._last_log = 0.0

    @classmethod
    def from_crawler(cls, crawler: Any) -> CrawlMemExtension:
        """Build from ``CRAWLMEM_*`` settings; raise NotConfigured unless CRAWLMEM_ENABLED."""
        settings = crawler.settings
        if not settings.getbool("CRAWLMEM_ENABLED"):
            raise NotConfigured("CRAWLMEM_ENABLED is off")
        interval = settings.getfloat("CRAWLMEM_INTERVAL_SECONDS", 0.1)
        if not interval > 0:
            raise ValueError(f"invalid CRAWLMEM_INTERVAL_SECONDS {interval!r}: expected seconds > 0")
        jsonl = settings.get("CRAWLMEM_JSONL")
        ext = cls(
            crawler,
            interval_seconds=interval,
            jsonl_path=Path(jsonl) if jsonl else None,
            checkpoints=settings.getbool("CRAWLMEM_CHECKPOINTS", True),
            checkpoint_min_responses=settings.getint("CRAWLMEM_CHECKPOINT_MIN_RESPONSES", 100),
            drain_timeout_seconds=settings.getfloat("CRAWLMEM_DRAIN_TIMEOUT_SECONDS", 5.0),
            tracemalloc_frames=settings.getint("CRAWLMEM_TRACEMALLOC_FRAMES", 0),
            log_interval_seconds=settings.getfloat("CRAWLMEM_LOG_INTERVAL_SECONDS", 0.0),
            attribution_frames=settings.getint("CRAWLMEM_ATTRIBUTION_FRAMES", 8),
            attribution_responses=settings.getint("CRAWLMEM_ATTRIBUTION_RESPONSES", 100),
            kill_at_bytes=settings.getint("CRAWLMEM_KILL_AT_BYTES", 0),
            timeout_seconds=settings.getfloat("CRAWLMEM_TIMEOUT_SECONDS", 0.0),
            leak_per_response=settings.getint("CRAWLMEM_LEAK_PER_RESPONSE", DEFAULT_LEAK_PER_RESPONSE),
        )
        crawler.signals.connect(ext.spider_opened, signal=signals.spider_opened)
        crawler.signals.connect(ext.response_received, signal=signals.response_received)
        crawler.signals.connect(ext.item_scraped, signal=signals.item_scraped)
        crawler.signals.connect(ext.spider_closed, signal=signals.spider_closed)
        return ext

    # -- signals (reactor thread) -------------------------------------------------

    def spider_opened(self, spider: Any) -> None:
        """Start tracing (if asked), reset the RSS peak and start the sampler thread."""
        if self.tracemalloc_frames and not tracemalloc.is_tracing():
            tracemalloc.start(self.tracemalloc_frames)
            self._started_tracing = True
        self._traced_whole = tracemalloc.is_tracing()
        if self._traced_whole:
            tracemalloc.reset_peak()
        self.started_at = time.monotonic()
        self.recording.header(spider=getattr(spider, "name", "?"), interval_seconds=self.interval_seconds)
        self._take_checkpoint(drained=True, cost_started=self.started_at)
        # measured like end_rss (after gc.collect() and malloc_trim), so rss_growth compares like with like
        self.start_rss = self.peak_rss = self.recording.checkpoints[-1].rss_bytes
        self._exact_peak = probes.reset_peak_rss()
        self._thread = threading.Thread(target=self._sample_loop, name="crawlmem-sampler", daemon=True)
        self._thread.start()
        if self.timeout_seconds:
            message = f"the crawl was still running after {self.timeout_seconds:g} s, the budget timeout"
            self._timeout_call = _reactor().callLater(self.timeout_seconds, self._stop_crawl, "crawlmem_timeout", message)

    def response_received(self, response: Any, request: Any, spider: Any) -> None:
        """Count the response, its size and latency; start a drained checkpoint when one is due."""
        self.responses += 1
        self.response_sizes.add(len(response.body))
        latency = request.meta.get("download_latency")
        if latency is not None:
            self.latency_us.add(int(latency * 1_000_000))
        if self.checkpoints_enabled and not self._checkpointing and self.responses >= self._next_checkpoint:
            self._next_checkpoint = next_checkpoint_at(self.responses, self.checkpoint_min_responses)
            self._begin_checkpoint()

    def item_scraped(self, item: Any, response: Any, spider: Any) -> None:
        """Count the item."""
        self.items += 1

    def spider_closed(self, spider: Any, reason: str) -> None:
        """Stop sampling, take the closing checkpoint and the exact peak."""
        self.finish_reason = reason
        if self._timeout_call is not None and self._timeout_call.active():
            self._timeout_call.cancel()
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._take_sample()
        self._take_checkpoint(drained=True, cost_started=time.monotonic())
        self.end_rss = self.recording.checkpoints[-1].rss_bytes
        peak = probes.read_peak_rss() if self._exact_peak else None
        sampled_peak = max((s.rss_bytes for s in self.recording.samples), default=self.start_rss)
        self.peak_rss = max(peak or 0, sampled_peak, self.start_rss)
        if self._traced_whole:
            self.traced_peak = tracemalloc.get_traced_memory()[1]
        self._end_window()
        if self._started_tracing and tracemalloc.is_tracing():
            tracemalloc.stop()
        self.recording.close()
        self._write_stats()

    # -- sampling (sampler thread) --------------------------------------------------

    def _sample_loop(self) -> None:
        while not self._stop.wait(self.interval_seconds):
            try:
                self._take_sample()
            except Exception as exc:
                self.recording.add_error(f"sample failed: {exc!r}")

    def _take_sample(self) -> None:
        queues = probes.read_queues(self.crawler)
        traced = tracemalloc.get_traced_memory()[0] if tracemalloc.is_tracing() else None
        sample = Sample(
            t_seconds=round(time.monotonic() - self.started_at, 4),
            responses=self.responses,
            items=self.items,
            rss_bytes=probes.read_rss_bytes(),
            traced_bytes=traced,
            scheduled=queues.scheduled,
            inflight=queues.inflight,
            slot_queued=queues.slot_queued,
            active_size_bytes=queues.active_size_bytes,
            backout=queues.backout,
            disk_scheduled=queues.disk_scheduled,
        )
        self.recording.add_sample(sample)
        if self.kill_at_bytes and sample.rss_bytes >= self.kill_at_bytes and not self.stopped_because:
            self.stopped_because = "pending"  # once: the reactor thread fills in the reason
            message = f"RSS reached {sample.rss_bytes / 2**20:,.1f} MiB at {sample.t_seconds:.1f} s, the hard ceiling kill_at"
            _reactor().callFromThread(self._stop_crawl, "crawlmem_kill_at", message)
        if self.log_interval_seconds and sample.t_seconds - self._last_log >= self.log_interval_seconds:
            self._last_log = sample.t_seconds
            logger.info(
                "crawlmem: rss=%.1f MiB scheduled=%s inflight=%s active=%s B backout=%s items=%d responses=%d",
                sample.rss_bytes / 2**20, sample.scheduled, sample.inflight,
                sample.active_size_bytes, sample.backout, sample.items, sample.responses,
            )

    # -- hard limits (reactor thread) ----------------------------------------------------

    def _stop_crawl(self, reason: str, message: str) -> None:
        """Stop the crawl at once: no new downloads, close the spider with ``reason``."""
        if self.stopped_because not in ("", "pending"):
            return
        self.stopped_because = message
        self.recording.add_error(f"stopped: {message}")
        logger.warning("crawlmem: stopping the crawl: %s", message)
        probes.pause_engine(self.crawler)
        probes.close_spider(self.crawler, reason)

    # -- drained checkpoints (reactor thread) ------------------------------------------

    def _begin_checkpoint(self) -> None:
        if not probes.pause_engine(self.crawler):
            return
        self._checkpointing = True
        started = time.monotonic()
        self._wait_for_drain(started)

    def _wait_for_drain(self, started: float) -> None:
        drained = probes.is_drained(self.crawler)
        if drained or time.monotonic() - started > self.drain_timeout_seconds:
            try:
                self._take_checkpoint(drained=drained, cost_started=started)
            finally:
                self._checkpointing = False
                probes.resume_engine(self.crawler)
            return
        _reactor().callLater(_DRAIN_POLL_SECONDS, self._wait_for_drain, started)

    def _take_checkpoint(self, *, drained: bool, cost_started: float) -> None:
        gc.collect()
        probes.malloc_trim()
        queues = probes.read_queues(self.crawler)
        traced = tracemalloc.get_traced_memory()[0] if tracemalloc.is_tracing() else None
        checkpoint = Checkpoint(
            responses=self.responses,
            t_seconds=round(time.monotonic() - self.started_at, 4),
            rss_bytes=probes.read_rss_bytes(),
            heap_bytes=probes.read_malloc_in_use_bytes(),
            traced_bytes=traced,
            scheduled=queues.scheduled or 0,
            allocated_blocks=sys.getallocatedblocks(),
            tracer_bytes=tracemalloc.get_tracemalloc_memory() if tracemalloc.is_tracing() else 0,
            live_refs=probes.live_ref_counts(self.epoch),
            drained=drained,
            cost_seconds=round(time.monotonic() - cost_started, 4),
        )
        self.recording.add_checkpoint(checkpoint)
        self._attribute(checkpoint)

    # -- attribution: a traced window opened when the crawl looks leaky (reactor thread) --

    def _attribute(self, checkpoint: Checkpoint) -> None:
        """Open a traced window when the checkpoints look like a leak; snapshot it at the next checkpoint.

        The window lasts ``attribution_responses`` responses (an extra checkpoint ends it),
        so only a crawl that already looks leaky pays for deep tracing, and only briefly.
        """
        if self._window_done or not self.attribution_frames:
            return
        if self._window:
            self._window.append(take_snapshot())
            self._window_responses.append(checkpoint.responses)
            self._end_window()
        elif self.checkpoints_enabled and suspicious(self.recording.checkpoints, self.leak_per_response):
            if tracemalloc.is_tracing():
                self._window = [take_snapshot()]
            else:
                tracemalloc.start(self.attribution_frames)
                self._window_started_tracing = True
                self._window = [None]  # nothing is traced yet: the empty snapshot
            self._window_responses = [checkpoint.responses]
            self._next_checkpoint = min(self._next_checkpoint, checkpoint.responses + self.attribution_responses)

    def _end_window(self) -> None:
        """Close the traced window and keep the sites that grew in every traced interval."""
        if self._window_done:
            return
        self._window_done = True
        if len(self._window) >= 2:
            self.growth_sites = growing_sites(self._window, self._window_responses)
        self._window = []
        if self._window_started_tracing and tracemalloc.is_tracing():
            tracemalloc.stop()

    def _write_stats(self) -> None:
        stats = self.crawler.stats
        stats.set_value("crawlmem/peak_rss", self.peak_rss)
        stats.set_value("crawlmem/start_rss", self.start_rss)
        stats.set_value("crawlmem/end_rss", self.end_rss)
        stats.set_value("crawlmem/samples", len(self.recording.samples))
        stats.set_value("crawlmem/checkpoints", len(self.recording.checkpoints))
        if self.traced_peak is not None:
            stats.set_value("crawlmem/traced_peak", self.traced_peak)


def _reactor() -> Any:
    """The installed Twisted reactor (imported late: Scrapy installs it)."""
    from twisted.internet import reactor

    return cast(Any, reactor)
