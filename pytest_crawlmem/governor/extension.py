"""``MemoryGovernor``: a Scrapy extension that keeps a crawl inside its memory budget, losing nothing (crawl process).

Enabled by ``CRAWLMEM_BUDGET`` (``"300 MiB"``, or ``"auto"``: 80% of the cgroup's limit). Every
``CRAWLMEM_GOVERNOR_INTERVAL_SECONDS`` a ``LoopingCall`` on the reactor reads RSS (a kept ``/proc/self/statm``
fd) and the engine's queues, asks the pure controller (:mod:`pytest_crawlmem.governor.policy`) for this
tick's decision, and moves the levers: ``downloader.total_concurrency`` and ``scraper.slot.max_active_size``
(in flight), the start gate and the spilling scheduler (backlog, :mod:`pytest_crawlmem.governor.spill`), and at
the end ``engine.close_spider_async(reason="memory_budget")``. With scrapy-playwright, the browser lever
(:mod:`pytest_crawlmem.governor.contextlever`) rotates contexts and, at the tree's floor, caps the concurrency.
Each decision is a stat under ``crawlmem/governor/``, an INFO log line, and an entry of
:attr:`MemoryGovernor.decisions`.

``GovernorAddon`` (``ADDONS``) installs the extension, the scheduler and the start gate together.
"""

from __future__ import annotations

import gc
import logging
import math
import time
from dataclasses import asdict, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from scrapy import signals
from scrapy.exceptions import NotConfigured

from pytest_crawlmem.core.defaults import CrawlMemConfig, name_of
from pytest_crawlmem.governor.admit import CostAdmission, payload_bytes
from pytest_crawlmem.governor.browser_concurrency import BROWSER_CONCURRENCY
from pytest_crawlmem.governor.close import danger_snapshot, undone_counts, write_record
from pytest_crawlmem.governor.context_policy import BROWSER_CONTEXT
from pytest_crawlmem.governor.gates import DownloadGate, PullHold, is_spilling
from pytest_crawlmem.governor.pacing import (
    ANSWER_RSS_SECONDS,
    BODY_WEIGHT,
    CLOSE_AFTER_SECONDS,
    FORCED_TRIM_SECONDS,
    QUIET_TICKS,
    RECLAIM_EVERY_SECONDS,
    RECLAIM_GROWTH,
    REJUDGE_RETAINED_BYTES,
    SIGNAL_SAMPLE_EVERY,
    SIGNAL_TICK_SECONDS,
    SMALL_BODY_BYTES,
    TRIM_EVERY_SECONDS,
    TRIM_MAX_BACKOFF,
    TRIM_MIN_BYTES,
    output_every,
)
from pytest_crawlmem.governor.policy import (
    GOVERNOR_FILE,
    MEMORY_BUDGET,
    RESTORE,
    RETAINED,
    Decision,
    DecisionRecord,
    Levers,
    Policy,
    PolicyConfig,
    Sample,
    coming_item_bytes,
    promised_items,
    undone_sentence,
)
from pytest_crawlmem.governor.setup import (
    ADDON_PATH,
    BUDGET,
    GovernorAddon,
    _Statm,
    _Status,
    add_components,
    add_governor,
    read_cgroup_limit,
    resolve_budget,
)
from pytest_crawlmem.governor.spill import SpillingScheduler, StartGate
from pytest_crawlmem.probes import readings as probes

if TYPE_CHECKING:
    from pytest_crawlmem.core.models import DangerSnapshot
    from pytest_crawlmem.governor.contextlever import ContextLever, LeverEvent

__all__ = ["ContextLever", "GovernorAddon", "MemoryGovernor", "add_governor", "governor_danger", "read_cgroup_limit",
           "resolve_budget"]
logger = logging.getLogger("pytest_crawlmem.governor")


