"""How much of a crawl's RSS growth came in its warm-up (pure, any process).

Verdicts judge growth after the warm-up (``growth.warmup_responses``: max(100, N/4) responses); RSS that rose while the
crawl warmed up (imports, caches filled once, the allocator's first arenas) is no leak. A crawl whose RSS grew by
108.7 MiB and reads ``steady`` says where that growth came: "RSS growth 108.7 MiB, all of it in the warm-up".
"""

from __future__ import annotations

from collections.abc import Sequence

from pytest_crawlmem.core.models import Checkpoint, CrawlResult
from pytest_crawlmem.core.schedule import warmup_responses
from pytest_crawlmem.core.units import format_size


def warmup_growth(start_rss: int, end_rss: int, checkpoints: Sequence[Checkpoint], responses: int) -> tuple[int, int] | None:
    """``(RSS growth by the end of the warm-up, the warm-up's responses)``: the RSS of the first drained checkpoint at or
    after the warm-up, less the crawl's start, at most the crawl's whole growth; ``None`` without such a checkpoint or
    without growth."""
    total = end_rss - start_rss
    warm = warmup_responses(responses)
    after = next((c for c in checkpoints if c.drained and c.responses >= warm), None)
    if total <= 0 or after is None or after.responses >= responses:
        return None
    return max(0, min(total, after.rss_bytes - start_rss)), after.responses


def warmup_note(start_rss: int, end_rss: int, checkpoints: Sequence[Checkpoint], responses: int) -> str:
    """``all of it in the warm-up (the first 250 responses)`` / ``96.0 MiB of it in the warm-up (...)``; '' when none."""
    found = warmup_growth(start_rss, end_rss, checkpoints, responses)
    if found is None or found[0] <= 0:
        return ""
    grown, warm = found
    share = "all of it" if grown >= end_rss - start_rss else f"{format_size(grown)} of it"
    return f"{share} in the warm-up (the first {warm:,} responses)"


def result_warmup_note(result: CrawlResult) -> str:
    """:func:`warmup_note` of a crawl's result (its verdict's checkpoints)."""
    return warmup_note(result.start_rss, result.end_rss, result.growth.checkpoints, result.responses)


def warmup_cell(result: CrawlResult) -> str:
    """The summary table's short form: ``all in warm-up`` / ``96.0 MiB in warm-up``; '' when none."""
    found = warmup_growth(result.start_rss, result.end_rss, result.growth.checkpoints, result.responses)
    if found is None or found[0] <= 0:
        return ""
    return "all in warm-up" if found[0] >= result.rss_growth else f"{format_size(found[0])} in warm-up"
