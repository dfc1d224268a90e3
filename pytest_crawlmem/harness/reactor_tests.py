"""Which tests run on pytest-twisted's reactor, and waiting for what a plain test returns (pytest process)."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import pytest

from pytest_crawlmem.harness.loopstate import LoopState

#: The session's ``LoopState`` (installed at session start when the reactor is asyncio's).
LOOP_STATE_KEY = pytest.StashKey[LoopState]()


def runs_on_reactor(function: Any) -> bool:
    """Whether a test must run inside the reactor's greenlet: ``async def``, or decorated by pytest-twisted."""
    if inspect.iscoroutinefunction(function):
        return True
    try:
        import pytest_twisted
    except ImportError:  # pragma: no cover - a declared dependency
        return False
    get_mark = getattr(pytest_twisted, "_get_mark", None)  # private: a no-op if it moves
    return get_mark is not None and get_mark(function) is not None


def wait_if_deferred(outcome: object) -> None:
    """Block until a Deferred returned by a plain test fires (raising its failure), as pytest-twisted does."""
    from twisted.internet.defer import Deferred

    if isinstance(outcome, Deferred):
        import pytest_twisted

        pytest_twisted.blockon(outcome)


def foreign_reactor() -> str | None:
    """The installed Twisted reactor's class name when it is not asyncio's (Scrapy cannot crawl on it here)."""
    import sys

    reactor = sys.modules.get("twisted.internet.reactor")
    if reactor is None or getattr(reactor, "_asyncioEventloop", None) is not None:
        return None
    return type(reactor).__name__


FOREIGN_REACTOR_WARNED_KEY = pytest.StashKey[bool]()


def isolate_for_foreign_reactor(config: pytest.Config, warn: Callable[[str], None]) -> bool:
    """Whether crawls must run in a subprocess because the session's reactor is not asyncio's; says so once."""
    name = foreign_reactor()
    if name is None:
        return False
    if not config.stash.get(FOREIGN_REACTOR_WARNED_KEY, False):
        config.stash[FOREIGN_REACTOR_WARNED_KEY] = True
        warn(
            f"this pytest process runs Twisted's {name}, installed before pytest-crawlmem could choose asyncio's"
            " reactor, which Scrapy needs: every crawl runs in a subprocess of its own (as crawl(isolate=True));"
            " to crawl in-process, install no reactor in conftest.py or run with --reactor=asyncio"
        )
    return True
