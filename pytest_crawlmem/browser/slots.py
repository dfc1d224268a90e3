"""No page opens while a browser checkpoint drains: its page slots are held and new pages wait at a gate (crawl
process, reactor thread).

A checkpoint of a scrapy-playwright crawl pauses the engine, but the downloader still hands the requests of its slot
queues to the download handler, and the handler opens a page for each (in a new context, too) as soon as a slot is
free. Measured at 32 in flight on scrapy-playwright's published example, every checkpoint then waited the whole drain
timeout: the requests left in the downloader's slot queues (13-21 of them) sat behind the ones waiting for a page
slot, and counted as in flight. :class:`PageGate` closes four ways while a checkpoint drains:

- every context's page slot that frees up is held (a future at the front of its semaphore's waiters), and so are
  those of a context created meanwhile, as soon as it is created;
- the handler's page creation (``_create_page``) waits at a gate, and so does its context creation
  (``_create_browser_context``, under ``context_launch_lock``); a page whose creation ends while the gate is closed
  waits blank at it, and navigates once it opens;
- what waits (in the downloader's slot queues, at the gate) or is in page creation (for the lock, a context, a slot,
  or ``new_page()``) is *parked*: it holds no response, so it does not keep the crawl from draining.

A crawl's first checkpoint comes while its pages and contexts are still being created: traced at 32 in flight, 9-11
requests had taken a slot and were in ``new_page()`` (a second each on a loaded machine), or waited for the context
lock; they then created contexts, opened pages, navigated and took screenshots during the drain (14 -> 25 pages
opened), and the first checkpoint hit the 5 s drain timeout in about one crawl of three. The gate goes in at that
checkpoint, so a creation begun before it passed no gate: once its page is created it waits at the gate in front of
the navigation (``_download_request_with_page``), and the next holder of the context lock waits, counted, at the one
in front of context creation (left uncounted, it alone kept 2 of 2 first checkpoints to the 5 s timeout: 27 in
flight, 26 parked, nothing else running).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import contextvars
import functools
import weakref
from collections.abc import Callable
from typing import Any

from pytest_crawlmem.probes import readings as probes

#: The gate installed in front of each scrapy-playwright handler's page creation (installed once per handler).
_GATES: weakref.WeakKeyDictionary[Any, _Gate] = weakref.WeakKeyDictionary()
#: Set while a download is inside the gated page creation (it is one of the gate's ``creating`` there).
_CREATING: contextvars.ContextVar[bool] = contextvars.ContextVar("crawlmem_gated_page_creation", default=False)


class _Gate:
    """Open, or closed with the downloads waiting at it or creating a page counted."""

    def __init__(self) -> None:
        self.opened = asyncio.Event()
        self.opened.set()
        self.waiting = 0  # at the gate, before page creation or with a page created while it was closed
        self.creating = 0  # in page creation: waiting for the context lock, a context, a page slot, or new_page()
        #: While closed: holds the page slots of a context just created (set by :meth:`PageGate.close`).
        self.on_context: Callable[[], None] | None = None

    async def passed(self, *, counted: bool = True) -> None:
        """Return once the gate is open (at once when it is); ``counted``: as one of :attr:`waiting`."""
        while not self.opened.is_set():
            self.waiting += counted
            try:
                await self.opened.wait()
            finally:
                self.waiting -= counted


def _gate_of(handler: Any) -> _Gate | None:
    """The handler's gate, installed on first use in front of its ``_create_page`` and of its context creation
    (``_create_browser_context``, under its ``context_launch_lock``); ``None`` if those moved."""
    gate = _GATES.get(handler)
    if gate is not None:
        return gate
    create_page = getattr(handler, "_create_page", None)
    if create_page is None or not asyncio.iscoroutinefunction(create_page):
        return None
    gate = _GATES[handler] = _Gate()

    @functools.wraps(create_page)
    async def gated_create_page(*args: Any, **kwargs: Any) -> Any:
        await gate.passed()
        gate.creating += 1
        token = _CREATING.set(True)
        try:
            page = await create_page(*args, **kwargs)
        finally:
            _CREATING.reset(token)
            gate.creating -= 1
        await gate.passed()  # a page created while the gate is closed waits blank: it navigates once it opens
        return page

    handler._create_page = gated_create_page
    create_context = getattr(handler, "_create_browser_context", None)
    if create_context is not None and asyncio.iscoroutinefunction(create_context):

        @functools.wraps(create_context)
        async def gated_create_context(*args: Any, **kwargs: Any) -> Any:
            # inside the gated page creation it is one of ``creating``; a creation begun before the gate went in (the
            # first checkpoint) holds the context lock here and is counted nowhere else
            await gate.passed(counted=not _CREATING.get())
            wrapper = await create_context(*args, **kwargs)
            if gate.on_context is not None:  # created while the gate closed: its slots are held before a page opens
                gate.on_context()
            return wrapper

        handler._create_browser_context = gated_create_context
    navigate = getattr(handler, "_download_request_with_page", None)
    if navigate is not None and asyncio.iscoroutinefunction(navigate):

        @functools.wraps(navigate)
        async def gated_navigate(*args: Any, **kwargs: Any) -> Any:
            await gate.passed()  # a page whose creation began before the gate went in waits blank too
            return await navigate(*args, **kwargs)

        handler._download_request_with_page = gated_navigate
    return gate


def _semaphores(crawler: Any) -> list[tuple[Any, int]]:
    """Every context's page-slot semaphore, with the context's slot count (PLAYWRIGHT_MAX_PAGES_PER_CONTEXT)."""
    found: list[tuple[Any, int]] = []
    for handler in probes.playwright_handlers(crawler):
        slots = int(getattr(getattr(handler, "config", None), "max_pages_per_context", 0) or 0)
        found.extend((wrapper.semaphore, slots) for wrapper in list(handler.context_wrappers.values()))
    return found


def _wake_waiters(semaphore: Any) -> None:
    """Give a semaphore's free slots to the downloads that queued behind the holds while slots were free.

    A download that asked for a slot while the holds stood in front waited although a slot was free; once the holds
    leave, nothing wakes it unless a page closes: in a context with no page open, never (the crawl hung, open_pages=0,
    32 requests in flight). ``asyncio.Semaphore.release`` wakes the next waiter, so each free slot is taken back and
    given again, until none is free or none waits.
    """
    while getattr(semaphore, "_value", 0) > 0 and any(not f.done() for f in getattr(semaphore, "_waiters", None) or ()):
        semaphore._value -= 1
        semaphore.release()


def _release(held: list[tuple[Any, Any]]) -> int:
    """Give back the held slots and wake the downloads waiting for them; return how many slots had been taken."""
    released = 0
    for semaphore, future in held:  # each leaves the waiters first: a done one left there would lock it for good
        with contextlib.suppress(ValueError, AttributeError):
            semaphore._waiters.remove(future)
    for semaphore, future in held:
        if future.done() and not future.cancelled() and future.exception() is None:
            semaphore.release()  # the slot it took goes to the next download waiting
            released += 1
        else:
            future.cancel()
    for semaphore in {id(semaphore): semaphore for semaphore, _ in held}.values():
        _wake_waiters(semaphore)  # the slots that were free all along, to those that queued behind the holds
    return released


def _lock_waiters(handler: Any) -> int:
    """Downloads waiting for scrapy-playwright's ``context_launch_lock`` (they hold no page yet)."""
    lock = getattr(handler, "context_launch_lock", None)
    return sum(not f.done() for f in list(getattr(lock, "_waiters", None) or ()))


