"""Cancelled timers the reactor still holds, dropped before a drained checkpoint is read.

Twisted keeps a cancelled ``DelayedCall`` in its heap until cancellations pass half of it (and 50), and asyncio keeps
a cancelled ``TimerHandle`` until it reaches the head of its heap or cancellations pass half of it (with more than
100 scheduled). A crawl cancels about two Twisted timers a response (the download timeout, the pooled connection's
expiry), and Twisted's asyncio reactor cancels an asyncio timer each time its next deadline moves sooner, so the
heap a drained checkpoint reads carries a sawtooth of up to about a hundred cancelled timers (25-35 KiB) whose
phase depends on when each reactor last purged: noise the size of a 1 KiB/response leak over 25 responses
(docs/detection.md). Dropping them as each reactor's own purge does takes the sawtooth off the reading.
A cancelled timer never runs and has dropped its callable already, so nothing the crawl does changes.
"""

from __future__ import annotations

import heapq
from typing import Any


def drop_cancelled_timers(reactor: Any) -> int:
    """Drop the cancelled timers of Twisted's ``reactor`` and of its asyncio loop, if any; return how many (reactor thread)."""
    return _drop_twisted(reactor) + _drop_asyncio(getattr(reactor, "_asyncioEventloop", None))


def _drop_twisted(reactor: Any) -> int:
    """Twisted's purge in ``runUntilCurrent``, without its threshold: ``_cancellations`` keeps counting the cancelled
    calls still held (those added since the last iteration, which the next one drops)."""
    pending = getattr(reactor, "_pendingTimedCalls", None)
    new = getattr(reactor, "_newTimedCalls", None)
    if not isinstance(pending, list) or not isinstance(new, list) or not hasattr(reactor, "_cancellations"):
        return 0
    kept = [call for call in pending if not call.cancelled]
    dropped = len(pending) - len(kept)
    if dropped:
        heapq.heapify(kept)
        reactor._pendingTimedCalls = kept
    reactor._cancellations = sum(1 for call in new if call.cancelled)
    return dropped


def _drop_asyncio(loop: Any) -> int:
    """asyncio's purge in ``BaseEventLoop._run_once``, without its threshold."""
    scheduled = getattr(loop, "_scheduled", None)
    if not isinstance(scheduled, list) or not hasattr(loop, "_timer_cancelled_count"):
        return 0
    kept = []
    for handle in scheduled:
        if handle._cancelled:
            handle._scheduled = False
        else:
            kept.append(handle)
    dropped = len(scheduled) - len(kept)
    if dropped:
        heapq.heapify(kept)
        loop._scheduled = kept
    loop._timer_cancelled_count = 0
    return dropped
