"""A browser crawl's browser: its process tree, its pages, the pages handed to callbacks and the stall they cause
when never closed (crawl process)."""

from __future__ import annotations

import asyncio
import os
import time
import weakref
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

from pytest_crawlmem.browser import tree as browsertree
from pytest_crawlmem.browser.slots import PageGate
from pytest_crawlmem.browser.tree import TreeReading
from pytest_crawlmem.browser.watch import BrowserWatch
from pytest_crawlmem.core.models import BrowserSummary, Checkpoint
from pytest_crawlmem.probes import readings as probes
from pytest_crawlmem.probes.recording import Recording

#: How long a renderer GC may take before a checkpoint reads the browser anyway.
GC_TIMEOUT_SECONDS = 5.0
#: Seconds between readings of the browser tree by the sampler, at least (each reads /proc of every browser process: at
#: a 0.1 s sample interval, reading it every sample cost a third of the crawl process's CPU).
TREE_SAMPLE_SECONDS = 1.0
#: The tree's readings (RSS, PSS, rediscovering the tree) take at most this share of the crawl process's CPU: a reading
#: due while they took more waits (measured: one PSS reading of a 30-process tree took 75 ms of CPU; the sampler and
#: status took 34% of the crawl process's CPU when nothing bounded them).
TREE_CPU_SHARE = 0.01
#: ...but its RSS is read at least this often, whatever it costs (kill_at and the PSS peak see the browser this late;
#: at 5 s these readings alone were half of the extension's CPU in production on a loaded machine).
TREE_MAX_AGE_SECONDS = 10.0
#: Seconds between rediscoveries of the tree by the sampler (a checkpoint's reading rediscovers it every time): walking
#: the children files of the crawl process, the driver, the browser and the zygotes (a file a thread), then naming the
#: new processes, was 60% of the tree's cost in production at every 2 s; a new process is read this late at most.
TREE_RESCAN_SECONDS = 10.0
#: Browser crawls are sampled at most this often (CRAWLMEM_INTERVAL_SECONDS below it is raised to it): a page takes
#: about a second, and at 0.1 s the samples alone (queues, pages, the stream) took 7% of the crawl process's CPU.
BROWSER_MIN_INTERVAL_SECONDS = 0.5
#: How long scrapy-playwright may wait for a download after a stop closed a page mid-navigation.
ABORTED_DOWNLOAD_WAIT_SECONDS = 1.0


async def collect_renderer_garbage(pages: Sequence[Any]) -> None:
    """Ask every page's renderer to collect its garbage (a page's error is ignored; raise TimeoutError past the limit)."""
    await asyncio.wait_for(asyncio.gather(*(page.request_gc() for page in pages), return_exceptions=True),
                           GC_TIMEOUT_SECONDS)


