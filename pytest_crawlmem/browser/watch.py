"""Watches a browser tree over a crawl or job: readings, peaks, open pages, and the summary (no pytest, no Scrapy)."""

from __future__ import annotations

from collections.abc import Sequence

from pytest_crawlmem.browser.tree import TreeReading, TreeSampler
from pytest_crawlmem.core.models import BrowserSummary, Checkpoint


class BrowserWatch:
    """The browser side of one measured run; fed by the sampler thread and the checkpoints."""

    def __init__(self, *, detail_seconds: float = 1.0, root_pid: int | None = None, rescan_seconds: float = 2.0) -> None:
        self.tree = TreeSampler(root_pid, detail_seconds=detail_seconds, rescan_seconds=rescan_seconds)
        self.peak: TreeReading | None = None  # the detail reading with the highest summed PSS
        self.max_pages = 0
        self.max_contexts = 0
        self.max_processes = 0

    def read(self, *, detail: bool | None = None, read_new: bool = True) -> TreeReading:
        """Read the tree (PSS/USS on schedule or when ``detail``; RSS otherwise) and keep the peak reading
        (``read_new``: see :meth:`TreeSampler.sample`)."""
        reading = self.tree.sample(detail=detail, read_new=read_new)
        self.max_processes = max(self.max_processes, len(reading.processes))
        if reading.pss_bytes is not None and (self.peak is None or reading.pss_bytes > (self.peak.pss_bytes or 0)):
            self.peak = reading
        return reading

    def count(self, pages: int | None, contexts: int | None) -> None:
        """Keep the most pages and contexts seen open at once."""
        self.max_pages = max(self.max_pages, pages or 0)
        self.max_contexts = max(self.max_contexts, contexts or 0)

    def summary(self, checkpoints: Sequence[Checkpoint] = (), unclosed_pages: int = 0) -> BrowserSummary | None:
        """What the tree used (``None`` when no browser process was ever read)."""
        tree = self.tree
        if not tree.detail_samples or tree.peak_pss_bytes == 0:
            return None
        last, peak = tree.last_detail, self.peak
        return BrowserSummary(
            peak_pss_bytes=tree.peak_pss_bytes,
            peak_rss_sum_bytes=tree.peak_rss_bytes,
            end_pss_bytes=last.pss_bytes if last else None,
            end_uss_bytes=last.uss_bytes if last else None,
            pss_by_kind_at_peak={k: v for k, v in (peak.by_kind() if peak else {}).items() if v},
            max_processes=self.max_processes,
            max_open_pages=max([self.max_pages] + [c.open_pages or 0 for c in checkpoints]),
            max_open_contexts=max([self.max_contexts] + [c.open_contexts or 0 for c in checkpoints]),
            unclosed_pages=unclosed_pages,
            readings=tree.samples,
            cost_seconds=round(tree.cpu_seconds, 4),
        )
