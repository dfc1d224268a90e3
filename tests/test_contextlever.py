"""The browser lever's bookkeeping on a stand-in of scrapy-playwright's handler: names, options, closes.

The real crawl is tests/test_governor_browser.py; here the handler's two coroutines the lever wraps
(``_create_page``, ``_create_browser_context``) are written as scrapy-playwright 0.0.48 writes them, so each rule
is seen alone: a rotated context's pages go to a fresh one with the same options, and it closes only once it has
no open page and none being created.
"""

from __future__ import annotations

import asyncio
import threading
from types import SimpleNamespace
from typing import Any

from pytest_crawlmem.governor.contextlever import ContextLever

MIB = 2**20


class Page:
    def __init__(self) -> None:
        self.closed = False

    def is_closed(self) -> bool:
        return self.closed


class Context:
    def __init__(self, handler: Handler, name: str) -> None:
        self.handler, self.name, self.pages = handler, name, []  # type: ignore[var-annotated]

    async def close(self) -> None:
        self.handler.context_wrappers.pop(self.name, None)  # scrapy-playwright's close callback


class Handler:
    """The part of scrapy_playwright.handler.ScrapyPlaywrightDownloadHandler the lever reads and wraps."""

    def __init__(self, startup: dict[str, Any] | None = None) -> None:
        self.config = SimpleNamespace(startup_context_kwargs=startup or {})
        self.context_wrappers: dict[str, Any] = {}
        self.created: list[tuple[str, Any]] = []
        self.slow: asyncio.Event | None = None  # set: page creation waits for it

    async def _create_browser_context(self, name: str, context_kwargs: Any = None, spider: Any = None) -> Any:
        self.created.append((name, context_kwargs))
        self.context_wrappers[name] = SimpleNamespace(context=Context(self, name), persistent=False)
        return self.context_wrappers[name]

    async def _create_page(self, request: Any, spider: Any) -> Page:
        name = request.meta.setdefault("playwright_context", "default")
        wrapper = self.context_wrappers.get(name)
        if wrapper is None:
            wrapper = await self._create_browser_context(name=name, context_kwargs=request.meta.get(
                "playwright_context_kwargs"), spider=spider)
        if self.slow is not None:
            await self.slow.wait()
        page = Page()
        wrapper.context.pages.append(page)
        return page


def run(scenario: Any) -> None:
    """Run a scenario on a loop of its own, in a thread (the test process's reactor may own this thread's loop)."""
    failures: list[BaseException] = []

    def target() -> None:
        try:
            asyncio.run(scenario())
        except BaseException as exc:  # re-raised in the test's thread
            failures.append(exc)

    thread = threading.Thread(target=target)
    thread.start()
    thread.join(30)
    if failures:
        raise failures[0]


def request(**meta: Any) -> Any:
    return SimpleNamespace(meta=dict(meta))


def lever_over(footprint: int) -> ContextLever:
    lever = ContextLever(100 * MIB, 0.85, 0.70, read_seconds=0.0)
    lever._read = lambda now, detail=None: footprint  # type: ignore[method-assign]
    return lever


def test_a_rotation_sends_new_pages_to_a_fresh_context_with_the_same_options_and_closes_the_old_one():
    async def scenario() -> None:
        handler = Handler()
        lever = lever_over(90 * MIB)
        assert lever.install(handler)
        options = {"viewport": {"width": 800, "height": 600}}
        pages = [await handler._create_page(request(playwright_context_kwargs=options), None) for _ in range(5)]
        [event] = lever.tick([handler], now=1.0)
        assert event.action == "rotate" and "rotating browser context 'default' after 5 pages" in event.message
        fresh = request(playwright_context="default")  # a follow-up naming the context it came from
        await handler._create_page(fresh, None)
        assert fresh.meta["playwright_context"] == "default#2"
        assert handler.created == [("default", options), ("default#2", options)]
        assert lever.tick([handler], now=2.0) == []  # the old context still has open pages: it stays
        for page in pages:
            page.closed = True
        [closed] = lever.tick([handler], now=3.0)
        assert closed.action == "close" and "closed browser context 'default' after 5 pages" in closed.message
        await asyncio.sleep(0)
        assert set(handler.context_wrappers) == {"default#2"}
        again = request(playwright_context="default#2")  # a retry of a request the rotated context served
        await handler._create_page(again, None)
        assert again.meta["playwright_context"] == "default#2" and lever.rotations == 1 and lever.closed == 1

    run(scenario)


