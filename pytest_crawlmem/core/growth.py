"""Growth verdicts from drained checkpoints (pure: no pytest, no Scrapy).

The rule (after CPython's refleak hunter, with a byte threshold): memory measured at
drained checkpoints (no download or callback in progress, after ``gc.collect()``) is
compared after the warm-up. A leak is declared only when *every* interval after the
warm-up, and at least ``MIN_DELTAS`` of them, grew by at least the threshold per
response once an allowance for requests added to the scheduler is taken off.
Allocator ratchets (one-off steps) and bounded caches (growth that stops) fail the
"every interval" clause, so they are never called a leak.

Two more rules judge crawls too short for three intervals, so that a stronger leak is
never harder to catch: growth of at least ``STRONG_FACTOR`` times the threshold in every
interval after ``STRONG_WARMUP_RESPONSES`` (two intervals suffice), and Scrapy objects
that rose at every checkpoint and were still held after the crawl ended (proven retention).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from functools import lru_cache
from itertools import pairwise

from .excess import ExcessSummary, excess_of_samples
from .models import Checkpoint, Growth, MediaSummary, Sample, SizeDistribution

MIN_DELTAS = 3
MIN_INTERVAL_RESPONSES = 50
#: Responses between the first checkpoints (later ones are half the crawl so far apart).
CHECKPOINT_MIN_RESPONSES = 50
#: Growth this many times the leak threshold in every interval is judged after a short warm-up, from
#: STRONG_MIN_DELTAS intervals. Measured (benchmarks/checkpoint_noise.py): clean crawls grew at most
#: 2.2 KiB/response in an interval starting at 50 responses or later (a bounded cache filling up), and
#: 0.9 KiB/response after 150: 6 KiB is 2.7x the worst.
STRONG_FACTOR = 6
STRONG_WARMUP_RESPONSES = 50
STRONG_MIN_DELTAS = 2
#: The strong rule's intervals may be this short: its first checkpoints are 50 responses apart by schedule, and
#: the responses still in flight when a checkpoint pauses the engine can bring two of them closer than 50.
STRONG_MIN_GAP = 25
#: Live Scrapy objects of one class must reach this count to be proven retention (a handful kept by a
#: closure or a stats value is evidence, not a leak per response).
PROVEN_MIN_OBJECTS = 20
DEFAULT_LEAK_PER_RESPONSE = 1024
#: Memory allowed per request added to the scheduler: generous, since a request's cost
#: depends on its URL, meta and cb_kwargs (measured: 2.0 KiB for catalog requests, 2.7 KiB
#: for /explode/ requests, heap estimate). Set too high it can hide a leak, never invent one.
REQUEST_ALLOWANCE = 4096
#: Memory credited per request the scheduler gave back, at least: deliberately below any request's
#: real cost, so a draining queue cannot make a clean crawl look leaky.
REQUEST_CREDIT = 1024
#: ... and at most (the crawl's own cost per queued request is measured, see ``measured_request_credit``):
#: a catalog request costs about 2 KiB, so a late 360 -> 0 drain no longer hides a 2.5 KB/response leak.
MAX_REQUEST_CREDIT = 2048
#: An interval whose queue grew by this many requests or more measures what a queued request costs.
COST_MIN_QUEUED = 50
#: Browser tree USS growth per page tolerated at drained checkpoints. The tree is noisy: a clean
#: scrapy-playwright crawl of /js/ pages moved by up to +845 KiB/page over 20-30 page intervals
#: (renderers and the driver's heap come and go), so open contexts and pages are counted too.
#: A context left open costs ~1.9 MiB of USS, a page left open 20-40 MiB.
DEFAULT_BROWSER_PER_PAGE = 1024 * 1024
#: The most an attribution window's residue may take off the heap signal. Measured: 410-560 KiB of malloc'd memory
#: stays in use after tracemalloc.stop() on a clean catalog crawl (8 frames, an 85-responses window).
WINDOW_RESIDUE_CAP = 1024 * 1024
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


#: The fix that usually helps, per verdict (appended to the failure message).
FIXES = {
    "retained-objects": "look for references kept after a response is processed: lists, dicts and caches on the"
    " spider or a module, request meta / cb_kwargs, closures connected to signals, middlewares and pipelines",
    "scheduler-backlog": "discover requests lazily (yield them from start() as they are needed), keep the queue on"
    " disk with JOBDIR, or bound the frontier (DEPTH_LIMIT, CLOSESPIDER_*)",
    "browser-state": "close what each request opens: pages handed to callbacks (`await page.close()` in the callback"
    " and the errback), named contexts (`playwright_context` per request keeps every context alive: reuse a few"
    " names or close them with `page.context.close()`), and long-lived connections on kept pages",
    "response-processing": "make callbacks and pipelines cheaper, or lower CONCURRENT_REQUESTS so responses do not"
    " pile up behind them",
    "downloader-activity": "every download buffers its whole body in memory until it completes: lower"
    " CONCURRENT_REQUESTS / CONCURRENT_REQUESTS_PER_DOMAIN, cap bodies with DOWNLOAD_MAXSIZE (DOWNLOAD_WARNSIZE"
    " logs the big ones), or give large downloads their own slot with a low concurrency (meta['download_slot'] and"
    " DOWNLOAD_SLOTS); budget the peak with peak_rss and max_inflight",
    "media-disk": "for cached media failures, keep URLs that fail out of file_urls / image_urls (Scrapy 2.19 keeps"
    " each failed download's Request and Response until the crawl ends) and budget them with max_dropped; for a"
    " growing JOBDIR, bound the frontier (DEPTH_LIMIT, CLOSESPIDER_*, lazy start requests) and budget it with"
    " jobdir_disk",
}


def next_checkpoint_at(responses: int, min_interval: int = CHECKPOINT_MIN_RESPONSES) -> int:
    """Return the response count of the checkpoint after one taken at ``responses``.

    Intervals grow with the crawl (half the responses so far, at least
    ``min_interval``), so a crawl of N responses pays for O(log N) checkpoints and
    always has about three intervals after a warm-up of N/4.
    """
    return responses + max(min_interval, responses // 2)


def warmup_responses(total: int) -> int:
    """Responses after which the crawl is assumed warm: max(150, N/4)."""
    return max(150, total // 4)


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


@lru_cache(maxsize=8)
def responses_to_judge(min_interval: int = CHECKPOINT_MIN_RESPONSES) -> int:
    """The fewest responses whose checkpoint schedule gives MIN_DELTAS judged intervals (any leak size)."""
    total = 1
    while len(_merged(checkpoint_schedule(total, min_interval), warmup_responses(total))) < MIN_DELTAS + 1:
        total += 1
    return total


@lru_cache(maxsize=8)
def responses_to_judge_strong(min_interval: int = CHECKPOINT_MIN_RESPONSES) -> int:
    """The fewest responses that give STRONG_MIN_DELTAS intervals after STRONG_WARMUP_RESPONSES."""
    total = 1
    while len(_merged(checkpoint_schedule(total, min_interval), STRONG_WARMUP_RESPONSES, STRONG_MIN_GAP)) < STRONG_MIN_DELTAS + 1:
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

    ``opening``: the checkpoint that opened the window and the one before it; ``after``: the heap estimate once the
    window closed and tracing stopped, ``responses`` later. The crawl's own growth in the window is taken as the
    rate of the interval before the window, at most ``traced`` (tracemalloc's figure when it closed: everything the
    crawl allocated in the window and still held, a leak included), so a leak's growth is not taken for the residue.
    """
    if len(opening) < 2 or traced is None:
        return 0
    before, base = heap_estimate(opening[-2]), heap_estimate(opening[-1])
    span = opening[-1].responses - opening[-2].responses
    if before is None or base is None or span <= 0:
        return 0
    crawl = min(traced, max(0.0, (base - before) / span) * responses)
    return int(min(max(0.0, after - base - crawl), WINDOW_RESIDUE_CAP))


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
    """Checkpoints after the warm-up (max(150, N/4) unless given), merging intervals shorter than MIN_INTERVAL_RESPONSES.

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


def memory_queued(checkpoint: Checkpoint) -> int:
    """Requests the scheduler holds in memory: its length less JOBDIR's disk queue."""
    return max(checkpoint.scheduled - checkpoint.disk_scheduled, 0)


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


