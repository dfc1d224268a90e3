"""What a crawl's drained checkpoints show, gathered once for the verdict rules: :class:`Evidence` (pure).

The judged checkpoints and their intervals, the plugin's own residues, Scrapy objects that rose, the backlog,
processing pressure, JOBDIR and media figures, and the trend with its power (``gather``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from itertools import pairwise

from pytest_crawlmem.core import verdicts as V
from pytest_crawlmem.core.defaults import CHECKPOINT_MIN_RESPONSES, DEFAULT_LEAK_PER_RESPONSE
from pytest_crawlmem.core.excess import ExcessSummary
from pytest_crawlmem.core.leaktrend import (
    COST_MIN_QUEUED,
    LATER_SHARE,
    MAX_REQUEST_CREDIT,
    REQUEST_CREDIT,
    TREND_MIN_POINTS,
    Trend,
    measure_trend,
    memory_queued,
)
from pytest_crawlmem.core.models import Checkpoint, Growth, MediaSummary, Sample, SizeDistribution, heap_estimate
from pytest_crawlmem.core.plateau import Plateau, find_plateau
from pytest_crawlmem.core.schedule import (
    MIN_INTERVAL_RESPONSES,
    STRONG_MIN_GAP,
    STRONG_WARMUP_RESPONSES,
    merged_points,
    responses_to_judge,
    warmup_responses,
)
from pytest_crawlmem.core.stages import DEFAULT_BROWSER_PER_PAGE, browser_growth, kib
from pytest_crawlmem.core.trend import slope_only

#: The trend after a short warm-up judges a leak this many times the threshold. Measured (benchmarks/checkpoint_noise.py):
#: clean crawls grew at most 2.2 KiB/response in an interval starting at 50 responses or later (a bounded cache filling
#: up), and 0.9 KiB/response after 150: the trend's 95% lower bound over 3 KiB needs the whole window above it, 1.4x
#: the worst single interval. (At 6x, a 4 KiB/response leak over 147 responses read inconclusive in 30 of 30 runs.)
STRONG_FACTOR = 3


#: The closing checkpoint fell this far below the last running one, beyond what the memory queue held at the credit:
#: the crawl's end released what its requests carried from one to the next (a list passed on in ``request.meta`` or
#: ``cb_kwargs``), so the trend is judged again over the checkpoints taken while the crawl ran (and decides only when
#: that proves a leak). Measured on 473 saved crawls of benchmarks/detection.py (rejudge.py): 10 of 30 ``request.meta``
#: chains released this much at their close (267-666 KiB at 1 KiB/response over 609 responses) and 9 of those 10 then
#: read a leak; 5 of 213 clean crawls did too (up to 398 KiB, a 2,050-response late drain) and none of those 5 did.
RELEASE_MIN_BYTES = 128 * 1024


#: A crawl whose own noise cannot bound a leak under this is ``inconclusive`` (it says how many responses would).
MAX_STATED_PER_RESPONSE = 8 * 1024


#: Memory allowed per request added to the scheduler: generous, since a request's cost
#: depends on its URL, meta and cb_kwargs (measured: 2.0 KiB for catalog requests, 2.7 KiB
#: for /explode/ requests, heap estimate). Set too high it can hide a leak, never invent one.
REQUEST_ALLOWANCE = 4096


#: The most an attribution window's residue may take off the heap signal. Measured: 410-560 KiB of malloc'd memory
#: stays in use after tracemalloc.stop() on a clean catalog crawl (8 frames, an 85-responses window).
WINDOW_RESIDUE_CAP = 1024 * 1024


#: The least an attribution window's residue is taken as. Measured on the windows of 89 clean crawls of
#: benchmarks/detection.py: 95% left 161 KiB or more; the three that left less (60-115 KiB) were caches
#: that stopped filling inside the window, so the rate before it overstated the crawl's growth in it and the residue
#: came out too small; one of them, its window 45 responses before the end, read ``retained-objects``. Leaky crawls'
#: windows left 129 KiB or more in 90% of 578, and none of them changes verdict at this floor (nor at 192 KiB).
WINDOW_RESIDUE_FLOOR = 160 * 1024


#: media-disk: JOBDIR growth per response tolerated in every drained interval. Measured: requests.seen adds
#: 24 B/response to a catalog crawl's JOBDIR; a frontier growing by 9 requests per response (/explode/, fanout 10)
#: adds 3.2 KiB/response (about 330 B per pickled request).
DEFAULT_DISK_PER_RESPONSE = 1024


#: media-disk: memory a failed media download may keep in the pipelines' cache (Scrapy 2.19 keeps its Request and
#: Response through the cached exception's tracebacks), on top of the failed response's body. Measured: 22.8 KiB
#: per failed download (heap signal, 161-byte 404 bodies, 700 failures).
MEDIA_FAILURE_ALLOWANCE = 32 * 1024


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


def judged_signal(checkpoints: Sequence[Checkpoint]) -> tuple[str, list[int]] | None:
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
    return [checkpoints[i] for i in merged_points(counts, warmup_responses(total) if warmup is None else warmup, min_gap)]


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
    picked = judged_signal(points)
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
        return "" if self.limits.running else f": {no_leak_note(t)}"

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
    whole = judged_signal(untraced)
    credit = measured_request_credit(untraced, whole[1]) if whole else float(REQUEST_CREDIT)
    picked = judged_signal(judged)
    signal, values = picked if picked else ("", [])
    trend = (measure_trend(judged, values, credit, limits.request_allowance, limits.leak_per_response, LATER_SHARE)
             if len(judged) >= TREND_MIN_POINTS else None)
    total = checkpoints[-1].responses if checkpoints else 0
    if trend is None and total >= responses_to_judge(limits.min_interval):
        # long enough, yet the attribution window's traced checkpoints and merging left three: the same trend over the
        # checkpoints STRONG_MIN_GAP apart decides, when it proves a leak (a 294-response crawl kept 114, 250, 294)
        close = judged_checkpoints(checkpoints, None, STRONG_MIN_GAP)
        close_signal = judged_signal(close)
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
        early_signal = judged_signal(early)
        if early_signal is not None and len(early) >= TREND_MIN_POINTS:
            strong = measure_trend(early, early_signal[1], credit, limits.request_allowance,
                                   STRONG_FACTOR * limits.leak_per_response)
            signal = signal or early_signal[0]
        if strong is not None and not strong.is_leak and not limits.running:
            running_strong = _strong_before_release(checkpoints, strong, credit, limits)
            if running_strong is not None:
                strong, close_left_out = running_strong, True
    spans = intervals(judged, values, limits.request_allowance, credit) if trend else []
    plateau = plateau_of(checkpoints, judged, values, signal, trend, limits, close=not running) if trend else None
    flat_trend = _flat_trend(plateau, judged, values, trend, limits) if plateau and trend else None
    return Evidence(
        checkpoints=tuple(checkpoints), samples=samples, limits=limits, judged=judged, signal=signal, values=values,
        credit=credit, trend=trend, strong=strong, spans=spans, rising=_rising_objects(judged) if trend else {},
        browser=browser_growth(checkpoints, limits.browser_per_page), released_at_close=released,
        close_left_out=bool(running) or close_left_out, recorded=recorded, plateau=plateau, flat_trend=flat_trend,
        **context,  # type: ignore[arg-type]
    )


def plateau_of(
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
    picked = judged_signal(early)
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
    close = judged_signal([checkpoints[-1]])
    picked = judged_signal(running)
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


def no_leak_note(t: Trend) -> str:
    """``no leak of 1.4 KiB/response or more (95%)``, rounded up."""
    return f"no leak of {math.ceil(t.detectable / 102.4) / 10:,.1f} KiB/response or more (95%)"


def media_cache(
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
    cost = f", about {kib(net_total / failures)} each" if failures and net_total > 0 else ""
    held = " and ".join(f"{r.count:,} {r.class_name}" for r in media.retained)
    return Growth(
        verdict=V.MEDIA_DISK,
        reason=(
            f"{signal} memory grew {kib(net_total)} over {window:,} responses ({kib(net_total / window)}/response)"
            f" while {failures:,} more failed media downloads were cached{cost}: the {media.failed_at_close:,} failures"
            f" {', '.join(media.pipelines)} cached keep {held} alive until the crawl ends, every Scrapy object the"
            " drained crawl still held (Scrapy caches each failure with its traceback), not your code"
        ),
        rule=f"retained Scrapy objects all held by cached media failures; growth beyond {kib(per_failure)} per"
        f" failure < {leak_per_response} B/response in some interval",
        per_response_bytes=net_total / window,
        deltas_per_response=tuple(round(i.net_per_response, 1) for i in spans),
        signal=signal,
    )