def test_a_rotated_context_waits_for_the_page_being_created_in_it():
    async def scenario() -> None:
        handler = Handler(startup={"default": {"locale": "de-DE"}})
        lever = lever_over(90 * MIB)
        lever.install(handler)
        for _ in range(4):
            (await handler._create_page(request(), None)).closed = True
        handler.slow = asyncio.Event()
        waiting = asyncio.ensure_future(handler._create_page(request(), None))  # past the mapping, not done yet
        await asyncio.sleep(0)
        [event] = lever.tick([handler], now=1.0)
        assert event.action == "rotate"
        assert lever.tick([handler], now=2.0) == []  # a page is being created in it: not closed
        handler.slow.set()
        (await waiting).closed = True
        [closed] = lever.tick([handler], now=3.0)
        assert closed.action == "close"
        handler.slow = None
        await handler._create_page(request(), None)
        assert handler.created[-1] == ("default#2", {"locale": "de-DE"})  # PLAYWRIGHT_CONTEXTS' options

    run(scenario)


def test_under_the_act_share_or_with_too_few_pages_nothing_rotates():
    async def scenario() -> None:
        handler = Handler()
        under = lever_over(80 * MIB)
        under.install(handler)
        for _ in range(10):
            await handler._create_page(request(), None)
        assert under.tick([handler], now=1.0) == []
        young = lever_over(99 * MIB)
        other = Handler()
        young.install(other)
        for _ in range(3):
            await other._create_page(request(), None)
        assert young.tick([other], now=1.0) == []

    run(scenario)


def test_an_estimate_that_a_pss_reading_does_not_confirm_is_confirmed_ever_more_rarely():
    async def scenario() -> None:
        handler = Handler()
        lever = ContextLever(100 * MIB, 0.85, 0.70, read_seconds=0.0)
        pss_reads: list[float] = []

        def read(now: float, detail: bool | None = None) -> int:
            if detail:
                pss_reads.append(now)
            lever.tree_bytes = 80 * MIB if detail else 90 * MIB  # the estimate over the act share, PSS under it
            return lever.tree_bytes

        lever._read = read  # type: ignore[method-assign]
        lever.install(handler)
        for _ in range(5):
            (await handler._create_page(request(), None)).closed = True
        for tenth in range(1, 1001):
            assert lever.tick([handler], now=tenth / 10) == []
        # Every 3 s at first (0.33 readings a second at 30-55 ms each), then 6, 12, 24 and 30 s apart.
        assert pss_reads == [0.1, 3.1, 9.1, 21.1, 45.1, 75.1]

    run(scenario)


def test_the_tree_is_read_every_2_s_far_under_the_budget_and_every_read_seconds_near_it():
    async def scenario(footprint: int, expected: int) -> None:
        handler = Handler()
        lever = ContextLever(100 * MIB, 0.85, 0.70, read_seconds=0.5)
        reads: list[float] = []

        def read(now: float, detail: bool | None = None) -> int:
            reads.append(now)
            lever.tree_bytes = footprint
            return footprint

        lever._read = read  # type: ignore[method-assign]
        lever.install(handler)
        for tenth in range(100):
            lever.tick([handler], now=tenth / 10)
        assert len(reads) == expected

    run(lambda: scenario(10 * MIB, 5))  # at 0, 2, 4, 6 and 8 s
    run(lambda: scenario(75 * MIB, 20))  # over the restore share: every 0.5 s


def test_over_the_close_share_a_context_rotates_whatever_the_back_off_asks():
    """Rotations whose close left the tree a little over the act share (the floor and one page) doubled the pages a
    context must serve up to 64: the context then grew the tree to 1,157 MiB of a 768 MiB budget before its turn. The
    back-off is a preference; over the close share the budget comes first."""
    async def scenario(footprint: int, rotates: bool) -> None:
        handler = Handler()
        lever = lever_over(footprint)
        lever.install(handler)
        lever.min_served = 64  # backed off four times
        for _ in range(10):
            (await handler._create_page(request(), None)).closed = True
        events = lever.tick([handler], now=1.0)
        assert [event.action for event in events] == (["rotate"] if rotates else [])

    run(lambda: scenario(90 * MIB, False))  # over the act share, under the close share: the back-off holds
    run(lambda: scenario(95 * MIB, True))
