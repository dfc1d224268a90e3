"""Growth verdicts from drained checkpoints (pure: no pytest, no Scrapy).

The leak rule is a trend judgement over the drained checkpoints after the warm-up, using the crawl's own noise:
the least-squares slope of memory against responses (net of what the scheduler's queue holds, at the crawl's own
cost per queued request, and of an allowance for requests added to it) with a one-sided 95% bound from the
residuals. A leak is declared when the lower bound exceeds the threshold and the later half of the window still
grew by the threshold: one noisy interval moves the slope by its share and widens the bound, it cannot cancel a
sustained leak. The two largest steps are counted at the typical step (allocator ratchets are one-off steps) and
the later-half clause keeps a bounded cache that filled and levelled off from being called a leak.

Every verdict states its power: the smallest leak this crawl would have caught in 95% of runs like it
(``Growth.detectable_per_response_bytes``). ``steady`` says it; a crawl whose noise cannot bring it under
MAX_STATED_PER_RESPONSE is ``inconclusive`` and says how many responses would. A crawl too short for the regular
warm-up is judged by the same trend after STRONG_WARMUP_RESPONSES at STRONG_FACTOR (3) times the threshold, and by
Scrapy objects that rose at every checkpoint and were still held after the crawl ended (proven retention).

:func:`analyze` builds one :class:`Evidence` from the checkpoints and runs the ordered :data:`RULES`; the first rule
that returns a verdict decides. The names come from :mod:`pytest_crawlmem.core.verdicts`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import lru_cache
from itertools import pairwise
from typing import TypedDict

from . import verdicts as V
from .backpressure import pressure
from .defaults import CHECKPOINT_MIN_RESPONSES as CHECKPOINT_MIN_RESPONSES  # the settings table's defaults
from .defaults import DEFAULT_LEAK_PER_RESPONSE as DEFAULT_LEAK_PER_RESPONSE
from .defaults import name_of
from .excess import ExcessSummary, excess_of_samples
from .leaktrend import (
    COST_MIN_QUEUED,
    LATER_SHARE,
    MAX_REQUEST_CREDIT,
    REQUEST_CREDIT,
    RUNNING_POWER_DRAWS,
    TREND_MIN_POINTS,
    TYPICAL_SHARE,
    Trend,
    measure_trend,
    memory_queued,
    unit_power,
)
from .models import Checkpoint, Growth, MediaSummary, Sample, SizeDistribution
from .plateau import Plateau, find_plateau
from .trend import slope_only, t95

#: Judged intervals the regular and the strong trend need at least (TREND_MIN_POINTS checkpoints).
MIN_DELTAS = TREND_MIN_POINTS - 1
#: Judged checkpoints closer than this are merged (the later one kept).
MIN_INTERVAL_RESPONSES = 20
DENSE_UNTIL_RESPONSES = 300
#: The trend after a short warm-up judges a leak this many times the threshold. Measured (benchmarks/checkpoint_noise.py):
#: clean crawls grew at most 2.2 KiB/response in an interval starting at 50 responses or later (a bounded cache filling
#: up), and 0.9 KiB/response after 150: the trend's 95% lower bound over 3 KiB needs the whole window above it, 1.4x
#: the worst single interval. (At 6x, a 4 KiB/response leak over 147 responses read inconclusive in 30 of 30 runs.)
STRONG_FACTOR = 3
STRONG_WARMUP_RESPONSES = 50
STRONG_MIN_DELTAS = MIN_DELTAS
#: The strong trend's checkpoints may be this close: a checkpoint lands up to CONCURRENT_REQUESTS responses after it
#: was due, so checkpoints due 25 apart landed 16-17 apart and, merged at 20, left a 147-response crawl 3 of its 5.
#: The least-squares fit weighs a close pair by its leverage and the stated power is simulated at the very counts.
STRONG_MIN_GAP = 10
#: The closing checkpoint fell this far below the last running one, beyond what the memory queue held at the credit:
#: the crawl's end released what its requests carried from one to the next (a list passed on in ``request.meta`` or
#: ``cb_kwargs``), so the trend is judged again over the checkpoints taken while the crawl ran (and decides only when
#: that proves a leak). Measured on 473 saved crawls of benchmarks/detection.py (rejudge.py): 10 of 30 ``request.meta``
#: chains released this much at their close (267-666 KiB at 1 KiB/response over 609 responses) and 9 of those 10 then
#: read a leak; 5 of 213 clean crawls did too (up to 398 KiB, a 2,050-response late drain) and none of those 5 did.
RELEASE_MIN_BYTES = 128 * 1024
#: A crawl whose own noise cannot bound a leak under this is ``inconclusive`` (it says how many responses would).
MAX_STATED_PER_RESPONSE = 8 * 1024
#: replay_copies="auto" serves the recording often enough for this many responses: a clean catalog crawl of 600
#: responses bounds a leak at 1.3-1.9 KiB/response (benchmarks/detection.py --stated 600).
AUTO_REPLAY_RESPONSES = 600
#: Live Scrapy objects of one class must reach this count to be proven retention (a handful kept by a
#: closure or a stats value is evidence, not a leak per response).
PROVEN_MIN_OBJECTS = 20
#: Memory allowed per request added to the scheduler: generous, since a request's cost
#: depends on its URL, meta and cb_kwargs (measured: 2.0 KiB for catalog requests, 2.7 KiB
#: for /explode/ requests, heap estimate). Set too high it can hide a leak, never invent one.
REQUEST_ALLOWANCE = 4096
#: Browser tree USS growth per page tolerated at drained checkpoints. The tree is noisy: a clean
#: scrapy-playwright crawl of /js/ pages moved by up to +845 KiB/page over 20-30 page intervals
#: (renderers and the driver's heap come and go), so open contexts and pages are counted too.
#: A context left open costs ~1.9 MiB of USS, a page left open 20-40 MiB.
DEFAULT_BROWSER_PER_PAGE = 1024 * 1024
#: The most an attribution window's residue may take off the heap signal. Measured: 410-560 KiB of malloc'd memory
#: stays in use after tracemalloc.stop() on a clean catalog crawl (8 frames, an 85-responses window).
WINDOW_RESIDUE_CAP = 1024 * 1024
#: The least an attribution window's residue is taken as. Measured on the windows of 89 clean crawls of
#: benchmarks/detection.py (sessions 17-20): 95% left 161 KiB or more; the three that left less (60-115 KiB) were caches
#: that stopped filling inside the window, so the rate before it overstated the crawl's growth in it and the residue
#: came out too small; one of them, its window 45 responses before the end, read ``retained-objects``. Leaky crawls'
#: windows left 129 KiB or more in 90% of 578, and none of them changes verdict at this floor (nor at 192 KiB).
WINDOW_RESIDUE_FLOOR = 160 * 1024
#: Mean size of a pymalloc block in a Scrapy process (sys._debugmallocstats: 95.7 B).
BLOCK_BYTES = 96
#: downloader-activity: sampled RSS this far (median) above the drained level around it. Measured: clean crawls
#: 0.3-0.6 MiB (catalog and 500 ms pages at CONCURRENT_REQUESTS=32), 15 MiB for 8 trickled 2 MiB bodies in flight,
#: 75-81 MiB for 32 x 2 MiB and 64 x 1 MiB (56-62 MiB for 64 x 1 MiB with three crawls sharing 2 cores).
DOWNLOAD_EXCESS_BYTES = 32 * 2**20
#: downloader-activity: the excess may be this many times the bytes the downloads in flight could buffer (median
#: in flight x mean body). Measured: 0.95x-1.45x (the finished body is copied once, and freed memory stays in
#: malloc's arenas until the next drained checkpoint trims them).
DOWNLOAD_EXCESS_FACTOR = 4
#: media-disk: JOBDIR growth per response tolerated in every drained interval. Measured: requests.seen adds
#: 24 B/response to a catalog crawl's JOBDIR; a frontier growing by 9 requests per response (/explode/, fanout 10)
#: adds 3.2 KiB/response (about 330 B per pickled request).
DEFAULT_DISK_PER_RESPONSE = 1024
#: media-disk: memory a failed media download may keep in the pipelines' cache (Scrapy 2.19 keeps its Request and
#: Response through the cached exception's tracebacks), on top of the failed response's body. Measured: 22.8 KiB
#: per failed download (heap signal, 161-byte 404 bodies, 700 failures).
MEDIA_FAILURE_ALLOWANCE = 32 * 1024


#: The fix that usually helps, per verdict (appended to the failure message); from the vocabulary.
FIXES = {name: v.fix for name, v in V.VERDICTS.items() if v.fix and name != V.INCONCLUSIVE}


def next_checkpoint_at(responses: int, min_interval: int = CHECKPOINT_MIN_RESPONSES, dense_until: int = 0) -> int:
    """Return the response count of the checkpoint after one taken at ``responses``.

    Every ``min_interval`` responses up to DENSE_UNTIL_RESPONSES (a short crawl gets the checkpoints a trend needs:
    a 300-response crawl has 9 after its warm-up), then a third of the responses so far apart, so a crawl of N responses
    pays for O(log N) of them. The queue does not move it: requests waiting are no promise of responses to come
    (CLOSESPIDER_*, a frontier cut short), and a checkpoint skipped for a warm-up the crawl never reached left a
    1,505-response frontier crawl with 2 judged checkpoints. Up to ``dense_until`` (an attribution window closed:
    POST_WINDOW_DENSE_RESPONSES after it) they come every POST_WINDOW_STEPS x ``min_interval``: see POST_WINDOW_DENSE_RESPONSES.
    """
    if responses < DENSE_UNTIL_RESPONSES:
        return responses + min_interval
    if responses < dense_until:
        return responses + POST_WINDOW_STEPS * min_interval
    return responses + max(min_interval, responses // 3)


#: After an attribution window closes, checkpoints come every POST_WINDOW_STEPS x CRAWLMEM_CHECKPOINT_MIN_RESPONSES for
#: this many responses. The window's traced checkpoints are not judged, and the trend after it is what tells a leak from
#: a cache that filled in it (``residue_after_rates``): on the sparse schedule a 609-response crawl kept 2 checkpoints
#: after its window (about 465 and the close), a 1 KiB/product keeper's rate over them read -0.2 to 0.75 KiB/response
#: (its queue drains and its close releases in that last interval), as a filled cache's did, so its residue was
#: over-corrected and 7 of 40 saved nested-dict keepers read ``steady`` (benchmarks/rejudge.py). A window opens only
#: when the checkpoints look like growth: none of the saved clean crawls but the filling cache's opened one.
POST_WINDOW_DENSE_RESPONSES = 200
POST_WINDOW_STEPS = 2


#: Responses after which a short crawl is assumed warm (a long one: after a quarter of it).
WARMUP_RESPONSES = 100


def warmup_responses(total: int) -> int:
    """Responses after which the crawl is assumed warm: max(100, N/4)."""
    return max(WARMUP_RESPONSES, total // 4)


def checkpoint_schedule(total: int, min_interval: int = CHECKPOINT_MIN_RESPONSES) -> list[int]:
    """Response counts of the checkpoints a crawl of ``total`` responses takes: opening, scheduled, closing."""
    points = [0]
    at = min_interval
    while at < total:
        points.append(at)
        at = next_checkpoint_at(at, min_interval)
    return [*points, total] if total > 0 else points


def _merged(counts: Sequence[int], warmup: int, min_gap: int = MIN_INTERVAL_RESPONSES) -> list[int]:
    """Indexes of the counts at or after ``warmup``, dropping one closer than ``min_gap`` responses to the last kept.

    The closing count is always kept (it replaces the one just before it when they are close).
    """
    kept: list[int] = []
    warm = [i for i, n in enumerate(counts) if n >= warmup]
    for i in warm:
        if kept and counts[i] - counts[kept[-1]] < min_gap:
            if i == warm[-1] and (len(kept) == 1 or counts[i] > counts[kept[-2]]):
                kept[-1] = i
            continue
        kept.append(i)
    return kept if all(b > a for a, b in pairwise(counts[i] for i in kept)) else []  # never an empty interval


def _scheduled_points(
    total: int, min_interval: int, warmup: int | None = None, min_gap: int = MIN_INTERVAL_RESPONSES
) -> list[int]:
    """The response counts the schedule of a ``total``-response crawl judges (after ``warmup``, by default the regular one)."""
    counts = checkpoint_schedule(total, min_interval)
    return [counts[i] for i in _merged(counts, warmup_responses(total) if warmup is None else warmup, min_gap)]


@lru_cache(maxsize=8)
def responses_to_judge(min_interval: int = CHECKPOINT_MIN_RESPONSES) -> int:
    """The fewest responses whose checkpoint schedule gives TREND_MIN_POINTS judged checkpoints (any leak size)."""
    total = 1
    while len(_scheduled_points(total, min_interval)) < TREND_MIN_POINTS:
        total += 1
    return total


@lru_cache(maxsize=8)
def responses_to_judge_strong(min_interval: int = CHECKPOINT_MIN_RESPONSES) -> int:
    """The fewest responses that give TREND_MIN_POINTS checkpoints after STRONG_WARMUP_RESPONSES."""
    total = 1
    while len(_scheduled_points(total, min_interval, STRONG_WARMUP_RESPONSES, STRONG_MIN_GAP)) < TREND_MIN_POINTS:
        total += 1
    return total


@dataclass(frozen=True)
class Interval:
    """Growth between two consecutive checkpoints after the warm-up."""

    start: Checkpoint
    end: Checkpoint
    raw_bytes: int
    net_bytes: float

    @property
    def responses(self) -> int:
        """Responses received during the interval."""
        return self.end.responses - self.start.responses

    @property
    def net_per_response(self) -> float:
        """Growth per response once the scheduler's allowance is taken off."""
        return self.net_bytes / self.responses

    @property
    def raw_per_response(self) -> float:
        """Growth per response, scheduler included."""
        return self.raw_bytes / self.responses


