"""asyncio's per-thread state follows the reactor's greenlet, so tests beside it see none (pytest process).

pytest-twisted runs Twisted's asyncio reactor in a greenlet of the main thread. Once that greenlet has run,
``loop.run_forever()`` has left its marks on the *thread*: the running loop, the async-generator hooks and
the policy's current loop. Every later test, fixture or hook then looks as if it ran inside the reactor's
loop, and ``asyncio.run()``, pytest-asyncio and ``loop.run_until_complete()`` refuse to run.

``LoopState`` keeps those three per greenlet instead, as they would be per thread if the reactor ran in a
thread of its own: entering the reactor's greenlet puts its state back, leaving it restores what the other
greenlet had. Nothing else changes; a test that never switches into the reactor never sees its loop.
"""

from __future__ import annotations

import asyncio
import functools
import sys
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, TypeVar

F = TypeVar("F", bound=Callable[..., Any])

#: greenlet's trace events that move execution from one greenlet to another.
SWITCH_EVENTS = frozenset({"switch", "throw"})


@dataclass
class ThreadLoopState:
    """What asyncio keeps per thread: the running loop, the async-generator hooks, the policy's current loop."""

    running: asyncio.AbstractEventLoop | None
    asyncgen_hooks: tuple[Any, Any]
    policy_loop: asyncio.AbstractEventLoop | None
    policy_set_called: bool

    @classmethod
    def read(cls) -> ThreadLoopState:
        """The calling thread's state now (nothing is created)."""
        local = _policy_local()
        hooks = sys.get_asyncgen_hooks()
        return cls(
            running=asyncio.events._get_running_loop(),
            asyncgen_hooks=(hooks.firstiter, hooks.finalizer),
            policy_loop=getattr(local, "_loop", None),
            policy_set_called=bool(getattr(local, "_set_called", False)),
        )

    @classmethod
    def empty(cls) -> ThreadLoopState:
        """A thread where no loop ever ran or was set."""
        return cls(running=None, asyncgen_hooks=(None, None), policy_loop=None, policy_set_called=False)

    def apply(self) -> None:
        """Make this the calling thread's state."""
        asyncio.events._set_running_loop(self.running)
        firstiter, finalizer = self.asyncgen_hooks
        sys.set_asyncgen_hooks(firstiter=firstiter, finalizer=finalizer)
        local = _policy_local()
        if local is not None and hasattr(local, "_loop"):
            local._loop = self.policy_loop
            local._set_called = self.policy_set_called


def _policy_local() -> Any:
    """The default policy's thread-local record (``None`` under a policy that keeps none)."""
    policy = getattr(asyncio.events, "_event_loop_policy", None)  # read directly: get_event_loop_policy() creates one
    return getattr(policy, "_local", None)


class LoopState:
    """Keeps asyncio's thread state with the greenlet it belongs to (installed once per pytest process)."""

    def __init__(self, reactor_greenlet: Callable[[], Any], reactor_loop: asyncio.AbstractEventLoop | None) -> None:
        self._reactor_greenlet = reactor_greenlet
        self.reactor_loop = reactor_loop
        # The reactor was installed in the main greenlet and made its loop the policy's current one there:
        # that loop belongs to the reactor's greenlet, the main greenlet gets a thread where nothing was set.
        self._reactor_state = ThreadLoopState.read()
        self._other_state = ThreadLoopState.empty()
        if reactor_loop is not None and self._reactor_state.policy_loop is reactor_loop:
            self._other_state.apply()
        self._previous: Any = None

    def install(self) -> None:
        """Start following switches (chains to a trace function already set)."""
        import greenlet

        self._previous = greenlet.settrace(self._trace)

    def uninstall(self) -> None:
        """Stop following switches and put back the previous trace function."""
        import greenlet

        greenlet.settrace(self._previous)

    def _trace(self, event: str, args: Any) -> None:
        if event in SWITCH_EVENTS:
            origin, target = args
            reactor = self._reactor_greenlet()
            if reactor is not None and (target is reactor) != (origin is reactor):
                if target is reactor:
                    self._other_state = ThreadLoopState.read()
                    self._reactor_state.apply()
                else:
                    self._reactor_state = ThreadLoopState.read()
                    self._other_state.apply()
        if self._previous is not None:
            self._previous(event, args)


def follow_reactor_greenlet() -> LoopState | None:
    """Install ``LoopState`` for pytest-twisted's asyncio reactor; ``None`` when another reactor (or none) runs."""
    try:
        import pytest_twisted
    except ImportError:  # pragma: no cover - a declared dependency
        return None
    instances = getattr(pytest_twisted, "_instances", None)
    reactor = getattr(instances, "reactor", None)
    loop = getattr(reactor, "_asyncioEventloop", None)
    if loop is None:
        return None
    state = LoopState(lambda: getattr(instances, "gr_twisted", None), loop)
    state.install()
    _ACTIVE[:] = [state]
    return state


#: The process's installed ``LoopState`` (one at most: greenlet's trace function is per thread).
_ACTIVE: list[LoopState] = []


def with_reactor_loop(function: F) -> F:
    """Run ``function`` with the reactor's loop as the policy's current one, as Scrapy's code expects.

    Scrapy, called from the test's greenlet to set a crawl up, asks asyncio for the current loop; a test
    that does not crawl must not find the reactor's loop there (``asyncio.get_event_loop()`` would hand it
    a loop that cannot run), so it is current only while the plugin's own fixtures drive a crawl.
    """

    @functools.wraps(function)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if not _ACTIVE:
            return function(*args, **kwargs)
        saved = ThreadLoopState.read()
        replace(saved, running=None, policy_loop=_ACTIVE[0].reactor_loop, policy_set_called=True).apply()
        try:
            return function(*args, **kwargs)
        finally:
            saved.apply()

    return wrapper  # type: ignore[return-value]
