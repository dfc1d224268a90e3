"""Cancelled timers dropped before a checkpoint is read (probes/timers.py), on a real Twisted asyncio reactor object.

The reactor is built on a private event loop and never installed; its loop runs briefly, in a thread, to fire timers.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from twisted.internet.asyncioreactor import AsyncioSelectorReactor

from pytest_crawlmem.probes.timers import drop_cancelled_timers


@pytest.fixture
def reactor() -> Iterator[Any]:
    loop = asyncio.new_event_loop()
    built = AsyncioSelectorReactor(loop)
    try:
        yield built
    finally:
        built.removeAll()
        loop.close()


def _run_loop(reactor: Any, seconds: float) -> None:
    """Run the reactor's loop for ``seconds`` in a thread of its own (this one may run the session's loop)."""
    loop = reactor._asyncioEventloop
    runner = threading.Thread(target=lambda: loop.run_until_complete(asyncio.sleep(seconds)))
    runner.start()
    runner.join(timeout=10)
    assert not runner.is_alive()


def _cancelled_held(reactor: Any) -> tuple[int, int]:
    twisted = sum(1 for c in reactor._pendingTimedCalls + reactor._newTimedCalls if c.cancelled)
    loop = reactor._asyncioEventloop
    return twisted, sum(1 for h in loop._scheduled if h._cancelled)


def test_cancelled_timers_are_dropped_and_live_ones_kept(reactor: Any) -> None:
    fired: list[int] = []
    calls = [reactor.callLater(100 + i, fired.append, i) for i in range(120)]
    for call in calls[::3]:
        call.cancel()
    # sooner deadlines move Twisted's asyncio timer: each move cancels the loop's previous handle
    soon = [reactor.callLater(0.5 - i / 100, fired.append, 1000 + i) for i in range(30)]
    live = {id(c) for c in calls + soon if not c.cancelled}
    before = _cancelled_held(reactor)
    assert before[0] == 40 and before[1] >= 20, before  # below both reactors' own purge thresholds: all held

    dropped = drop_cancelled_timers(reactor)

    assert dropped == sum(before)
    assert _cancelled_held(reactor) == (0, 0)
    assert {id(c) for c in reactor.getDelayedCalls()} == live
    assert reactor._cancellations == 0 and reactor._asyncioEventloop._timer_cancelled_count == 0
    assert drop_cancelled_timers(reactor) == 0


def test_the_reactor_runs_on_after_the_drop(reactor: Any) -> None:
    fired: list[str] = []
    for i in range(60):
        reactor.callLater(0.2 + i / 1000, fired.append, "cancelled").cancel()
    reactor.callLater(0.01, fired.append, "first")
    reactor.callLater(0.02, fired.append, "second")
    late = reactor.callLater(0.03, fired.append, "cancelled after the drop")
    drop_cancelled_timers(reactor)
    late.cancel()  # counted again from zero: the reactor's own purge still sees it
    assert reactor._cancellations == 1
    _run_loop(reactor, 0.3)
    assert fired == ["first", "second"]


def test_a_reactor_without_those_heaps_is_left_alone() -> None:
    class Clockless:
        pass

    assert drop_cancelled_timers(Clockless()) == 0
