"""The ledger of dropped data: responses a size limit cancelled or ignored, and size warnings (pure).

Filled in the crawl process by the extension and the plugin's downloader middlewares
(:mod:`pytest_crawlmem.measure.middleware`); read by the runner into ``CrawlResult.dropped``.
"""

from __future__ import annotations

import re

from pytest_crawlmem.core.distribution import Histogram, next_power_of_two
from pytest_crawlmem.core.models import DroppedResponse, MaxsizeSuggestion

MAXSIZE_DECLARED = "download_maxsize (declared)"
MAXSIZE_STREAMED = "download_maxsize (streamed)"
DECOMPRESSION = "decompression limit"
CANCELLED = "download cancelled"
MEDIA_FAILED = "media download failed"

#: Dropped responses kept by URL; beyond this only the count grows (a crawl dropping millions stays bounded).
KEEP_DROPPED = 1000

_EXPECTED_SIZE = re.compile(r"Expected to receive (\d+) bytes")


def declared_size(message: str) -> int | None:
    """The Content-Length in Scrapy's DOWNLOAD_MAXSIZE message (``Expected to receive N bytes ...``), if there."""
    match = _EXPECTED_SIZE.search(message)
    return int(match.group(1)) if match else None


class DropLedger:
    """Dropped responses (the first :data:`KEEP_DROPPED`), their total and the DOWNLOAD_WARNSIZE warnings."""

    def __init__(self, keep: int = KEEP_DROPPED) -> None:
        self.keep = keep
        self.dropped: list[DroppedResponse] = []
        self.count = 0
        self.warnsize_warnings = 0

    def drop(self, url: str, reason: str, size_bytes: int | None) -> None:
        """Record one dropped response."""
        self.count += 1
        if len(self.dropped) < self.keep:
            self.dropped.append(DroppedResponse(url, reason, size_bytes))

    def warn(self) -> None:
        """Count one response over DOWNLOAD_WARNSIZE (kept, not dropped)."""
        self.warnsize_warnings += 1


def suggest_maxsize(sizes: Histogram) -> MaxsizeSuggestion | None:
    """Suggest DOWNLOAD_MAXSIZE: the next power of two at or above p99 x 2, and how many responses it would drop."""
    p99 = sizes.percentile(99)
    if p99 is None:
        return None
    limit = next_power_of_two(max(p99 * 2, 1024))
    return MaxsizeSuggestion(download_maxsize=limit, would_drop=sizes.count_above(limit))