def suspicious(checkpoints: Sequence[Checkpoint], leak_per_response: int = DEFAULT_LEAK_PER_RESPONSE) -> bool:
    """Whether the crawl so far looks like a leak: worth tracing allocations from here on.

    Judged on the checkpoints taken so far: the last two intervals after 150 responses
    both grew past the threshold (net of the scheduler), or unexplained live Scrapy
    objects rose in both; before that, the intervals after 50 responses (one or two) grew
    past STRONG_FACTOR x the threshold (a leak the strong rule will judge in a short crawl).
    """
    warm = [c for c in checkpoints if c.responses >= STRONG_WARMUP_RESPONSES]
    if len(warm) < 2:
        return False
    recent = warm[-3:]
    picked = _signal(recent)
    if picked is None:
        return False
    spans = intervals(recent, picked[1])
    if recent[0].responses < 150 or len(recent) < 3:
        return all(i.net_per_response >= STRONG_FACTOR * leak_per_response for i in spans)
    return all(i.net_per_response >= leak_per_response for i in spans) or bool(_rising_objects(recent))


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
) -> Growth:
    """Return the verdict for a crawl from its checkpoints (and samples for processing pressure).

    Precedence: ``retained-objects`` (or ``media-disk`` when the media pipelines' cached failures hold all of
    the retained Scrapy objects), ``browser-state``, ``scheduler-backlog``, ``response-processing``,
    ``media-disk`` (JOBDIR growing on disk), ``downloader-activity``, ``steady``. ``response_sizes`` (the
    crawl's body sizes) is needed for ``downloader-activity``; ``media`` (the pipelines' cache at close) and
    ``media_failure_body_bytes`` (mean body of the failed media responses) for the media cache's explanation.
    ``held_after_close`` counts, per Scrapy class, the crawl's objects still alive after it ended that a
    module, class or library structure was shown to hold (proven retention). ``min_interval`` is the
    extension's CRAWLMEM_CHECKPOINT_MIN_RESPONSES (to say how many responses a judgement needs).
    ``download_excess`` is the timeline's running summary of RSS above the drained level (exact on a thinned one).
    """
    judged = judged_checkpoints(checkpoints)
    picked = _signal(judged)
    total = checkpoints[-1].responses if checkpoints else 0
    browser = browser_growth(checkpoints, browser_per_page)
    if picked is None or len(judged) < MIN_DELTAS + 1:
        early = _strong_growth(checkpoints, leak_per_response, request_allowance) or _proven_retention(
            checkpoints, held_after_close or {}, leak_per_response)
        if early is not None:
            return replace(early, checkpoints=tuple(checkpoints))
        if browser is not None:  # a short browser crawl: its memory is the browser's
            note = "" if browser.verdict != "steady" else (
                f"; Python's own memory is not judged: {total:,} responses are too few"
                f" (about {responses_to_judge(min_interval):,} are needed)")
            return replace(browser, reason=browser.reason + note, checkpoints=tuple(checkpoints))
        return Growth(
            verdict="inconclusive",
            reason=(
                f"{total:,} responses gave {max(len(judged) - 1, 0)} checkpoint intervals after the warm-up;"
                f" {MIN_DELTAS} are needed to judge growth: crawl at least {responses_to_judge(min_interval):,}"
                f" responses (growth of {_kib(STRONG_FACTOR * leak_per_response)}/response or more is judged from"
                f" {responses_to_judge_strong(min_interval):,})"
            ),
            rule="too-few-checkpoints",
            checkpoints=tuple(checkpoints),
        )
    signal, values = picked
    untraced = [c for c in checkpoints if not c.tracer_bytes] if not all(c.tracer_bytes for c in checkpoints) else checkpoints
    whole = _signal(untraced)
    credit = measured_request_credit(untraced, whole[1]) if whole else float(REQUEST_CREDIT)
    spans = intervals(judged, values, request_allowance, credit)
    net = tuple(round(i.net_per_response, 1) for i in spans)
    window = judged[-1].responses - judged[0].responses
    raw_total = sum(i.raw_bytes for i in spans)
    per_response = sum(i.net_bytes for i in spans) / window
    base = {"checkpoints": tuple(checkpoints), "deltas_per_response": net, "signal": signal}
    rising = _rising_objects(judged)
    leak = _leak(signal, spans, window, leak_per_response, rising)
    leak_spans = spans
    if leak is None and signal == "traced" and all(c.heap_bytes is not None for c in judged):
        heap = [int(heap_estimate(c) or 0) for c in judged]
        leak_spans = intervals(judged, heap, request_allowance)
        native = _leak("heap", leak_spans, window, leak_per_response, rising)
        if native is not None:
            leak = replace(
                native, reason=f"{native.reason}, while traced memory grew {_kib(per_response)}/response:"
                " native memory that tracemalloc cannot see (lxml trees, C extensions)"
            )
    if leak is not None:
        cached = _media_cache(leak.signal, judged, leak_spans, leak_per_response, media, media_failure_body_bytes)
        return replace(cached or leak, checkpoints=tuple(checkpoints))
    if browser is not None and browser.verdict == "browser-state":
        return replace(browser, checkpoints=tuple(checkpoints))
    cached = _media_cache(signal, judged, spans, leak_per_response, media, media_failure_body_bytes) if rising else None
    if cached is not None:
        return replace(cached, checkpoints=tuple(checkpoints))
    proven = _proven_retention(checkpoints, held_after_close or {}, leak_per_response)
    if proven is not None:
        return replace(proven, checkpoints=tuple(checkpoints))
    if rising:
        return Growth(
            verdict="retained-objects",
            reason=f"live Scrapy objects rose at every drained checkpoint: {_describe(rising)}",
            rule="live Scrapy objects rising at every drained checkpoint",
            per_response_bytes=per_response,
            **base,  # type: ignore[arg-type]
        )
    if all(i.raw_per_response >= leak_per_response for i in spans) and judged[-1].scheduled > judged[0].scheduled:
        return Growth(
            verdict="scheduler-backlog",
            reason=(
                f"{signal} memory grew {_kib(raw_total)} over {window:,} responses while the scheduler grew"
                f" from {judged[0].scheduled:,} to {judged[-1].scheduled:,} requests: a backlog, not a leak"
            ),
            rule="growth explained by requests added to the scheduler",
            per_response_bytes=raw_total / window,
            **base,  # type: ignore[arg-type]
        )
    pressure = _processing_pressure(samples, max_active_size)
    if pressure:
        return Growth(
            verdict="response-processing", reason=pressure, rule="sustained scraper backout",
            per_response_bytes=per_response, **base,  # type: ignore[arg-type]
        )
    disk = _jobdir_growth(judged, samples, disk_per_response)
    if disk:
        return Growth(
            verdict="media-disk", reason=f"{disk}; {signal} memory levelled off ({_kib(per_response)}/response)",
            rule=f"every interval >= {disk_per_response} B/response of JOBDIR disk use",
            per_response_bytes=per_response, **base,  # type: ignore[arg-type]
        )
    downloads = _downloader_activity(checkpoints, samples, response_sizes, download_excess)
    if downloads:
        return Growth(
            verdict="downloader-activity",
            reason=f"{downloads}; memory at the drained checkpoints levelled off ({_kib(per_response)}/response)",
            rule=f"median sampled RSS >= {DOWNLOAD_EXCESS_BYTES // 2**20} MiB above the drained checkpoints around it,"
            f" within {DOWNLOAD_EXCESS_FACTOR}x of median downloads in flight x mean body",
            per_response_bytes=per_response, **base,  # type: ignore[arg-type]
        )
    return Growth(
        verdict="steady",
        reason=f"{signal} memory levelled off after the warm-up ({_kib(per_response)}/response over {window:,} responses)",
        rule=f"some interval < {leak_per_response} B/response",
        per_response_bytes=per_response,
        **base,  # type: ignore[arg-type]
    )


