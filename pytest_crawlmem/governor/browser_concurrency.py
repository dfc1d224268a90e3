"""The governor's browser concurrency lever: how many pages the browser may hold open once rotating cannot help (pure).

Rotating contexts frees what closed pages left in a context; it cannot free the browser tree's floor: Playwright's
driver, Chromium's own processes and a renderer per open page (47-52 MiB a page measured). When a rotated context
has closed and the tree is still over the act share (the lever's *floor* case), the crawl process
(``governor/contextlever.py``) asks :class:`PageConcurrency` for a cap on the downloader's concurrency, and the
governor applies ``min(its own concurrency, the cap)``. The rules:

- The cost of an open page is the tree's footprint over the pages open (``footprint / open_pages``): the floor is
  counted in the pages' cost, so the rule errs toward fewer pages, never toward more.
- Over the act share, the cap is the pages whose cost fits under it: ``floor(high_share x budget / cost)``, never
  above the cap that stands and never below ``least`` (1): a request waits in the scheduler, none is dropped.
- Under the restore share for ``restore_readings`` readings in a row, the cap doubles (at least +1, at most what the
  last cost says fits under the act share, unless that is under the cap already); at ``base`` the cap is lifted.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

#: The kind of a lowering decision of the browser concurrency lever (its restores are of kind ``restore``).
BROWSER_CONCURRENCY: Final = "browser_concurrency"
#: Readings in a row under the restore share before the cap is raised.
RESTORE_READINGS: Final = 3
_MIB = 2**20


def page_cost(footprint_bytes: int, open_pages: int) -> float | None:
    """The cost of an open page: the tree's footprint over the pages open (None with no page open)."""
    if open_pages <= 0 or footprint_bytes <= 0:
        return None
    return footprint_bytes / open_pages


def pages_that_fit(cost_bytes: float, budget_bytes: int, high_share: float, least: int = 1) -> int:
    """The pages whose cost fits under the act share (at least ``least``)."""
    return max(least, int(high_share * budget_bytes // cost_bytes))


@dataclass(frozen=True)
class CapChange:
    """A new cap on the downloader's concurrency (``None``: lifted), with the sentence that explains it."""

    cap: int | None
    lowered: bool
    message: str


@dataclass
class PageConcurrency:
    """The cap the browser lever holds on concurrency, from reading to reading."""

    budget_bytes: int
    high_share: float
    low_share: float
    base: int  # CONCURRENT_REQUESTS: the cap is lifted when it reaches it
    least: int = 1
    restore_readings: int = RESTORE_READINGS
    cap: int | None = None  # None: no cap (the crawl's own concurrency)
    cost_bytes: float | None = None  # the cost of an open page at the last lowering (or reading with pages open)
    _calm: int = 0

    def current(self, concurrency: int) -> int:
        """The downloader's concurrency: the governor's own, under the cap."""
        return min(concurrency, self.cap) if self.cap is not None else concurrency

    def target(self, footprint_bytes: int, open_pages: int, concurrency: int) -> int | None:
        """The cap :meth:`lower` would set from this reading (None: it would not lower)."""
        if footprint_bytes < self.high_share * self.budget_bytes:
            return None
        cost = page_cost(footprint_bytes, open_pages)
        if cost is None:
            return None  # no page open: what is left is not the pages'
        current = self.current(concurrency)
        new = max(self.least, min(current, pages_that_fit(cost, self.budget_bytes, self.high_share, self.least)))
        return new if new < current else None

    def lower(self, footprint_bytes: int, open_pages: int, concurrency: int, closing: bool = False) -> CapChange | None:
        """Over the act share in the floor case (``closing``: over the close share while a rotated context waits for
        its pages): cap concurrency at the pages that fit (None: no change).

        ``concurrency`` is the downloader's concurrency as it stands (the governor's own, under the cap).
        """
        self._calm = 0
        new = self.target(footprint_bytes, open_pages, concurrency)
        if new is None:
            return None
        cost = footprint_bytes / open_pages
        current = self.current(concurrency)
        self.cost_bytes, self.cap = cost, new
        where = (f"while a rotated context waits for its pages, with {open_pages} page(s) open in the fresh one at"
                 f" {_mib(cost)} each:" if closing else f"after a rotated context closed, with {open_pages} page(s)"
                 f" open at {_mib(cost)} each: rotating cannot free the browser's floor;")
        return CapChange(new, True, (
            f"browser tree {_mib(footprint_bytes)} is over {100 * self.high_share:.0f}% of the budget"
            f" ({_mib(self.budget_bytes)}) {where} concurrency {current} -> {new}"
            " (pages open x cost under the act share; requests wait in the scheduler)"))

    def calm(self, footprint_bytes: int, open_pages: int) -> CapChange | None:
        """A reading under the act share: raise the cap after ``restore_readings`` under the restore share."""
        if self.cap is None:
            self._calm = 0
            return None
        if footprint_bytes > self.low_share * self.budget_bytes:
            self._calm = 0
            return None
        self._calm += 1
        if self._calm < self.restore_readings:
            return None
        self._calm = 0
        cost = page_cost(footprint_bytes, open_pages) or self.cost_bytes
        current = self.cap
        new = 2 * current
        if cost is not None:
            new = min(new, pages_that_fit(cost, self.budget_bytes, self.high_share, self.least))
        new = max(current + 1, new)
        lifted = new >= self.base
        self.cap = None if lifted else new
        shown = f"{self.base} (lifted)" if lifted else str(new)
        return CapChange(self.cap, False, (
            f"browser tree {_mib(footprint_bytes)} under {100 * self.low_share:.0f}% of the budget"
            f" ({_mib(self.budget_bytes)}) for {self.restore_readings} readings: browser concurrency cap"
            f" {current} -> {shown}"))


def _mib(num_bytes: float) -> str:
    return f"{num_bytes / _MIB:,.0f} MiB"
