"""The governor extension's timings and thresholds, each with the measurement that set it (pure)."""

from __future__ import annotations

from pytest_crawlmem.governor.policy import MIN_RETAINED_BYTES

#: Least seconds between two malloc_trim(0) calls (7.8 ms each, DESIGN.md) while governing over the act share.
TRIM_EVERY_SECONDS = 5.0
#: Least seconds between two trims that a lowering decision asks for.
FORCED_TRIM_SECONDS = 1.0
#: A trim that gives back less than this doubles the least interval to the next (up to TRIM_MAX_BACKOFF times).
TRIM_MIN_BYTES = 4 * 2**20
TRIM_MAX_BACKOFF = 8
#: Growth of RSS (share of the act threshold) since the last reclaim (malloc_trim, then gc.collect()) that calls for another.
RECLAIM_GROWTH = 0.03
#: Least seconds between two reclaims: a full collection of a big heap costs tens of ms of the crawl's CPU.
RECLAIM_EVERY_SECONDS = 2.0
#: Rise of RSS over the highest reading a reclaim ran at after which memory not yet called retained is judged again
#: without waiting RECLAIM_EVERY_SECONDS: judged once as it passes MIN_RETAINED_BYTES, a crawl keeping 200 kB a response
#: read 9.7 of 16.2 MiB unexplained (under the half the rule asks) and ended before the next reclaim, in 1 of 3 runs.
REJUDGE_RETAINED_BYTES = MIN_RETAINED_BYTES // 2
#: Least seconds between two statm reads that a response's signal makes (over the act share it ticks out of turn).
SIGNAL_TICK_SECONDS = 0.02
#: Age of the RSS reading the cost admission answers from (with the bodies received since): a gate releasing
#: downloads asks once a download, in one reactor turn.
ANSWER_RSS_SECONDS = 0.005
#: One signal handler call in this many is timed, in thread CPU time; the handlers' CPU is the sampled calls' CPU
#: scaled to every call, the timing reads left in (they are the governor's too: 0.5 us a pair inside a crawl). Timing
#: every call in wall time (``perf_counter``) counted the waits of a loaded machine: 2.7 s for 60,000 calls on the
#: catalog crawl at load 6-15, where the calls cost ~1 us of CPU each. One in 61 (about 35 samples of a crawl of 400
#: large pages, heavy-tailed: a few calls take 50-100 us) read the same crawl's signals at 13-27 ms from run to run. A
#: prime: with 64, a burst of items kept the sampled calls on the same of the per-item hook's costlier calls.
SIGNAL_SAMPLE_EVERY = 7
#: A body announced smaller than this is learnt from its response alone (headers_received returns at once).
SMALL_BODY_BYTES = 64 * 1024
#: A quiet crawl (no headers, response, item or ended output since the last tick) is read every this many intervals
#: (_pace).
QUIET_TICKS = 4
#: Weight of the latest response in the mean body size.
BODY_WEIGHT = 0.25
#: Seconds over the close share before the governor closes the crawl.
CLOSE_AFTER_SECONDS = 3.0
#: The start gate hands the governor one item a callback yields in this many at first (it counts every item itself):
#: a call an item cost the governor ~5 us of a slow-pipeline crawl's CPU, 6,000 items in 2 s of CPU.
OUTPUT_EVERY = 16
#: Once an item's payload is known, one item in as many as carry OUTPUT_BYTES between two calls (the grain of the
#: burst guard: a callback yielding 100 MB of items between two ticks), from OUTPUT_EVERY up to OUTPUT_EVERY_MAX:
#: 375 calls at ~10 us each were a seventh of the governor's CPU on 6,000 items of 128 KiB.
OUTPUT_BYTES = 8 * 2**20
OUTPUT_EVERY_MAX = 64


def output_every(item_bytes: float) -> int:
    """One item in how many the start gate hands the governor, for items carrying ``item_bytes`` on average."""
    if item_bytes <= 0:
        return OUTPUT_EVERY
    return max(OUTPUT_EVERY, min(OUTPUT_EVERY_MAX, int(OUTPUT_BYTES // item_bytes)))