def heap_estimate(checkpoint: Checkpoint) -> int | None:
    """malloc's bytes in use plus pymalloc's blocks at their mean size, less tracemalloc's tables and the plugin's residue."""
    if checkpoint.heap_bytes is None:
        return None
    return (checkpoint.heap_bytes + BLOCK_BYTES * (checkpoint.allocated_blocks or 0) - checkpoint.tracer_bytes
            - checkpoint.plugin_bytes)


def window_residue(opening: Sequence[Checkpoint], after: int, traced: int | None, responses: int) -> int:
    """Heap an attribution window left behind once tracing stopped (not the crawl's), at most WINDOW_RESIDUE_CAP.

    ``opening``: the checkpoints before the window, the one that opened it last (two or more; the dense schedule's
    are 25 responses apart, so the rate comes from the least-squares slope of up to the last five drained ones);
    ``after``: the heap estimate once the window closed and tracing stopped, ``responses`` later. The crawl's own
    growth in the window is taken at that rate, at most ``traced`` (tracemalloc's figure when it closed: everything
    the crawl allocated in the window and still held, a leak included), so a leak's growth is not taken for the
    residue.
    """
    points = [c for c in opening[-5:] if c.drained and heap_estimate(c) is not None]
    if len(points) < 2 or traced is None or points[-1] is not opening[-1]:
        return 0
    base = heap_estimate(points[-1]) or 0
    rate = slope_only([float(c.responses) for c in points], [float(heap_estimate(c) or 0) for c in points])
    crawl = min(traced, max(0.0, rate) * responses)
    return int(min(max(0.0, after - base - crawl), WINDOW_RESIDUE_CAP))


#: The drained checkpoints after an attribution window must span this many responses to correct its residue.
POST_WINDOW_MIN_RESPONSES = 60
#: ... and have grown this many times ``leak_per_response`` slower than before it.
POST_WINDOW_SLOWED = 1.5


def residue_after_rates(checkpoints: Sequence[Checkpoint], leak_per_response: int) -> list[Checkpoint]:
    """The checkpoints, the attribution window's residue corrected when the crawl grew slower after the window.

    The residue (:func:`window_residue`) takes the crawl's own growth in the window at the rate before it. A crawl
    whose growth stopped in the window (a cache that filled up there) grew less, so the residue came out too small and
    every later checkpoint sat higher by the difference. When the drained checkpoints after the window span
    POST_WINDOW_MIN_RESPONSES or more and grew POST_WINDOW_SLOWED x ``leak_per_response`` or more slower than the five
    before it (a leak keeps its rate; at 1x, 1 KiB/product keepers whose later rate fell by noise lost their verdict),
    the window's growth is taken at the later rate (at least 0), at most WINDOW_RESIDUE_CAP of residue in all. The
    residue is a level shift, so the later rate does not depend on it; it is the running checkpoints' when two or more
    span POST_WINDOW_MIN_RESPONSES (the schedule is dense after a window: POST_WINDOW_DENSE_RESPONSES), else a close
    that released RELEASE_MIN_BYTES (a ``request.meta`` chain let go of) is left out of it. A residue under
    WINDOW_RESIDUE_FLOOR is taken as the floor: that little was left only where the crawl's growth stopped in the window
    (when the checkpoints after it are too few to show the slower rate, the floor is what stands).
    """
    after = [k for k, c in enumerate(checkpoints) if c.plugin_bytes and not c.tracer_bytes]
    if not after:
        return list(checkpoints)
    first = after[0]
    residue = checkpoints[first].plugin_bytes
    least = max(_residue_at_later_rate(checkpoints, after, leak_per_response), WINDOW_RESIDUE_FLOOR)
    return [replace(c, plugin_bytes=least) if k >= first and c.plugin_bytes == residue else c
            for k, c in enumerate(checkpoints)] if least > residue else list(checkpoints)


def _residue_at_later_rate(checkpoints: Sequence[Checkpoint], after: Sequence[int], leak_per_response: int) -> int:
    """The window's residue, its growth taken at the rate after it when that rate is known and slower (see
    :func:`residue_after_rates`; ``after``: the indexes of the checkpoints after the window)."""
    first = after[0]
    residue = checkpoints[first].plugin_bytes
    opening = [c for c in checkpoints[:first] if not c.tracer_bytes and c.drained and heap_estimate(c) is not None][-5:]
    traced = [c for c in checkpoints[:first] if c.tracer_bytes]
    later = list({c.responses: c for c in (checkpoints[k] for k in after)
                  if c.drained and c.plugin_bytes == residue}.values())
    running = [c for c in later if c.responses < checkpoints[-1].responses]
    credit = 0.0
    if len(running) >= 2 and running[-1].responses - running[0].responses >= POST_WINDOW_MIN_RESPONSES:
        # the rate while the crawl ran (the close lets go of the engine), net of the memory queue, which drains as the
        # crawl runs out of pages: that freed memory, no growth stopped (a 1 KiB/product keeper's raw rate read -0.2)
        later = running
        untraced = [c for c in checkpoints if not c.tracer_bytes and heap_estimate(c) is not None]
        credit = measured_request_credit(untraced, [heap_estimate(c) or 0 for c in untraced])
    elif len(later) >= 2 and (heap_estimate(later[-1]) or 0) < (heap_estimate(later[-2]) or 0) - RELEASE_MIN_BYTES:
        later = later[:-1]  # a close that released what the crawl's requests kept says nothing of the rate
    if len(opening) < 2 or len(later) < 2 or later[-1].responses - later[0].responses < POST_WINDOW_MIN_RESPONSES:
        return residue

    def rate(points: Sequence[Checkpoint]) -> float:
        return slope_only([float(c.responses) for c in points],
                          [float(heap_estimate(c) or 0) - credit * memory_queued(c) for c in points])

    rate_before, rate_after = rate(opening), rate(later)
    slowed = max(rate_before, 0.0) - max(rate_after, 0.0)
    if slowed < POST_WINDOW_SLOWED * leak_per_response:
        return residue
    span = (traced[-1].responses if traced else checkpoints[first].responses) - opening[-1].responses
    return int(min(residue + slowed * span, max(residue, WINDOW_RESIDUE_CAP)))


