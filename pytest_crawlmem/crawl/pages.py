"""A browser crawl's browser: its process tree, its pages, the pages handed to callbacks and the stall they cause
when never closed (crawl process)."""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Sequence
from typing import Any

from ..core.models import BrowserSummary, Checkpoint
from . import probes
from .browsertree import TreeReading
from .browserwatch import BrowserWatch
from .recording import Recording

#: How long a renderer GC may take before a checkpoint reads the browser anyway.
GC_TIMEOUT_SECONDS = 5.0


async def collect_renderer_garbage(pages: Sequence[Any]) -> None:
    """Ask every page's renderer to collect its garbage (a page's error is ignored; raise TimeoutError past the limit)."""
    await asyncio.wait_for(asyncio.gather(*(page.request_gc() for page in pages), return_exceptions=True),
                           GC_TIMEOUT_SECONDS)


class HandedPages:
    """Pages handed to callbacks (``playwright_include_page``), held weakly, and the crawl's progress in responses."""

    def __init__(self, stall_seconds: float) -> None:
        self.stall_seconds = stall_seconds
        self._refs: list[weakref.ref[Any]] = []
        self._progress = (0, 0.0)  # (responses, when that count was first seen)

    def add(self, page: Any) -> None:
        """Note a page handed to a callback (reactor thread)."""
        self._refs.append(weakref.ref(page))

    def open(self) -> list[Any]:
        """The handed pages still open."""
        alive = [page for ref in self._refs if (page := ref()) is not None and not page.is_closed()]
        self._refs = [weakref.ref(page) for page in alive]
        return alive

    def stall(self, responses: int, t_seconds: float, full_contexts: int, *, stopping: bool) -> str | None:
        """Why the crawl would hang, when no response came for ``stall_seconds`` because unclosed pages fill every
        context's slots (``None`` while it progresses, or when a stop is already under way) (sampler thread)."""
        if responses != self._progress[0]:
            self._progress = (responses, t_seconds)
            return None
        if t_seconds - self._progress[1] < self.stall_seconds or not full_contexts or stopping:
            return None
        unclosed = len(self.open())
        if not unclosed:
            return None
        return (
            f"{unclosed:,} pages handed to callbacks (playwright_include_page=True) were never closed, and no response"
            f" came for {self.stall_seconds:g} s because {full_contexts} browser context(s) had no free page slot"
            " (PLAYWRIGHT_MAX_PAGES_PER_CONTEXT): the crawl would hang. Close the page in the callback"
            " (`await page.close()`) and in the errback"
        )


class CrawlBrowser:
    """What the extension reads of a browser crawl's browser (scrapy-playwright): the tree, the pages, handed pages.

    The crawler is passed to each call, never kept: the runner lets go of the crawl before it counts what is alive.
    """

    def __init__(self, recording: Recording, *, detail_seconds: float, stall_seconds: float) -> None:
        self.recording = recording
        self.watch = BrowserWatch(detail_seconds=detail_seconds)
        self.handed = HandedPages(stall_seconds)  # pages given to callbacks (playwright_include_page)
        self.unclosed_at_close = 0

    def response_received(self, response: Any) -> None:
        """Note the page a response hands to its callback, if it does (reactor thread)."""
        page = response.meta.get("playwright_page")
        if page is not None:
            self.handed.add(page)

    def sample(self, crawler: Any) -> tuple[TreeReading, probes.PageReading | None]:
        """Read the tree (PSS/USS on schedule, RSS otherwise) and the open pages; keep the most seen (sampler thread)."""
        tree = self.watch.read()
        pages = probes.read_pages(crawler)
        if pages is not None:
            self.watch.count(pages.pages, pages.contexts)
        return tree, pages

    def checkpoint_fields(self, crawler: Any) -> dict[str, Any]:
        """A checkpoint's browser fields, from a detailed reading of the tree (none when no browser runs yet)."""
        tree = self.watch.read(detail=True)
        if not tree.processes:
            return {}
        pages = probes.read_pages(crawler)
        return {
            "browser_pss_bytes": tree.pss_bytes,
            "browser_uss_bytes": tree.uss_bytes,
            "open_pages": pages.pages if pages else None,
            "open_contexts": pages.contexts if pages else None,
            "unclosed_pages": len(self.unclosed()),
        }

    def unclosed(self) -> list[Any]:
        """Pages handed to callbacks (``playwright_include_page``) that are still open."""
        return self.handed.open()

    def stall(self, responses: int, t_seconds: float, pages: probes.PageReading, *, stopping: bool) -> str | None:
        """Why the crawl would hang on pages callbacks never closed (``None`` while it progresses) (sampler thread)."""
        return self.handed.stall(responses, t_seconds, pages.full_contexts, stopping=stopping)

    def close_unclosed(self) -> None:
        """Close the handed pages still open, so downloads waiting for a page slot can finish (reactor thread)."""
        for page in self.unclosed():
            as_deferred(page.close()).addErrback(lambda _failure: None)

    def collect_garbage(self, crawler: Any) -> Any:
        """Ask every open page's renderer to collect garbage (a Deferred; never fails) (reactor thread)."""
        from twisted.internet import defer

        pages = probes.open_pages(crawler)
        if not pages:
            return defer.succeed(None)

        def failed(failure: Any) -> None:
            self.recording.add_error(f"browser gc failed: {failure.value!r}")

        return as_deferred(collect_renderer_garbage(pages)).addErrback(failed)

    def close(self) -> None:
        """Count the handed pages left open when the spider closes."""
        self.unclosed_at_close = len(self.unclosed())

    def summary(self, checkpoints: Sequence[Checkpoint]) -> BrowserSummary | None:
        """What the browser tree used during the crawl (``None`` when no browser process was ever read)."""
        return self.watch.summary(checkpoints, self.unclosed_at_close)


def as_deferred(coro: Any) -> Any:
    """Run a coroutine on the asyncio reactor's loop; return a Deferred of its result."""
    from scrapy.utils.defer import deferred_from_coro

    return deferred_from_coro(coro)
