"""The growth verdict vocabulary: each name, whether it is a leak, the fix that usually helps, its colour (pure).

Every module that gives a verdict (``growth``, ``cluster``) or reads one (budgets, reports, the summary row) uses
these names; the verdict travels as data, the sentence is for people. ``tests/test_verdicts.py`` checks that no
other module spells a verdict name as a string literal.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final


@dataclass(frozen=True, slots=True)
class Verdict:
    """One verdict: its name, whether ``leak="fail"`` fails it, the fix appended to its message, its report colour."""

    name: str
    is_leak: bool
    fix: str
    colour: str  # the report's class: "pass", "fail", "warn" or "muted"


#: Memory at the drained checkpoints did not grow by a leak this crawl could detect.
STEADY: Final = "steady"
#: The crawl's own noise (or too few drained checkpoints) cannot bound a leak under MAX_STATED_PER_RESPONSE.
INCONCLUSIVE: Final = "inconclusive"
#: Memory grew with the responses and stayed: something keeps a share of every response.
RETAINED_OBJECTS: Final = "retained-objects"
#: The browser process tree grew with the pages (contexts or pages left open).
BROWSER_STATE: Final = "browser-state"
#: Growth explained by requests added to the scheduler.
SCHEDULER_BACKLOG: Final = "scheduler-backlog"
#: Responses arrived faster than callbacks and pipelines finished.
RESPONSE_PROCESSING: Final = "response-processing"
#: Downloads in flight held the peak.
DOWNLOADER_ACTIVITY: Final = "downloader-activity"
#: Scrapy's cached media failures, or JOBDIR growing on disk.
MEDIA_DISK: Final = "media-disk"

VERDICTS: Final = {
    v.name: v
    for v in (
        Verdict(STEADY, False, "", "pass"),
        Verdict(INCONCLUSIVE, False, "", "muted"),
        Verdict(
            RETAINED_OBJECTS, True,
            "look for references kept after a response is processed: lists, dicts and caches on the spider or a module,"
            " request meta / cb_kwargs, closures connected to signals, middlewares and pipelines", "fail"),
        Verdict(
            BROWSER_STATE, True,
            "close what each request opens: pages handed to callbacks (`await page.close()` in the callback and the"
            " errback), named contexts (`playwright_context` per request keeps every context alive: reuse a few names"
            " or close them with `page.context.close()`), and long-lived connections on kept pages", "fail"),
        Verdict(
            SCHEDULER_BACKLOG, False,
            "discover requests lazily (yield them from start() as they are needed), keep the queue on disk with JOBDIR,"
            " or bound the frontier (DEPTH_LIMIT, CLOSESPIDER_*)", "warn"),
        Verdict(
            RESPONSE_PROCESSING, False,
            "make callbacks and pipelines cheaper, or lower CONCURRENT_REQUESTS so responses do not pile up behind"
            " them", "warn"),
        Verdict(
            DOWNLOADER_ACTIVITY, False,
            "every download buffers its whole body in memory until it completes: lower CONCURRENT_REQUESTS /"
            " CONCURRENT_REQUESTS_PER_DOMAIN, cap bodies with DOWNLOAD_MAXSIZE (DOWNLOAD_WARNSIZE logs the big ones),"
            " or give large downloads their own slot with a low concurrency (meta['download_slot'] and DOWNLOAD_SLOTS);"
            " budget the peak with peak_rss and max_inflight", "warn"),
        Verdict(
            MEDIA_DISK, False,
            "for cached media failures, keep URLs that fail out of file_urls / image_urls (Scrapy 2.19 keeps each failed"
            " download's Request and Response until the crawl ends) and budget them with max_dropped; for a growing"
            " JOBDIR, bound the frontier (DEPTH_LIMIT, CLOSESPIDER_*, lazy start requests) and budget it with"
            " jobdir_disk", "warn"),
    )
}

#: The verdicts ``leak="fail"`` fails.
LEAKS: Final = frozenset(name for name, v in VERDICTS.items() if v.is_leak)
#: Verdicts a worker's own pressure explains (a cluster's workers), not a leak.
PRESSURE: Final = (SCHEDULER_BACKLOG, RESPONSE_PROCESSING, MEDIA_DISK, DOWNLOADER_ACTIVITY)


def is_leak(name: str) -> bool:
    """Whether ``leak="fail"`` fails a crawl with this verdict."""
    verdict = VERDICTS.get(name)
    return verdict is not None and verdict.is_leak


def fix_of(name: str) -> str:
    """The fix that usually helps ('' for an unknown verdict or one without a fix)."""
    verdict = VERDICTS.get(name)
    return verdict.fix if verdict is not None else ""


def colour_of(name: str) -> str:
    """The report's colour class of a verdict ("warn" for an unknown one)."""
    verdict = VERDICTS.get(name)
    return verdict.colour if verdict is not None else "warn"
