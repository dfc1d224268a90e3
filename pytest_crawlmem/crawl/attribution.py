"""The attribution window: a short traced stretch of a crawl that looks leaky, and what it finds (crawl process).

Opened at a drained checkpoint when the checkpoints so far look like a leak (``growth.suspicious``), closed
at the next one: tracemalloc snapshots at both ends give the growth sites (``snapshots.growing_sites``), the
containers that grew in between are the holders (``holders.find_holders``), and what tracing left behind
once stopped is the window's residue (``plugin_bytes``, taken off later checkpoints' heap signal). Only a
crawl that already looks leaky pays for deep tracing, and only briefly. Runs on the reactor thread.
"""

from __future__ import annotations

import gc
import sys
import tracemalloc
from typing import Any

from ..core.growth import BLOCK_BYTES, suspicious, window_residue
from ..core.models import Checkpoint, GrowthSite, Holder
from . import probes
from .holders import Lengths, container_lengths, find_holders, user_modules
from .meter import settle
from .recording import Recording
from .snapshots import growing_sites, queued_share, take_snapshot


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
        self.plugin_bytes = 0  # memory the closed window left behind (not the crawl's): off the heap signal after it
        self.started_tracing = False  # the window runs on tracing it started (or adopted): it stops it when it ends
        self._snapshots: list[tracemalloc.Snapshot | None] = []
        self._responses: list[int] = []  # the response count at each snapshot
        self._done = False
        self._resume_at = 0  # the checkpoint the schedule had planned when the window opened
        self._queued: dict[str, int] = {}  # the scheduler's share of the growth sites when the window closed
        self._opening: list[Checkpoint] = []  # the checkpoint that opened the window and the one before it
        self._lengths: Lengths = {}

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
        if self._snapshots:
            self._snapshots.append(take_snapshot())
            self._queued = self._queued_share(crawler)
            self._responses.append(checkpoint.responses)
            self._close(crawler, checkpoint.traced_bytes, checkpoint.responses)
            # the window's extra checkpoint does not shift the schedule
            return self._resume_at if self._resume_at > checkpoint.responses else next_checkpoint
        if not (self.enabled and suspicious(self.recording.checkpoints, self.leak_per_response)):
            return next_checkpoint
        if tracemalloc.is_tracing():
            self._snapshots = [take_snapshot()]
        else:
            tracemalloc.start(self.frames)
            self.started_tracing = True
            self._snapshots = [None]  # nothing is traced yet: the empty snapshot
            self._opening = self.recording.checkpoints[-5:]  # the rate before the window: growth.window_residue
        self._responses = [checkpoint.responses]
        try:
            self._lengths = container_lengths(_holder_roots(crawler))
        except Exception as exc:  # evidence, never a reason to break the crawl
            self.recording.add_error(f"measuring containers failed: {exc!r}")
        self._resume_at = next_checkpoint
        # the window closes on an extra checkpoint halfway to the scheduled one at the latest: that one stays untraced
        room = max(next_checkpoint - checkpoint.responses, 2) // 2
        return checkpoint.responses + min(self.max_responses, room)

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
        if len(self._snapshots) >= 2:
            self.growth_sites = growing_sites(self._snapshots, self._responses, queued=self._queued)
        self._snapshots = []
        if self.started_tracing and tracemalloc.is_tracing():
            tracemalloc.stop()

    def _close(self, crawler: Any, traced: int | None, responses: int) -> None:
        """End the window, find the holders, then measure what tracing left behind once stopped (drained crawl).

        Measured: about 500-600 KiB stays in use after ``tracemalloc.stop()`` on a clean catalog crawl (a 3 KiB/response
        step in the interval across a 170-response window): the heap after, less the heap when the window opened and
        the crawl's growth in it (``growth.window_residue``; ``traced`` is read before the closing snapshot), is taken
        off every later checkpoint's heap signal.
        """
        traced = traced if self.started_tracing else None
        self.end()
        self._find_holders(crawler, responses)
        if traced is None or len(self._opening) < 2:
            return
        settle()
        heap = probes.read_malloc_in_use_bytes()
        if heap is not None:
            after = heap + BLOCK_BYTES * sys.getallocatedblocks()
            self.plugin_bytes = window_residue(self._opening, after, traced, responses - self._opening[-1].responses)

    def _find_holders(self, crawler: Any, responses: int) -> None:
        """At the window's closing checkpoint (crawl alive, drained): the containers that grew during the window."""
        if not self._responses:
            return
        try:
            sites = [site.location for site in self.growth_sites]
            self.holders = find_holders(_holder_roots(crawler), self._lengths, responses - self._responses[0], prefer=sites)
        except Exception as exc:  # evidence, never a reason to break the crawl
            self.recording.add_error(f"finding holders failed: {exc!r}")
        self._lengths = {}

    def _queued_share(self, crawler: Any) -> dict[str, int]:
        """Traced bytes per growth site of the requests the scheduler holds (evidence: never breaks the crawl)."""
        try:
            return queued_share(probes.queued_requests(crawler))
        except Exception as exc:
            self.recording.add_error(f"measuring the scheduler's share failed: {exc!r}")
            return {}


def _holder_roots(crawler: Any) -> dict[str, Any]:
    """The spider, the crawl's components and the user's modules: where a holder of a leak can hang."""
    roots = probes.crawl_roots(crawler)
    roots.update((f"module {name}", module) for name, module in user_modules().items())
    return roots