def _signal(checkpoints: Sequence[Checkpoint]) -> tuple[str, list[int]] | None:
    """Pick the memory figure to judge by: traced memory if every checkpoint has it, else heap."""
    if checkpoints and all(c.traced_bytes is not None for c in checkpoints):
        return "traced", [int(c.traced_bytes or 0) for c in checkpoints]
    if checkpoints and all(c.heap_bytes is not None for c in checkpoints):
        return "heap", [int(heap_estimate(c) or 0) for c in checkpoints]
    if checkpoints:
        return "rss", [c.rss_bytes for c in checkpoints]
    return None


def judged_checkpoints(
    checkpoints: Sequence[Checkpoint], warmup: int | None = None, min_gap: int = MIN_INTERVAL_RESPONSES
) -> list[Checkpoint]:
    """Drained checkpoints after the warm-up (max(150, N/4) unless given), merging intervals shorter than ``min_gap``.

    A checkpoint read undrained (the pause timed out with downloads or callbacks in progress) is never judged.

    The extra checkpoint that closes an attribution window (tracemalloc on for part of the crawl) is
    left out: tracing costs more memory than tracemalloc reports (measured: ~600 KiB over 100 responses,
    beyond get_tracemalloc_memory()). The window never closes on a scheduled checkpoint and the schedule
    resumes after it, so leaving it out merges two intervals and costs no judged interval.
    """
    if not checkpoints:
        return []
    total = checkpoints[-1].responses
    if not all(c.tracer_bytes for c in checkpoints):
        checkpoints = [c for c in checkpoints if not c.tracer_bytes]
    checkpoints = [c for c in checkpoints if c.drained]
    counts = [c.responses for c in checkpoints]
    return [checkpoints[i] for i in _merged(counts, warmup_responses(total) if warmup is None else warmup, min_gap)]


def intervals(
    checkpoints: Sequence[Checkpoint],
    values: Sequence[int],
    request_allowance: int = REQUEST_ALLOWANCE,
    request_credit: float = REQUEST_CREDIT,
) -> list[Interval]:
    """Growth of ``values`` between consecutive checkpoints, net of the scheduler's share.

    Requests added to the queue are allowed ``request_allowance`` each, on disk too (JOBDIR's dupefilter and
    queue files still cost some memory); only requests given back by the *memory* queue are credited: a
    request waiting in JOBDIR's disk queue is pickled, so draining it frees nothing.
    """
    result = []
    for (a, va), (b, vb) in pairwise(zip(checkpoints, values, strict=True)):
        raw = vb - va
        queued = b.scheduled - a.scheduled
        share = request_allowance * queued if queued > 0 else request_credit * min(memory_queued(b) - memory_queued(a), 0)
        result.append(Interval(a, b, raw, raw - share))
    return result


def measured_request_credit(checkpoints: Sequence[Checkpoint], values: Sequence[int]) -> float:
    """Memory to credit per request the scheduler gives back, from the crawl's own intervals where the queue grew.

    The smallest growth per queued request among intervals after STRONG_WARMUP_RESPONSES whose memory queue grew by
    COST_MIN_QUEUED or more (growth the queue does not explain only raises it), clamped to
    [REQUEST_CREDIT, MAX_REQUEST_CREDIT]; REQUEST_CREDIT when no interval measured it.
    """
    costs = [
        (vb - va) / (memory_queued(b) - memory_queued(a))
        for (a, va), (b, vb) in pairwise(zip(checkpoints, values, strict=True))
        if a.responses >= STRONG_WARMUP_RESPONSES and memory_queued(b) - memory_queued(a) >= COST_MIN_QUEUED
    ]
    if not costs:
        return float(REQUEST_CREDIT)
    return float(min(max(min(costs), REQUEST_CREDIT), MAX_REQUEST_CREDIT))


def unexplained_refs(checkpoint: Checkpoint) -> dict[str, int]:
    """Live Scrapy objects a drained crawl should not hold: Requests beyond the scheduler's memory queue, all others."""
    counts = {}
    for name, count in checkpoint.live_refs.items():
        if name == "Request":
            count -= memory_queued(checkpoint)
        if count > 0:
            counts[name] = count
    return counts


def _rising_objects(judged: Sequence[Checkpoint]) -> dict[str, int]:
    """Scrapy classes whose unexplained live count rose at every judged checkpoint, with the rise."""
    series = [unexplained_refs(c) for c in judged]
    names = set().union(*series) if series else set()
    rising = {}
    for name in sorted(names):
        counts = [s.get(name, 0) for s in series]
        if len(counts) > 1 and all(b > a for a, b in pairwise(counts)):
            rising[name] = counts[-1] - counts[0]
    return rising


#: Until TREND_MIN_POINTS drained checkpoints lie past this many responses, suspicion reads the strong trend.
SUSPICION_WARMUP_RESPONSES = 150


def _suspicion_points(checkpoints: Sequence[Checkpoint]) -> tuple[list[Checkpoint], bool]:
    """The drained, untraced checkpoints suspicion reads (one a count), and whether they are the strong trend's."""
    drained = [c for c in checkpoints if c.drained and not c.tracer_bytes]
    drained = list({c.responses: c for c in drained}.values())  # one point a count: the last reading of equal counts
    warm = [c for c in drained if c.responses >= SUSPICION_WARMUP_RESPONSES]
    strong = len(warm) < TREND_MIN_POINTS
    return ([c for c in drained if c.responses >= STRONG_WARMUP_RESPONSES] if strong else warm), strong


def short_of_strong_points(checkpoints: Sequence[Checkpoint]) -> bool:
    """Whether a short crawl's strong trend still lacks points: fewer than TREND_MIN_POINTS drained checkpoints after
    its warm-up. An attribution window opened now would take the room of the checkpoint the strong rule needs (a
    147-response ``request.meta`` chain, whose close releases what it kept, had 3 and read ``inconclusive``)."""
    points, strong = _suspicion_points(checkpoints)
    return strong and len(points) < TREND_MIN_POINTS


def suspicious(checkpoints: Sequence[Checkpoint], leak_per_response: int = DEFAULT_LEAK_PER_RESPONSE) -> bool:
    """Whether the crawl so far looks like a leak: worth tracing allocations from here on.

    Judged on the drained checkpoints taken so far: the net slope of the last TREND_MIN_POINTS after 150 responses,
    and of all of them, reached the threshold, or unexplained live Scrapy objects rose at the last three; before 150
    responses, the last points after 50 responses (at least three) grew at STRONG_FACTOR x the threshold (a leak the
    strong trend will judge in a short crawl).
    """
    points, strong = _suspicion_points(checkpoints)
    if len(points) < 3:
        return False
    picked = _signal(points)
    if picked is None:
        return False
    credit = float(MAX_REQUEST_CREDIT)
    threshold = leak_per_response * (STRONG_FACTOR if strong else 1)
    recent = measure_trend(points[-TREND_MIN_POINTS:], picked[1][-TREND_MIN_POINTS:], credit, REQUEST_ALLOWANCE, threshold)
    whole = measure_trend(points, picked[1], credit, REQUEST_ALLOWANCE, threshold)
    if recent.net_slope >= threshold and whole.net_slope >= threshold:
        return True
    return not strong and bool(_rising_objects(points[-3:]))


@dataclass(frozen=True)
class Limits:
    """The thresholds a crawl is judged by (its budgets and settings)."""

    leak_per_response: int = DEFAULT_LEAK_PER_RESPONSE
    request_allowance: int = REQUEST_ALLOWANCE
    max_active_size: int | None = None
    browser_per_page: int = DEFAULT_BROWSER_PER_PAGE
    disk_per_response: int = DEFAULT_DISK_PER_RESPONSE
    min_interval: int = CHECKPOINT_MIN_RESPONSES
    responses_per_copy: int | None = None  # a replayed crawl: the recording's responses (one copy)
    running: bool = False  # judged while the crawl runs (its last checkpoint is not the close)


@dataclass(frozen=True)
class Evidence:
    """Everything the rules read, computed once from one crawl's checkpoints and samples."""

    checkpoints: tuple[Checkpoint, ...]
    samples: Sequence[Sample]
    limits: Limits
    judged: list[Checkpoint]
    signal: str
    values: list[int]
    credit: float
    trend: Trend | None  # the regular trend (None: too few judged checkpoints)
    strong: Trend | None  # the strong trend after STRONG_WARMUP_RESPONSES (judged when ``trend`` is None)
    spans: list[Interval]
    rising: dict[str, int]
    browser: Growth | None
    media: MediaSummary | None = None
    media_failure_body_bytes: float = 0.0
    held_after_close: Mapping[str, int] = field(default_factory=dict)
    response_sizes: SizeDistribution | None = None
    download_excess: ExcessSummary | None = None
    released_at_close: int = 0  # bytes the close released beyond the queue (0: none measured)
    close_left_out: bool = False  # the trend is the running checkpoints' (the close released, or ended a window)
    #: the checkpoints as measured (``checkpoints`` has the window's residue corrected: residue_after_rates); what the
    #: verdict reports, so judging a report's checkpoints again corrects once
    recorded: tuple[Checkpoint, ...] = ()
    plateau: Plateau | None = None  # the judged signal rose and then stayed flat to the end (core/plateau.py)
    flat_trend: Trend | None = None  # the trend of the plateau's flat part: the power a crawl with a plateau states

    @property
    def total(self) -> int:
        """Responses the crawl received."""
        return self.checkpoints[-1].responses if self.checkpoints else 0

    @property
    def power(self) -> Trend | None:
        """The trend that states this crawl's power: the regular one, else the strong one."""
        return self.flat_trend or self.trend or self.strong

    @property
    def stated_power(self) -> float | None:
        """The power a verdict states (``Growth.detectable_per_response_bytes``): None without a trend, and while the
        crawl runs (a running verdict's figure is read by no one, and its simulation cost 3-6 ms a checkpoint)."""
        power = self.power
        return round(power.detectable, 1) if power and not self.limits.running else None

    def bounded(self, t: Trend) -> bool:
        """Whether trend ``t`` bounds a leak under MAX_STATED_PER_RESPONSE: by its power from POWER_DRAWS simulated
        crawls once the crawl closed; while it runs, from RUNNING_POWER_DRAWS (a running crawl judges at every checkpoint
        and states no power)."""
        return (t.running_detectable if self.limits.running else t.detectable) <= MAX_STATED_PER_RESPONSE

    def no_leak(self, t: Trend) -> str:
        """``: no leak of 1.4 KiB/response or more (95%)``; empty while the crawl runs (its verdict states no power)."""
        return "" if self.limits.running else f": {_no_leak(t)}"

    @property
    def per_response(self) -> float:
        """Net growth per response of the judged window (0 without a trend)."""
        return self.trend.net_slope if self.trend else 0.0

    def undrained_after_warmup(self) -> int:
        """Checkpoints after the warm-up read undrained (left out of the judgement)."""
        warm = warmup_responses(self.total)
        return sum(1 for c in self.checkpoints if not c.drained and c.responses >= warm)

    def growth(self, verdict: str, reason: str, rule: str, per_response: float | None = None) -> Growth:
        """A verdict with this evidence's checkpoints, interval deltas, signal and power."""
        return Growth(
            verdict=verdict, reason=reason, rule=rule,
            per_response_bytes=(self.trend.net_slope if self.trend else None) if per_response is None else per_response,
            checkpoints=self.recorded or self.checkpoints, deltas_per_response=self.trend.deltas if self.trend else (),
            signal=self.signal, detectable_per_response_bytes=self.stated_power,
        )