def _strong_growth(checkpoints: Sequence[Checkpoint], leak_per_response: int, request_allowance: int) -> Growth | None:
    """``retained-objects`` when every interval after a short warm-up grew by STRONG_FACTOR x the threshold or more.

    Far above the noise of clean crawls (see STRONG_FACTOR), so STRONG_MIN_DELTAS intervals are enough;
    a crawl too short for the regular rule is judged when its leak is this strong.
    """
    judged = judged_checkpoints(checkpoints, STRONG_WARMUP_RESPONSES, STRONG_MIN_GAP)
    picked = _signal(judged)
    if picked is None or len(judged) < STRONG_MIN_DELTAS + 1:
        return None
    spans = intervals(judged, picked[1], request_allowance)
    strong = STRONG_FACTOR * leak_per_response
    window = judged[-1].responses - judged[0].responses
    leak = _leak(picked[0], spans, window, strong, {})
    if leak is None:
        return None
    return replace(
        leak,
        reason=f"{leak.reason}; at least {STRONG_FACTOR}x the leak threshold in every interval, so"
        f" {len(spans)} intervals after {STRONG_WARMUP_RESPONSES} responses are enough",
        rule=f"every interval >= {strong} B/response ({STRONG_FACTOR}x leak_per_response) of {picked[0]} memory"
        f" after {STRONG_WARMUP_RESPONSES} responses, net of scheduler growth",
    )


