"""The governor's browser lever: rotate scrapy-playwright contexts between pages when the tree's PSS grows (crawl
process, reactor thread).

Installed on each scrapy-playwright handler the first time the governor ticks with one loaded: its ``_create_page``
and ``_create_browser_context`` are wrapped (as :mod:`pytest_crawlmem.browser.slots` wraps page creation).
A request's ``playwright_context`` (its *logical* name) is mapped to the context that serves it now (its *physical*
name: the logical name, then ``name#2``, ``name#3``... after rotations), and the request's meta says which. A rotated
context gets no new page; once it has no open page and no page being created, the lever closes it (never a page
mid-navigation, nor a page a callback holds: ``playwright_include_page`` pages keep their context open until closed).
The fresh context is created with the options of the one it replaces (``playwright_context_kwargs`` or
``PLAYWRIGHT_CONTEXTS``). The decision (:mod:`pytest_crawlmem.governor.context_policy`) reads the tree's PSS: an RSS
reading (~10 us a process) estimated as PSS every ``read_seconds`` near the budget (every IDLE_READ_SECONDS far
under it), a PSS reading (~3 ms a process) on schedule near the budget and before acting, backing off when it does
not confirm the estimate.

What rotating cannot free (the tree's floor: a renderer per open page) the lever's concurrency cap
(:mod:`pytest_crawlmem.governor.browser_concurrency`) takes on: when a rotated context's close left the tree over the act
share, the downloader's concurrency is capped at the open pages that fit, and raised again under the restore share.
"""

from __future__ import annotations

import asyncio
import functools
import time
import weakref
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from pytest_crawlmem.browser.tree import TreeSampler
from pytest_crawlmem.governor.browser_concurrency import CapChange, PageConcurrency
from pytest_crawlmem.governor.context_policy import MIN_SERVED_PAGES, ContextState, choose_rotation, closable

#: Seconds between two readings of the tree (RSS, estimated as PSS: ~10 us a process) once it is over the restore
#: share of the budget; under it, IDLE_READ_SECONDS.
READ_SECONDS = 0.5
IDLE_READ_SECONDS = 2.0
#: Seconds between two rediscoveries of the tree (~1 ms: the children files of every thread of the driver and the
#: browser); a process that exits makes the next reading rediscover it at once.
RESCAN_SECONDS = 10.0
#: Seconds between two PSS readings of the tree on schedule, to re-base the estimate, taken only while the tree is
#: over the restore share (each reads every process's smaps_rollup: 32-55 ms of CPU for a 10-17 process tree,
#: against 0.1-0.2 ms for its RSS). A browser crawl's own process does little (Chromium does the work): at 10 s,
#: and confirming every estimate over the act share, the readings were 3.9 s of a 200-page crawl process's 8.6 s.
DETAIL_SECONDS = 30.0
#: A PSS reading younger than this confirms an estimate over the act share without reading again.
CONFIRM_SECONDS = 3.0
#: After a PSS reading found the tree under the act share that the estimate said it was over, the next one waits
#: twice as long as the last wait (from CONFIRM_SECONDS), up to this; a rotation starts over.
MAX_CONFIRM_WAIT_SECONDS = 30.0
#: The most pages a context serves before it may be rotated, once rotations stopped helping (the back-off's cap).
MAX_SERVED_PAGES = 64
_DEFAULT_CONTEXT = "default"
#: The closes under way (the loop keeps only weak references to its tasks).
_PENDING: set[Any] = set()
_SEPARATOR = "#"


@dataclass
class _HandlerState:
    """What the lever keeps of one handler's contexts (names are physical unless said)."""

    current: dict[str, str] = field(default_factory=dict)  # logical -> physical serving new pages
    logical_of: dict[str, str] = field(default_factory=dict)  # physical -> logical
    kwargs: dict[str, Any] = field(default_factory=dict)  # logical -> the context options it was created with
    served: Counter[str] = field(default_factory=Counter)
    creating: Counter[str] = field(default_factory=Counter)
    retiring: set[str] = field(default_factory=set)
    closing: set[str] = field(default_factory=set)
    generation: Counter[str] = field(default_factory=Counter)