def gather(
    checkpoints: Sequence[Checkpoint], samples: Sequence[Sample], limits: Limits, **context: object,
) -> Evidence:
    """Build the :class:`Evidence` of one crawl (``context``: the media summary, sizes, held objects...)."""
    recorded = tuple(checkpoints)
    checkpoints = residue_after_rates(checkpoints, limits.leak_per_response)
    judged = judged_checkpoints(checkpoints)
    untraced = [c for c in checkpoints if not c.tracer_bytes] if not all(c.tracer_bytes for c in checkpoints) else checkpoints
    whole = _signal(untraced)
    credit = measured_request_credit(untraced, whole[1]) if whole else float(REQUEST_CREDIT)
    picked = _signal(judged)
    signal, values = picked if picked else ("", [])
    trend = (measure_trend(judged, values, credit, limits.request_allowance, limits.leak_per_response, LATER_SHARE)
             if len(judged) >= TREND_MIN_POINTS else None)
    total = checkpoints[-1].responses if checkpoints else 0
    if trend is None and total >= responses_to_judge(limits.min_interval):
        # long enough, yet the attribution window's traced checkpoints and merging left three: the same trend over the
        # checkpoints STRONG_MIN_GAP apart decides, when it proves a leak (a 294-response crawl kept 114, 250, 294)
        close = judged_checkpoints(checkpoints, None, STRONG_MIN_GAP)
        close_signal = _signal(close)
        if close_signal is not None and len(close) >= TREND_MIN_POINTS:
            candidate = measure_trend(close, close_signal[1], credit, limits.request_allowance, limits.leak_per_response,
                                      LATER_SHARE)
            if candidate.is_leak:
                judged, (signal, values), trend = close, close_signal, candidate
    released, running = 0, list[Checkpoint]()
    if trend is not None and not trend.is_leak and not limits.running:
        # memory the crawl's end let go of says nothing of the rate while it ran: judge the running checkpoints alone
        running, released = _before_release(judged, values, trend, _window_at_end(checkpoints))
        if running:
            candidate = measure_trend(running, values[:len(running)], credit, limits.request_allowance,
                                      limits.leak_per_response, LATER_SHARE)
            if candidate.is_leak:
                judged, values, trend = running, values[:len(running)], candidate
            else:
                running, released = [], 0
    strong: Trend | None = None
    close_left_out = False
    if trend is None:
        early = judged_checkpoints(checkpoints, STRONG_WARMUP_RESPONSES, STRONG_MIN_GAP)
        early_signal = _signal(early)
        if early_signal is not None and len(early) >= TREND_MIN_POINTS:
            strong = measure_trend(early, early_signal[1], credit, limits.request_allowance,
                                   STRONG_FACTOR * limits.leak_per_response)
            signal = signal or early_signal[0]
        if strong is not None and not strong.is_leak and not limits.running:
            running_strong = _strong_before_release(checkpoints, strong, credit, limits)
            if running_strong is not None:
                strong, close_left_out = running_strong, True
    spans = intervals(judged, values, limits.request_allowance, credit) if trend else []
    plateau = _plateau(checkpoints, judged, values, signal, trend, limits, close=not running) if trend else None
    flat_trend = _flat_trend(plateau, judged, values, trend, limits) if plateau and trend else None
    return Evidence(
        checkpoints=tuple(checkpoints), samples=samples, limits=limits, judged=judged, signal=signal, values=values,
        credit=credit, trend=trend, strong=strong, spans=spans, rising=_rising_objects(judged) if trend else {},
        browser=browser_growth(checkpoints, limits.browser_per_page), released_at_close=released,
        close_left_out=bool(running) or close_left_out, recorded=recorded, plateau=plateau, flat_trend=flat_trend,
        **context,  # type: ignore[arg-type]
    )


def _plateau(
    checkpoints: Sequence[Checkpoint], judged: Sequence[Checkpoint], values: Sequence[int], signal: str, trend: Trend,
    limits: Limits, close: bool,
) -> Plateau | None:
    """The plateau of the level series (memory less the memory queue at the trend's credit), if it has one: its knot and
    flat part among the judged checkpoints, its rise from the warm-up's drained checkpoints on.

    The last judged checkpoint is the close unless the crawl still runs or the trend already left the close out
    (``close`` false); a close that fell RELEASE_MIN_BYTES or more below the checkpoint before it is left out of the flat
    part (memory the end let go of: a database closed, a cache dropped).
    """
    credit = trend.credit_per_request
    early = _warming(checkpoints, judged, signal)
    points = [*early[0], *judged]
    ys = [v - credit * memory_queued(c) for c, v in zip(points, [*early[1], *values], strict=True)]
    released = RELEASE_MIN_BYTES if close and not limits.running else 0
    return find_plateau([float(c.responses) for c in points], ys, limits.leak_per_response, first=len(early[0]),
                        close_released=released)


def _warming(
    checkpoints: Sequence[Checkpoint], judged: Sequence[Checkpoint], signal: str,
) -> tuple[list[Checkpoint], list[int]]:
    """The drained, untraced checkpoints from STRONG_WARMUP_RESPONSES to the first judged one (STRONG_MIN_GAP apart), with
    their ``signal`` readings: where a cache full by the end of the warm-up did its filling."""
    early: list[Checkpoint] = []
    for c in checkpoints:
        if (c.drained and not c.tracer_bytes and c.responses >= STRONG_WARMUP_RESPONSES
                and c.responses <= judged[0].responses - STRONG_MIN_GAP
                and (not early or c.responses - early[-1].responses >= STRONG_MIN_GAP)):
            early.append(c)
    picked = _signal(early)
    return (early, picked[1]) if picked is not None and picked[0] == signal else ([], [])


def _flat_trend(
    plateau: Plateau, judged: Sequence[Checkpoint], values: Sequence[int], trend: Trend, limits: Limits,
) -> Trend:
    """The trend of the plateau's flat part alone: what states the power of a crawl whose memory levelled off (a leak
    on top of the plateau adds its rate to the flat part, where this trend catches it)."""
    flat = [k for k, c in enumerate(judged) if plateau.at_responses <= c.responses <= plateau.end_responses]
    return measure_trend([judged[k] for k in flat], [values[k] for k in flat], trend.credit_per_request,
                         limits.request_allowance, limits.leak_per_response, LATER_SHARE)


def _before_release(
    judged: list[Checkpoint], values: list[int], trend: Trend, window_at_end: bool,
) -> tuple[list[Checkpoint], int]:
    """The judged checkpoints taken while the crawl ran, and what its close released beyond the memory queue (bytes),
    when that is RELEASE_MIN_BYTES or more, or the close came after an attribution window that ran to the crawl's end
    (its residue is measured against the close itself, so a release hides in it); else ``([], 0)``. At least
    TREND_MIN_POINTS running checkpoints are needed."""
    total = judged[-1].responses
    first_closing = next(k for k, c in enumerate(judged) if c.responses == total)
    if first_closing < TREND_MIN_POINTS:
        return [], 0
    last = judged[first_closing - 1]
    credit = trend.credit_per_request
    released = int(values[first_closing - 1] - credit * memory_queued(last) - (values[-1] - credit * memory_queued(judged[-1])))
    return (judged[:first_closing], max(released, 0)) if released >= RELEASE_MIN_BYTES or window_at_end else ([], 0)


def _strong_before_release(
    checkpoints: Sequence[Checkpoint], strong: Trend, credit: float, limits: Limits,
) -> Trend | None:
    """The strong trend of the running checkpoints alone, when the close fell below the last of them (net of the memory
    queue) and that trend proves a leak; else ``None``.

    A short crawl's strong trend has few points, and a close that let go of what the crawl held while it ran (a
    ``request.meta`` chain is freed with its last request: measured 330-550 KiB at the close of a 147-response chain)
    cancels them. The running checkpoints are merged apart from the close, so the last one is not replaced by it.
    """
    total = checkpoints[-1].responses
    untraced = [c for c in checkpoints if not c.tracer_bytes and c.responses < total]
    running = judged_checkpoints(untraced, STRONG_WARMUP_RESPONSES, STRONG_MIN_GAP) if untraced else []
    close = _signal([checkpoints[-1]])
    picked = _signal(running)
    if close is None or picked is None or len(running) < TREND_MIN_POINTS or picked[0] != close[0]:
        return None
    last, end = running[-1], checkpoints[-1]
    per_request = strong.credit_per_request
    if close[1][0] - per_request * memory_queued(end) >= picked[1][-1] - per_request * memory_queued(last):
        return None  # the close released nothing: it judges like any checkpoint
    candidate = measure_trend(running, picked[1], credit, limits.request_allowance, STRONG_FACTOR * limits.leak_per_response)
    return candidate if candidate.is_leak else None


