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
import time
import tracemalloc
import uuid
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any, cast

from scrapy import signals
from scrapy.exceptions import NotConfigured

from pytest_crawlmem.attribution.declared import DeclaredMeter
from pytest_crawlmem.attribution.retention import find_retention
from pytest_crawlmem.attribution.window import AttributionWindow
from pytest_crawlmem.browser.pages import BROWSER_MIN_INTERVAL_SECONDS, CrawlBrowser
from pytest_crawlmem.browser.settings import is_playwright_crawl
from pytest_crawlmem.browser.slots import page_slots
from pytest_crawlmem.browser.tree import TreeReading
from pytest_crawlmem.core import stops
from pytest_crawlmem.core.declared import parse_expected_growth
from pytest_crawlmem.core.defaults import CrawlMemConfig, name_of
from pytest_crawlmem.core.distribution import Histogram
from pytest_crawlmem.core.drain import holders_phrase, media_phrase
from pytest_crawlmem.core.dropped import DropLedger, suggest_maxsize
from pytest_crawlmem.core.growth import POST_WINDOW_DENSE_RESPONSES
from pytest_crawlmem.core.measurement import Measurement, latency_distribution, size_distribution
from pytest_crawlmem.core.models import BrowserSummary, Checkpoint, MediaSummary, Sample
from pytest_crawlmem.core.schedule import POST_WINDOW_STEPS, next_checkpoint_at
from pytest_crawlmem.core.shots import ShotLedger
from pytest_crawlmem.measure.escalation import OVERDUE_STEP_SECONDS, STEP_SECONDS, StopEscalation
from pytest_crawlmem.measure.leakwatch import LeakWatch
from pytest_crawlmem.measure.media import summarize_media, watch_media_failures
from pytest_crawlmem.measure.metrics import MetricsServer, require_prometheus
from pytest_crawlmem.measure.refill import PauseRefill
from pytest_crawlmem.measure.status import StatusTicker, read_status
from pytest_crawlmem.probes import readings as probes
from pytest_crawlmem.probes.amplification import AmplificationMeter
from pytest_crawlmem.probes.danger import DangerWatch
from pytest_crawlmem.probes.jobdir import JobdirMeter, jobdir_meter
from pytest_crawlmem.probes.meter import Ceiling, Sampler, drained_checkpoint
from pytest_crawlmem.probes.recording import Recording
from pytest_crawlmem.probes.snapshots import start_tracing, stop_tracing
from pytest_crawlmem.probes.timers import drop_cancelled_timers

logger = logging.getLogger("pytest_crawlmem.extension")  # the documented logger name (docs/production.md), stable across moves

#: A drain is polled every _DRAIN_POLL_SECONDS (its last responses' callbacks finish at no signal of their own) for
#: its first _DRAIN_FAST_SECONDS, then every _DRAIN_SLOW_POLL_SECONDS; once drained, it is read _DRAIN_SETTLE_SECONDS
#: later (what the last callbacks left behind runs first). A plain crawl's drain read 16-18 ms at 5 ms steps, 9 ms at
#: 1 ms steps with no settling, 13 ms now (benchmarks/checkpoint_pause.py, 20 checkpoints a 2,050-response crawl);
#: read at once, 147-response clean crawls read `inconclusive` in 6/16 runs against 2/16 at 5 ms steps, settled 3/32
#: against 11/32 (the same runs, interleaved: noisy, and not worse).
_DRAIN_POLL_SECONDS = 0.001
_DRAIN_FAST_SECONDS = 0.05
_DRAIN_SLOW_POLL_SECONDS = 0.005
_DRAIN_SETTLE_SECONDS = 0.001
#: Room an attribution window that opens is given (it closes halfway: CRAWLMEM_ATTRIBUTION_RESPONSES, 100, at most).
WINDOW_ROOM_RESPONSES = 200


#: Crawls of this process being measured right now (what Ctrl-C closes).
_RUNNING: weakref.WeakSet[CrawlMemExtension] = weakref.WeakSet()


def interrupt_running_crawls(message: str = stops.INTERRUPTED_MESSAGE) -> None:
    """Close every measured crawl of this process early, saying ``message`` (safe to call from a signal handler)."""
    for ext in list(_RUNNING):
        _reactor().callFromThread(ext._stop_crawl, stops.INTERRUPTED, message)


def uses_playwright(settings: Any) -> bool:
    """Whether the crawl downloads through scrapy-playwright (its handler is in DOWNLOAD_HANDLERS)."""
    return is_playwright_crawl({"DOWNLOAD_HANDLERS": settings.getdict("DOWNLOAD_HANDLERS")})