@dataclass(frozen=True)
class LeverEvent:
    """Something the lever did this tick: a rotation, a close, the floor, or a concurrency cap, with the footprint."""

    action: str  # "rotate", "close", "floor", "lower" (a cap on concurrency) or "raise" (the cap raised or lifted)
    tree_bytes: int
    message: str
    cap: int | None = None  # "lower" and "raise": the cap on the downloader's concurrency now (None: lifted)


class ContextLever:
    """Reads the browser tree and rotates the context that grew (reactor thread)."""

    def __init__(self, budget_bytes: int, high_share: float, low_share: float, *, read_seconds: float = READ_SECONDS,
                 detail_seconds: float = DETAIL_SECONDS, base_concurrency: int = 0, least_concurrency: int = 1,
                 hard_share: float = 0.95) -> None:
        self.budget_bytes = budget_bytes
        self.high_share = high_share
        self.hard_share = hard_share  # over it a context rotates after MIN_SERVED_PAGES, backed off or not
        self.low_share = low_share
        self.min_served = MIN_SERVED_PAGES  # doubles while rotations leave the tree over the act share
        self._rotated = False  # a rotation's context closed since the last reading over the act share
        self.floor_said = False
        self.at_floor = False  # a rotation's close left the tree over the act share (reset under the restore share)
        #: the concurrency lever (the floor case): a cap on the downloader's concurrency; off without a base
        self.pages = PageConcurrency(budget_bytes, high_share, low_share, base=base_concurrency,
                                     least=max(1, least_concurrency)) if base_concurrency > 0 else None
        self.read_seconds = read_seconds
        self.detail_seconds = detail_seconds
        self.tree = TreeSampler(None, detail_seconds=detail_seconds, rescan_seconds=RESCAN_SECONDS, watch_forks=True)
        self._confirm_wait = CONFIRM_SECONDS  # after a PSS reading that did not confirm the estimate
        self._next_confirm = float("-inf")
        self._states: weakref.WeakKeyDictionary[Any, _HandlerState] = weakref.WeakKeyDictionary()
        self._last_read = float("-inf")
        self._last_detail = float("-inf")
        self._last_pss = 0  # the last PSS reading of the tree
        self.tree_bytes = 0  # the last footprint read (PSS, or RSS estimated as PSS)
        self.peak_tree_bytes = 0
        self.rotations = 0
        self.closed = 0

    # -- installing on a handler --------------------------------------------------------

    def install(self, handler: Any) -> bool:
        """Wrap the handler's page and context creation once (False when its internals moved)."""
        if handler in self._states:
            return True
        create_page = getattr(handler, "_create_page", None)
        create_context = getattr(handler, "_create_browser_context", None)
        if not (asyncio.iscoroutinefunction(create_page) and asyncio.iscoroutinefunction(create_context)
                and isinstance(getattr(handler, "context_wrappers", None), dict)):
            return False
        state = self._states[handler] = _HandlerState()
        startup = getattr(getattr(handler, "config", None), "startup_context_kwargs", None) or {}
        state.kwargs.update(startup)

        @functools.wraps(create_page)
        async def rotating_create_page(request: Any, spider: Any = None) -> Any:
            given = request.meta.get("playwright_context") or _DEFAULT_CONTEXT
            logical = state.logical_of.get(given, given)
            physical = state.current.get(logical, logical)
            request.meta["playwright_context"] = physical
            state.logical_of.setdefault(physical, logical)
            if logical not in state.kwargs and request.meta.get("playwright_context_kwargs"):
                state.kwargs[logical] = request.meta["playwright_context_kwargs"]
            state.creating[physical] += 1
            try:
                page = await create_page(request, spider)
            finally:
                state.creating[physical] -= 1
            state.served[physical] += 1
            return page

        @functools.wraps(create_context)
        async def rotating_create_context(name: str, context_kwargs: Any = None, spider: Any = None) -> Any:
            logical = state.logical_of.get(name, name)
            if not context_kwargs and logical != name:
                context_kwargs = state.kwargs.get(logical)  # a rotated context: the options of the one it replaces
            return await create_context(name=name, context_kwargs=context_kwargs, spider=spider)

        handler._create_page = rotating_create_page
        handler._create_browser_context = rotating_create_context
        return True

    # -- one tick ---------------------------------------------------------------------

    def tick(self, handlers: list[Any], now: float | None = None, concurrency: int = 0) -> list[LeverEvent]:
        """Close rotated contexts whose pages finished; every ``read_seconds`` read the tree and rotate if it grew.

        In the floor case (a rotation's close left the tree over the act share), cap the downloader's
        ``concurrency`` (the governor's own) at the open pages that fit; raise the cap under the restore share.
        """
        now = time.monotonic() if now is None else now
        events: list[LeverEvent] = []
        for handler in handlers:
            if self.install(handler):
                events += self._reap(handler)
        interval = self.read_seconds if self.tree_bytes >= self.low_share * self.budget_bytes else max(
            self.read_seconds, IDLE_READ_SECONDS)
        if now - self._last_read < interval:
            return events
        self._last_read = now
        footprint = self._read(now)
        if footprint < self.low_share * self.budget_bytes:
            self.min_served = MIN_SERVED_PAGES
            self.at_floor = False
        if self.pages is not None:  # every reading: under the restore share counts toward a raise, over it resets
            events += self._cap_event(self.pages.calm(footprint, self._open_pages(handlers)), footprint)
        if footprint < self.high_share * self.budget_bytes:
            return events
        confirmed = now - self._last_detail < CONFIRM_SECONDS
        if self.retiring and self.pages is not None and concurrency > 0 and footprint >= self.hard_share * self.budget_bytes:
            # a rotated context closes when its pages finish, while the fresh one's grow the tree (at 4 pages, from
            # 699 to 825 MiB of a 768 MiB budget): over the close share, cap now at the fresh pages that fit
            fresh = sum(c.open_pages for h in handlers if h in self._states
                        for c in self._contexts(h, self._states[h]) if not c.retiring)
            return events + self._lower(handlers, footprint, confirmed, now, concurrency, fresh)
        if self._rotated and not self.retiring:  # a rotated context closed: did that bring the tree under?
            if not confirmed:
                footprint, confirmed = self._read(now, detail=True), True
            self._rotated = False  # judged: the rotation helped, or it did not
            if footprint >= self.high_share * self.budget_bytes:
                self.at_floor = True  # what is left is the floor: the driver, the browser, a renderer per open page
                installed = [h for h in handlers if h in self._states]
                if all(c.served < self.min_served for h in installed for c in self._contexts(h, self._states[h])):
                    events += self._back_off(footprint)  # only fresh contexts: rotate half as often
                if self.pages is not None and concurrency > 0:
                    lowered = self._lower(handlers, footprint, confirmed, now, concurrency)
                    if lowered:  # fewer pages open first; a rotation waits for the next reading
                        return events + lowered
        for handler in handlers:
            state = self._states.get(handler)
            if state is None:
                continue
            contexts = self._contexts(handler, state)
            choice = self._choose(footprint, contexts)
            if choice is not None and not confirmed:  # act on a PSS reading, not on an estimate (read only now)
                if now < self._next_confirm:
                    break  # the last PSS reading did not confirm an estimate: wait before reading again
                footprint, confirmed = self._read(now, detail=True), True
                choice = self._choose(footprint, contexts)
                if choice is None:
                    self._next_confirm = now + self._confirm_wait
                    self._confirm_wait = min(MAX_CONFIRM_WAIT_SECONDS, 2 * self._confirm_wait)
            if choice is not None:
                self._confirm_wait, self._next_confirm = CONFIRM_SECONDS, float("-inf")
                events.append(self._rotate(handler, state, choice, footprint))
                return events
        if self.pages is not None and self.at_floor and not self.retiring and concurrency > 0:
            events += self._lower(handlers, footprint, confirmed, now, concurrency)
        return events

    def _choose(self, footprint: int, contexts: list[ContextState]) -> ContextState | None:
        return choose_rotation(footprint, self.budget_bytes, self.high_share, contexts, self.min_served, self.hard_share)

    def _lower(self, handlers: list[Any], footprint: int, confirmed: bool, now: float,
               concurrency: int, pages: int | None = None) -> list[LeverEvent]:
        """The floor case, nothing to rotate: cap concurrency at the open pages (``pages``, else all) whose cost fits
        (on a PSS reading)."""
        assert self.pages is not None
        open_pages = self._open_pages(handlers) if pages is None else pages
        if not (confirmed and self._last_pss >= self.high_share * self.budget_bytes):  # on a PSS reading over it
            if self.pages.target(footprint, open_pages, concurrency) is None or now < self._next_confirm:
                return []  # the estimate would not lower the cap: no PSS reading (32-55 ms) for nothing
            footprint = self._read(now, detail=True)
            if footprint < self.high_share * self.budget_bytes:
                self._next_confirm = now + self._confirm_wait
                self._confirm_wait = min(MAX_CONFIRM_WAIT_SECONDS, 2 * self._confirm_wait)
                return []
            self._confirm_wait, self._next_confirm = CONFIRM_SECONDS, float("-inf")
        change = self.pages.lower(footprint, open_pages, concurrency, closing=pages is not None)
        return self._cap_event(change, footprint)

    def _cap_event(self, change: CapChange | None, footprint: int) -> list[LeverEvent]:
        if change is None:
            return []
        return [LeverEvent("lower" if change.lowered else "raise", footprint, change.message, cap=change.cap)]

    def _open_pages(self, handlers: list[Any]) -> int:
        """Pages open in every context of the handlers the lever is installed on."""
        return sum(_open_pages(wrapper) for handler in handlers if handler in self._states
                   for wrapper in list(handler.context_wrappers.values()))

    def _back_off(self, footprint: int) -> list[LeverEvent]:
        """A rotation closed its context and the tree is still over the act share: what is left is the tree's floor
        (the driver, the browser, a renderer per open page), which rotating cannot free; rotate half as often."""
        self._rotated = False
        self.at_floor = True
        if self.min_served >= MAX_SERVED_PAGES:
            return []
        self.min_served = min(MAX_SERVED_PAGES, 2 * self.min_served)
        if self.floor_said:
            return []
        self.floor_said = True
        return [LeverEvent("floor", footprint, (
            f"browser tree PSS {footprint / 2**20:.0f} MiB is still over {100 * self.high_share:.0f}% of the budget"
            f" ({self.budget_bytes / 2**20:.0f} MiB) after a rotated context closed: the rest is the browser's floor"
            " (Playwright's driver, Chromium, a renderer per open page), which closing contexts cannot free; "
            + ("the governor caps concurrency at the open pages that fit" if self.pages is not None else
               "lower CONCURRENT_REQUESTS or PLAYWRIGHT_MAX_PAGES_PER_CONTEXT")
            + f". Contexts now serve at least {self.min_served} pages before a rotation"))]

    def _read(self, now: float, detail: bool | None = None) -> int:
        last = self.tree.last_detail
        if detail is None and (last is None or not last.processes):
            detail = True  # no PSS read of the tree yet: an estimate would count every process at its RSS (2-3x)
        elif detail is None:  # re-base on schedule only near the budget: far under it, the estimate is enough
            detail = (self.tree_bytes >= self.low_share * self.budget_bytes
                      and now - self._last_detail >= self.detail_seconds)
        reading = self.tree.sample(detail=detail, read_new=False)  # a new renderer counts at its kind's PSS/RSS
        if reading.pss_bytes is not None:
            self._last_detail = now
            footprint = self._last_pss = reading.pss_bytes
        else:
            footprint = self.tree.estimate_pss_bytes(reading)
        self.tree_bytes = footprint
        self.peak_tree_bytes = max(self.peak_tree_bytes, footprint)
        return footprint

    def _contexts(self, handler: Any, state: _HandlerState) -> list[ContextState]:
        return [
            ContextState(name=name, served=state.served[name], open_pages=_open_pages(wrapper),
                         persistent=bool(getattr(wrapper, "persistent", False)), retiring=name in state.retiring)
            for name, wrapper in list(handler.context_wrappers.items())
        ]

    def _rotate(self, handler: Any, state: _HandlerState, old: ContextState, footprint: int) -> LeverEvent:
        logical = state.logical_of.get(old.name, old.name)
        state.generation[logical] = max(state.generation[logical], 1) + 1
        fresh = f"{logical}{_SEPARATOR}{state.generation[logical]}"
        state.current[logical] = fresh
        state.logical_of[fresh] = logical
        state.retiring.add(old.name)
        self.rotations += 1
        waits = f"closes when its {old.open_pages} open page(s) finish" if old.open_pages else "closes now"
        return LeverEvent("rotate", footprint, (
            f"browser tree PSS {footprint / 2**20:.0f} MiB is over {100 * self.high_share:.0f}% of the budget"
            f" ({self.budget_bytes / 2**20:.0f} MiB): rotating browser context {old.name!r} after {old.served:,} pages;"
            f" new pages go to {fresh!r}, the old context gets no new page and {waits}"))

    def _reap(self, handler: Any) -> list[LeverEvent]:
        """Close the rotated contexts that have no open page and no page being created; forget the closed ones."""
        state = self._states[handler]
        events: list[LeverEvent] = []
        for name in sorted(state.retiring):
            wrapper = handler.context_wrappers.get(name)
            if wrapper is None:  # closed (by the lever, or by the browser's end)
                self._rotated = True
                state.retiring.discard(name)
                state.closing.discard(name)
                state.served.pop(name, None)
                continue
            if name in state.closing:
                continue
            context = ContextState(name=name, served=state.served[name], open_pages=_open_pages(wrapper),
                                   retiring=True)
            if closable(context, state.creating[name]):
                state.closing.add(name)
                self.closed += 1
                _close_soon(handler, wrapper.context)
                events.append(LeverEvent("close", self.tree_bytes, (
                    f"closed browser context {name!r} after {context.served:,} pages, with no page open in it"
                    f" (browser tree PSS {self.tree_bytes / 2**20:.0f} MiB before)")))
        return events

    @property
    def cpu_seconds(self) -> float:
        """CPU time the tree's readings took."""
        return self.tree.cpu_seconds

    @property
    def retiring(self) -> int:
        """Rotated contexts not closed yet."""
        return sum(len(state.retiring) for state in self._states.values())


def _open_pages(wrapper: Any) -> int:
    return sum(1 for page in list(getattr(wrapper.context, "pages", ()) or ()) if not page.is_closed())


def _close_soon(handler: Any, context: Any) -> None:
    """Close a context on the handler's loop; scrapy-playwright's close callback forgets it and frees its slot."""

    async def close() -> None:
        try:
            await context.close()
        except Exception:  # the browser went first: nothing left to close
            return

    if hasattr(handler, "_deferred_from_coro"):  # on scrapy-playwright's loop, threaded or not
        deferred = handler._deferred_from_coro(close())
        _PENDING.add(deferred)
        deferred.addBoth(lambda result: _PENDING.discard(deferred))
    else:
        task = asyncio.ensure_future(close())
        _PENDING.add(task)
        task.add_done_callback(_PENDING.discard)