def _window_at_end(checkpoints: Sequence[Checkpoint]) -> bool:
    """Whether the attribution window was still open at the crawl's end: a traced checkpoint right before the close.

    Measured: it opens only when the checkpoints look like growth, and none of 273 clean crawls of
    benchmarks/detection.py had it open at the end; 8 of 10 ``request.meta`` chains over 294 responses did.
    """
    total = checkpoints[-1].responses if checkpoints else 0
    closing = next((k for k, c in enumerate(checkpoints) if c.responses == total and not c.tracer_bytes), 0)
    return closing > 0 and checkpoints[closing - 1].tracer_bytes > 0


Rule = Callable[[Evidence], Growth | None]


def _close_note(ev: Evidence) -> str:
    """What the reason says of a close left out of the trend (empty when it was judged)."""
    if not ev.close_left_out:
        return ""
    if ev.released_at_close >= RELEASE_MIN_BYTES:
        released = f"released {_kib(ev.released_at_close)} more than its queue held"
    elif ev.trend is None:
        released = "fell below the checkpoints taken while the crawl ran"
    else:
        released = "fell below the checkpoints taken while the crawl ran, after an attribution window that ran to the end"
    # what was let go of is not named: the holder, when one was found, is (a crawl stopped by its timeout lets go of
    # the requests it still had queued and in flight, whatever holds its leak)
    return (f"; the crawl's end {released} (left out of the trend): memory a crawl lets go of as it ends (requests"
            " still queued or in flight when it was stopped, a list passed on from request to request in request.meta"
            " or cb_kwargs) says nothing of its growth while it ran")


def _short_strong_leak(ev: Evidence) -> Growth | None:
    """A crawl too short for the regular trend: the strong trend after STRONG_WARMUP_RESPONSES."""
    if ev.trend is not None or ev.strong is None or not ev.strong.is_leak:
        return None
    t = ev.strong
    proven = _proven_retention(ev.checkpoints, ev.held_after_close)  # the evidence, as the regular trend gives it
    held = (f"; {proven.reason.partition('; memory ')[0]}" if proven else "") + _close_note(ev)
    return ev.growth(
        V.RETAINED_OBJECTS,
        f"{_grew(ev.signal, t)}; at least {STRONG_FACTOR}x the leak threshold, so {len(t.points)} drained checkpoints"
        f" after {STRONG_WARMUP_RESPONSES} responses are enough{held}",
        f"95% lower bound of the trend >= {t.threshold:g} B/response ({STRONG_FACTOR}x leak_per_response) of"
        f" {ev.signal} memory after {STRONG_WARMUP_RESPONSES} responses, net of the scheduler",
        t.net_slope,
    )


def _short_proven(ev: Evidence) -> Growth | None:
    """A crawl too short for the regular trend: Scrapy objects proven retained after it."""
    return _with_power(ev, _proven_retention(ev.checkpoints, ev.held_after_close)) if ev.trend is None else None


def _short_browser(ev: Evidence) -> Growth | None:
    """A short browser crawl: its memory is the browser's."""
    if ev.trend is not None or ev.browser is None:
        return None
    note = "" if ev.browser.verdict != V.STEADY else f"; Python's own memory is not judged: {_too_few(ev)}"
    return replace(ev.browser, reason=ev.browser.reason + note, checkpoints=ev.recorded or ev.checkpoints)


def _short_steady(ev: Evidence) -> Growth | None:
    """A crawl too short for the regular trend whose strong trend still bounds a leak under MAX_STATED_PER_RESPONSE."""
    if ev.trend is not None or ev.strong is None or not ev.bounded(ev.strong):
        return None
    t = ev.strong
    return ev.growth(
        V.STEADY,
        f"{ev.signal} memory grew {_kib(t.net_slope)}/response over {t.window:,} responses after a warm-up of"
        f" {STRONG_WARMUP_RESPONSES}{ev.no_leak(t)}; for the {_kib(ev.limits.leak_per_response)}/response threshold"
        f" itself, {_too_few(ev)}",
        f"95% upper bound of the trend after {STRONG_WARMUP_RESPONSES} responses; detectable <="
        f" {MAX_STATED_PER_RESPONSE} B/response", t.net_slope,
    )


def _too_few(ev: Evidence) -> str:
    """Why the regular trend was not judged: too few responses (and how many would do), or the checkpoints it lost."""
    needed = responses_to_judge(ev.limits.min_interval)
    if ev.total < needed:
        return f"{ev.total:,} responses are too few (about {needed:,} are needed)"
    warm = warmup_responses(ev.total)
    traced = sum(1 for c in ev.checkpoints if c.tracer_bytes and c.responses >= warm)
    lost = [f"{traced} read while the attribution window traced allocations"] if traced else []
    undrained = ev.undrained_after_warmup()
    lost += [f"{undrained} undrained"] if undrained else []
    lost += [f"those closer than {MIN_INTERVAL_RESPONSES} responses merged"]
    return (f"{ev.total:,} responses gave {len(ev.judged)} judged checkpoints after the warm-up of {warm:,}"
            f" ({', '.join(lost)}); {TREND_MIN_POINTS} are needed")


def _too_few_checkpoints(ev: Evidence) -> Growth | None:
    """``inconclusive``: too few drained checkpoints after the warm-up, saying why and what would do."""
    if ev.trend is not None:
        return None
    needed = responses_to_judge(ev.limits.min_interval)
    judged = len(ev.judged)
    undrained = ev.undrained_after_warmup()
    head = (f"{ev.total:,} responses gave {judged} drained checkpoint{'s' if judged != 1 else ''} after the warm-up of"
            f" {warmup_responses(ev.total):,} responses; {TREND_MIN_POINTS} are needed to judge growth")
    if undrained and ev.total >= needed:
        advice = (f": {undrained} checkpoint{'s' if undrained != 1 else ''} after the warm-up did not drain (downloads"
                  f" or callbacks were still in progress when the pause timed out, {name_of('drain_timeout_seconds')}) and"
                  " are not judged: let in-flight work finish (failing or slow downloads, DOWNLOAD_TIMEOUT) or raise"
                  " the drain timeout")
        held = next((c.held_by for c in reversed(ev.checkpoints) if c.held_by), "")
        if held:
            advice += f"; the last was held by the media pipelines' {held}"
    else:
        advice = f": crawl at least {needed:,} responses{_replay_note(ev, needed)}"
        if undrained:
            advice += f" ({undrained} checkpoints after the warm-up did not drain and are not judged)"
    strong = (f" (growth of {_kib(STRONG_FACTOR * ev.limits.leak_per_response)}/response or more is judged from"
              f" {responses_to_judge_strong(ev.limits.min_interval):,})")
    if ev.strong is not None and not ev.limits.running:  # judged, too noisy for a bound a verdict can use
        strong = (f" (the trend after {STRONG_WARMUP_RESPONSES} responses, which judges growth of"
                  f" {_kib(ev.strong.threshold)}/response or more, could only have caught a leak of"
                  f" {_kib(ev.strong.detectable)}/response or more (95%), above the"
                  f" {_kib(MAX_STATED_PER_RESPONSE)}/response a verdict needs)")
    growth = ev.growth(V.INCONCLUSIVE, head + advice + strong, "too-few-checkpoints")
    return replace(growth, responses_needed=needed if ev.total < needed else None)


def _trend_leak(ev: Evidence) -> Growth | None:
    """``retained-objects`` (or ``media-disk``: cached media failures hold it all) from the regular trend."""
    t = ev.trend
    if t is None:
        return None
    leak, signal = (t, ev.signal) if t.is_leak and ev.plateau is None else (None, ev.signal)  # a filled cache: no leak
    native = ""
    if leak is None and ev.signal == "traced" and all(c.heap_bytes is not None for c in ev.judged):
        heap = [int(heap_estimate(c) or 0) for c in ev.judged]
        heap_trend = measure_trend(ev.judged, heap, ev.credit, ev.limits.request_allowance, ev.limits.leak_per_response,
                                   LATER_SHARE)
        if heap_trend.is_leak and _plateau(ev.checkpoints, ev.judged, heap, "heap", heap_trend, ev.limits,
                                           not ev.close_left_out) is None:
            leak, signal = heap_trend, "heap"
            native = (f", while traced memory grew {_kib(t.net_slope)}/response: native memory that tracemalloc cannot"
                      " see (lxml trees, C extensions)")
    if leak is None:
        return None
    spans = intervals(ev.judged, ev.values if signal == ev.signal else heap, ev.limits.request_allowance, ev.credit)
    cached = _media_cache(signal, ev.judged, spans, ev.limits.leak_per_response, ev.media, ev.media_failure_body_bytes)
    if cached is not None:
        return _with_power(ev, cached)
    held = f"; live Scrapy objects rising: {_describe(ev.rising)}" if ev.rising else ""
    proven = _proven_retention(ev.checkpoints, ev.held_after_close)
    held += f"; {proven.reason.partition('; memory ')[0]}" if proven else ""
    held += _close_note(ev)
    growth = ev.growth(
        V.RETAINED_OBJECTS, f"{_grew(signal, leak)}{native}{held}",
        f"95% lower bound of the trend > {leak.threshold:g} B/response of {signal} memory, net of the scheduler,"
        f", the later half still growing by {leak.later_share:g}x it and the typical interval by {TYPICAL_SHARE:g}x",
        leak.net_slope,
    )
    return replace(growth, signal=signal)


def _browser_state(ev: Evidence) -> Growth | None:
    """The browser tree grew with the pages."""
    if ev.browser is not None and ev.browser.verdict == V.BROWSER_STATE:
        return _with_power(ev, ev.browser)
    return None