class HandedPages:
    """Pages handed to callbacks (``playwright_include_page``), held weakly with the callback each went to, and the
    crawl's progress in responses."""

    def __init__(self, stall_seconds: float) -> None:
        self.stall_seconds = stall_seconds
        self._refs: list[tuple[weakref.ref[Any], str]] = []
        self._progress = (0, 0.0)  # (responses, when that count was first seen, or when the stall last fired)
        self._paused = False  # a checkpoint holds the page slots: no response comes, and that is no stall

    def add(self, page: Any, callback: str = "") -> None:
        """Note a page handed to ``callback`` (reactor thread)."""
        self._refs.append((weakref.ref(page), callback))

    def open(self) -> list[Any]:
        """The handed pages still open."""
        return [page for page, _ in self._open()]

    def _open(self) -> list[tuple[Any, str]]:
        alive = [(page, name) for ref, name in self._refs if (page := ref()) is not None and not page.is_closed()]
        self._refs = [(weakref.ref(page), name) for page, name in alive]
        return alive

    def keepers(self) -> Counter[str]:
        """The callbacks holding the handed pages still open, with how many each holds."""
        return Counter(name or "?" for _, name in self._open())

    def pause(self) -> None:
        """A checkpoint holds the page slots from now on: no stall until :meth:`resume` (reactor thread)."""
        self._paused = True

    def resume(self, t_seconds: float) -> None:
        """The checkpoint gave the slots back at ``t_seconds``: the stall clock starts again from there."""
        self._progress = (self._progress[0], t_seconds)
        self._paused = False

    def held_contexts(self, slots: int) -> int:
        """Browser contexts whose ``slots`` page slots (PLAYWRIGHT_MAX_PAGES_PER_CONTEXT) are all held by handed pages
        still open: nothing in them can progress until a callback closes one."""
        per_context = Counter(id(getattr(page, "context", None)) for page, _ in self._open())
        return sum(1 for count in per_context.values() if count >= slots)

    def stall(self, responses: int, t_seconds: float, full_contexts: int, waiting: int = 0,
              slots: int = 0) -> str | None:
        """Why the crawl would hang, when no response came for ``stall_seconds`` because unclosed pages fill every
        context's slots (``None`` while it progresses, or while a checkpoint holds the slots); it fires again after
        each further ``stall_seconds`` of the same stall, so a stop under way hears of it too (sampler thread).
        With ``slots`` known, a context counts as full only when handed pages hold all of its slots (under load, a
        crawl that closes its pages went 5 s without a response while its full contexts' pages still worked)."""
        if self._paused:
            return None
        if responses != self._progress[0]:
            self._progress = (responses, t_seconds)
            return None
        if t_seconds - self._progress[1] < self.stall_seconds or not full_contexts:
            return None
        keepers = self.keepers()
        unclosed = sum(keepers.values())
        if not unclosed:
            return None
        if slots:  # the contexts whose every slot a handed page holds: a full context of pages still working waits
            full_contexts = self.held_contexts(slots)
            if not full_contexts:
                return None
        self._progress = (responses, t_seconds)
        return stall_message(unclosed, keepers, self.stall_seconds, full_contexts, waiting)


def stall_message(unclosed: int, keepers: Counter[str], stall_seconds: float, full_contexts: int, waiting: int) -> str:
    """The sentence of a crawl stopped because the pages its callbacks kept filled every page slot."""
    who = ", ".join(f"{name} ({count:,})" if len(keepers) > 1 else name for name, count in keepers.most_common(3))
    waited = f" while {waiting:,} request(s) waited for one" if waiting else ""
    return (
        f"{unclosed:,} pages handed to callbacks (playwright_include_page=True) were never closed by {who}, and no"
        f" response came for {stall_seconds:g} s because {full_contexts} browser context(s) had no free page slot"
        f" (PLAYWRIGHT_MAX_PAGES_PER_CONTEXT){waited}: the crawl would hang. Close the page in the callback"
        " (`await page.close()`) and in the errback"
    )


def callback_name(request: Any, spider: Any) -> str:
    """The callback a request's response goes to, as ``Class.method`` (the spider's ``parse`` when none is set)."""
    callback = getattr(request, "callback", None) or getattr(spider, "parse", None)
    func = getattr(callback, "__func__", callback)
    return str(getattr(func, "__qualname__", None) or getattr(callback, "__name__", "") or repr(callback))


