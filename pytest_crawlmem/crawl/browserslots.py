"""No page opens while a browser checkpoint drains: its page slots are held and new pages wait at a gate (crawl
process, reactor thread).

A checkpoint of a scrapy-playwright crawl pauses the engine, but the downloader still hands the requests of its slot
queues to the download handler, and the handler opens a page for each (in a new context, too) as soon as a slot is
free. Measured at 32 in flight on scrapy-playwright's published example, every checkpoint then waited the whole drain
timeout: the requests left in the downloader's slot queues (13-21 of them) sat behind the ones waiting for a page
slot, and counted as in flight. :class:`PageGate` closes three ways while a checkpoint drains:

- every context's page slot that frees up is held (a future at the front of its semaphore's waiters, as
  :func:`pytest_crawlmem.crawl.probes.hold_page_slots` does), and so are those of a context created meanwhile;
- the handler's page creation (``_create_page``, where a new context is created too) waits at a gate;
- what waits (for a slot, at the gate, in the downloader's slot queues) is *parked*: it holds no page and no
  response, so it does not keep the crawl from draining.
"""

from __future__ import annotations

import asyncio
import collections
import functools
import weakref
from typing import Any

from . import probes

#: The gate installed in front of each scrapy-playwright handler's page creation (installed once per handler).
_GATES: weakref.WeakKeyDictionary[Any, _Gate] = weakref.WeakKeyDictionary()


class _Gate:
    """Open, or closed with the downloads waiting at it counted."""

    def __init__(self) -> None:
        self.opened = asyncio.Event()
        self.opened.set()
        self.waiting = 0

    async def passed(self) -> None:
        """Return once the gate is open (at once when it is)."""
        while not self.opened.is_set():
            self.waiting += 1
            try:
                await self.opened.wait()
            finally:
                self.waiting -= 1


def _gate_of(handler: Any) -> _Gate | None:
    """The handler's gate, installed in front of its ``_create_page`` on first use (``None`` if that moved)."""
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
        return await create_page(*args, **kwargs)

    handler._create_page = gated_create_page
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


def page_slots(crawler: Any) -> int:
    """The page slots of a context (scrapy-playwright's PLAYWRIGHT_MAX_PAGES_PER_CONTEXT, else CONCURRENT_REQUESTS);
    0 when no handler is loaded or it moved."""
    for handler in probes._attempt(probes.playwright_handlers, crawler) or []:
        return int(getattr(getattr(handler, "config", None), "max_pages_per_context", 0) or 0)
    return 0


class PageGate:
    """Closed while a checkpoint drains: no page opens; :meth:`parked` counts what waits (reactor thread)."""

    def __init__(self) -> None:
        self._held: list[tuple[Any, Any]] = []  # (semaphore, future) pairs, as probes.hold_page_slots returns them
        self._held_ids: set[int] = set()
        self._gates: list[_Gate] = []

    @property
    def is_closed(self) -> bool:
        """Whether a checkpoint holds the gate closed."""
        return bool(self._gates or self._held)

    def close(self, crawler: Any) -> None:
        """Hold every page slot and close the page-creation gate of every handler."""
        handlers = probes._attempt(probes.playwright_handlers, crawler) or []
        self._gates = [gate for gate in (probes._attempt(_gate_of, h) for h in handlers) if gate is not None]
        for gate in self._gates:
            gate.opened.clear()
        self._hold_new(crawler)

    def _hold_new(self, crawler: Any) -> None:
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
        """Downloads that wait and hold no page: for a slot, at the gate, or in the downloader's slot queues."""
        self._hold_new(crawler)
        at_gate = sum(gate.waiting for gate in self._gates)
        queued = probes.read_queues(crawler).slot_queued or 0
        return probes.parked_downloads(crawler) + at_gate + queued

    def open(self) -> int:
        """Give the held slots back and open the gates, waking what waits; return how many slots were given back."""
        held, self._held, self._held_ids = self._held, [], set()
        gates, self._gates = self._gates, []
        released = probes.release_page_slots(held)
        for semaphore in {id(semaphore): semaphore for semaphore, _ in held}.values():
            _wake_waiters(semaphore)
        for gate in gates:
            gate.opened.set()
        return released