def _proven_retention(
    checkpoints: Sequence[Checkpoint], held: Mapping[str, int], leak_per_response: int
) -> Growth | None:
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
        verdict="retained-objects",
        reason=(
            f"live Scrapy objects rose at every drained checkpoint ({_describe(proven)}) and {kept} were still held"
            f" after the crawl ended; memory grew {_kib(per_response)}/response over {window:,} responses"
        ),
        rule="live Scrapy objects rising at every checkpoint and held after the crawl (proven retention)",
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
            verdict="steady",
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
        verdict="browser-state",
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


def _leak(
    signal: str, spans: Sequence[Interval], window: int, leak_per_response: int, rising: dict[str, int]
) -> Growth | None:
    """The retained-objects verdict if every interval of ``signal`` grew past the threshold, else None."""
    if not all(i.net_per_response >= leak_per_response for i in spans):
        return None
    net_total = sum(i.net_bytes for i in spans)
    raw_total = sum(i.raw_bytes for i in spans)
    held = f"; live Scrapy objects rising: {_describe(rising)}" if rising else ""
    return Growth(
        verdict="retained-objects",
        reason=(
            f"{signal} memory grew {_kib(net_total)} over {window:,} responses ({_kib(net_total / window)}/response)"
            f" in each of {len(spans)} drained intervals, {_scheduler_share(raw_total - net_total)}{held}"
        ),
        rule=f"every interval >= {leak_per_response} B/response of {signal} memory, net of scheduler growth",
        per_response_bytes=net_total / window,
        deltas_per_response=tuple(round(i.net_per_response, 1) for i in spans),
        signal=signal,
    )