class CrawlBrowser:
    """What the extension reads of a browser crawl's browser (scrapy-playwright): the tree, the pages, handed pages.

    The crawler is passed to each call, never kept: the runner lets go of the crawl before it counts what is alive.
    """

    def __init__(self, recording: Recording, *, detail_seconds: float, stall_seconds: float) -> None:
        self.recording = recording
        self.watch = BrowserWatch(detail_seconds=detail_seconds, rescan_seconds=TREE_RESCAN_SECONDS)
        self.handed = HandedPages(stall_seconds)  # pages given to callbacks (playwright_include_page)
        self.gate = PageGate()  # closed while a checkpoint drains: no page opens
        self.unclosed_at_close = 0
        self._last_tree: TreeReading | None = None
        self._last_tree_at = 0.0
        self._cpu_at_start = _process_cpu_seconds()
        self.deferred_readings = 0  # tree readings put off because the tree's readings had taken their share of CPU
        #: A ceiling (kill_at) is set: the tree's first PSS reading is taken whatever it costs (without one, the estimate
        #: of its PSS from RSS counts each process's shared pages whole, 3-5 times a Chromium process's PSS).
        self.pss_base_needed = False

    def response_received(self, response: Any, request: Any = None, spider: Any = None) -> None:
        """Note the page a response hands to its callback, and which callback, if it does (reactor thread)."""
        page = response.meta.get("playwright_page")
        if page is not None:
            self.handed.add(page, callback_name(request or response.request, spider))

    def sample(self, crawler: Any) -> tuple[TreeReading, probes.PageReading | None]:
        """Read the tree (PSS/USS on schedule, RSS otherwise, when :meth:`tree_due`: between readings the last one
        stands) and the open pages; keep the most seen (sampler thread)."""
        now = time.monotonic()
        due = self.tree_due(now)
        if due is not None:  # past its share of CPU, the tree's RSS alone (cheap), never a PSS
            self._last_tree = self.watch.read(detail=None, read_new=True) if due else self.watch.read(detail=False,
                                                                                                    read_new=False)
            self._last_tree_at = now
        assert self._last_tree is not None
        pages = probes.read_pages(crawler)
        if pages is not None:
            self.watch.count(pages.pages, pages.contexts)
        return self._last_tree, pages

    def tree_due(self, now: float) -> bool | None:
        """Whether the tree is to be read now (``None``: not): :data:`TREE_SAMPLE_SECONDS` after the last reading while
        its readings took at most :data:`TREE_CPU_SHARE` of the crawl process's CPU (``True``: its PSS when scheduled,
        if the PSS reading's expected cost still fits in that share, else ``False``: its RSS alone); past that share,
        its RSS alone every :data:`TREE_MAX_AGE_SECONDS` (``False``).

        The expected cost counts: with only the spent CPU checked, one PSS reading could overshoot the share by its own
        cost (15-34 ms of the sampler's CPU for 5-12 processes, measured; a crawl process used 1.6-1.9 s in a 60-book
        crawl, so one reading alone was 1-2% of it). The first one too, unless :attr:`pss_base_needed`: until a
        reading (the sampler's or a checkpoint's) gives the estimate its base, RSS readings raise no PSS peak."""
        tree = self.watch.tree
        if self._last_tree is None:  # the tree is not known yet, nor what its PSS would cost: its RSS (kill_at: PSS)
            return self.pss_base_needed
        age = now - self._last_tree_at
        if age < TREE_SAMPLE_SECONDS:
            return None
        if self.pss_base_needed and not tree.has_browser_base:  # kill_at's estimate needs the browser's PSS once
            return True
        share = TREE_CPU_SHARE * self.process_cpu_seconds()
        if tree.cpu_seconds + tree.expected_pss_cpu_seconds() <= share:  # a PSS reading, had it come now, fits
            return True
        if tree.cpu_seconds <= share:  # one would not fit: the RSS alone
            self.deferred_readings += 1
            return False
        self.deferred_readings += 1
        return False if age >= TREE_MAX_AGE_SECONDS else None

    def process_cpu_seconds(self) -> float:
        """The crawl process's CPU time since the browser was first watched."""
        return _process_cpu_seconds() - self._cpu_at_start

    def checkpoint_fields(self, crawler: Any) -> dict[str, Any]:
        """A checkpoint's browser fields, from a detailed reading of the tree (none when no browser runs yet)."""
        tree = self.watch.read(detail=True)
        if not tree.processes:
            return {}
        pages = probes.read_pages(crawler)
        return {
            "browser_pss_bytes": tree.pss_bytes,
            "browser_uss_bytes": tree.uss_bytes,
            "open_pages": pages.pages if pages else None,
            "open_contexts": pages.contexts if pages else None,
            "unclosed_pages": len(self.unclosed()),
        }

    def unclosed(self) -> list[Any]:
        """Pages handed to callbacks (``playwright_include_page``) that are still open."""
        return self.handed.open()

    def stall(self, responses: int, t_seconds: float, pages: probes.PageReading, slots: int = 0) -> str | None:
        """Why the crawl would hang on pages callbacks never closed (``None`` while it progresses) (sampler thread)."""
        return self.handed.stall(responses, t_seconds, pages.full_contexts, pages.waiting, slots)

    def close_unclosed(self) -> str:
        """Close the handed pages still open, so downloads waiting for a page slot can finish (reactor thread)."""
        pages = self.unclosed()
        for page in pages:
            _quietly(page.close())
        return f"closed {len(pages):,} page(s) handed to callbacks and left open"

    # -- the steps of a stop under way (escalation.py), each a last resort after the one before (reactor thread) --

    def stop_steps(self, crawler: Callable[[], Any]) -> list[tuple[str, Callable[[], str]]]:
        """The browser's steps of a stop that does not end: every page, every context, the browser itself."""
        return [  # pages still navigating are let finish first: closed mid-navigation, scrapy-playwright waits for a
            # download for DOWNLOAD_TIMEOUT (net::ERR_ABORTED); handed pages are idle, each round closes the new ones
            ("close handed pages", lambda: self.close_handed_pages(crawler())),
            ("close handed pages", lambda: self.close_handed_pages(crawler())),
            ("close pages", lambda: self.close_every_page(crawler())),
            ("close contexts", lambda: self.close_every_context(crawler())),
            ("kill the browser", self.kill_browser),
            ("fail the browser's calls", lambda: self.fail_browser_calls(crawler())),
        ]

    def close_handed_pages(self, crawler: Any) -> str:
        """Close the pages callbacks were handed and left open, and fail the downloads waiting for a page slot."""
        closed = self.close_unclosed()
        waiting = probes.release_slot_waiters(crawler)
        return f"{closed}, failed {waiting:,} download(s) waiting for a page slot"

    def close_every_page(self, crawler: Any) -> str:
        """Close every open page (those navigating too) and fail the downloads waiting for a page slot."""
        probes.shorten_download_waits(crawler, ABORTED_DOWNLOAD_WAIT_SECONDS)
        pages = probes.open_pages(crawler)
        for page in pages:
            _quietly(page.close())
        waiting = probes.release_slot_waiters(crawler)
        return f"closed {len(pages):,} open page(s), failed {waiting:,} download(s) waiting for a page slot"

    def close_every_context(self, crawler: Any) -> str:
        """Close every browser context (their pages with them) and cancel the downloads still waiting for a slot."""
        contexts = probes.browser_contexts(crawler)
        for context in contexts:
            _quietly(context.close())
        waiting = probes.release_slot_waiters(crawler)
        return f"closed {len(contexts):,} browser context(s), failed {waiting:,} download(s) waiting for a page slot"

    def fail_browser_calls(self, crawler: Any) -> str:
        """Close Playwright's connection to the browser: every call still waiting fails, so its download ends."""
        return f"closed Playwright's connection to the browser, failing {probes.close_browser_connection(crawler):,} call(s)"

    def kill_browser(self) -> str:
        """Kill the browser's processes (never Playwright's driver): its pending calls fail and the crawl can close."""
        killed = browsertree.kill_browser(browsertree.discover_browser_tree())
        return f"killed the browser ({killed:,} process(es))"

    def collect_garbage(self, crawler: Any) -> Any:
        """Ask every open page's renderer to collect garbage (a Deferred; never fails) (reactor thread)."""
        from twisted.internet import defer

        pages = probes.open_pages(crawler)
        if not pages:
            return defer.succeed(None)

        def failed(failure: Any) -> None:
            self.recording.add_error(f"browser gc failed: {failure.value!r}")

        return as_deferred(collect_renderer_garbage(pages)).addErrback(failed)

    def close(self) -> None:
        """Count the handed pages left open when the spider closes."""
        self.unclosed_at_close = len(self.unclosed())

    def summary(self, checkpoints: Sequence[Checkpoint]) -> BrowserSummary | None:
        """What the browser tree used during the crawl (``None`` when no browser process was ever read)."""
        return self.watch.summary(checkpoints, self.unclosed_at_close)


def _process_cpu_seconds() -> float:
    times = os.times()
    return times.user + times.system


def _quietly(coro: Any) -> None:
    """Run a Playwright call whose failure does not matter (the page or context may be gone already)."""
    as_deferred(coro).addErrback(lambda _failure: None)


def as_deferred(coro: Any) -> Any:
    """Run a coroutine on the asyncio reactor's loop; return a Deferred of its result."""
    from scrapy.utils.defer import deferred_from_coro

    return deferred_from_coro(coro)
