"""Growth verdicts from drained checkpoints (pure: no pytest, no Scrapy).

The rule (after CPython's refleak hunter, with a byte threshold): memory measured at
drained checkpoints (no download or callback in progress, after ``gc.collect()``) is
compared after the warm-up. A leak is declared only when *every* interval after the
warm-up, and at least ``MIN_DELTAS`` of them, grew by at least the threshold per
response once an allowance for requests added to the scheduler is taken off.
Allocator ratchets (one-off steps) and bounded caches (growth that stops) fail the
"every interval" clause, so they are never called a leak.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from itertools import pairwise

from .models import Checkpoint, Growth, Sample

MIN_DELTAS = 3
MIN_INTERVAL_RESPONSES = 50
DEFAULT_LEAK_PER_RESPONSE = 1024
#: Memory allowed per request added to the scheduler: generous, since a request's cost
#: depends on its URL, meta and cb_kwargs (measured: 2.0 KiB for catalog requests, 2.7 KiB
#: for /explode/ requests, heap estimate). Set too high it can hide a leak, never invent one.
REQUEST_ALLOWANCE = 4096
#: Memory credited per request the scheduler gave back: deliberately below any request's
#: real cost, so a draining queue cannot make a clean crawl look leaky.
REQUEST_CREDIT = 1024
#: Browser tree USS growth per page tolerated at drained checkpoints. The tree is noisy: a clean
#: scrapy-playwright crawl of /js/ pages moved by up to +845 KiB/page over 20-30 page intervals
#: (renderers and the driver's heap come and go), so open contexts and pages are counted too.
#: A context left open costs ~1.9 MiB of USS, a page left open 20-40 MiB.
DEFAULT_BROWSER_PER_PAGE = 1024 * 1024
#: Mean size of a pymalloc block in a Scrapy process (sys._debugmallocstats: 95.7 B).
BLOCK_BYTES = 96


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
}


def next_checkpoint_at(responses: int, min_interval: int) -> int:
    """Return the response count of the checkpoint after one taken at ``responses``.

    Intervals grow with the crawl (half the responses so far, at least
    ``min_interval``), so a crawl of N responses pays for O(log N) checkpoints and
    always has about three intervals after a warm-up of N/4.
    """
    return responses + max(min_interval, responses // 2)


def warmup_responses(total: int) -> int:
    """Responses after which the crawl is assumed warm: max(150, N/4)."""
    return max(150, total // 4)


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
    """malloc's bytes in use plus pymalloc's blocks at their mean size, less tracemalloc's own tables."""
    if checkpoint.heap_bytes is None:
        return None
    return checkpoint.heap_bytes + BLOCK_BYTES * (checkpoint.allocated_blocks or 0) - checkpoint.tracer_bytes


def _signal(checkpoints: Sequence[Checkpoint]) -> tuple[str, list[int]] | None:
    """Pick the memory figure to judge by: traced memory if every checkpoint has it, else heap."""
    if checkpoints and all(c.traced_bytes is not None for c in checkpoints):
        return "traced", [int(c.traced_bytes or 0) for c in checkpoints]
    if checkpoints and all(c.heap_bytes is not None for c in checkpoints):
        return "heap", [int(heap_estimate(c) or 0) for c in checkpoints]
    if checkpoints:
        return "rss", [c.rss_bytes for c in checkpoints]
    return None


def judged_checkpoints(checkpoints: Sequence[Checkpoint]) -> list[Checkpoint]:
    """Checkpoints after the warm-up, merging intervals shorter than MIN_INTERVAL_RESPONSES.

    Checkpoints taken inside an attribution window (tracemalloc on for part of the crawl)
    are left out: tracing costs memory of its own.
    """
    if not checkpoints:
        return []
    total = checkpoints[-1].responses
    if not all(c.tracer_bytes for c in checkpoints):  # a traced window's own cost is not the crawl's growth
        checkpoints = [c for c in checkpoints if not c.tracer_bytes]
    warm = [c for c in checkpoints if c.responses >= warmup_responses(total)]
    kept: list[Checkpoint] = []
    for checkpoint in warm:
        if kept and checkpoint.responses - kept[-1].responses < MIN_INTERVAL_RESPONSES:
            if checkpoint is warm[-1]:
                kept[-1] = checkpoint  # keep the closing checkpoint, drop the one just before it
            continue
        kept.append(checkpoint)
    return kept