class MemoryGovernor:
    """Moves concurrency, the scraper's active size and the backlog so RSS stays inside ``CRAWLMEM_BUDGET``."""

    def __init__(self, crawler: Any, *, budget_bytes: int, interval_seconds: float, min_concurrency: int = 1,
                 high_share: float = 0.85, low_share: float = 0.70, close_share: float = 0.95,
                 start_concurrency: int = 0) -> None:
        self.crawler = crawler
        settings = crawler.settings
        self.config: PolicyConfig = PolicyConfig(
            budget_bytes=budget_bytes,
            base_concurrency=max(1, settings.getint("CONCURRENT_REQUESTS")),
            base_active_size=settings.getint("SCRAPER_SLOT_MAX_ACTIVE_SIZE"),
            min_concurrency=min_concurrency, high_share=high_share, low_share=low_share, hard_share=close_share,
            start_concurrency=start_concurrency or None,
            close_ticks=max(1, math.ceil(CLOSE_AFTER_SECONDS / interval_seconds)), close_after_seconds=CLOSE_AFTER_SECONDS,
        )
        self.policy: Policy = Policy(self.config)
        self.interval_seconds = interval_seconds
        self.jobdir = settings.get("JOBDIR") or None
        jsonl = settings.get(name_of("jsonl"))
        self.record_path = Path(jsonl).parent / GOVERNOR_FILE if jsonl else None
        self.decisions: list[DecisionRecord] = []
        self.peak_rss_bytes = 0
        self.tick_seconds = 0.0  # ticks, spills and collections (thread CPU)
        self.signal_calls = 0  # signal handler calls
        self.signal_sampled = 0  # ... of which timed (one in SIGNAL_SAMPLE_EVERY)
        self.signal_sampled_seconds = 0.0  # thread CPU of the timed calls (their ticks excepted)
        self._in_signal = False  # a handler is running (_signal)
        self.spill_seconds = 0.0  # of cpu_seconds: moving requests to disk
        self.ticks = 0
        self._statm = _Statm()
        self._task: Any = None
        self._started = 0.0
        self._last_trim = 0.0
        self._trim_backoff = 1  # times the trims' least interval (_trim)
        self.trims = 0  # trims outside reclaims
        self.trim_seconds = 0.0  # ... their thread CPU (of tick_seconds)
        self._after_reclaim, self._reclaim_high, self._last_reclaim = 0, 0, 0.0  # high: the most RSS a reclaim ran at
        self._body_bytes = 0.0
        self._last_signal_read = self._last_item_read = self._last_tick = 0.0  # statm reads of signals, of items; ticks
        self._metrics_registered = self._froze_gc = False
        self.reclaims, self.reclaim_seconds, self.reclaimed_bytes = 0, 0.0, 0
        self._closing = False
        self.danger: DangerSnapshot | None = None  # the evidence of a close without JOBDIR
        self.lever: ContextLever | None = None  # the browser lever, once a scrapy-playwright handler is loaded
        self.download_gate: DownloadGate | None = None  # every download waits at it while the limit is reached
        self.admission: CostAdmission | None = None  # downloads admitted by their cost before the parse
        self.pull_hold: PullHold | None = None  # the engine pulls no request while the pipelines hold the item cap
        self._received = 0  # responses received (response_received), for the items they will yield
        self._arrivals_seen = 0  # headers, responses, items and ended outputs at the last tick (_pace)
        self._headers = 0  # headers received
        self._status = _Status()  # VmHWM
        self._high_bytes = 0  # the last VmHWM read
        self._item_bytes = 0.0  # mean payload of a sampled item
        self._start_gate: StartGate | None = None  # counts the items the callbacks yielded and the outputs that ended
        self.undone: dict[str, int] = {}  # what a close without JOBDIR leaves uncrawled
        self.browser_cap: int | None = None  # the browser lever's cap on concurrency (the tree's floor), if any
        self._found_scheduler: Any = None
        self._handlers_seen = -1  # download handlers loaded at the last look for scrapy-playwright's
        self._browser_handlers: list[Any] = []

    def _concurrency(self, levers: Levers) -> int:
        """The downloader's concurrency: the policy's, under the browser lever's cap."""
        return levers.concurrency if self.browser_cap is None else min(levers.concurrency, self.browser_cap)

    @property
    def signal_seconds(self) -> float:
        """The signal handlers' CPU (and the cost admission's answers to the download gate): the sampled calls' CPU
        scaled to every call."""
        if not self.signal_sampled:
            return 0.0
        return self.signal_sampled_seconds * self.signal_calls / self.signal_sampled

    @property
    def cpu_seconds(self) -> float:
        """The governor's own CPU: its ticks (spills, collections, the browser lever) and its signal handlers."""
        return self.tick_seconds + self.signal_seconds

    @classmethod
    def from_crawler(cls, crawler: Any) -> MemoryGovernor:
        """Build from ``CRAWLMEM_BUDGET`` and ``CRAWLMEM_GOVERNOR_*``; NotConfigured without a budget."""
        settings = crawler.settings
        config = CrawlMemConfig.from_settings(settings)
        if config.budget in (None, ""):
            raise NotConfigured(f"{BUDGET} is not set")
        budget = resolve_budget(config.budget)
        if budget is None:
            logger.warning("crawlmem governor: %s='auto' but this process's cgroup sets no memory limit:"
                           " the governor is off", BUDGET)
            raise NotConfigured(f"{BUDGET} is auto and no cgroup limit is set")
        if config.governor_low_share >= config.governor_high_share:
            raise ValueError(
                f"invalid {name_of('governor_low_share')} {config.governor_low_share!r} from Scrapy settings:"
                f" it must be under {name_of('governor_high_share')} ({config.governor_high_share!r})"
            )
        governor = cls(
            crawler, budget_bytes=budget, interval_seconds=config.governor_interval_seconds,
            min_concurrency=config.governor_min_concurrency,
            high_share=config.governor_high_share, low_share=config.governor_low_share,
            close_share=config.governor_close_share,
            start_concurrency=config.governor_start_concurrency,
        )
        if not settings.frozen:  # EXTENSIONS alone: the start gate and the spilling scheduler, as the addon adds them
            add_components(settings)
        crawler.signals.connect(governor.spider_opened, signal=signals.spider_opened)
        crawler.signals.connect(governor.spider_closed, signal=signals.spider_closed)
        crawler.signals.connect(governor.headers_received, signal=signals.headers_received)
        crawler.signals.connect(governor.response_received, signal=signals.response_received)
        return governor

    # -- signals (reactor thread) ----------------------------------------------------

    def spider_opened(self, spider: Any) -> None:
        """Start ticking; say which levers this crawl has."""
        from twisted.internet import task

        began = time.thread_time()
        self._started = time.monotonic()
        stats = self.crawler.stats
        stats.set_value("crawlmem/governor/budget_bytes", self.config.budget_bytes)
        stats.set_value("crawlmem/governor/concurrency", self.config.base_concurrency)
        stats.set_value("crawlmem/governor/base_concurrency", self.config.base_concurrency)
        levers = ["concurrency", "scraper active size"]
        gate = self._gate()
        if gate is not None:
            gate.on_item = self._signal_tick  # RSS read every 20 ms: start() can yield 400 MB of requests in one 0.25 s tick
            gate.on_output = lambda output: self._signal(self._on_output, output)  # timed as signals
            self._start_gate = gate
        levers += ["start gate"] if gate is not None else []
        spilling = is_spilling(self._scheduler(), SpillingScheduler)
        levers += ["spill to disk"] if spilling else []
        engine = probes._engine(self.crawler)
        if engine is not None:
            self.download_gate = DownloadGate(engine.downloader)
            self.pull_hold = PullHold(engine.downloader, engine, lambda: self._signal(self._items_promised))
            self._admit(self.download_gate, gate)
            levers += ["download gate", "items in pipelines"]
        levers += ["browser contexts"] if probes._attempt(probes.playwright_handlers, self.crawler) else []
        missing = ([] if gate is not None else ["its start gate (SPIDER_MIDDLEWARES)"]) + (
            [] if spilling else [f"its spilling scheduler (SCHEDULER is {type(self._scheduler()).__name__})"])
        if missing:
            logger.warning("crawlmem governor: running without %s: the backlog and parse trees are not governed;"
                           " enable it with ADDONS = {%r: 0}", " and ".join(missing), ADDON_PATH)
        if probes.reset_peak_rss():  # VmHWM from here: the peak and spikes between two readings (as the extension does)
            self._high_bytes = self._status.peak_bytes() or 0
        logger.info("crawlmem governor: budget %.1f MiB (acts over %.0f%%, restores under %.0f%%, closes over %.0f%%);"
                    " levers: %s", self.config.budget_bytes / 2**20, 100 * self.config.high_share,
                    100 * self.config.low_share, 100 * self.config.hard_share, ", ".join(levers))
        if gc.get_freeze_count() == 0:  # what exists before the crawl leaves the collector: reclaims walk the crawl's
            gc.freeze()  # without a collection first (20-40 ms of a short crawl's CPU): the open's garbage is small
            self._froze_gc = True
        rss = self._statm.rss_bytes()
        opening = self.policy.open(rss)
        if engine is not None:
            for decision in opening:  # the start, from the headroom: ramps up once responses show their cost
                self._apply(engine, decision, Sample(rss_bytes=rss, in_flight=0, queued=0))
            if self.policy.levers.concurrency < self.config.base_concurrency:
                engine.downloader.total_concurrency = self.policy.levers.concurrency
                stats.set_value("crawlmem/governor/concurrency", self.policy.levers.concurrency)
                if self.download_gate is not None:  # until a response shows its size, two at a time
                    self.download_gate.set_limit(min(2, self.policy.levers.concurrency))
        self.tick_seconds += time.thread_time() - began
        self._task = task.LoopingCall(self._scheduled_tick)
        self._task.start(self.interval_seconds, now=True)

    def spider_closed(self, spider: Any, reason: str) -> None:
        """Stop ticking; write the summary stats."""
        if self._task is not None and self._task.running:
            self._task.stop()
        self._task = None
        if self._froze_gc:
            gc.unfreeze()
            self._froze_gc = False
        self._statm.close()
        self.peak_rss_bytes = max(self.peak_rss_bytes, self._status.peak_bytes() or 0)  # the kernel's, not the ticks'
        self._status.close()
        stats = self.crawler.stats
        for installed in (self.download_gate, self.pull_hold):
            if installed is not None:
                installed.uninstall()
        if self.download_gate is not None:
            stats.set_value("crawlmem/governor/download_gate_waits", self.download_gate.waits)
            stats.set_value("crawlmem/governor/download_gate_peak", self.download_gate.peak_passed)
        if self.pull_hold is not None:
            stats.set_value("crawlmem/governor/item_holds", self.pull_hold.holds)
        if self.admission is not None:
            stats.set_value("crawlmem/governor/cost_holds", self.admission.holds)
            stats.set_value("crawlmem/governor/parse_amplification", round(self.admission.parse.amplification, 2))
        cost_f, cost_q = self.policy.model.costs()
        for key, value in {"peak_rss_bytes": self.peak_rss_bytes, "ticks": self.ticks, "trims": self.trims,
                           "cpu_seconds": round(self.cpu_seconds, 6), "cpu_seconds/signals": round(self.signal_seconds, 6),
                           "cpu_seconds/spill": round(self.spill_seconds, 6), "cpu_seconds/trim": round(self.trim_seconds, 6),
                           "cost_in_flight_bytes": int(cost_f), "cost_queued_bytes": int(cost_q)}.items():
            stats.set_value(f"crawlmem/governor/{key}", value)
        if self.lever is not None:
            stats.set_value("crawlmem/governor/browser_peak_pss_bytes", self.lever.peak_tree_bytes)
            stats.set_value("crawlmem/governor/browser_read_cpu_seconds", round(self.lever.cpu_seconds, 6))
            stats.set_value("crawlmem/governor/browser_reads", self.lever.tree.samples)
            stats.set_value("crawlmem/governor/browser_pss_reads", self.lever.tree.detail_samples)
        if self.record_path is not None:
            write_record(self, self.record_path, reason)

    def headers_received(self, headers: Any, body_length: int, request: Any, spider: Any) -> None:
        """A download's headers arrived: learn its announced size before its body is in memory (not a small one's, nor
        one no larger than the mean body: its response tells the same in a moment, and the cost admission counts it
        at the mean body meanwhile, which is no less; a crawl of 512 KiB pages spent a fifth of its signals' CPU here)."""
        self._headers += 1
        if self._body_bytes > 0 and (body_length < SMALL_BODY_BYTES or body_length <= self._body_bytes):
            return
        self._signal(self._on_headers, body_length, request)

    def response_received(self, response: Any, request: Any, spider: Any) -> None:
        """A response arrived: learn its size; tick out of turn when RSS is past the act share."""
        self._signal(self._on_response, len(getattr(response, "body", b"")), request, response)

    def _signal(self, handler: Any, *args: Any) -> Any:
        """Run a signal's handler (or a gate's question), timing one call in SIGNAL_SAMPLE_EVERY in thread CPU (less a
        tick it runs and the downloads a release starts; a call in which the collector ran is no sample). A call inside
        another (a parse's end wakes the gate, which asks the admission) is the outer call's CPU, counted once (but
        one inside a download a release starts: the outer call leaves that CPU to the crawl)."""
        if self._in_signal and not (self.download_gate is not None and self.download_gate.releasing):
            return handler(*args)
        self.signal_calls += 1
        outer, self._in_signal = self._in_signal, True
        try:
            if self.signal_calls % SIGNAL_SAMPLE_EVERY:
                return handler(*args)
            collections, ticks, released, began = _collections(), self.tick_seconds, self._released(), time.thread_time()
            answer = handler(*args)
            spent = time.thread_time() - began - (self.tick_seconds - ticks) - (self._released() - released)
        finally:
            self._in_signal = outer
        if _collections() != collections:  # the collector ran in the call: the crawl's allocations pay it
            return answer
        self.signal_sampled_seconds += max(0.0, spent)
        self.signal_sampled += 1
        return answer

    def _released(self) -> float:
        """Thread CPU of the downloads the download gate's releases started: the crawl's work, not the governor's."""
        return self.download_gate.released_seconds if self.download_gate is not None else 0.0

    def _on_headers(self, body_length: int, request: Any = None) -> None:
        first = self._body_bytes <= 0
        if body_length and body_length > 0:
            self._learn_body(body_length)
            if self.admission is not None:
                self.admission.headers(request, body_length)
        if first and self._body_bytes > 0:  # the first size shown: decide from it before more downloads start
            self.tick()
            self._sync_gate()  # else its response ticks out of turn if need be: this body is not in memory yet

    def _on_response(self, body_length: int, request: Any = None, response: Any = None) -> None:
        self._received += 1
        self._statm.add(body_length)
        first = self._body_bytes <= 0
        self._learn_body(body_length)
        if self.admission is not None:
            self.admission.response(request, response, body_length)
        if first:
            self.tick()
            self._sync_gate()
        else:
            self._signal_tick()

    def _on_output(self, output: Any) -> None:
        """The start gate saw one item in its ``output_every``: learn what an item carries."""
        if time.monotonic() - self._last_tick >= self.interval_seconds:  # a callback's burst can hold the reactor
            self.tick()
        if self._item_bytes > 0:  # a callback can yield 100 MB of items between two ticks
            self._item_tick()
        size = float(payload_bytes(output))
        self._item_bytes = size if self._item_bytes <= 0 else BODY_WEIGHT * size + (1 - BODY_WEIGHT) * self._item_bytes
        if self._start_gate is not None:
            self._start_gate.output_every = output_every(self._item_bytes)

    def _per_response(self) -> float:
        """Items a callback yields, on average (0 before a callback's output ended): the start gate counts them."""
        gate = self._start_gate
        return gate.items_out / gate.responses_out if gate is not None and gate.responses_out else 0.0

    def _item_tick(self) -> None:
        """Tick now (at most every 20 ms) when RSS and what the downloads under way will yield pass the act share."""
        now = time.monotonic()
        per_response = self._per_response()
        if now - self._last_item_read < SIGNAL_TICK_SECONDS or not per_response:  # its own clock: responses 10 ms
            return  # apart kept _signal_tick's taken, and 1,450 items were inside before a tick saw them coming
        self._last_item_read = now
        engine = probes._engine(self.crawler)
        slot = getattr(getattr(engine, "scraper", None), "slot", None)
        pending = len(getattr(getattr(engine, "downloader", None), "active", ()) or ()) + self._unparsed(slot)
        coming = coming_item_bytes(pending, self._concurrency(self.policy.levers), per_response, self._item_bytes)
        if self._statm.rss_bytes() + coming >= self.config.high_share * self.config.budget_bytes:
            self.tick()

    def _unparsed(self, slot: Any) -> int:
        """Responses received whose callback's output has not ended, at most those the scraper holds (a response that
        never reaches a callback, or a media download, must not hold the crawl for good)."""
        gate, held = self._start_gate, len(getattr(slot, "active", ()) or ())
        return 0 if gate is None else max(0, min(self._received - gate.responses_out, held))

    def _items_promised(self) -> int:
        """What the item cap counts: the items inside the pipelines and those the requests pulled and not yet parsed
        will yield (downloading, waiting at the download gate, or received with their callback's output not ended:
        Scrapy reads it a few items a turn while the engine pulls again)."""
        engine = probes._engine(self.crawler)
        slot = getattr(getattr(engine, "scraper", None), "slot", None)
        items = int(getattr(slot, "itemproc_size", 0) or 0)
        gate = self._start_gate
        if gate is None or not gate.responses_out:
            return items
        pending = len(getattr(getattr(engine, "downloader", None), "active", ()) or ()) + self._unparsed(slot)
        return promised_items(items, pending, gate.items_out / gate.responses_out)

    def _pause(self, paused: bool) -> None:
        """Start no new download while over the close share (and again once under it)."""
        if self.download_gate is None or self.pull_hold is None or self.download_gate.paused == paused:
            return
        self.download_gate.set_paused(paused)
        self.pull_hold.paused = paused
        if paused:
            self.crawler.stats.inc_value("crawlmem/governor/pauses")
            logger.info("crawlmem governor: RSS over %.0f%% of the budget: no new download starts until it is under"
                        " again", 100 * self.config.hard_share)
        else:
            self.pull_hold.kick()

    def _sync_gate(self) -> None:
        """The download gate at the concurrency the levers say while governing; open otherwise."""
        if self.download_gate is not None:
            governing = self.policy.governing or self.browser_cap is not None
            self.download_gate.set_limit(self._concurrency(self.policy.levers) if governing else 0)

    def _learn_body(self, body_bytes: int) -> None:
        self._body_bytes = body_bytes if self._body_bytes <= 0 else (
            BODY_WEIGHT * body_bytes + (1 - BODY_WEIGHT) * self._body_bytes)
        if self.admission is not None:
            self.admission.mean_body_bytes = self._body_bytes

    def _admit(self, download_gate: DownloadGate, gate: StartGate | None) -> None:
        """Admit downloads by their cost (``admit.py``): the download gate asks it, the start gate tells it what
        each parse cost."""
        admission = self.admission = CostAdmission(
            self.config.budget_bytes, self.config.high_share * self.config.budget_bytes, self._statm.rss_bytes,
            self.crawler.stats, base_rss=lambda: self.policy.open_bytes or self._statm.rss_bytes(),
            recent_rss=lambda: self._statm.recent_bytes(ANSWER_RSS_SECONDS))
        admission.downloading = lambda: download_gate.passed
        admission.yielded = lambda: self._item_bytes * self._per_response()
        download_gate.fits = lambda: bool(self._signal(admission.fits))  # the governor's CPU counts its answers
        if gate is not None:
            gate.on_parse = self._parse_signal

    def _parse_signal(self, response: Any, phase: int) -> None:
        """The start gate saw a callback begin (0), give its first output (1) or end (2); the first output matters
        only to a parse being measured (a large body), the end also to downloads waiting at the gate."""
        measuring = self.admission is not None and self.admission.measuring
        waiting = self.download_gate is not None and self.download_gate.waiting > 0
        if phase and not measuring and (phase == 1 or not waiting):
            return
        self._signal(self._on_parse, response, phase)

    def _on_parse(self, response: Any, phase: int) -> None:
        if self.admission is not None:
            self.admission.parse_phase(response, phase)
        if phase == 2 and self.download_gate is not None:
            self.download_gate.wake()  # the parse's memory is free: what now fits may start

    def _signal_tick(self) -> None:
        """Tick now when the LoopingCall is late, or when RSS is past the act share: a large response's cost arrives
        with it, between two ticks, and acting on its signal lowers concurrency before the next downloads start."""
        now = time.monotonic()
        if now - self._last_tick >= self.interval_seconds:
            self.tick()
            return
        if now - self._last_signal_read < SIGNAL_TICK_SECONDS:  # at most one statm read in SIGNAL_TICK_SECONDS
            return
        self._last_signal_read = now
        if self._statm.rss_bytes() >= self.config.high_share * self.config.budget_bytes:
            self.tick()

    # -- one tick -----------------------------------------------------------------------

    def _scheduled_tick(self) -> None:
        """The LoopingCall's tick, skipped when a signal ticked out of turn within half an interval: its reading is
        fresh (a crawl over the act share ticks on its responses every 20 ms)."""
        if time.monotonic() - self._last_tick >= self.interval_seconds / 2:
            self.tick()

    def tick(self) -> None:
        """Read memory and the queues, decide, act (reactor thread; never raises into the LoopingCall)."""
        began, released = time.thread_time(), self._released()
        try:
            if not self._metrics_registered and self.ticks <= 1:
                self._register_metrics()  # the measuring extension starts its server when the spider opens
            self._tick()
        except Exception:  # a Scrapy internal that moved must not stop the crawl
            logger.exception("crawlmem governor: a tick failed")
        finally:
            self.tick_seconds += time.thread_time() - began - (self._released() - released)

    def _tick(self) -> None:
        engine = probes._engine(self.crawler)
        if engine is None or getattr(engine, "spider", None) is None or self._closing:
            return
        self.ticks += 1
        self._last_tick = time.monotonic()
        sample = self._sample(engine)
        self.peak_rss_bytes = max(self.peak_rss_bytes, sample.rss_bytes)
        paused = self.policy.paused(sample)
        if (paused or self.policy.wants_fresh_reading(sample)) and self._trim(force=True):
            # the heap gave back what the crawl freed (a trim: it costs what it gives back): a collection (15 ms and
            # more on this heap) may not be needed any more, and a pause on freed heap lifts (a pipeline crawl paused
            # while its trims backed off: 107 s where its other runs took 27-31 s)
            sample = replace(sample, rss_bytes=self._statm.rss_bytes())
        if self.policy.wants_fresh_reading(sample):
            sample = self._reclaim(engine, sample) or sample  # decide on what is left once garbage is gone
        for decision in self.policy.step(sample):
            self._apply(engine, decision, sample)
        self._pause(self.policy.paused(sample) and not self._closing)
        if self.policy.governing and sample.rss_bytes >= self.config.high_share * self.config.budget_bytes:
            # not under the act share while the item cap holds the crawl: trims every second there cost 7-30 ms of CPU a
            # crawl (the governor's most), and in 5 runs without them the crawl ended no sooner
            self._trim()
        self._browser_tick(sample)
        self._pace(sample)

    def _pace(self, sample: Sample) -> None:
        """Tick every QUIET_TICKS intervals while the crawl is quiet (no headers, response, item or ended output
        since the last tick, the close share's clock not running, no browser whose tree grows between responses:
        memory grows with what arrives, and the first signal ticks out of turn), else every interval. A crawl waiting
        on a slow item pipeline spent most of the governor's CPU on ticks that read the same figures (paused over the
        close share while its items drained: 17 ticks in 4 s)."""
        gate = self._start_gate
        arrivals = self._headers + self._received + (gate.items_out + gate.responses_out if gate is not None else 0)
        quiet = (arrivals == self._arrivals_seen and not self._closing and self.lever is None
                 and not self.policy.close_clock)
        self._arrivals_seen = arrivals
        interval = self.interval_seconds * (QUIET_TICKS if quiet else 1)
        if self._task is not None and self._task.interval != interval:
            self._task.interval = interval

    def _browser_tick(self, sample: Sample) -> None:
        """The browser lever: rotate the context that grew when the browser tree's PSS passes the act share."""
        handlers = self._playwright_handlers()
        if not handlers:
            return
        if self.lever is None:
            self.lever = _lever_class()(self.config.budget_bytes, self.config.high_share, self.config.low_share,
                                        base_concurrency=self.config.base_concurrency,
                                        least_concurrency=self.config.min_concurrency, hard_share=self.config.hard_share)
        for event in self.lever.tick(handlers, concurrency=self.policy.levers.concurrency):
            self._browser_event(event, sample)

    def _browser_event(self, event: LeverEvent, sample: Sample) -> None:
        """Act on, count, log and record what the browser lever did: a cap on concurrency (``lower``, a
        ``browser_concurrency`` decision; ``raise``, a ``restore``), a rotation, a rotated context's close, the floor."""
        stats = self.crawler.stats
        if event.action in ("lower", "raise"):
            kind = BROWSER_CONCURRENCY if event.action == "lower" else RESTORE
            self.browser_cap = event.cap
            concurrency = self._concurrency(self.policy.levers)
            engine = probes._engine(self.crawler)
            if engine is not None:
                engine.downloader.total_concurrency = concurrency  # requests wait in the scheduler: none is dropped
                self._sync_gate()
            stats.set_value("crawlmem/governor/concurrency", concurrency)
            stats.min_value("crawlmem/governor/min_concurrency", concurrency)
            stats.set_value("crawlmem/governor/browser_concurrency_cap", event.cap or 0)
            if event.cap is not None:
                stats.min_value("crawlmem/governor/browser_min_concurrency", event.cap)
        else:
            kind = BROWSER_CONTEXT
            counter = {"rotate": "browser_rotations", "close": "browser_contexts_closed"}.get(event.action, "browser_floor")
            stats.inc_value(f"crawlmem/governor/{counter}")
        stats.inc_value("crawlmem/governor/decisions")
        stats.inc_value(f"crawlmem/governor/decisions/{kind}")
        stats.max_value("crawlmem/governor/browser_peak_pss_bytes", event.tree_bytes)
        logger.log(logging.WARNING if event.action == "floor" else logging.INFO, "crawlmem governor: %s", event.message)
        levers = self.policy.levers
        self.decisions.append(DecisionRecord(
            round(time.monotonic() - self._started, 3), int(stats.get_value("response_received_count", 0) or 0),
            kind, sample.rss_bytes, self._concurrency(levers), levers.max_active_size, levers.gate_start, levers.spill,
            event.message, browser_pss_bytes=event.tree_bytes,
        ))

    def _sample(self, engine: Any) -> Sample:
        scheduler = self._scheduler()
        if is_spilling(scheduler, SpillingScheduler):
            queued = scheduler.in_memory
        elif scheduler is not None and getattr(scheduler, "dqs", None) is None:
            queued = len(scheduler)
        else:
            queued = 0  # JOBDIR: Scrapy keeps the queue on disk
        slot = getattr(engine.scraper, "slot", None)
        held = len(getattr(slot, "active", ()) or ())
        downloading = len(engine.downloader.active) - (self.download_gate.waiting if self.download_gate else 0)
        per_response = self._per_response()
        high = self._status.high_bytes() or 0  # a new high since the last reading is a spike the ticks missed
        spike, self._high_bytes = (high if high > self._high_bytes else 0), max(high, self._high_bytes)
        return Sample(
            collected=False, t_seconds=time.monotonic(),
            rss_bytes=self._statm.rss_bytes(),
            in_flight=downloading + held,  # downloading, or downloaded and waiting in the scraper
            queued=queued,
            active_bytes=int(getattr(slot, "active_size", 0) or 0),
            active_responses=held,
            body_bytes=self._body_bytes,
            high_bytes=spike, items=int(getattr(slot, "itemproc_size", 0) or 0), item_bytes=self._item_bytes,
            items_per_response=per_response,
            downloading=downloading, unparsed=self._unparsed(slot),
        )

    def _apply(self, engine: Any, decision: Decision, sample: Sample) -> None:
        """Move the levers as ``decision`` says; count, log and record it."""
        levers: Levers = decision.levers
        concurrency = self._concurrency(levers)
        engine.downloader.total_concurrency = concurrency
        self._sync_gate()
        if self.pull_hold is not None:
            self.pull_hold.set_cap(levers.item_cap)
        slot = getattr(engine.scraper, "slot", None)
        if slot is not None:
            slot.max_active_size = levers.max_active_size
        gate = self._gate()
        if gate is not None and levers.gate_start:
            gate.close_gate()
        elif gate is not None:
            gate.open_gate()
        scheduler = self._scheduler()
        message = decision.message
        if concurrency < levers.concurrency:
            message += f" (the browser lever caps it at {concurrency})"
        if is_spilling(scheduler, SpillingScheduler):
            scheduler.spilling = levers.spill
            if decision.spill_now:
                began = time.thread_time()
                moved = scheduler.spill(decision.spill_now)
                self.spill_seconds += time.thread_time() - began
                if moved < decision.spill_now:
                    message += f" ({decision.spill_now - moved:,} cannot be serialized and stay in memory)"
        elif levers.spill:
            message += " (no spilling scheduler: set SCHEDULER, or use the GovernorAddon)"
        if decision.kind == RETAINED:
            self.crawler.stats.set_value("crawlmem/governor/retained_bytes", sample.rss_bytes)
            logger.warning("crawlmem governor: %s", message)
        else:
            logger.info("crawlmem governor: %s", message)
        stats = self.crawler.stats
        stats.inc_value("crawlmem/governor/decisions")
        stats.inc_value(f"crawlmem/governor/decisions/{decision.kind}")
        stats.set_value("crawlmem/governor/concurrency", concurrency)
        stats.set_value("crawlmem/governor/max_active_size", levers.max_active_size)
        stats.min_value("crawlmem/governor/min_concurrency", concurrency)
        self.decisions.append(DecisionRecord(
            round(time.monotonic() - self._started, 3), int(stats.get_value("response_received_count", 0) or 0),
            decision.kind, sample.rss_bytes, concurrency,
            levers.max_active_size, levers.gate_start, levers.spill, message,
        ))
        if decision.kind in ("in_flight", "backlog"):
            self._trim(force=True)
        if decision.close:
            self._close(engine)

    def _close(self, engine: Any) -> None:
        self._closing = True
        if self.pull_hold is not None:  # from here no request leaves the scheduler: the count below calls it queued
            self.pull_hold.hold_for_close()
        if self.jobdir:
            logger.info("crawlmem governor: closing with reason %s; the queue is kept in JOBDIR %s: run the crawl"
                        " again with the same JOBDIR to resume", MEMORY_BUDGET, self.jobdir)
            probes.close_spider(self.crawler, MEMORY_BUDGET)
            return
        from scrapy.utils.defer import deferred_from_coro

        deferred_from_coro(self._close_counted(engine)).addErrback(
            lambda failure: logger.error("crawlmem governor: closing failed: %s", failure.getErrorMessage()))

    async def _close_counted(self, engine: Any) -> None:
        """Count what the close leaves uncrawled (the queue, spilled requests, start() read to its end), say it, close."""
        self.undone = await undone_counts(engine, self._scheduler(), self._gate())
        for key, value in self.undone.items():
            self.crawler.stats.set_value(f"crawlmem/governor/undone/{key}", value)
        self.danger = danger_snapshot(
            self.crawler, engine, queued=self.undone["queued_requests"],
            threshold_bytes=int(self.config.hard_share * self.config.budget_bytes),
            t_seconds=time.monotonic() - self._started, rss_bytes=self._statm.rss_bytes(),
            start_rss_bytes=self.policy.baseline_bytes or 0,
            record_dir=self.record_path.parent if self.record_path is not None else None, governor=self)
        logger.warning("crawlmem governor: closing with reason %s without JOBDIR: %s (set JOBDIR to resume the queue);"
                       " %s", MEMORY_BUDGET, undone_sentence(self.undone), self.danger.describe())
        probes.close_spider(self.crawler, MEMORY_BUDGET)

    def _reclaim(self, engine: Any, sample: Sample) -> Sample | None:
        """Before a decision that needs a fresh reading (a close, retained): trim the heap, then collect if the trim was
        not enough (items a pipeline let go are freed heap, not garbage); the reading to decide on (None: none taken).
        Only when RSS grew RECLAIM_GROWTH of the act threshold since the last, at most every RECLAIM_EVERY_SECONDS or
        to judge retained memory again once RSS passed a reclaim's highest reading by REJUDGE_RETAINED_BYTES."""
        rss = self._statm.rss_bytes()
        grown = rss - self._after_reclaim
        if grown < RECLAIM_GROWTH * self.config.high_share * self.config.budget_bytes:
            return None
        # a new high, not a rise from the last collection's low: RSS swinging with the bodies in flight never asks
        rejudge = (rss - self._reclaim_high >= REJUDGE_RETAINED_BYTES
                   and sample.rss_bytes < self.config.hard_share * self.config.budget_bytes)
        if time.monotonic() - self._last_reclaim < RECLAIM_EVERY_SECONDS and not rejudge:
            return None
        began = time.thread_time()
        probes.malloc_trim()
        self._last_trim = self._last_reclaim = time.monotonic()
        self._after_reclaim = self._statm.rss_bytes()
        self._reclaim_high = max(self._reclaim_high, rss)
        trimmed = replace(sample, rss_bytes=self._after_reclaim)
        if not self.policy.wants_fresh_reading(trimmed):  # the trim was enough: what was over is no longer
            self.trims += 1
            self.trim_seconds += time.thread_time() - began
            return trimmed
        gc.collect()
        probes.malloc_trim()
        self._after_reclaim = self._statm.rss_bytes()
        self.reclaims += 1
        self.reclaim_seconds += time.thread_time() - began  # CPU of the trims and the collection
        self.reclaimed_bytes += max(0, rss - self._after_reclaim)
        stats = self.crawler.stats
        stats.set_value("crawlmem/governor/reclaims", self.reclaims)
        stats.set_value("crawlmem/governor/reclaimed_bytes", self.reclaimed_bytes)
        stats.set_value("crawlmem/governor/reclaim_seconds", round(self.reclaim_seconds, 4))
        return replace(self._sample(engine), collected=True)

    def _trim(self, force: bool = False) -> bool:
        """Give freed heap back to the kernel (glibc keeps freed bodies): for a decision (``force``) at most every
        FORCED_TRIM_SECONDS, else every TRIM_EVERY_SECONDS times ``_trim_backoff``, doubled after a trim that gave back
        under TRIM_MIN_BYTES and reset by one that gave more. A trim costs what it gives back (8-17 ms for 200 MiB,
        0.2 ms for nothing). Whether it trimmed and gave back at least TRIM_MIN_BYTES."""
        now = time.monotonic()
        if now - self._last_trim < (FORCED_TRIM_SECONDS if force else TRIM_EVERY_SECONDS * self._trim_backoff):
            return False
        self._last_trim = now
        began, before = time.thread_time(), self._statm.rss_bytes()
        probes.malloc_trim()
        freed = before - self._statm.rss_bytes()
        self.trims += 1
        self.trim_seconds += time.thread_time() - began
        self._trim_backoff = 1 if freed >= TRIM_MIN_BYTES else min(TRIM_MAX_BACKOFF, 2 * self._trim_backoff)
        return freed >= TRIM_MIN_BYTES

    def _register_metrics(self) -> None:
        """Add the governor's gauges to the measuring extension's Prometheus endpoint, once, when it serves one."""
        if not self._metrics_registered:
            from pytest_crawlmem.governor.metrics import register_metrics

            self._metrics_registered = register_metrics(self)

    # -- where the levers are -----------------------------------------------------------

    def _scheduler(self) -> Any:
        """The engine's scheduler (kept once found: the engine makes it before the spider opens)."""
        if self._found_scheduler is None:
            engine = probes._engine(self.crawler)
            self._found_scheduler = probes._scheduler(engine) if engine is not None else None
        return self._found_scheduler

    def _playwright_handlers(self) -> list[Any]:
        """The loaded scrapy-playwright handlers, looked for again once the downloader loaded another handler (each
        tick's look was 14-19 us of a ~250 us tick)."""
        loaded = probes.loaded_handlers(self.crawler)
        if loaded is None or len(loaded) != self._handlers_seen:
            self._handlers_seen = -1 if loaded is None else len(loaded)
            self._browser_handlers = probes._attempt(probes.playwright_handlers, self.crawler) or []
        return self._browser_handlers

    def _gate(self) -> StartGate | None:
        engine = probes._engine(self.crawler)
        manager = getattr(getattr(engine, "scraper", None), "spidermw", None)
        for middleware in getattr(manager, "middlewares", ()):
            if isinstance(middleware, StartGate):
                return middleware
        return None

    def records(self) -> list[dict[str, Any]]:
        """The decisions as plain dicts (report.json, the timeline's bands)."""
        return [asdict(record) for record in self.decisions]


def _collections() -> int:
    """Collections the garbage collector ran so far (``gc.get_count()`` also falls as objects are freed)."""
    return sum(generation["collections"] for generation in gc.get_stats())


def _lever_class() -> type[ContextLever]:
    """The browser lever's class, imported once a scrapy-playwright handler is loaded (its browser tree reader loads
    psutil); a class set on this module (a benchmark's variant) is used as it is."""
    lever: type[ContextLever] = globals().get("ContextLever") or __getattr__("ContextLever")
    return lever


def __getattr__(name: str) -> Any:
    """``ContextLever``, re-exported here, loads with its module when first asked for."""
    if name in ("ContextLever", "LeverEvent"):
        from pytest_crawlmem.governor import contextlever

        return getattr(contextlever, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def governor_danger(crawler: Any) -> DangerSnapshot | None:
    """The danger snapshot the governor took as it closed the crawl without JOBDIR, if it did (crawl process)."""
    for extension in getattr(getattr(crawler, "extensions", None), "middlewares", ()):
        if isinstance(extension, MemoryGovernor):
            return extension.danger
    return None
