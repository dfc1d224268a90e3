"""The attribution window: a short traced stretch of a crawl that looks leaky, and what it finds (crawl process).

Opened at a drained checkpoint when the checkpoints so far look like a leak (``growth.suspicious``; in a short crawl
whose strong trend still lacks a point, one scheduled checkpoint later, the containers measured already), closed two extra
checkpoints later (the middle one: tracemalloc's growth from there, net of the queue, is the crawl's Python-level
growth, compared with the heap's to tell native memory). Snapshots at all three give the growth sites
(``snapshots.growing_sites``); the containers that grew in between are the holders (``holders.find_keepers``, read
while tracing still runs so the tracebacks of their newest entries point at the line that stores into them); that line
leads the growth sites (``sites.keeping_first``); what tracing left behind once stopped is the window's residue
(``plugin_bytes``, taken off later checkpoints' heap signal). Only a crawl that already looks leaky pays for deep
tracing, and only briefly. Runs on the reactor thread.
"""

from __future__ import annotations

import gc
import linecache
import os
import sys
import tracemalloc
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from pytest_crawlmem.attribution.holders import (
    Lengths,
    QueuedRequests,
    container_lengths,
    find_keepers,
    python_roots,
    user_classes,
    user_modules,
)
from pytest_crawlmem.attribution.keeping import Store, same_function
from pytest_crawlmem.attribution.scope import modules_in_scope, spider_packages
from pytest_crawlmem.core.evidence import short_of_strong_points, suspicious, window_residue
from pytest_crawlmem.core.models import BLOCK_BYTES, Checkpoint, GrowthSite, Holder
from pytest_crawlmem.core.sites import KeptEvidence, keeping_first, net_of_queue
from pytest_crawlmem.probes import readings as probes
from pytest_crawlmem.probes.meter import settle
from pytest_crawlmem.probes.recording import Recording
from pytest_crawlmem.probes.snapshots import (
    is_user_file,
    queued_share,
    site_growth,
    start_tracing,
    stop_tracing,
    take_snapshot,
    traced_files,
)

#: The window has a middle checkpoint when each half spans at least this many responses.
MIN_HALF_WINDOW_RESPONSES = 10