def _cached_media(ev: Evidence) -> Growth | None:
    """Rising Scrapy objects all held by the media pipelines' cached failures."""
    if not ev.rising or ev.trend is None:
        return None
    return _with_power(ev, _media_cache(ev.signal, ev.judged, ev.spans, ev.limits.leak_per_response, ev.media,
                                        ev.media_failure_body_bytes))


def _proven(ev: Evidence) -> Growth | None:
    """Scrapy objects that rose at every checkpoint and were held after the crawl."""
    return _with_power(ev, _proven_retention(ev.checkpoints, ev.held_after_close))


def _rising(ev: Evidence) -> Growth | None:
    """Live Scrapy objects that rose at every judged checkpoint, whatever the bytes."""
    if not ev.rising:
        return None
    memory = _memory_aside(ev.signal, ev.per_response, ev.limits.leak_per_response)
    return ev.growth(V.RETAINED_OBJECTS,
                     f"live Scrapy objects rose at every drained checkpoint: {_describe(ev.rising)}{memory}", RISING_RULE)


def _memory_aside(signal: str, per_response: float, threshold: float) -> str:
    """For a verdict the live objects decided: what memory itself did, when it alone shows no leak ('' when it does)."""
    if per_response >= threshold:
        return ""
    moved = "grew" if per_response >= 0 else "fell"
    return (f"; the objects decide, not the bytes: {signal or 'memory'} memory itself {moved} {_kib(abs(per_response))}"
            f"/response, under the {_kib(threshold)}/response threshold (each object is small beside the heap's own"
            " movement, and a drained crawl holds none of them)")


def _backlog(ev: Evidence) -> Growth | None:
    """Growth above the threshold that the scheduler's growing queue explains."""
    t = ev.trend
    if t is None or ev.judged[-1].scheduled <= ev.judged[0].scheduled:
        return None
    if t.raw_slope - t95(t.fit.df) * t.fit.se < ev.limits.leak_per_response:
        return None
    raw = (ev.values[-1] - ev.values[0])
    return ev.growth(
        V.SCHEDULER_BACKLOG,
        f"{ev.signal} memory grew {_kib(raw)} over {t.window:,} responses while the scheduler grew from"
        f" {ev.judged[0].scheduled:,} to {ev.judged[-1].scheduled:,} requests: a backlog, not a leak",
        "growth explained by requests added to the scheduler", t.raw_slope,
    )


def _response_processing(ev: Evidence) -> Growth | None:
    """Sustained scraper backout."""
    pressure = _processing_pressure(ev.samples, ev.limits.max_active_size)
    return ev.growth(V.RESPONSE_PROCESSING, pressure, "sustained scraper backout") if pressure else None


def _jobdir(ev: Evidence) -> Growth | None:
    """JOBDIR growing on disk in every judged interval."""
    disk = _jobdir_growth(ev.judged, ev.samples, ev.limits.disk_per_response)
    if not disk:
        return None
    return ev.growth(V.MEDIA_DISK, f"{disk}; {ev.signal} memory levelled off ({_kib(ev.per_response)}/response)",
                     f"every interval >= {ev.limits.disk_per_response} B/response of JOBDIR disk use")


def _downloads(ev: Evidence) -> Growth | None:
    """Downloads in flight held the peak."""
    downloads = _downloader_activity(ev.checkpoints, ev.samples, ev.response_sizes, ev.download_excess)
    if not downloads:
        return None
    return ev.growth(
        V.DOWNLOADER_ACTIVITY,
        f"{downloads}; memory at the drained checkpoints levelled off ({_kib(ev.per_response)}/response)",
        f"median sampled RSS >= {DOWNLOAD_EXCESS_BYTES // 2**20} MiB above the drained checkpoints around it,"
        f" within {DOWNLOAD_EXCESS_FACTOR}x of median downloads in flight x mean body",
    )


def _steady(ev: Evidence) -> Growth | None:
    """No leak this crawl could have caught: it says the smallest it would have (95%)."""
    t = ev.trend
    if t is not None and ev.plateau is not None:
        return _levelled_off(ev, ev.plateau)
    if t is None or not ev.bounded(t):
        return None
    if t.net_slope < t.threshold:
        moved = f"{ev.signal} memory levelled off after the warm-up ({_kib(t.net_slope)}/response over {t.window:,} responses)"
    else:  # above the threshold, yet not told from this crawl's noise, or not still growing in the later half or most
        # intervals (one or two steps)
        moved = (f"{ev.signal} memory grew {_kib(t.net_slope)}/response over {t.window:,} responses after the warm-up"
                 f" (at least {_kib(max(t.lower, 0.0))}/response at 95%, {_kib(t.later_slope)}/response in the later half,"
                 f" {_kib(t.typical_slope)}/response in the typical interval; a leak needs the first above"
                 f" {_kib(t.threshold)}/response, the second at {_kib(t.later_share * t.threshold)}/response and the third"
                 f" at {_kib(TYPICAL_SHARE * t.threshold)}/response or more)")
    return ev.growth(
        V.STEADY,
        f"{moved}{ev.no_leak(t)}",
        f"95% lower bound of the trend <= {t.threshold:g} B/response; detectable <= {MAX_STATED_PER_RESPONSE} B/response",
    )


def _levelled_off(ev: Evidence, p: Plateau) -> Growth:
    """``steady`` for memory that filled and levelled off (a plateau): where, at what level, how flat after it."""
    before = _rise_before(p)
    released = (f"; the crawl's end released {_kib(p.released_bytes)} more (left out of the flat part: memory the end let"
                " go of says nothing of the rate while it ran)") if p.released_bytes else ""
    power = f": {_no_leak(ev.flat_trend)}" if ev.flat_trend is not None and not ev.limits.running else ""
    return ev.growth(
        V.STEADY,
        f"{ev.signal} memory filled to {_mib(p.level_bytes)} and levelled off at response {p.at_responses:,}{before}:"
        f" {_kib(p.flat.slope)}/response over the {p.flat_responses:,} responses after it (at most"
        f" {_kib(p.flat.upper)}/response at 95%, under the {_kib(ev.limits.leak_per_response)}/response threshold):"
        f" growth that stopped, as a bounded cache's does, not a leak{released}{power}",
        f"plateau: growth before response {p.at_responses} stopped; 95% upper bound of the trend after it <"
        f" {ev.limits.leak_per_response} B/response",
        p.flat.slope,
    )


def _rise_before(p: Plateau) -> str:
    """`` after rising 5.6 KiB/response from response 58``: the fill, from the warm-up's first drained checkpoint on."""
    if p.at_responses <= p.start_responses:
        return ""
    return f" after rising {_kib(p.rise_per_response)}/response from response {p.start_responses:,}"


def _too_noisy(ev: Evidence) -> Growth | None:
    """``inconclusive``: the crawl's own noise cannot bound a leak under MAX_STATED_PER_RESPONSE."""
    t = ev.trend
    if t is None:
        return None
    moved = (f"{ev.signal} memory moved by {_kib(t.noise_sd)} around its trend between drained checkpoints"
             f" ({_kib(t.net_slope)}/response over {t.window:,} responses)")
    if ev.limits.running:  # no power simulated while the crawl runs
        return ev.growth(V.INCONCLUSIVE, f"{moved}: too noisy so far to bound a leak under"
                         f" {_kib(MAX_STATED_PER_RESPONSE)}/response", f"detectable > {MAX_STATED_PER_RESPONSE} B/response"
                         f" ({RUNNING_POWER_DRAWS} simulated crawls, while the crawl runs)")
    needed = responses_for_power(t, ev.limits.min_interval, ev.total)
    more = f": crawl at least {needed:,} responses{_replay_note(ev, needed)}" if needed else ": a longer crawl would not"
    growth = ev.growth(
        V.INCONCLUSIVE,
        f"{moved}: this crawl could only have caught a leak of"
        f" {_kib(t.detectable)}/response or more (95%), above the {_kib(MAX_STATED_PER_RESPONSE)}/response a verdict"
        f" needs{more}",
        f"detectable > {MAX_STATED_PER_RESPONSE} B/response",
    )
    return replace(growth, responses_needed=needed)


#: The rules of the verdicts live Scrapy objects decide (their memory figures are not what decided them).
RISING_RULE = "live Scrapy objects rising at every drained checkpoint"
PROVEN_RULE = "live Scrapy objects rising at every checkpoint and held after the crawl (proven retention)"
#: A plateau's rule starts with this (``_levelled_off``).
PLATEAU_RULE = "plateau"
#: The rule of a holder declared by design that grew beyond its declaration (core/setaside.py).
DECLARED_RULE = "declared growth exceeded"

#: The one piece of evidence a verdict rests on, by its rule (the first that matches): a short name a status line or a
#: report prints beside the verdict, so the figures beside it are read as what they are.
EVIDENCE: tuple[tuple[Callable[[str], bool], str], ...] = (
    (lambda rule: rule == "too-few-checkpoints", "checkpoints"),
    (lambda rule: rule.startswith(PLATEAU_RULE), "plateau"),
    (lambda rule: rule == DECLARED_RULE, "declared"),
    (lambda rule: rule in (RISING_RULE, PROVEN_RULE), "live-objects"),
    (lambda rule: "cached media failures" in rule, "media-cache"),
    (lambda rule: "browser" in rule, "browser"),
    (lambda rule: rule.startswith("growth explained by requests"), "scheduler"),
    (lambda rule: rule == "sustained scraper backout", "backout"),
    (lambda rule: "JOBDIR" in rule, "jobdir"),
    (lambda rule: rule.startswith("median sampled RSS"), "downloads"),
)


def decided_by(growth: Growth) -> str:
    """The evidence ``growth``'s verdict rests on: ``live-objects`` (its per-response and power figures are memory's,
    which did not decide it), ``plateau``, ``scheduler``, ``backout``, ``browser``, ... or ``memory`` (the trend of memory
    against responses, which its figures describe); '' for a verdict with no rule (an old report)."""
    if not growth.rule:
        return ""
    return next((name for matches, name in EVIDENCE if matches(growth.rule)), "memory")