class CrawlMemExtension:
    """Measures one crawl; what it measured comes back as one :class:`Measurement` (:meth:`measurement`).

    ``__init__`` takes a plain value (testable without a crawler): the typed :class:`CrawlMemConfig` of the one
    table of ``CRAWLMEM_*`` settings, :data:`pytest_crawlmem.core.defaults.SETTINGS` (``CrawlMemConfig.of(...)``).
    """

    def __init__(self, crawler: Any, config: CrawlMemConfig | None = None) -> None:
        config = config or CrawlMemConfig.of()
        self.crawler, self.config = crawler, config
        browser = config.browser
        interval_seconds = config.interval_seconds
        if browser:  # a page takes about a second: sampling faster only costs CPU (pages.py)
            interval_seconds = max(interval_seconds, BROWSER_MIN_INTERVAL_SECONDS)
        checkpoints, checkpoint_min_responses = config.checkpoints, config.checkpoint_min_responses
        leak_per_response, attribution_frames = config.leak_per_response, config.attribution_frames
        jsonl_path = Path(config.jsonl) if config.jsonl else None
        timeline_samples = config.timeline_samples
        self.interval_seconds = interval_seconds
        self.stopped_because = ""  # why the harness stopped the crawl, if it did
        self.escalation: StopEscalation | None = None  # the stop under way, carried through until the crawl ends
        # holders declared by design (expected_growth): measured at each drained checkpoint, set aside by the verdict
        declared = parse_expected_growth(config.expected_growth or "", source=name_of("expected_growth"))
        self.declared = DeclaredMeter(declared) if declared else None
        self.leaks = LeakWatch(logger, leak_per_response=leak_per_response, min_interval=checkpoint_min_responses,
                               expected_growth=declared)
        self.undrained_checkpoints = 0
        self.last_browser_pss_bytes: int | None = None  # the tree's last PSS reading (status line, metrics)
        self._timeout_call: Any = None
        self.attribution_seconds = 0.0  # wall time of the attribution window's work (counted in the pauses)
        self.attribution_cpu_seconds = 0.0
        self.checkpoint_cpu_seconds = 0.0  # the reactor thread's CPU in checkpoints and attribution (self CPU)
        self._traced_whole = False
        # -- production: bounded memory and disk, status, metrics (timeline.py, stream.py, status.py, metrics.py)
        self.recording = Recording(jsonl_path, max_samples=timeline_samples, max_bytes=config.jsonl_max_bytes,
                                   max_checkpoints=max(32, timeline_samples // 8) if timeline_samples else 0)
        self.sampler = Sampler(self._take_sample, interval_seconds, self.recording, name="crawlmem-sampler")
        self.ceiling = Ceiling(config.kill_at_bytes, self._request_stop)
        self.attribution = AttributionWindow(self.recording, frames=attribution_frames,
                                             max_responses=config.attribution_responses, enabled=checkpoints,
                                             leak_per_response=leak_per_response)
        self.ticker: StatusTicker | None = None
        self.metrics: MetricsServer | None = None
        # -- end production
        self.epoch = probes.Epoch.now()  # Scrapy objects created before the crawl are not its own
        self.responses = 0
        self.items = 0
        self.ledger = DropLedger()  # filled by pytest_crawlmem.measure.middleware's downloader middlewares
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
        self._dense_until = 0  # checkpoints come closer until here after an attribution window (growth.next_checkpoint_at)
        self._checkpointing = False
        self._held_by = ""  # the media downloads the last undrained checkpoint waited for, in words
        self.refill = PauseRefill(interval_seconds)  # the checkpoints' pauses, left out of the scraper's figures
        self._froze_gc = False
        self.jobdir: JobdirMeter | None = None  # JOBDIR's disk use, when the crawl has one
        self.media_pipelines: list[Any] = []  # the crawl's MediaPipelines while it runs, for the cache probes
        self.media: MediaSummary | None = None  # their cache when the spider closed
        self.pages = CrawlBrowser(self.recording, detail_seconds=config.browser_detail_seconds,
                                  stall_seconds=config.stall_seconds) if browser else None
        if self.pages is not None:
            self.pages.pss_base_needed = bool(config.kill_at_bytes)  # 0: no ceiling
        # issue 19: screenshot captures (shots.py), parse amplification (amplification.py's spider middleware)
        self.shots = ShotLedger()
        self.amplification = AmplificationMeter()
        snapshot_at = config.snapshot_at_bytes
        self.danger = DangerWatch(snapshot_at, report_dir=jsonl_path.parent if jsonl_path else None,
                                  window_seconds=config.danger_window_seconds, frames=attribution_frames,
                                  open_later=lambda open_window: _reactor().callFromThread(open_window),
                                  ) if snapshot_at else None
        self._danger_close_asked = False
        if self.danger is not None:
            self.attribution.handoff = self.danger.adopt_tracing

    @classmethod
    def from_crawler(cls, crawler: Any) -> CrawlMemExtension:
        """Build from ``CRAWLMEM_*`` settings; raise NotConfigured unless CRAWLMEM_ENABLED."""
        settings = crawler.settings
        if not settings.getbool(name_of("enabled")):
            raise NotConfigured(f"{name_of('enabled')} is off")
        config = CrawlMemConfig.from_settings(settings, playwright=uses_playwright(settings))  # defaults.py's table
        if config.prometheus_port is not None:
            require_prometheus()
        ext = cls(crawler, config)
        crawler.signals.connect(ext.spider_opened, signal=signals.spider_opened)
        crawler.signals.connect(ext.response_received, signal=signals.response_received)
        crawler.signals.connect(ext.item_scraped, signal=signals.item_scraped)
        crawler.signals.connect(ext.spider_closed, signal=signals.spider_closed)
        return ext

    # -- signals (reactor thread) -------------------------------------------------

    def spider_opened(self, spider: Any) -> None:
        """Start tracing (if asked), reset the RSS peak and start the sampler thread."""
        if self.config.tracemalloc_frames and not tracemalloc.is_tracing():
            start_tracing(self.config.tracemalloc_frames)
            self._started_tracing = True
        self._traced_whole = tracemalloc.is_tracing()
        if self._traced_whole:
            tracemalloc.reset_peak()
        self.started_at = time.monotonic()
        _RUNNING.add(self)
        self.recording.header(spider=getattr(spider, "name", "?"), interval_seconds=self.interval_seconds,
                              crawl_id=uuid.uuid4().hex, started_at=time.time())
        self._take_checkpoint(drained=True, cost_started=self.started_at)
        # measured like end_rss (after gc.collect() and malloc_trim), so rss_growth compares like with like
        self.start_rss = self.peak_rss = self.recording.checkpoints[-1].rss_bytes
        # what existed before the crawl is frozen out of the cyclic GC until it ends: each
        # checkpoint's gc.collect() then walks the crawl's objects, not the whole process
        self._froze_gc = self.config.gc_freeze and gc.get_freeze_count() == 0  # CRAWLMEM_GC_FREEZE: test crawls, opt-in elsewhere
        if self._froze_gc:
            gc.freeze()
        self._exact_peak = probes.reset_peak_rss()
        self.jobdir = jobdir_meter(self.crawler.settings.get("JOBDIR"))
        self.media_pipelines = probes.media_pipelines(self.crawler)
        if self.config.media_failures:  # test crawls: failed media downloads are dropped data
            watch_media_failures(self.media_pipelines, self.ledger)
        self.sampler.start()
        if self.config.timeout_seconds:
            self._timeout_call = _reactor().callLater(self.config.timeout_seconds, self._time_out)
        self._start_reporting(spider)

    def response_received(self, response: Any, request: Any, spider: Any) -> None:
        """Count the response, its size and latency, and a screenshot API's capture; start a drained checkpoint when due."""
        self.responses += 1
        if self.pages is not None:
            self.pages.response_received(response, request, spider)
        self.response_sizes.add(len(response.body))
        latency = request.meta.get("download_latency")
        if latency is not None:
            self.latency_us.add(int(latency * 1_000_000))
        self.shots.response_received(response, request, spider)  # one receiver: each costs a dispatch (~7 us)
        if self.config.checkpoints and not self._checkpointing and self.responses >= self._next_checkpoint:
            self._next_checkpoint = next_checkpoint_at(self.responses, self.config.checkpoint_min_responses,
                                                       self._dense_until)
            self._begin_checkpoint()

    def item_scraped(self, item: Any, response: Any, spider: Any) -> None:
        """Count the item."""
        self.items += 1

    def spider_closed(self, spider: Any, reason: str) -> None:
        """Stop sampling, take the closing checkpoint and the exact peak."""
        self.finish_reason = reason
        _RUNNING.discard(self)
        self._stop_reporting()
        if self._timeout_call is not None and self._timeout_call.active():
            self._timeout_call.cancel()
        self.sampler.stop()
        self._close_danger()
        if self.jobdir is not None:
            self.jobdir.expire()  # the closing sample has JOBDIR as a resumed crawl will find it
        self._take_sample()
        if self.pages is not None:
            self.pages.close()
        # drained: an open window closes first, so the closing checkpoint is untraced
        with self._plugin_work(pause=False):
            self.attribution.close_at_end(self.crawler, self.responses)
        try:
            self._take_checkpoint(drained=True, cost_started=time.monotonic())
        finally:  # measured like start_rss; a closing checkpoint that failed still leaves a reading, never 0
            closing = self.recording.checkpoints[-1] if self.recording.checkpoints else None
            self.end_rss = closing.rss_bytes if closing and closing.responses == self.responses else probes.read_rss_bytes()
        self.media, self.media_pipelines = summarize_media(self.media_pipelines), []  # let go of the pipelines
        if self._froze_gc:
            gc.unfreeze()
            self._froze_gc = False
        peak = probes.read_peak_rss() if self._exact_peak else None
        sampled_peak = max((s.rss_bytes for s in self.recording.samples), default=self.start_rss)
        self.peak_rss = max(peak or 0, sampled_peak, self.start_rss)
        if self._traced_whole:
            self.traced_peak = tracemalloc.get_traced_memory()[1]
        self.attribution.end()
        if self._started_tracing and tracemalloc.is_tracing():
            stop_tracing()
        self._stream_finish(reason)
        self.recording.close()
        self._write_stats()

    def measurement(self) -> Measurement:
        """Everything this crawl measured, once the spider closed (crawl process).

        What is alive after the crawl (``live_refs``, ``retention``) is read now: call it once the crawl is let go of
        (the runner sets :attr:`crawler` to ``None`` and collects first).
        """
        recording, attribution, ledger = self.recording, self.attribution, self.ledger
        retention = find_retention(self.epoch)
        return Measurement(
            samples=tuple(recording.samples), checkpoints=tuple(recording.checkpoints), errors=tuple(recording.errors),
            finish_reason=self.finish_reason, stopped_because=self.stopped_because if self.stopped_because != "pending" else "",
            start_rss=self.start_rss, end_rss=self.end_rss or probes.read_rss_bytes(),  # never 0: not a growth of -start_rss
            peak_rss=self.peak_rss, traced_peak=self.traced_peak, responses=self.responses, items_scraped=self.items,
            checkpoint_min_responses=self.config.checkpoint_min_responses,
            top_growth=tuple(attribution.growth_sites), holders=attribution.holders, kept=attribution.kept,
            retention=retention, live_refs=probes.live_ref_counts(self.epoch),
            dropped=tuple(ledger.dropped), dropped_count=ledger.count, warnsize_warnings=ledger.warnsize_warnings,
            response_sizes=size_distribution(self.response_sizes), suggested_maxsize=suggest_maxsize(self.response_sizes),
            download_latency=latency_distribution(self.latency_us), download_excess=recording.timeline.excess_summary(),
            browser=self.browser_summary(), media=self.media, shots=self.shots.summary(),
            parse_amplification=self.amplification.summary(), danger=self.danger.snapshot if self.danger else None,
        )

    def _stream_finish(self, reason: str) -> None:
        """The stream's last record: the finish reason, the traced window's growth sites, the browser's figures, the
        verdict so far (what ``crawlmem report`` of a production stream names)."""
        browser = self.browser_summary()
        try:
            self.recording.add_finish(
                reason, growth_sites=[site.to_json() for site in self.attribution.growth_sites],
                browser=browser.to_json() if browser is not None else None, verdict=self.leaks.verdict or None,
            )
        except Exception as exc:  # what cannot be streamed must not stop the close
            self.recording.add_error(f"finish record failed: {exc!r}")

    # -- sampling (sampler thread) --------------------------------------------------

    @property
    def sampler_cpu_seconds(self) -> float:
        """CPU time the sampler thread spent (status lines, soak benchmark)."""
        return self.sampler.cpu_seconds

    def _take_sample(self) -> None:
        queues = probes.read_queues(self.crawler)
        # the scraper empties while a checkpoint holds the engine and fills again after it: whether it is over its
        # limit then says what the plugin did, not the crawl (a serialized pipeline read 12% against plain Scrapy's 42%)
        held = self.refill.held(queues.active_size_bytes, queues.backout, self.responses)
        traced = tracemalloc.get_traced_memory()[0] if tracemalloc.is_tracing() else None
        tree, pages = self.pages.sample(self.crawler) if self.pages is not None else (None, None)
        if tree is not None and tree.pss_bytes is not None:
            self.last_browser_pss_bytes = tree.pss_bytes
        sample = Sample(
            t_seconds=round(time.monotonic() - self.started_at, 4),
            responses=self.responses,
            items=self.items,
            traced_bytes=traced,
            scheduled=queues.scheduled,
            inflight=queues.inflight,
            slot_queued=queues.slot_queued,
            active_size_bytes=queues.active_size_bytes,
            backout=None if held else queues.backout,
            disk_scheduled=queues.disk_scheduled,
            browser_rss_bytes=tree.rss_bytes if tree else None,
            browser_pss_bytes=tree.pss_bytes if tree else None,
            browser_uss_bytes=tree.uss_bytes if tree else None,
            open_pages=pages.pages if pages else None,
            open_contexts=pages.contexts if pages else None,
            jobdir_bytes=self.jobdir.read() if self.jobdir else None,
            media_cached=probes.read_media_cached(self.media_pipelines),
            **probes.read_process(),  # rss_bytes, ...
        )
        self.recording.add_sample(sample)
        if self.danger is not None:
            self._watch_danger(sample)
        if pages is not None:
            self._check_stall(sample, pages)  # pages is read only for a browser crawl
        self.ceiling.check(sample.rss_bytes, sample.t_seconds, self._browser_footprint(tree))

    def _browser_footprint(self, tree: TreeReading | None) -> int:
        """The browser tree's PSS now: read on detail samples, estimated from RSS growth between them (kill_at)."""
        if tree is None or self.pages is None or not tree.processes:
            return 0
        return tree.pss_bytes if tree.pss_bytes is not None else self.pages.watch.tree.estimate_pss_bytes(tree)

    def _request_stop(self, reason: str, message: str) -> None:
        """Ask the reactor thread to stop the crawl (sampler thread), unless a stop is already under way."""
        if self.stopped_because:
            return
        self.stopped_because = "pending"  # once: the reactor thread fills in the reason
        _reactor().callFromThread(self._stop_crawl, reason, message)

    # -- the danger snapshot (danger.py): taken by the sampler thread; its traced window runs on the reactor thread --

    def _watch_danger(self, sample: Sample) -> None:
        """Take the snapshot when RSS first crosses snapshot_at; ask for its traced window's close when due (sampler
        thread: tracemalloc is left to the reactor thread)."""
        assert self.danger is not None
        due = self.danger.observe(sample, start_rss=self.start_rss, live_refs=lambda: probes.live_ref_counts(self.epoch))
        if due and not self._danger_close_asked:
            self._danger_close_asked = True
            _reactor().callFromThread(self._close_danger, sample.rss_bytes)

    def _close_danger(self, rss_bytes: int | None = None) -> None:
        """Close the traced window when due, or still open when the spider closes (reactor thread)."""
        if self.danger is None:
            return
        self.danger.close(responses=self.responses, rss_bytes=rss_bytes if rss_bytes is not None else probes.read_rss_bytes())
        if self.danger.started_tracing:
            self.danger.started_tracing = False
            self._release_danger_tracing()

    def _release_danger_tracing(self) -> None:
        """Stop the tracing the danger window started, unless the attribution window now relies on it (reactor thread)."""
        if not self.attribution.adopt_tracing() and tracemalloc.is_tracing() and not self._traced_whole:
            stop_tracing()

    # -- the browser (pages.py): pages left open stop the crawl before it hangs -----------

    def _check_stall(self, sample: Sample, pages: probes.PageReading) -> None:
        """Stop a crawl that waits forever for page slots held by pages callbacks never closed; while a stop is
        under way, close them again each time the stall comes back (sampler thread)."""
        assert self.pages is not None
        message = self.pages.stall(sample.responses, sample.t_seconds, pages, page_slots(self.crawler))
        if message is None:
            return
        if not self.stopped_because:
            self.stopped_because = "pending"
        _reactor().callFromThread(self._stop_unclosed, message)

    def _stop_unclosed(self, message: str) -> None:
        """Stop the crawl (or note the stall of a stop under way), closing the pages that block it so waiting
        downloads can finish (reactor thread)."""
        if self.stopped_because in ("", "pending"):
            self._stop_crawl(stops.UNCLOSED_PAGES, message)
        else:
            self.recording.add_error(f"stop under way: stalled again: {message}")
        if self.pages is not None:
            self.pages.close_unclosed()

    def browser_summary(self) -> BrowserSummary | None:
        """What the browser tree used during the crawl (``None`` without a browser or when none started)."""
        return self.pages.summary(self.recording.checkpoints) if self.pages is not None else None

    # -- hard limits (reactor thread) ----------------------------------------------------

    def _stop_crawl(self, reason: str, message: str) -> None:
        """Stop the crawl at once: no new downloads, close the spider with ``reason``; a stop already under way
        escalates instead (escalation.py), so the timeout still ends a crawl whose first stop did not."""
        if self.stopped_because not in ("", "pending"):
            if self.escalation is not None and self.crawler is not None:
                self.escalation.escalate(message)
            return
        self.stopped_because = message
        self.recording.add_stop(reason, message)
        logger.warning("crawlmem: stopping the crawl: %s", message)
        probes.pause_engine(self.crawler)
        probes.close_spider(self.crawler, reason)
        self.escalation = self._escalation(overdue=reason == stops.TIMEOUT)
        self.escalation.start()

    def _escalation(self, *, overdue: bool) -> StopEscalation:
        """The steps of this crawl's stop, should closing the spider not end it (a browser crawl's: pages,
        contexts, the browser); a stop at the timeout is overdue already: its steps hurry."""
        steps = self.pages.stop_steps(lambda: self.crawler) if self.pages is not None else []
        return StopEscalation(steps, ended=lambda: probes.crawl_ended(self.crawler), call_later=_reactor().callLater,
                              logger=logger, note=self.recording.add_error,
                              step_seconds=OVERDUE_STEP_SECONDS if overdue else STEP_SECONDS)

    # -- drained checkpoints (reactor thread) ------------------------------------------

    def _begin_checkpoint(self) -> None:
        if not probes.pause_engine(self.crawler):
            return
        self.refill.paused(probes.read_queues(self.crawler).inflight)
        self._checkpointing = True
        started = time.monotonic()
        if self.pages is not None:  # no new page opens while it drains: the downloads waiting for one stay parked
            self.pages.gate.close(self.crawler)
            self.pages.handed.pause()  # full contexts and no response while it drains: no stall
        self._wait_for_drain(started)

    def _wait_for_drain(self, started: float, settled: bool = False) -> None:
        waited = time.monotonic() - started
        timed_out = waited > self.config.drain_timeout_seconds
        poll = _DRAIN_POLL_SECONDS if waited < _DRAIN_FAST_SECONDS else _DRAIN_SLOW_POLL_SECONDS
        if not timed_out and probes.scraper_busy(self.crawler):  # callbacks still run: what is parked is not counted yet
            if self.pages is not None and self.pages.gate.is_closed:
                self.pages.gate.hold_new(self.crawler)  # a context created meanwhile opens no page
            _reactor().callLater(poll, self._wait_for_drain, started)
            return
        parked = self.pages.gate.parked(self.crawler) if self.pages is not None and self.pages.gate.is_closed else 0
        drained = probes.is_drained(self.crawler, parked=parked)
        if drained and not settled:  # what the last callbacks left runs first
            _reactor().callLater(_DRAIN_SETTLE_SECONDS, self._wait_for_drain, started, True)
            return
        if drained or timed_out:
            if not drained:
                self._undrained(parked)
            if self.pages is not None:  # renderers collect their garbage first, so it is not counted as growth
                self.pages.collect_garbage(self.crawler).addBoth(lambda _: self._finish_checkpoint(drained, started))
            else:
                self._finish_checkpoint(drained, started)
            return
        _reactor().callLater(poll, self._wait_for_drain, started)

    def _undrained(self, parked: int) -> None:
        """Say that a checkpoint did not drain and what would make it (recorded each time, logged once)."""
        queues = probes.read_queues(self.crawler)
        waiting = f", {parked:,} of them parked (waiting for a page or to start)" if parked else ""
        inflight = queues.inflight or 0
        holders = holders_phrase(max(0, inflight - parked), probes.callbacks_running(self.crawler))
        self._held_by = media_phrase(probes.media_downloads(self.crawler, self.media_pipelines))
        if self._held_by:
            holders += f"{'; ' if holders else ''}the media pipelines' {self._held_by}"
        browser = " (or PLAYWRIGHT_MAX_PAGES_PER_CONTEXT)" if self.pages is not None else ""
        message = (
            f"the checkpoint at {self.responses:,} responses did not drain within {name_of('drain_timeout_seconds')}"
            f" ({self.config.drain_timeout_seconds:g} s): {inflight:,} request{'s were' if inflight != 1 else ' was'} still in"
            f" flight{waiting}"
            f"{'; ' + holders if holders else ''}; it is not judged. Checkpoints drain when what is in flight finishes"
            " within the timeout: lower"
            f" CONCURRENT_REQUESTS{browser} or raise {name_of('drain_timeout_seconds')}"
        )
        self.recording.add_error(message)
        if not self.undrained_checkpoints:
            logger.warning("crawlmem: %s", message)

    def _finish_checkpoint(self, drained: bool, started: float) -> None:
        try:
            judge = self._take_checkpoint(drained=drained, cost_started=started, judge_now=False)
        finally:
            self._checkpointing = False
            if self.pages is not None:
                self.pages.gate.open()
                self.pages.handed.resume(time.monotonic() - self.started_at)
            probes.resume_engine(self.crawler, _reactor().callLater)
            self.refill.resumed(self.responses, time.monotonic() - started)
        if judge:  # after the engine resumed: the verdict so far is computed while the next downloads are in flight
            _reactor().callLater(0, self._judge_later)

    def _judge_later(self) -> None:
        """A mid-crawl checkpoint's judgement, unless the spider closed since (its closing checkpoint judged them all)."""
        if not self.finish_reason:
            self._judge_so_far()

    def _take_checkpoint(self, *, drained: bool, cost_started: float, judge_now: bool = True) -> bool:
        """Read a checkpoint; judge the checkpoints so far (``judge_now``), else return whether they are to be judged."""
        cpu_started = time.thread_time()
        try:
            return self._read_checkpoint(drained=drained, cost_started=cost_started, judge_now=judge_now)
        finally:  # the reactor thread's CPU on the plugin's behalf: gc.collect(), the readings, attribution
            self.checkpoint_cpu_seconds += time.thread_time() - cpu_started

    @contextmanager
    def _plugin_work(self, *, pause: bool) -> Iterator[None]:
        """Count the block's wall and CPU time as attribution's, and its wall time in the checkpoints' pause (``pause``:
        of the checkpoint just read; else a pause of its own)."""
        wall, cpu = time.monotonic(), time.thread_time()
        try:
            yield
        finally:
            spent = time.monotonic() - wall
            self.attribution_seconds += spent
            self.attribution_cpu_seconds += time.thread_time() - cpu
            if spent > 0.0005:
                self.recording.add_pause(spent, after_checkpoint=pause)
            if not pause:  # outside a checkpoint: its CPU is counted here
                self.checkpoint_cpu_seconds += time.thread_time() - cpu

    def _time_out(self) -> None:
        """Stop a crawl still running at the budget ``timeout``, saying how much of that time was the plugin's."""
        message = stops.timeout_message(self.config.timeout_seconds,
                                        paused_seconds=self.recording.checkpoint_pause_total_seconds,
                                        attribution_seconds=self.attribution_seconds)
        self._stop_crawl(stops.TIMEOUT, message)

    def _read_checkpoint(self, *, drained: bool, cost_started: float, judge_now: bool) -> bool:
        queues = probes.read_queues(self.crawler)  # the engine is paused: its queues hold still
        drop_cancelled_timers(_reactor())  # not the sawtooth of cancelled timers the reactor purges now and then
        checkpoint = drained_checkpoint(
            self.responses, started_at=self.started_at, cost_started=cost_started, drained=drained,
            held_by="" if drained else self._held_by, scheduled=queues.scheduled or 0, disk_scheduled=queues.disk_scheduled or 0,
            plugin_bytes=self.attribution.plugin_bytes, read=lambda: {"live_refs": probes.live_ref_counts(self.epoch),
                                                                      **self._declared_fields()},
        )
        if self.jobdir is not None:  # read here: the sampler's last reading can be older than the previous checkpoint
            self.jobdir.expire()
            checkpoint = replace(checkpoint, jobdir_bytes=self.jobdir.read())
        browser = self.pages.checkpoint_fields(self.crawler) if self.pages is not None else {}  # read after the checkpoint's cost
        if browser.get("browser_pss_bytes") is not None:  # the sampler reads PSS only within its CPU share: often never
            self.last_browser_pss_bytes = browser["browser_pss_bytes"]
        if browser:
            checkpoint = replace(checkpoint, **browser)
        previous = self.recording.checkpoints[-1] if self.recording.checkpoints else None
        self.recording.add_checkpoint(checkpoint)
        self.undrained_checkpoints += not drained
        if previous is None or previous.responses < checkpoint.responses:  # an interval of no response judges nothing
            self._next_checkpoint = self._after_attribution(checkpoint)
        if previous is not None and judge_now:  # the opening checkpoint has nothing to judge
            self._judge_so_far()
        return previous is not None

    def _declared_fields(self) -> dict[str, Any]:
        """The declared holders' sizes now (checkpoint fields; none without ``expected_growth``)."""
        if self.declared is None:
            return {}
        fields = dict(self.declared.read(self.crawler))
        while self.declared.errors:
            self.recording.add_error(self.declared.errors.pop(0))
        return fields

    def _after_attribution(self, checkpoint: Checkpoint) -> int:
        """Let the attribution window open or close here; return the next checkpoint.

        A window that opens gets room for WINDOW_ROOM_RESPONSES (it closes halfway to the checkpoint it is given, and
        the dense early schedule's next one is only CHECKPOINT_MIN_RESPONSES away); otherwise the schedule stands.
        """
        due, was_open = self._next_checkpoint, self.attribution.is_open
        room = due if was_open else max(due, checkpoint.responses + WINDOW_ROOM_RESPONSES)
        with self._plugin_work(pause=True):  # the engine is still paused: part of this checkpoint's pause
            after = self.attribution.at_checkpoint(self.crawler, checkpoint, room)
        if self.attribution.is_open:
            return after
        if was_open:  # closed here: the trend after a window tells a leak from a cache that filled in it
            # the schedule resumes where it stands, not at the room the window was given: resuming at the room skipped
            # the dense checkpoints after it (a 294-response crawl with a 32 KiB/response leak kept 2 judged)
            self._dense_until = checkpoint.responses + POST_WINDOW_DENSE_RESPONSES
            return min(due, checkpoint.responses + POST_WINDOW_STEPS * self.config.checkpoint_min_responses)
        return due

    def _judge_so_far(self) -> None:
        """The verdict of the drained checkpoints so far, as stats, and a WARNING when it shows a leak (leakwatch.py)."""
        self.leaks.judge(self.recording.checkpoints)
        if self.leaks.verdict and self.crawler is not None:
            self.crawler.stats.set_value("crawlmem/verdict", self.leaks.verdict)
            if self.leaks.per_response_bytes is not None:
                self.crawler.stats.set_value("crawlmem/growth_per_response", round(self.leaks.per_response_bytes, 1))

    def _write_stats(self) -> None:
        stats = self.crawler.stats
        stats.set_value("crawlmem/peak_rss", self.peak_rss)
        stats.set_value("crawlmem/start_rss", self.start_rss)
        stats.set_value("crawlmem/end_rss", self.end_rss)
        self._write_production_stats(stats)
        if self.traced_peak is not None:
            stats.set_value("crawlmem/traced_peak", self.traced_peak)
        browser = self.browser_summary()
        if browser is not None:
            stats.set_value("crawlmem/browser_pss", browser.peak_pss_bytes)
            stats.set_value("crawlmem/browser_max_open_pages", browser.max_open_pages)
            stats.set_value("crawlmem/browser_max_open_contexts", browser.max_open_contexts)
        stats.set_value("crawlmem/undrained_checkpoints", self.undrained_checkpoints)


    # -- production: status, metrics and the extension's own costs (reactor thread) ---------

    def _start_reporting(self, spider: Any) -> None:
        """Start the status ticker (CRAWLMEM_LOG_INTERVAL_SECONDS) and the metrics server (CRAWLMEM_PROMETHEUS_PORT)."""
        self.ticker = StatusTicker(self, self.config.log_interval_seconds)
        self.ticker.start()
        port, addr = self.config.prometheus_port, self.config.prometheus_addr
        if port is not None:
            self.metrics = MetricsServer(lambda: read_status(self), port=port, addr=addr, spider=getattr(spider, "name", "?"))
            try:
                self.metrics.start()
            except OSError as exc:  # a port in use must not stop the crawl it monitors
                message = f"could not serve Prometheus metrics on {addr}:{port}: {exc}"
                self.recording.add_error(message)
                logger.error("crawlmem: %s", message)

    def _stop_reporting(self) -> None:
        if self.ticker is not None:
            self.ticker.stop()
        if self.metrics is not None:
            self.metrics.stop()

    def _write_production_stats(self, stats: Any) -> None:
        """The closing status and what the extension cost: samples, checkpoints' pauses, its CPU, its stream."""
        if self.ticker is not None:
            self.ticker.emit(log=self.config.log_interval_seconds > 0)
        recording = self.recording
        stats.set_value("crawlmem/samples", recording.timeline.raw_samples)
        stats.set_value("crawlmem/checkpoints", recording.timeline.checkpoints_added)
        stats.set_value("crawlmem/checkpoint_pause_max_seconds", round(recording.checkpoint_pause_max_seconds, 4))
        stats.set_value("crawlmem/checkpoint_pause_total_seconds", round(recording.checkpoint_pause_total_seconds, 4))
        stats.set_value("crawlmem/attribution_seconds", round(self.attribution_seconds, 4))
        stats.set_value("crawlmem/attribution_cpu_seconds", round(self.attribution_cpu_seconds, 4))
        stats.set_value("crawlmem/attribution_roots", self.attribution.roots_walked)
        stats.set_value("crawlmem/attribution_files", self.attribution.files_parsed)
        stats.set_value("crawlmem/stream_rotations", recording.stream_rotations)


def _reactor() -> Any:
    """The installed Twisted reactor (imported late: Scrapy installs it)."""
    from twisted.internet import reactor

    return cast(Any, reactor)
