"""The governor's browser lever: which browser context to rotate when the browser tree's PSS passes the budget (pure).

A scrapy-playwright context keeps state its pages leave behind (an incognito context holds its IndexedDB, cache and
storage in memory), so the tree grows with the pages a context served, and closing the context gives it back. The
crawl process (``governor/contextlever.py``) never closes a page: it *rotates* a context (new pages go to a fresh one of
the same name and options) and closes the old one once it has no open page and no page being created. The rules:

- Over ``high_share`` of the budget, rotate the context that served the most pages since it was created (the largest
  in the state pages leave), if it served at least ``min_served`` of them and no rotated context is still closing.
  Over ``hard_share`` (the close share) ``MIN_SERVED_PAGES`` will do, whatever the lever's back-off asks: the budget
  comes first.
- A persistent context (``user_data_dir``) is never rotated: a second one cannot open the same profile.
- Nothing to rotate while over the act share (a fresh context, or the tree's floor: Playwright's driver and the
  browser process) is said once, as the retained signature is.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

#: The kind of a decision of the browser lever (a stat, a log line, a band of report.html's timeline).
BROWSER_CONTEXT: Final = "browser_context"
#: A context that served fewer pages than this since it was created is not rotated (it is not what grew).
MIN_SERVED_PAGES: Final = 4


@dataclass(frozen=True)
class ContextState:
    """One open scrapy-playwright context as the lever sees it."""

    name: str
    served: int  # pages created in it since it was created
    open_pages: int
    persistent: bool = False
    retiring: bool = False  # rotated: no new page goes to it; closes when its pages finish


def choose_rotation(tree_bytes: int, budget_bytes: int, high_share: float, contexts: Sequence[ContextState],
                    min_served: int = MIN_SERVED_PAGES, hard_share: float | None = None) -> ContextState | None:
    """The context to rotate now (``None``: under the act share, a rotated one still closing, or none fits)."""
    if tree_bytes < high_share * budget_bytes or any(c.retiring for c in contexts):
        return None
    if hard_share is not None and tree_bytes >= hard_share * budget_bytes:
        min_served = min(min_served, MIN_SERVED_PAGES)
    candidates = [c for c in contexts if not c.persistent and c.served >= min_served]
    if not candidates:
        return None
    return max(candidates, key=lambda c: (c.served, c.open_pages, c.name))


def closable(context: ContextState, creating: int) -> bool:
    """Whether a rotated context may close now: no open page and no page being created in it."""
    return context.retiring and context.open_pages == 0 and creating == 0