#: The verdict rules, in order: the first that returns a verdict decides.
RULES: tuple[Rule, ...] = (
    _short_strong_leak, _short_proven, _short_browser, _short_steady, _too_few_checkpoints,
    _trend_leak, _browser_state, _cached_media, _proven, _rising, _backlog, _response_processing, _jobdir, _downloads,
    _steady, _too_noisy,
)


def responses_for_power(t: Trend, min_interval: int, total: int) -> int | None:
    """The fewest responses whose schedule would bring the detectable leak under MAX_STATED_PER_RESPONSE at this noise."""
    base = t.threshold + t.queue_slope + max(0.0, -t.upper)
    if base >= MAX_STATED_PER_RESPONSE:
        return None
    n = max(total, 1)
    for _ in range(60):
        n = int(n * 1.25) + 1
        xs = tuple(float(x) for x in _scheduled_points(n, min_interval))
        if len(xs) >= TREND_MIN_POINTS and base + t.noise_sd * unit_power(xs) <= MAX_STATED_PER_RESPONSE:
            return _round_up(n)
    return None


def auto_replay_copies(entries: int, responses: int = AUTO_REPLAY_RESPONSES, most: int = 10_000) -> int:
    """The copies of a recording of ``entries`` responses that give a crawl ``responses`` of them (1 to ``most``)."""
    return max(1, min(most, math.ceil(responses / max(entries, 1))))