def intervals(
    checkpoints: Sequence[Checkpoint],
    values: Sequence[int],
    request_allowance: int = REQUEST_ALLOWANCE,
    request_credit: int = REQUEST_CREDIT,
) -> list[Interval]:
    """Growth of ``values`` between consecutive checkpoints, net of the scheduler's share."""
    result = []
    for (a, va), (b, vb) in pairwise(zip(checkpoints, values, strict=True)):
        raw = vb - va
        queued = b.scheduled - a.scheduled
        share = request_allowance * queued if queued > 0 else request_credit * queued
        result.append(Interval(a, b, raw, raw - share))
    return result


def unexplained_refs(checkpoint: Checkpoint) -> dict[str, int]:
    """Live Scrapy objects a drained crawl should not hold: Requests beyond the scheduler's, all others."""
    counts = {}
    for name, count in checkpoint.live_refs.items():
        if name == "Request":
            count -= checkpoint.scheduled
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
    objects rose in both.
    """
    warm = [c for c in checkpoints if c.responses >= 150]
    if len(warm) < 3:
        return False
    recent = warm[-3:]
    picked = _signal(recent)
    if picked is None:
        return False
    spans = intervals(recent, picked[1])
    return all(i.net_per_response >= leak_per_response for i in spans) or bool(_rising_objects(recent))


def analyze(
    checkpoints: Sequence[Checkpoint],
    samples: Sequence[Sample] = (),
    *,
    leak_per_response: int = DEFAULT_LEAK_PER_RESPONSE,
    request_allowance: int = REQUEST_ALLOWANCE,
    max_active_size: int | None = None,
    browser_per_page: int = DEFAULT_BROWSER_PER_PAGE,
) -> Growth:
    """Return the verdict for a crawl from its checkpoints (and samples for processing pressure)."""
    judged = judged_checkpoints(checkpoints)
    picked = _signal(judged)
    total = checkpoints[-1].responses if checkpoints else 0
    browser = browser_growth(checkpoints, browser_per_page)
    if picked is None or len(judged) < MIN_DELTAS + 1:
        if browser is not None:  # a short browser crawl: its memory is the browser's
            note = "" if browser.verdict != "steady" else (
                f"; Python's own memory is not judged: {total:,} responses are too few (about 600 are needed)")
            return replace(browser, reason=browser.reason + note, checkpoints=tuple(checkpoints))
        return Growth(
            verdict="inconclusive",
            reason=(
                f"{total:,} responses gave {max(len(judged) - 1, 0)} checkpoint intervals after the warm-up;"
                f" {MIN_DELTAS} are needed to judge growth (crawl about 600 responses or more)"
            ),
            rule="too-few-checkpoints",
            checkpoints=tuple(checkpoints),
        )
    signal, values = picked
    spans = intervals(judged, values, request_allowance)
    net = tuple(round(i.net_per_response, 1) for i in spans)
    window = judged[-1].responses - judged[0].responses
    raw_total = sum(i.raw_bytes for i in spans)
    per_response = sum(i.net_bytes for i in spans) / window
    base = {"checkpoints": tuple(checkpoints), "deltas_per_response": net, "signal": signal}
    rising = _rising_objects(judged)
    leak = _leak(signal, spans, window, leak_per_response, rising)
    if leak is None and signal == "traced" and all(c.heap_bytes is not None for c in judged):
        heap = [int(heap_estimate(c) or 0) for c in judged]
        native = _leak("heap", intervals(judged, heap, request_allowance), window, leak_per_response, rising)
        if native is not None:
            leak = replace(
                native, reason=f"{native.reason}, while traced memory grew {_kib(per_response)}/response:"
                " native memory that tracemalloc cannot see (lxml trees, C extensions)"
            )
    if leak is not None:
        return replace(leak, checkpoints=tuple(checkpoints))
    if browser is not None and browser.verdict == "browser-state":
        return replace(browser, checkpoints=tuple(checkpoints))
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
    return Growth(
        verdict="steady",
        reason=f"{signal} memory levelled off after the warm-up ({_kib(per_response)}/response over {window:,} responses)",
        rule=f"some interval < {leak_per_response} B/response",
        per_response_bytes=per_response,
        **base,  # type: ignore[arg-type]
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
    flags = [s.backout for s in samples if s.backout is not None]
    if len(flags) < 10:
        return ""
    share = sum(flags) / len(flags)
    if share < 0.25:
        return ""
    peak = max((s.active_size_bytes or 0) for s in samples)
    limit = f" (limit {_kib(max_active_size)})" if max_active_size else ""
    return (
        f"the scraper was over its active-size limit in {share:.0%} of samples, peaking at"
        f" {_kib(peak)}{limit}: responses arrive faster than callbacks and pipelines finish"
    )


def _kib(num_bytes: float) -> str:
    return f"{num_bytes / 1024:,.1f} KiB"


def _describe(counts: dict[str, int]) -> str:
    return ", ".join(f"{name} +{n:,}" for name, n in counts.items())