class AttributionWindow:
    """One traced window per crawl; its findings are :attr:`growth_sites`, :attr:`holders` and :attr:`plugin_bytes`.

    The crawler is passed to each call, never kept: the runner lets go of the crawl before it counts what is alive.
    """

    def __init__(self, recording: Recording, *, frames: int, max_responses: int, enabled: bool,
                 leak_per_response: int) -> None:
        self.recording = recording
        self.frames = frames  # CRAWLMEM_ATTRIBUTION_FRAMES: 0 never opens a window
        self.max_responses = max_responses  # CRAWLMEM_ATTRIBUTION_RESPONSES
        self.enabled = enabled  # the crawl takes checkpoints (CRAWLMEM_CHECKPOINTS): nothing to judge otherwise
        self.leak_per_response = leak_per_response
        self.growth_sites: list[GrowthSite] = []
        self.holders: tuple[Holder, ...] = ()  # containers that grew during the window
        self.kept: KeptEvidence | None = None  # what tracemalloc saw grow in the window, the first holder's entries
        self.plugin_bytes = 0  # memory the closed window left behind (not the crawl's): off the heap signal after it
        self.started_tracing = False  # the window runs on tracing it started (or adopted): it stops it when it ends
        #: asked when the window ends on tracing it started: True when another window (the danger snapshot's) takes
        #: the tracing over and stops it itself
        self.handoff: Callable[[], bool] | None = None
        self._snapshots: list[tracemalloc.Snapshot | None] = []
        self._responses: list[int] = []  # the response count at each snapshot
        self._done = False
        self._resume_at = 0  # the checkpoint the schedule had planned when the window opened
        self._queued: dict[str, int] = {}  # the scheduler's share of the growth sites when the window closed
        self._opening: list[Checkpoint] = []  # the checkpoint that opened the window and the one before it
        self._lengths: Lengths = {}
        self._lengths_at: int | None = None  # the response count the containers were measured at (before tracing)
        self._traced_at_open: int | None = None  # tracemalloc's figure at the opening checkpoint (0: tracing starts)
        self._close_at = 0  # the response count the window closes at, when it has a middle checkpoint
        self._middle: tuple[int, int | None, int] | None = None  # responses, traced bytes, queued bytes in the middle
        self._queued_middle: dict[str, int] = {}  # the scheduler's share of the growth sites in the middle
        self._last_interval_bytes: int | None = None  # what the growing sites grew by from the middle on
        self.roots_walked = 0  # the most roots one holder walk went through (work, not seconds: tests read it)
        self.files_parsed = 0  # source files read for the storing line

    @property
    def is_open(self) -> bool:
        """Whether a window is open now."""
        return bool(self._snapshots)

    def at_checkpoint(self, crawler: Any, checkpoint: Checkpoint, next_checkpoint: int) -> int:
        """Open the window when the checkpoints look like a leak, or close an open one; return the next checkpoint.

        The window lasts ``max_responses`` responses at most and ends on an extra checkpoint halfway to the
        scheduled one at the latest; the schedule then resumes where it was, so leaving that traced checkpoint
        out of the judgement costs no judged interval.
        """
        if self._done or not self.frames:
            return next_checkpoint
        if self._snapshots and len(self._snapshots) == 1 and self._close_at:
            # the middle of the window (a drained checkpoint lands up to CONCURRENT_REQUESTS responses after it was due):
            # tracemalloc's start-up churn is behind it, what it sees grow from here is the crawl's growth
            self._snapshots.append(take_snapshot())
            self._responses.append(checkpoint.responses)
            self._queued_middle = self._queued_share(crawler)
            self._middle = (checkpoint.responses, checkpoint.traced_bytes, sum(self._queued_middle.values()))
            return max(self._close_at, checkpoint.responses + 2 * MIN_HALF_WINDOW_RESPONSES)
        if self._snapshots:
            self._snapshots.append(take_snapshot())
            self._queued = self._queued_share(crawler)
            self._responses.append(checkpoint.responses)
            self._close(crawler, checkpoint.traced_bytes, checkpoint.responses)
            # the window's extra checkpoint does not shift the schedule
            return self._resume_at if self._resume_at > checkpoint.responses else next_checkpoint
        if not (self.enabled and suspicious(self.recording.checkpoints, self.leak_per_response)):
            self._lengths, self._lengths_at = {}, None  # a deferred opening that no longer looks leaky
            return next_checkpoint
        if self._lengths_at is None:
            try:  # before tracing starts: the walk's own allocations are not traced (a traced walk ran ~10x slower)
                roots = _holder_roots(crawler)[0]
                self.roots_walked = max(self.roots_walked, len(roots))
                self._lengths = container_lengths(roots)
                del roots
            except Exception as exc:  # evidence, never a reason to break the crawl
                self.recording.add_error(f"measuring containers failed: {exc!r}")
            self._lengths_at = checkpoint.responses
        if not tracemalloc.is_tracing() and short_of_strong_points(self.recording.checkpoints):
            # tracing waits for the scheduled checkpoint the short crawl's verdict still needs; the containers measured
            # here keep the holders' span (their tracebacks need only the newest entries traced)
            return next_checkpoint
        if tracemalloc.is_tracing():
            self._snapshots = [take_snapshot()]
            self._traced_at_open = checkpoint.traced_bytes
        else:
            self._traced_at_open = 0
            start_tracing(self.frames)
            self.started_tracing = True
            self._snapshots = [None]  # nothing is traced yet: the empty snapshot
            self._opening = self.recording.checkpoints[-5:]  # the rate before the window: growth.window_residue
        self._responses = [checkpoint.responses]
        self._resume_at = next_checkpoint
        # the window closes on an extra checkpoint halfway to the scheduled one at the latest: that one stays untraced
        room = max(next_checkpoint - checkpoint.responses, 2) // 2
        self._close_at = checkpoint.responses + min(self.max_responses, room)
        # a traced checkpoint in the middle: what tracemalloc sees grow from there is the crawl's growth (a short room
        # stretches the window past the scheduled checkpoint, which then falls in the window)
        return checkpoint.responses + max((self._close_at - checkpoint.responses) // 2, MIN_HALF_WINDOW_RESPONSES)

    def close_at_end(self, crawler: Any, responses: int) -> None:
        """Close a window still open when the spider closes (the crawl is drained), before the closing checkpoint."""
        if not self._snapshots:
            return
        gc.collect()
        traced = tracemalloc.get_traced_memory()[0] if tracemalloc.is_tracing() else None
        self._snapshots.append(take_snapshot())
        self._responses.append(responses)
        self._close(crawler, traced, responses)

    def adopt_tracing(self) -> bool:
        """Whether an open window runs on tracing now: it takes over tracing another window started, and stops it when
        it ends. A closed window owns no tracing (it stopped its own), so the caller stops what is left."""
        if not self._snapshots or self._done:
            return False
        self.started_tracing = True
        return True

    def end(self) -> None:
        """Close the traced window and keep the sites that grew in every traced interval."""
        if self._done:
            return
        self._done = True
        self._sites()
        self._snapshots = []
        if self.started_tracing and tracemalloc.is_tracing() and not (self.handoff is not None and self.handoff()):
            stop_tracing()

    def _close(self, crawler: Any, traced: int | None, responses: int) -> None:
        """End the window, find the holders, then measure what tracing left behind once stopped (drained crawl).

        Measured: about 500-600 KiB stays in use after ``tracemalloc.stop()`` on a clean catalog crawl (a 3 KiB/response
        step in the interval across a 170-response window): the heap after, less the heap when the window opened and
        the crawl's growth in it (``growth.window_residue``; ``traced`` is read before the closing snapshot), is taken
        off every later checkpoint's heap signal.
        """
        window_traced = traced
        traced = traced if self.started_tracing else None
        self._sites()
        self._find_holders(crawler, responses, window_traced)  # tracing still runs: the entries' tracebacks
        self.end()
        if traced is None or len(self._opening) < 2:
            return
        settle()
        heap = probes.read_malloc_in_use_bytes()
        if heap is not None:
            after = heap + BLOCK_BYTES * sys.getallocatedblocks()
            self.plugin_bytes = window_residue(self._opening, after, traced, responses - self._opening[-1].responses)

    def _sites(self) -> None:
        """The sites that grew in every traced interval (once, while the snapshots are there), less those whose growth is
        the scheduler's queue; what a drained checkpoint inside the window freed never grew in every interval."""
        if len(self._snapshots) >= 2 and not self.growth_sites:
            sites, grew = site_growth(self._snapshots, self._responses, queued=self._queued,
                                      queued_before=self._queued_middle if self._middle else None)
            self.growth_sites = list(net_of_queue(sites, self._queued))  # the scheduler's lines never lead
            self._last_interval_bytes = grew if len(self._snapshots) > 2 else None

    def _find_holders(self, crawler: Any, responses: int, traced: int | None) -> None:
        """At the window's closing checkpoint (crawl alive, drained, still tracing): the containers that grew during the
        window, the line that keeps the first, and the growth sites led by that line."""
        if not self._responses:
            return
        window = responses - (self._responses[0] if self._lengths_at is None else self._lengths_at)
        try:
            sites = [site.location for site in self.growth_sites]
            roots, library = _holder_roots(crawler)
            self.roots_walked = max(self.roots_walked, len(roots))
            # the storing line is searched in the files the traced window names (and each root's own): not in a large
            # project's every loaded module, which took minutes to parse while tracing
            files = traced_files(self._snapshots[-1] if self._snapshots else None) | _files_of(
                [site.location for site in self.growth_sites if site.in_user_code])
            parsed: dict[str, list[Store]] = {}
            keepers = find_keepers(roots, self._lengths, window, prefer=sites, library=library, files=files,
                                   parsed=parsed)
            self.files_parsed += len(parsed)
            del parsed
            self.holders = tuple(holder for holder, _ in keepers)
            span, grew = self._traced_growth(responses, traced)
            first = keepers[0] if keepers else None
            self.kept = KeptEvidence(
                responses=span, traced_bytes=grew,
                holder=first[0].path if first else "", line=first[0].line if first else None,
                owners=tuple(first[1].owners.most_common(3)) if first else (),
                sampled=first[1].sampled if first else 0,
                allocated_at=tuple(site for site, _ in first[1].sites.most_common(5)) if first else (),
            )
            del keepers, first, roots
            line = next((h.line for h in self.holders if h.line), None)
            if line is not None and not set(self.kept.allocated_at) & {s.location for s in self.growth_sites}:
                # the entries' tracebacks are unknown (allocated before the window, or from a C type's free list)
                beside = same_function(line, [s.location for s in self.growth_sites if s.in_user_code])
                self.kept = replace(self.kept, allocated_at=tuple(beside[:1]))
            self.growth_sites = list(keeping_first(self.growth_sites, self.holders, self.kept, _source_of(line)))
            if line is not None and self.growth_sites and self.growth_sites[0].location == line:
                self.kept = replace(self.kept, kept_per_response=self.growth_sites[0].bytes_per_response)
            held = next((h.entries_bytes_per_response for h in self.holders if h.line == line), None)
            if line is not None and held is not None and held > (self.kept.kept_per_response or 0.0):
                # what the entries hold, deep: Python-level memory even where the window's sites were the scheduler's
                # (a list handed on in request.meta), so it is not taken for native growth
                self.kept = replace(self.kept, kept_per_response=held)
        except Exception as exc:  # evidence, never a reason to break the crawl
            self.recording.add_error(f"finding holders failed: {exc!r}")
        self._lengths, self._lengths_at = {}, None

    def _traced_growth(self, responses: int, traced: int | None) -> tuple[int, int | None]:
        """Responses and what tracemalloc saw grow over them, net of the scheduler's queue: from the window's middle
        checkpoint on, the sites that grew in both halves (before it, and at sites that stop growing, tracing counts
        the objects the crawl replaces as new: measured 6 KiB/response on a catalog crawl), else from its opening."""
        queued = sum(self._queued.values())
        if self._middle is not None and self._last_interval_bytes is not None:
            return responses - self._middle[0], max(0, self._last_interval_bytes)
        if traced is None or self._traced_at_open is None or not self._responses:
            return 0, None
        return responses - self._responses[0], max(0, traced - self._traced_at_open - queued)

    def _queued_share(self, crawler: Any) -> dict[str, int]:
        """Traced bytes per growth site of the requests the scheduler holds (evidence: never breaks the crawl)."""
        try:
            return queued_share(probes.queued_requests(crawler))
        except Exception as exc:
            self.recording.add_error(f"measuring the scheduler's share failed: {exc!r}")
            return {}


#: Queued requests whose ``meta`` and ``cb_kwargs`` the holder walk reads (a container they share is in the first).
QUEUED_ROOT_REQUESTS = 200


def _holder_roots(crawler: Any) -> tuple[dict[str, Any], list[str]]:
    """Where a holder of a leak can hang: the spider, the crawl's components, what the queued requests share, the
    user's modules and classes, then Scrapy's own stores a user writes into (the stats collector, the signal
    dispatcher); and the names of the latter."""
    roots = probes.crawl_roots(crawler)
    queued = probes.queued_requests(crawler)[:QUEUED_ROOT_REQUESTS]
    if queued:  # a list handed on in request.meta lives in the requests (the engine is paused: they hold still)
        roots["queued requests"] = QueuedRequests(queued)
    # a large project's other spider modules (SpiderLoader imports them all) hold nothing this crawl reaches
    packages = spider_packages(getattr(crawler, "settings", None))
    modules = modules_in_scope(user_modules(packages), roots.values(), packages)
    roots.update((f"module {name}", module) for name, module in modules.items())
    roots.update(user_classes(modules))
    roots.update(python_roots())  # the logging module's registry, what live threads were handed
    library = []
    stats = getattr(crawler, "stats", None)
    if stats is not None:
        roots["stats"] = stats
        library.append("stats")
    dispatcher = sys.modules.get("pydispatch.dispatcher")  # Scrapy's SignalManager keeps its receivers there
    if dispatcher is not None:
        roots["signal dispatcher"] = dispatcher
        library.append("signal dispatcher")
    return roots, library


def _files_of(sites: list[str]) -> set[str]:
    """The source files of growth sites (``spiders/shop.py:31``, relative to the working directory when below it)."""
    files = {os.path.abspath(site.rpartition(":")[0]) for site in sites}
    return {file for file in files if file.endswith(".py") and is_user_file(file)}


def _source_of(location: str | None) -> str:
    """The source text at ``file:line`` ('' when unknown); the file is read once and dropped from linecache again."""
    if not location:
        return ""
    filename, _, line = location.rpartition(":")
    cached = filename in linecache.cache
    text = linecache.getline(filename, int(line)) if line.isdigit() else ""
    if not cached:
        linecache.cache.pop(filename, None)
    return text.strip()