def _round_up(n: int) -> int:
    """``n`` rounded up to two significant figures (a count to tell people)."""
    step: int = 10 ** max(len(str(n)) - 2, 0)
    return -(-n // step) * step


class Analysis(TypedDict, total=False):
    """What a run's path knows for :func:`analyze` beyond its checkpoints, samples and threshold (each the parameter's
    type): ``assemble.judge`` passes it through, typed."""

    request_allowance: int
    max_active_size: int | None
    browser_per_page: int
    response_sizes: SizeDistribution | None
    media: MediaSummary | None
    media_failure_body_bytes: float
    disk_per_response: int
    held_after_close: Mapping[str, int] | None
    min_interval: int
    download_excess: ExcessSummary | None
    responses_per_copy: int | None
    running: bool


def analyze(
    checkpoints: Sequence[Checkpoint],
    samples: Sequence[Sample] = (),
    *,
    leak_per_response: int = DEFAULT_LEAK_PER_RESPONSE,
    request_allowance: int = REQUEST_ALLOWANCE,
    max_active_size: int | None = None,
    browser_per_page: int = DEFAULT_BROWSER_PER_PAGE,
    response_sizes: SizeDistribution | None = None,
    media: MediaSummary | None = None,
    media_failure_body_bytes: float = 0.0,
    disk_per_response: int = DEFAULT_DISK_PER_RESPONSE,
    held_after_close: Mapping[str, int] | None = None,
    min_interval: int = CHECKPOINT_MIN_RESPONSES,
    download_excess: ExcessSummary | None = None,
    responses_per_copy: int | None = None,
    running: bool = False,
) -> Growth:
    """Return the verdict for a crawl from its checkpoints (and samples for processing pressure).

    The :data:`RULES` run in order over one :class:`Evidence`: a short crawl's strong trend, proven retention,
    browser verdict, strong-trend bound, or too few checkpoints; then the regular trend's ``retained-objects`` (or
    ``media-disk`` when the media pipelines' cached failures hold all of the retained Scrapy objects),
    ``browser-state``, rising objects, ``scheduler-backlog``, ``response-processing``, ``media-disk`` (JOBDIR growing
    on disk), ``downloader-activity``, ``steady``, and ``inconclusive`` when the noise bounds no leak under
    MAX_STATED_PER_RESPONSE. ``response_sizes`` (the crawl's body sizes) is needed for ``downloader-activity``;
    ``media`` (the pipelines' cache at close) and ``media_failure_body_bytes`` (mean body of the failed media
    responses) for the media cache's explanation. ``held_after_close`` counts, per Scrapy class, the crawl's objects
    still alive after it ended that a module, class or library structure was shown to hold (proven retention).
    ``min_interval`` is the extension's CRAWLMEM_CHECKPOINT_MIN_RESPONSES (to say how many responses a judgement
    needs); ``responses_per_copy`` a replayed crawl's recording size (to say which ``replay_copies`` would do).
    ``download_excess`` is the timeline's running summary of RSS above the drained level (exact on a thinned one).
    ``running``: the crawl still runs (a production crawl's verdict so far), so its last checkpoint is no close.
    """
    limits = Limits(leak_per_response, request_allowance, max_active_size, browser_per_page, disk_per_response,
                    min_interval, responses_per_copy, running)
    ev = gather(checkpoints, samples, limits, media=media, media_failure_body_bytes=media_failure_body_bytes,
                held_after_close=dict(held_after_close or {}), response_sizes=response_sizes,
                download_excess=download_excess)
    for rule in RULES:
        growth = rule(ev)
        if growth is not None:
            return _with_undrained(growth, ev)
    raise AssertionError("the last rule always decides")  # pragma: no cover


def _with_undrained(growth: Growth, ev: Evidence) -> Growth:
    """``growth`` whose reason says, unless it said so of them all, that mid-crawl checkpoints did not drain and what
    would make them (the issue's 149-response browser crawl read only ``crawl at least ... responses``)."""
    middle = ev.checkpoints[1:-1]  # the opening and closing checkpoints are always drained
    undrained = sum(not c.drained for c in middle)
    if not undrained or (ev.undrained_after_warmup() == undrained and "did not drain" in growth.reason):
        return growth
    browser = any(c.open_pages is not None or c.browser_uss_bytes is not None for c in ev.checkpoints)
    fewer = "CONCURRENT_REQUESTS or PLAYWRIGHT_MAX_PAGES_PER_CONTEXT" if browser else "CONCURRENT_REQUESTS"
    return replace(growth, reason=(
        f"{growth.reason}; the checkpoints did not drain: {undrained} of {len(middle)} hit the drain timeout"
        f" ({name_of('drain_timeout_seconds')}) with downloads or callbacks still in progress and are not judged: they"
        f" drain when what is in flight finishes within the timeout (lower {fewer}, or raise the timeout)"))


def _with_power(ev: Evidence, growth: Growth | None) -> Growth | None:
    """``growth`` with this evidence's checkpoints and power (``None`` stays ``None``)."""
    if growth is None:
        return None
    return replace(growth, checkpoints=ev.recorded or ev.checkpoints, detectable_per_response_bytes=ev.stated_power)


def _no_leak(t: Trend) -> str:
    """``no leak of 1.4 KiB/response or more (95%)``, rounded up."""
    return f"no leak of {math.ceil(t.detectable / 102.4) / 10:,.1f} KiB/response or more (95%)"


def _grew(signal: str, t: Trend) -> str:
    """How the judged signal grew, with its bound and the scheduler's share."""
    share = t.queue_share  # under 0.05 KiB either way is no share ("explains 0.0 KiB")
    queue = (f", of which the scheduler's growing queue explains {_kib(max(share, 0.0))}/response" if share > -51 else
             f", even though the draining scheduler queue freed about {_kib(-share)}/response")
    return (f"{signal} memory grew {_kib(t.net_slope * t.window)} over {t.window:,} responses"
            f" ({_kib(t.net_slope)}/response, at least {_kib(t.lower)}/response at 95% from {len(t.points)} drained"
            f" checkpoints){queue}")


def _replay_note(ev: Evidence, needed: int) -> str:
    """For a replayed crawl: the ``replay_copies`` that would give ``needed`` responses."""
    per_copy = ev.limits.responses_per_copy
    if not per_copy:
        return ""
    return f" (replay_copies={max(1, math.ceil(needed / per_copy))} of this {per_copy:,}-response recording)"


def _proven_retention(checkpoints: Sequence[Checkpoint], held: Mapping[str, int]) -> Growth | None:
    """``retained-objects`` for Scrapy objects that rose at every checkpoint and were still held after the crawl.

    The unexplained live count of the class (Requests beyond the scheduler's) must rise at every
    checkpoint from the opening one (merged like judged intervals), at least twice, and reach
    PROVEN_MIN_OBJECTS; ``held`` (from the crawl process) says a structure still held them after the end.
    A bounded cache stops rising once full and is never proven retention.
    """
    points = judged_checkpoints(checkpoints, 0, STRONG_MIN_GAP)
    if len(points) < 3:
        return None
    proven = {}
    for name, after in held.items():
        counts = [unexplained_refs(c).get(name, 0) for c in points]
        if after >= PROVEN_MIN_OBJECTS and all(b > a for a, b in pairwise(counts)):
            proven[name] = counts[-1] - counts[0]
    if not proven:
        return None
    picked = _signal(points)
    values = picked[1] if picked else [0] * len(points)
    window = max(points[-1].responses - points[0].responses, 1)
    spans = intervals(points, values)
    per_response = sum(i.net_bytes for i in spans) / window
    kept = ", ".join(f"{held[name]:,} {name}" for name in proven)
    return Growth(
        verdict=V.RETAINED_OBJECTS,
        reason=(
            f"live Scrapy objects rose at every drained checkpoint ({_describe(proven)}) and {kept} were still held"
            f" after the crawl ended; memory {'grew' if per_response >= 0 else 'fell'} {_kib(abs(per_response))}/response"
            f" over {window:,} responses"
        ),
        rule=PROVEN_RULE,
        per_response_bytes=per_response,
        deltas_per_response=tuple(round(i.net_per_response, 1) for i in spans),
        signal=picked[0] if picked else "",
    )


def browser_growth(checkpoints: Sequence[Checkpoint], per_page: int = DEFAULT_BROWSER_PER_PAGE) -> Growth | None:
    """Judge the browser tree: ``browser-state`` when its USS grew past ``per_page`` in every interval, else ``steady``.

    Judged on drained checkpoints with a browser reading (taken after a renderer GC on every
    open page), after a warm-up of a quarter of the crawl that also skips the browser's
    launch; at least ``MIN_DELTAS`` intervals are needed (``None`` with fewer, or without a browser).
    """
    readings = [c for c in checkpoints if c.drained and c.browser_uss_bytes is not None]
    if not readings:
        return None
    warm = max(readings[0].responses + 1, readings[-1].responses // 4)
    judged: list[Checkpoint] = []
    for c in readings:  # the first reading at each count: a closing one after cleanup does not hide growth
        if c.responses >= warm and (not judged or c.responses > judged[-1].responses):
            judged.append(c)
    if len(judged) < MIN_DELTAS + 1:
        return None
    deltas = [((b.browser_uss_bytes or 0) - (a.browser_uss_bytes or 0)) / (b.responses - a.responses)
              for a, b in pairwise(judged)]
    rising = _rising_browser_state(judged)
    window = judged[-1].responses - judged[0].responses
    grown = (judged[-1].browser_uss_bytes or 0) - (judged[0].browser_uss_bytes or 0)
    if not rising and not all(d >= per_page for d in deltas):
        return Growth(
            verdict=V.STEADY,
            reason=f"the browser process tree's private memory (USS) levelled off ({_kib(grown / window)}/page over"
            f" {window:,} pages, measured after a renderer GC)",
            rule=f"some interval < {per_page} B/page of browser-tree USS",
            per_response_bytes=grown / window,
            deltas_per_response=tuple(round(d, 1) for d in deltas),
            signal="browser-uss",
        )
    uss = (f"the browser process tree's private memory (USS) grew {_kib(grown)} over {window:,} pages"
           f" ({_kib(grown / window)}/page)")
    if rising:
        held = ", ".join(f"{what} {first:,} -> {last:,}" for what, (first, last) in rising.items())
        reason = f"what the browser holds rose at every drained checkpoint ({held}) and {uss}"
    else:
        reason = f"{uss} in each of {len(deltas)} drained intervals"
    return Growth(
        verdict=V.BROWSER_STATE,
        reason=reason + ", measured after a renderer GC",
        rule=("open browser contexts or pages rising at every drained checkpoint" if rising
              else f"every interval >= {per_page} B/page of browser-tree USS"),
        per_response_bytes=grown / window,
        deltas_per_response=tuple(round(d, 1) for d in deltas),
        signal="browser-uss",
    )


def _rising_browser_state(judged: Sequence[Checkpoint]) -> dict[str, tuple[int, int]]:
    """Open contexts or pages that rose at every drained checkpoint: ``{what: (first, last)}``."""
    rising = {}
    for what, values in (
        ("open browser contexts", [c.open_contexts for c in judged]),
        ("open pages", [c.open_pages for c in judged]),
        ("pages handed to callbacks and still open", [c.unclosed_pages for c in judged]),
    ):
        counts = [v for v in values if v is not None]
        if len(counts) == len(judged) and all(b > a for a, b in pairwise(counts)):
            rising[what] = (counts[0], counts[-1])
    return rising


def _processing_pressure(samples: Sequence[Sample], max_active_size: int | None) -> str:
    """Describe a scraper that falls behind (responses arriving faster than callbacks finish; backpressure.py)."""
    found = pressure(samples, max_active_size)
    return found.describe(max_active_size) if found else ""


def _media_cache(
    signal: str,
    judged: Sequence[Checkpoint],
    spans: Sequence[Interval],
    leak_per_response: int,
    media: MediaSummary | None,
    failure_body_bytes: float,
) -> Growth | None:
    """``media-disk`` when the media pipelines' cached failures hold every Scrapy object retained at close.

    Every class of unexplained live Scrapy objects at the closing checkpoint must be kept (at least as many) by the
    cached failures, and once each failure added in an interval is allowed MEDIA_FAILURE_ALLOWANCE plus the mean
    failed body, some interval must fall under ``leak_per_response``: otherwise there is a leak beyond the cache.
    """
    if media is None or not media.retained:
        return None
    kept = {r.class_name: r.count for r in media.retained}
    closing = unexplained_refs(judged[-1])
    if not closing or any(count > kept.get(name, 0) for name, count in closing.items()):
        return None
    per_failure = MEDIA_FAILURE_ALLOWANCE + max(0.0, failure_body_bytes)
    added = []
    for span in spans:
        before, after = unexplained_refs(span.start), unexplained_refs(span.end)
        added.append(max(0, *(after.get(name, 0) - before.get(name, 0) for name in kept)))
    beyond = [(i.net_bytes - n * per_failure) / i.responses for i, n in zip(spans, added, strict=True)]
    if all(b >= leak_per_response for b in beyond):
        return None
    window = judged[-1].responses - judged[0].responses
    net_total = sum(i.net_bytes for i in spans)
    failures = sum(added)
    cost = f", about {_kib(net_total / failures)} each" if failures and net_total > 0 else ""
    held = " and ".join(f"{r.count:,} {r.class_name}" for r in media.retained)
    return Growth(
        verdict=V.MEDIA_DISK,
        reason=(
            f"{signal} memory grew {_kib(net_total)} over {window:,} responses ({_kib(net_total / window)}/response)"
            f" while {failures:,} more failed media downloads were cached{cost}: the {media.failed_at_close:,} failures"
            f" {', '.join(media.pipelines)} cached keep {held} alive until the crawl ends, every Scrapy object the"
            " drained crawl still held (Scrapy caches each failure with its traceback), not your code"
        ),
        rule=f"retained Scrapy objects all held by cached media failures; growth beyond {_kib(per_failure)} per"
        f" failure < {leak_per_response} B/response in some interval",
        per_response_bytes=net_total / window,
        deltas_per_response=tuple(round(i.net_per_response, 1) for i in spans),
        signal=signal,
    )


def _jobdir_at(judged: Sequence[Checkpoint], samples: Sequence[Sample]) -> list[int] | None:
    """JOBDIR's size at each checkpoint: read at the checkpoint, else (older reports) the last sample before it.

    The sampler's last reading can be seconds old beside a CPU hog (its thread starves), older than the previous
    checkpoint; the checkpoint's own reading is what the interval grew by. ``None`` if a checkpoint has neither.
    """
    if judged and all(c.jobdir_bytes is not None for c in judged):
        return [c.jobdir_bytes or 0 for c in judged]
    readings = [s for s in samples if s.jobdir_bytes is not None]
    picked = []
    for checkpoint in judged:
        before = [s for s in readings if s.t_seconds <= checkpoint.t_seconds]
        if not before:
            return None
        picked.append(before[-1].jobdir_bytes or 0)
    return picked


def _jobdir_growth(judged: Sequence[Checkpoint], samples: Sequence[Sample], per_response: int) -> str:
    """Describe JOBDIR's disk use growing by ``per_response`` or more in every judged interval ('' if it did not)."""
    picked = _jobdir_at(judged, samples)
    if picked is None or len(picked) < MIN_DELTAS + 1:
        return ""
    rates = [(b - a) / (cb.responses - ca.responses) for (a, ca), (b, cb) in pairwise(zip(picked, judged, strict=True))]
    if not all(r >= per_response for r in rates):
        return ""
    first, last = picked[0], picked[-1]
    window = judged[-1].responses - judged[0].responses
    peak = max((s.disk_scheduled for s in samples if s.disk_scheduled is not None), default=None)
    queued = f"; its disk request queue peaked at {peak:,} requests" if peak else ""
    return (
        f"JOBDIR grew on disk from {_kib(first)} to {_kib(last)} over {window:,} responses ({_kib((last - first) / window)}"
        f"/response, at least {_kib(min(rates))}/response in each of {len(rates)} drained intervals){queued}"
    )


def _downloader_activity(
    checkpoints: Sequence[Checkpoint], samples: Sequence[Sample], sizes: SizeDistribution | None,
    excess: ExcessSummary | None = None,
) -> str:
    """Describe memory held by downloads in flight ('' when the samples do not show it).

    Each sample between two checkpoints is compared with the higher of their RSS (drained: no download in
    flight, after gc.collect() and malloc_trim). The median excess must reach DOWNLOAD_EXCESS_BYTES, with at
    least 2 downloads in flight in half the samples, and be within DOWNLOAD_EXCESS_FACTOR of what they could
    buffer (median in flight x mean body). ``excess`` is the crawl's running summary (a thinned timeline's
    merged samples hold maxima, so their median reads high); without it the samples give it.
    """
    if sizes is None or not sizes.count or len(checkpoints) < 2:
        return ""
    mean_body = sizes.total_bytes / sizes.count
    if excess is None:
        excess = excess_of_samples(checkpoints, samples)
    if excess is None or excess.samples < 10:
        return ""
    median_excess, median_inflight = excess.median_bytes, excess.median_inflight
    buffered = median_inflight * mean_body
    if median_excess < DOWNLOAD_EXCESS_BYTES or median_inflight < 2 or buffered * DOWNLOAD_EXCESS_FACTOR < median_excess:
        return ""
    p95 = f", p95 {_mib(sizes.p95_bytes)}" if sizes.p95_bytes is not None else ""
    return (
        f"downloads held the peak, not retained objects: a median of {median_inflight:g} downloads were in flight"
        f" (peak {excess.max_inflight:,}) with bodies of {_mib(mean_body)} on average{p95}, up to {_mib(buffered)} buffered"
        f" until each completes, and sampled RSS ran {_mib(median_excess)} above the drained level of the"
        f" checkpoints around it (median; p90 {_mib(excess.p90_bytes)}, peak sample {_mib(max(s.rss_bytes for s in samples))})"
    )


def _mib(num_bytes: float) -> str:
    return f"{num_bytes / 2**20:,.1f} MiB"


def _kib(num_bytes: float) -> str:
    return f"{num_bytes / 1024:,.1f} KiB"


def _describe(counts: dict[str, int]) -> str:
    return ", ".join(f"{name} +{n:,}" for name, n in counts.items())
