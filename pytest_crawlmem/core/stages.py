"""Growth of the other allocation stages, read from the checkpoints: the browser tree, media caches, JOBDIR,
downloads in flight and processing pressure (pure). The verdict rules name them when they explain the growth.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import pairwise

from pytest_crawlmem.core import verdicts as V
from pytest_crawlmem.core.backpressure import pressure
from pytest_crawlmem.core.excess import ExcessSummary, excess_of_samples
from pytest_crawlmem.core.leaktrend import TREND_MIN_POINTS
from pytest_crawlmem.core.models import Checkpoint, Growth, Sample, SizeDistribution

#: Judged intervals the regular and the strong trend need at least (TREND_MIN_POINTS checkpoints).
MIN_DELTAS = TREND_MIN_POINTS - 1


#: Browser tree USS growth per page tolerated at drained checkpoints. The tree is noisy: a clean
#: scrapy-playwright crawl of /js/ pages moved by up to +845 KiB/page over 20-30 page intervals
#: (renderers and the driver's heap come and go), so open contexts and pages are counted too.
#: A context left open costs ~1.9 MiB of USS, a page left open 20-40 MiB.
DEFAULT_BROWSER_PER_PAGE = 1024 * 1024


#: downloader-activity: sampled RSS this far (median) above the drained level around it. Measured: clean crawls
#: 0.3-0.6 MiB (catalog and 500 ms pages at CONCURRENT_REQUESTS=32), 15 MiB for 8 trickled 2 MiB bodies in flight,
#: 75-81 MiB for 32 x 2 MiB and 64 x 1 MiB (56-62 MiB for 64 x 1 MiB with three crawls sharing 2 cores).
DOWNLOAD_EXCESS_BYTES = 32 * 2**20


#: downloader-activity: the excess may be this many times the bytes the downloads in flight could buffer (median
#: in flight x mean body). Measured: 0.95x-1.45x (the finished body is copied once, and freed memory stays in
#: malloc's arenas until the next drained checkpoint trims them).
DOWNLOAD_EXCESS_FACTOR = 4


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
    rising = rising_browser_state(judged)
    window = judged[-1].responses - judged[0].responses
    grown = (judged[-1].browser_uss_bytes or 0) - (judged[0].browser_uss_bytes or 0)
    if not rising and not all(d >= per_page for d in deltas):
        return Growth(
            verdict=V.STEADY,
            reason=f"the browser process tree's private memory (USS) levelled off ({kib(grown / window)}/page over"
            f" {window:,} pages, measured after a renderer GC)",
            rule=f"some interval < {per_page} B/page of browser-tree USS",
            per_response_bytes=grown / window,
            deltas_per_response=tuple(round(d, 1) for d in deltas),
            signal="browser-uss",
        )
    uss = (f"the browser process tree's private memory (USS) grew {kib(grown)} over {window:,} pages"
           f" ({kib(grown / window)}/page)")
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


def rising_browser_state(judged: Sequence[Checkpoint]) -> dict[str, tuple[int, int]]:
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


def processing_pressure(samples: Sequence[Sample], max_active_size: int | None) -> str:
    """Describe a scraper that falls behind (responses arriving faster than callbacks finish; backpressure.py)."""
    found = pressure(samples, max_active_size)
    return found.describe(max_active_size) if found else ""


def jobdir_at(judged: Sequence[Checkpoint], samples: Sequence[Sample]) -> list[int] | None:
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


def downloader_activity(
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
    p95 = f", p95 {mib(sizes.p95_bytes)}" if sizes.p95_bytes is not None else ""
    return (
        f"downloads held the peak, not retained objects: a median of {median_inflight:g} downloads were in flight"
        f" (peak {excess.max_inflight:,}) with bodies of {mib(mean_body)} on average{p95}, up to {mib(buffered)} buffered"
        f" until each completes, and sampled RSS ran {mib(median_excess)} above the drained level of the"
        f" checkpoints around it (median; p90 {mib(excess.p90_bytes)}, peak sample {mib(max(s.rss_bytes for s in samples))})"
    )


def mib(num_bytes: float) -> str:
    return f"{num_bytes / 2**20:,.1f} MiB"


def kib(num_bytes: float) -> str:
    return f"{num_bytes / 1024:,.1f} KiB"