def _scheduler_share(share: float) -> str:
    """Describe the part of the growth the scheduler's queue explains."""
    if share >= 0:
        return f"of which the scheduler's growing queue explains {_kib(share)}"
    return f"even though the draining scheduler queue freed about {_kib(-share)}"


def _processing_pressure(samples: Sequence[Sample], max_active_size: int | None) -> str:
    """Describe sustained scraper backout (responses arriving faster than callbacks finish)."""
    flags = [s for s in samples if s.backout is not None]
    if len(flags) < 10:
        return ""
    share = sum(s.span for s in flags if s.backout) / sum(s.span for s in flags)  # span: raw samples a thinned one stands for
    if share < 0.25:
        return ""
    peak = max((s.active_size_bytes or 0) for s in samples)
    limit = f" (limit {_kib(max_active_size)})" if max_active_size else ""
    return (
        f"the scraper was over its active-size limit in {share:.0%} of samples, peaking at"
        f" {_kib(peak)}{limit}: responses arrive faster than callbacks and pipelines finish"
    )


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
        verdict="media-disk",
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


def _at_checkpoints(judged: Sequence[Checkpoint], samples: Sequence[Sample]) -> list[Sample] | None:
    """The last sample with a JOBDIR reading taken by each checkpoint (``None`` if one has none)."""
    readings = [s for s in samples if s.jobdir_bytes is not None]
    picked = []
    for checkpoint in judged:
        before = [s for s in readings if s.t_seconds <= checkpoint.t_seconds]
        if not before:
            return None
        picked.append(before[-1])
    return picked


def _jobdir_growth(judged: Sequence[Checkpoint], samples: Sequence[Sample], per_response: int) -> str:
    """Describe JOBDIR's disk use growing by ``per_response`` or more in every judged interval ('' if it did not)."""
    picked = _at_checkpoints(judged, samples)
    if picked is None or len(picked) < MIN_DELTAS + 1:
        return ""
    rates = [((b.jobdir_bytes or 0) - (a.jobdir_bytes or 0)) / (cb.responses - ca.responses)
             for (a, ca), (b, cb) in pairwise(zip(picked, judged, strict=True))]
    if not all(r >= per_response for r in rates):
        return ""
    first, last = picked[0].jobdir_bytes or 0, picked[-1].jobdir_bytes or 0
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