#: The page slots of each crawl's contexts once read (a setting: it does not change during the crawl).
_SLOTS: weakref.WeakKeyDictionary[Any, int] = weakref.WeakKeyDictionary()


def page_slots(crawler: Any) -> int:
    """The page slots of a context (scrapy-playwright's PLAYWRIGHT_MAX_PAGES_PER_CONTEXT, else CONCURRENT_REQUESTS);
    0 when no handler is loaded or it moved. Read once per crawl (the sampler asks every sample)."""
    slots = probes._attempt(_SLOTS.get, crawler)
    if slots:
        return int(slots)
    for handler in probes._attempt(probes.playwright_handlers, crawler) or []:
        slots = int(getattr(getattr(handler, "config", None), "max_pages_per_context", 0) or 0)
        if slots:
            probes._attempt(_SLOTS.__setitem__, crawler, slots)
        return slots
    return 0


class PageGate:
    """Closed while a checkpoint drains: no page opens; :meth:`parked` counts what waits (reactor thread)."""

    def __init__(self) -> None:
        self._held: list[tuple[Any, Any]] = []  # (semaphore, future): a slot held, or to be held when one frees up
        self._held_ids: set[int] = set()
        self._gates: list[_Gate] = []

    @property
    def is_closed(self) -> bool:
        """Whether a checkpoint holds the gate closed."""
        return bool(self._gates or self._held)

    def _install(self, crawler: Any) -> list[_Gate]:
        """The gates in front of every handler's page and context creation, put in at the crawl's first checkpoint.

        Put in when the spider opened instead, the published example's crawl that never closes its pages took
        32-39 s to end at concurrency 4 and 8 (2 of 6 within timeout + 10 s; main and this without it: 6 of 6 in
        11-17 s, cause not found): a page creation begun before the first checkpoint is counted by what it waits
        for (:meth:`parked`)."""
        handlers = probes._attempt(probes.playwright_handlers, crawler) or []
        return [gate for gate in (probes._attempt(_gate_of, h) for h in handlers) if gate is not None]

    def close(self, crawler: Any) -> None:
        """Hold every page slot and close the page-creation gate of every handler."""
        self._gates = self._install(crawler)
        for gate in self._gates:
            gate.opened.clear()
            gate.on_context = functools.partial(self.hold_new, crawler)
        self.hold_new(crawler)

    def hold_new(self, crawler: Any) -> None:
        """Hold the slots of every context not held yet (one created since the gate closed, too)."""
        loop = asyncio.get_event_loop()
        for semaphore, slots in probes._attempt(_semaphores, crawler) or []:
            if id(semaphore) in self._held_ids:
                continue
            self._held_ids.add(id(semaphore))
            if getattr(semaphore, "_waiters", None) is None:
                semaphore._waiters = collections.deque()
            for _ in range(slots):
                future = loop.create_future()
                probes._HOLDS.add(future)
                semaphore._waiters.appendleft(future)  # before any waiting download: a freed slot comes here
                self._held.append((semaphore, future))

    def parked(self, crawler: Any) -> int:
        """Downloads that hold no response: in the downloader's slot queues, at the gate, in page creation (for the
        context lock, a context, a page slot, or the page itself), or with a blank page created while it drained.

        A page creation begun before the gate was installed is not counted in it; what waits for a slot or the lock
        then is (the larger count: each undercounts, neither counts a download twice)."""
        self.hold_new(crawler)
        queued = probes.read_queues(crawler).slot_queued or 0
        waiting = probes.parked_downloads(crawler) + sum(_lock_waiters(h) for h in probes.playwright_handlers(crawler))
        at_gate = sum(gate.waiting for gate in self._gates)
        return queued + at_gate + max(waiting, sum(gate.creating for gate in self._gates))

    def open(self) -> int:
        """Give the held slots back and open the gates, waking what waits; return how many slots were given back."""
        held, self._held, self._held_ids = self._held, [], set()
        gates, self._gates = self._gates, []
        released = _release(held)
        for gate in gates:
            gate.on_context = None
            gate.opened.set()
        return released
