"""Pages a browser crawl handed to its callbacks, and the stall they cause when never closed (crawl process)."""

from __future__ import annotations

import weakref
from typing import Any


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
