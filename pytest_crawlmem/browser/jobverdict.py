"""A browser job's verdict in its own unit, pages, with what the job must do to be judged (pure: no pytest, no Scrapy).

Runs in the pytest process, on the verdict :func:`pytest_crawlmem.core.growth.analyze` gave for a job's
checkpoints. ``analyze`` speaks of a crawl (responses, the extension's checkpoint schedule); a job counts
pages (``job.page_done()``) and is checkpointed where it calls ``await job.checkpoint()``, so the pages it
needs depend on its batches, not on the crawl schedule.
"""

from __future__ import annotations

import re
import statistics
from collections.abc import Sequence
from dataclasses import replace
from itertools import pairwise

from pytest_crawlmem.core.evidence import judged_checkpoints
from pytest_crawlmem.core.models import Checkpoint, Growth
from pytest_crawlmem.core.stages import MIN_DELTAS

#: The batch the advice assumes when the job took no checkpoint of its own.
SUGGESTED_BATCH = 10
_NOT_JUDGED = "; Python's own memory is not judged"
_UNITS = ((re.compile(r"\bresponses\b"), "pages"), (re.compile(r"(?<![\w-])response(?![\w-])"), "page"))


def pages_to_judge(batch: int) -> int:
    """The fewest pages whose checkpoints, one every ``batch`` pages, give the intervals a verdict needs."""
    if batch < 1:
        raise ValueError(f"invalid batch {batch}: expected at least 1 page between checkpoints")
    pages = batch
    while True:
        points = [Checkpoint(responses=n, t_seconds=float(n), rss_bytes=0, heap_bytes=None, traced_bytes=None, scheduled=0)
                  for n in range(0, pages + 1, batch)]
        if len(judged_checkpoints(points)) >= MIN_DELTAS + 1:
            return pages
        pages += batch


def job_batch(checkpoints: Sequence[Checkpoint]) -> int | None:
    """Pages between the job's own checkpoints (the median), ``None`` when it took none between opening and closing."""
    gaps = [b.responses - a.responses for a, b in pairwise(checkpoints) if b.responses > a.responses]
    return int(statistics.median(gaps)) if len(gaps) > 1 else None


def in_pages(growth: Growth, checkpoints: Sequence[Checkpoint]) -> Growth:
    """``growth`` with its reason in pages; a job too short to judge is told how many pages it needs."""
    pages = checkpoints[-1].responses if checkpoints else 0
    batch = job_batch(checkpoints)
    if batch is None:
        need = (f"call `await job.checkpoint()` after each batch of pages: at one every {SUGGESTED_BATCH} pages,"
                f" about {pages_to_judge(SUGGESTED_BATCH):,} pages are needed")
    else:
        need = f"at a checkpoint every {batch:,} pages, about {pages_to_judge(batch):,} pages are needed"
    reason, note, _ = growth.reason.partition(_NOT_JUDGED)
    for pattern, word in _UNITS:
        reason = pattern.sub(word, reason)
    if growth.rule == "too-few-checkpoints":
        intervals = max(len(judged_checkpoints(checkpoints)) - 1, 0)
        reason = (f"{pages:,} pages gave {intervals} checkpoint intervals after the warm-up; {MIN_DELTAS} are needed"
                  f" to judge growth: {need}")
    elif note:
        reason += f"{_NOT_JUDGED}: {pages:,} pages are too few ({need})"
    return replace(growth, reason=reason)
