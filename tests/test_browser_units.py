"""Pure logic of browser crawls: the browser-state rule and Chromium's launch settings."""

from __future__ import annotations

import pytest

from pytest_crawlmem.browser import settings as browser
from pytest_crawlmem.core.growth import analyze
from pytest_crawlmem.core.models import Checkpoint
from pytest_crawlmem.core.stages import DEFAULT_BROWSER_PER_PAGE, browser_growth

MIB = 2**20


def checkpoint(pages: int, uss_mib: float | None, contexts: int = 1, open_pages: int = 0) -> Checkpoint:
    return Checkpoint(responses=pages, t_seconds=pages / 10, rss_bytes=80 * MIB, heap_bytes=40 * MIB,
                      traced_bytes=None, scheduled=0, browser_uss_bytes=None if uss_mib is None else int(uss_mib * MIB),
                      open_pages=open_pages, open_contexts=contexts)


def series(uss: list[float], contexts: list[int] | None = None, pages: list[int] | None = None) -> list[Checkpoint]:
    counts = [0, 20, 40, 60, 90, 135, 200][: len(uss)]
    contexts = contexts or [1] * len(uss)
    pages = pages or [0] * len(uss)
    return [checkpoint(n, u, c, p) for n, u, c, p in zip(counts, uss, contexts, pages, strict=True)]


def test_steady_tree_with_noise_is_steady():
    growth = browser_growth(series([None, 300, 320, 305, 330, 325, 340]))  # type: ignore[list-item]
    assert growth is not None and growth.verdict == "steady"
    assert growth.signal == "browser-uss"


def test_uss_rising_past_the_threshold_in_every_interval_is_browser_state():
    growth = browser_growth(series([None, 300, 330, 360, 400, 460, 550]))  # type: ignore[list-item]
    assert growth is not None and growth.verdict == "browser-state"
    assert all(d >= DEFAULT_BROWSER_PER_PAGE for d in growth.deltas_per_response)
    assert "in each of" in growth.reason


def test_one_flat_interval_is_not_browser_state():
    growth = browser_growth(series([None, 300, 330, 360, 360, 420, 500]))  # type: ignore[list-item]
    assert growth is not None and growth.verdict == "steady"


def test_contexts_rising_at_every_checkpoint_is_browser_state_even_with_noisy_uss():
    growth = browser_growth(series([None, 300, 310, 305, 330, 320, 340], contexts=[0, 20, 40, 60, 90, 135, 200]))  # type: ignore[list-item]
    assert growth is not None and growth.verdict == "browser-state"
    assert "open browser contexts 60 -> 200" in growth.reason


def test_a_closing_checkpoint_after_cleanup_does_not_hide_growth():
    points = series([None, 300, 330, 360, 400, 460, 550], pages=[0, 20, 40, 60, 90, 135, 200])  # type: ignore[list-item]
    points.append(checkpoint(200, 150, contexts=0, open_pages=0))
    growth = browser_growth(points)
    assert growth is not None and growth.verdict == "browser-state"


def test_too_few_browser_checkpoints_give_no_browser_judgement():
    assert browser_growth(series([None, 300, 600])) is None  # type: ignore[list-item]
    assert browser_growth(series([None] * 5)) is None  # type: ignore[list-item]


def test_analyze_prefers_the_browser_judgement_for_short_crawls():
    growth = analyze(series([None, 300, 330, 360, 400, 460, 550]))  # type: ignore[list-item]
    assert growth.verdict == "browser-state"
    steady = analyze(series([None, 300, 320, 305, 330, 325, 340]))  # type: ignore[list-item]
    assert steady.verdict == "steady" and "Python's own memory is not judged" in steady.reason


def test_launch_options_use_the_installed_chromium_and_keep_the_users_keys(monkeypatch, tmp_path):
    fake = tmp_path / "chromium"
    fake.write_text("#!/bin/sh\n")
    fake.chmod(0o755)
    monkeypatch.setenv("CRAWLMEM_CHROMIUM", str(fake))
    options = browser.launch_options({"args": ["--lang=fr"], "slow_mo": 5})
    assert options["executable_path"] == str(fake)
    assert options["args"] == ["--lang=fr", "--disable-gpu", "--disable-dev-shm-usage"]
    assert options["slow_mo"] == 5 and options["headless"] is True
    assert "executable_path" not in browser.launch_options({"channel": "chrome"})


def test_a_missing_chromium_is_a_clear_error(monkeypatch):
    monkeypatch.setenv("CRAWLMEM_CHROMIUM", "/nonexistent/chromium")
    with pytest.raises(browser.BrowserNotFound, match="CRAWLMEM_CHROMIUM='/nonexistent/chromium' is not an executable"):
        browser.chromium_path()


def test_playwright_settings_route_downloads_through_scrapy_playwright(monkeypatch, tmp_path):
    fake = tmp_path / "chromium"
    fake.write_text("")
    fake.chmod(0o755)
    monkeypatch.setenv("CRAWLMEM_CHROMIUM", str(fake))
    settings = browser.playwright_settings({"CONCURRENT_REQUESTS": 4}, slow_mo=1)
    assert settings["DOWNLOAD_HANDLERS"]["https"] == browser.PLAYWRIGHT_HANDLER
    assert settings["CONCURRENT_REQUESTS"] == 4
    assert settings["PLAYWRIGHT_LAUNCH_OPTIONS"]["slow_mo"] == 1
    assert browser.is_playwright_crawl(settings)
    assert not browser.is_playwright_crawl({"DOWNLOAD_HANDLERS": {"s3": None}})


def test_the_tree_is_read_within_its_share_of_the_crawl_process_cpu(monkeypatch, tmp_path):
    from pytest_crawlmem.browser import pages
    from pytest_crawlmem.probes.recording import Recording

    cpu = [100.0]
    monkeypatch.setattr(pages, "_process_cpu_seconds", lambda: cpu[0])
    browser_pages = pages.CrawlBrowser(Recording(None), detail_seconds=2.0, stall_seconds=5.0)
    tree = browser_pages.watch.tree
    assert browser_pages.tree_due(0.0) is False  # the first reading: the tree is not known yet, its RSS
    browser_pages._last_tree, browser_pages._last_tree_at = object(), 0.0  # type: ignore[assignment]
    assert browser_pages.tree_due(0.5) is None  # sooner than TREE_SAMPLE_SECONDS
    cpu[0], tree.cpu_seconds = 110.0, 0.05  # the tree took 0.5% of the process's 10 s: within its share
    assert browser_pages.tree_due(1.0) is True
    tree.cpu_seconds = 0.5  # 5%: past its share, nothing until TREE_MAX_AGE_SECONDS, then its RSS alone
    assert browser_pages.tree_due(2.0) is None
    assert browser_pages.tree_due(pages.TREE_MAX_AGE_SECONDS) is False
    assert browser_pages.deferred_readings == 2


def test_a_pss_reading_is_taken_only_if_its_expected_cost_still_fits_in_the_trees_share(monkeypatch):
    from pytest_crawlmem.browser import pages
    from pytest_crawlmem.browser import tree as browsertree
    from pytest_crawlmem.probes.recording import Recording

    cpu = [100.0]  # the process's CPU since the browser was first watched: 1 s, so the share is 10 ms
    monkeypatch.setattr(pages, "_process_cpu_seconds", lambda: cpu[0])
    browser_pages = pages.CrawlBrowser(Recording(None), detail_seconds=2.0, stall_seconds=5.0)
    tree = browser_pages.watch.tree
    browser_pages._last_tree, browser_pages._last_tree_at = object(), 0.0  # type: ignore[assignment]
    tree._kinds = {pid: "renderer" for pid in range(1, 13)}  # 12 processes: 36 ms expected before any reading
    cpu[0], tree.cpu_seconds = 101.0, 0.002
    assert tree.expected_pss_cpu_seconds() == 12 * browsertree.PSS_CPU_PER_PROCESS_SECONDS
    assert browser_pages.tree_due(1.0) is False  # 2 ms spent of 10 ms, but the reading would take it to 38 ms
    cpu[0] = 104.0  # 40 ms of share: it fits
    assert browser_pages.tree_due(2.0) is True
    tree._pss_cpu_per_process = 0.01  # measured since: 10 ms a process, 120 ms expected
    assert browser_pages.tree_due(3.0) is False
    assert browser_pages.deferred_readings == 2


def test_with_kill_at_the_browsers_pss_is_read_once_whatever_it_costs(monkeypatch):
    from pytest_crawlmem.browser import pages
    from pytest_crawlmem.browser.tree import BrowserProcess
    from pytest_crawlmem.probes.recording import Recording

    monkeypatch.setattr(pages, "_process_cpu_seconds", lambda: 100.0)  # no CPU share at all
    browser_pages = pages.CrawlBrowser(Recording(None), detail_seconds=2.0, stall_seconds=5.0)
    browser_pages.pss_base_needed = True
    tree = browser_pages.watch.tree
    assert browser_pages.tree_due(0.0) is True
    browser_pages._last_tree, browser_pages._last_tree_at = object(), 0.0  # type: ignore[assignment]
    tree.cpu_seconds = 1.0
    assert browser_pages.tree_due(1.0) is True  # the driver alone was read: the browser's PSS still is not known
    tree._base = {7: BrowserProcess(7, "browser", 100, 50, 40)}
    assert browser_pages.tree_due(2.0) is None  # read once: past the share now


class _FakeHandler:
    """What PageGate reads of scrapy-playwright's download handler: its contexts' page-slot semaphores, its config and
    its page creation."""

    def __init__(self, semaphore, slots: int) -> None:
        from types import SimpleNamespace

        self.config = SimpleNamespace(max_pages_per_context=slots)
        self.context_wrappers = {"default": SimpleNamespace(semaphore=semaphore, context=SimpleNamespace(pages=[]))}
        self.created = 0

    async def _create_page(self, request=None, spider=None):
        self.created += 1
        return object()


def _crawler_with(handler):
    from types import SimpleNamespace

    downloader = SimpleNamespace(handlers=SimpleNamespace(_handlers={"http": handler}), active=set(), slots={})
    return SimpleNamespace(_engine=SimpleNamespace(downloader=downloader))


def _run(main):  # type: ignore[no-untyped-def]
    """asyncio.run in a thread: pytest-twisted already runs an asyncio loop here."""
    import asyncio
    import concurrent.futures

    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, main()).result(timeout=30)


def test_a_download_that_waited_on_a_free_slot_while_the_gate_held_it_gets_it_when_the_gate_opens():
    import asyncio

    from pytest_crawlmem.browser.slots import PageGate

    async def scenario() -> bool:
        semaphore = asyncio.Semaphore(4)
        await semaphore.acquire()  # one page open: three slots free
        handler = _FakeHandler(semaphore, 4)
        gate = PageGate()
        gate.close(_crawler_with(handler))
        waiter = asyncio.ensure_future(semaphore.acquire())  # a download past the gate, queued behind the holds
        await asyncio.sleep(0.01)
        assert not waiter.done()  # no page opens while the checkpoint drains
        gate.open()  # nothing else will ever release a slot: the free ones must go to it now
        await asyncio.wait_for(waiter, 1.0)
        return waiter.result()

    assert _run(scenario) is True


def test_a_slot_freed_while_the_gate_is_closed_is_held_then_goes_to_the_waiting_download():
    import asyncio

    from pytest_crawlmem.browser.slots import PageGate

    async def scenario() -> tuple[bool, int, bool, int]:
        semaphore = asyncio.Semaphore(1)
        await semaphore.acquire()  # the context's one slot: a page open
        gate = PageGate()
        gate.close(_crawler_with(_FakeHandler(semaphore, 1)))
        waiter = asyncio.ensure_future(semaphore.acquire())
        await asyncio.sleep(0.01)
        semaphore.release()  # the page closes while the checkpoint drains: a hold takes its slot
        await asyncio.sleep(0.01)
        waited = not waiter.done()
        released = gate.open()
        await asyncio.wait_for(waiter, 1.0)
        return waited, released, waiter.result(), len(semaphore._waiters or ())

    assert _run(scenario) == (True, 1, True, 0)


def test_page_creation_waits_at_the_closed_gate_and_is_counted_parked():
    import asyncio

    from pytest_crawlmem.browser.slots import PageGate

    async def scenario() -> tuple[int, int, int]:
        handler = _FakeHandler(asyncio.Semaphore(4), 4)
        crawler = _crawler_with(handler)
        gate = PageGate()
        gate.close(crawler)
        creating = asyncio.ensure_future(handler._create_page())
        await asyncio.sleep(0.01)
        parked, created_while_closed = gate.parked(crawler), handler.created
        gate.open()
        await asyncio.wait_for(creating, 1.0)
        return parked, created_while_closed, handler.created

    assert _run(scenario) == (1, 0, 1)


class _Page:
    def is_closed(self) -> bool:
        return False


def test_a_checkpoint_that_holds_the_page_slots_is_not_a_stall():
    # a checkpoint holds every page slot while it drains (contexts read full) and no response comes: under load it
    # outlasted CRAWLMEM_STALL_SECONDS and a crawl that closes its pages was stopped as one that never does
    from pytest_crawlmem.browser.pages import HandedPages

    handed, page = HandedPages(stall_seconds=5.0), _Page()
    handed.add(page, "BooksSpider.parse_book")  # its callback is still taking the screenshot
    assert handed.stall(10, 0.0, full_contexts=1) is None
    handed.pause()
    assert handed.stall(10, 9.0, full_contexts=1) is None  # the checkpoint drains: 9 s without a response
    handed.resume(9.0)
    assert handed.stall(10, 13.0, full_contexts=1) is None  # the stall clock starts again when it ends
    assert "were never closed by BooksSpider.parse_book" in (handed.stall(10, 14.5, full_contexts=1) or "")


class _ContextPage(_Page):
    def __init__(self, context: object) -> None:
        self.context = context


def test_a_full_context_whose_pages_still_work_is_not_a_stall():
    # under load a crawl that closes its pages went 5 s without a response, its contexts full of pages still
    # navigating or in callbacks: only a context whose every slot a handed page holds can never progress
    from pytest_crawlmem.browser.pages import HandedPages

    handed, context = HandedPages(stall_seconds=5.0), object()
    pages = [_ContextPage(context) for _ in range(4)]
    for page in pages[:3]:  # the fourth slot's page is still navigating: not handed yet
        handed.add(page, "BooksSpider.parse_book")
    assert handed.stall(10, 0.0, full_contexts=1, slots=4) is None
    assert handed.stall(10, 6.0, full_contexts=1, slots=4) is None
    handed.add(pages[3], "BooksSpider.parse_book")
    assert handed.held_contexts(4) == 1
    message = handed.stall(10, 12.0, full_contexts=1, slots=4) or ""
    assert "4 pages handed to callbacks" in message and "1 browser context(s) had no free page slot" in message


class _LaunchingHandler:
    """scrapy-playwright's page creation as its handler does it (0.0.48): under ``context_launch_lock`` the request's
    context is looked up or created (``browser.new_context`` takes a while), then a page slot is acquired and a page
    opened."""

    def __init__(self, slots: int) -> None:
        import asyncio
        from types import SimpleNamespace

        self.config = SimpleNamespace(max_pages_per_context=slots)
        self.context_wrappers: dict[str, object] = {}
        self.context_launch_lock = asyncio.Lock()
        self.new_context_done = asyncio.Event()  # browser.new_context() returns when it is set
        self.new_page_done = asyncio.Event()  # context.new_page() returns when it is set
        self.new_page_done.set()
        self.pages = 0

    async def _create_browser_context(self, name, context_kwargs=None, spider=None):
        import asyncio
        from types import SimpleNamespace

        await self.new_context_done.wait()
        wrapper = SimpleNamespace(semaphore=asyncio.Semaphore(self.config.max_pages_per_context),
                                  context=SimpleNamespace(pages=[]))
        self.context_wrappers[name] = wrapper
        return wrapper

    async def _create_page(self, request=None, spider=None):
        async with self.context_launch_lock:
            wrapper = self.context_wrappers.get(request)
            if wrapper is None:
                wrapper = await self._create_browser_context(name=request)
        await wrapper.semaphore.acquire()
        await self.new_page_done.wait()
        self.pages += 1
        return object()


def test_no_page_opens_in_a_context_created_while_the_gate_is_closed_and_its_waiters_are_parked():
    # the first checkpoint of the published example at 32 in flight: 24 requests waited for the context lock while
    # contexts were being created; two contexts were created during the drain and opened 3 pages: 5 s undrained
    import asyncio

    from pytest_crawlmem.browser.slots import PageGate

    async def scenario() -> tuple[int, int, int, int]:
        handler = _LaunchingHandler(slots=4)
        crawler = _crawler_with(handler)
        gate = PageGate()
        gate.close(crawler)  # installs the gate in front of page creation,
        gate.open()
        creating = [asyncio.ensure_future(handler._create_page(f"page-{i % 2}")) for i in range(6)]
        await asyncio.sleep(0.01)  # past the gate: one creates context page-0, five wait for the lock
        gate.close(crawler)
        handler.new_context_done.set()  # page-0's context is created now, while the checkpoint drains
        await asyncio.sleep(0.05)
        opened_while_closed, parked = handler.pages, gate.parked(crawler)
        gate.open()
        await asyncio.wait_for(asyncio.gather(*creating), 1.0)
        return opened_while_closed, parked, len(handler.context_wrappers), handler.pages

    opened_while_closed, parked, contexts, pages = _run(scenario)
    assert opened_while_closed == 0
    assert parked == 6  # none holds a page: all six wait (for a slot, the lock or the gate)
    assert (contexts, pages) == (2, 6)


def test_a_page_created_while_the_gate_is_closed_waits_blank_and_creating_it_is_parked():
    # the first checkpoint at 32 in flight, traced: 9 requests had taken a slot and were in context.new_page(), which
    # takes a second on a loaded machine; they then navigated and took their screenshots during the drain (14 -> 25
    # pages opened, 5 s undrained). Creating a page holds no response; a page created while closed waits blank.
    import asyncio

    from pytest_crawlmem.browser.slots import PageGate

    async def scenario() -> tuple[int, int, bool, bool]:
        handler = _LaunchingHandler(slots=4)
        handler.new_context_done.set()
        handler.new_page_done.clear()
        crawler = _crawler_with(handler)
        gate = PageGate()
        gate.close(crawler)
        gate.open()
        creating = [asyncio.ensure_future(handler._create_page("page-0")) for _ in range(3)]
        await asyncio.sleep(0.01)  # all three hold a slot, in new_page()
        gate.close(crawler)
        parked_creating = gate.parked(crawler)
        handler.new_page_done.set()  # their pages are created while the checkpoint drains
        await asyncio.sleep(0.05)
        parked_blank, returned = gate.parked(crawler), any(task.done() for task in creating)
        gate.open()
        await asyncio.wait_for(asyncio.gather(*creating), 1.0)
        return parked_creating, parked_blank, returned, all(task.done() for task in creating)

    assert _run(scenario) == (3, 3, False, True)


def test_a_page_creation_begun_before_the_gate_was_installed_still_counts_parked_while_it_waits_for_a_slot():
    # the gate went in at the first checkpoint: requests already waiting for a slot were counted nowhere, held
    # behind the checkpoint's holds, and the first two checkpoints waited the whole 5 s drain timeout
    import asyncio

    from pytest_crawlmem.browser.slots import PageGate

    async def scenario() -> int:
        handler = _LaunchingHandler(slots=1)
        handler.new_context_done.set()
        crawler = _crawler_with(handler)
        creating = [asyncio.ensure_future(handler._create_page("page-0")) for _ in range(3)]  # no gate yet
        await asyncio.sleep(0.01)  # one page open, two wait for its slot
        gate = PageGate()
        gate.close(crawler)
        parked = gate.parked(crawler)
        gate.open()
        for task in creating:
            task.cancel()
        return parked

    assert _run(scenario) == 2



class _DownloadingHandler(_LaunchingHandler):
    """A download as scrapy-playwright's handler runs it (``_download_request_with_retry``): the page is created, then
    ``_download_request_with_page`` navigates it (counted here)."""

    def __init__(self, slots: int) -> None:
        super().__init__(slots)
        self.navigations = 0

    async def _download_request_with_page(self, request, page, spider=None):
        self.navigations += 1
        return page

    async def download(self, request):
        page = await self._create_page(request)
        return await self._download_request_with_page(request, page)


def test_page_creations_begun_before_the_gate_was_installed_are_parked_and_navigate_only_once_it_opens():
    # the first checkpoint of the published example at 32 in flight, traced (browser_drain_final.json): the gate went
    # in while one request created a context under scrapy-playwright's lock and 24 waited for it. The creator then
    # opened a page and navigated during the drain, and the next lock holder waited at the gate in front of context
    # creation counted nowhere: 27 in flight, 26 parked, for the whole 5 s drain timeout (2 of 2 first checkpoints)
    import asyncio

    from pytest_crawlmem.browser.slots import PageGate

    async def scenario() -> tuple[int, int, int, int]:
        handler = _DownloadingHandler(slots=4)
        crawler = _crawler_with(handler)
        downloads = [asyncio.ensure_future(handler.download(f"page-{min(i, 1)}")) for i in range(3)]
        await asyncio.sleep(0.01)  # no gate yet: page-0's context is being created, two wait for the lock
        gate = PageGate()
        gate.close(crawler)  # the first checkpoint
        handler.new_context_done.set()  # page-0's context is created while it drains; page-1's creation begins
        await asyncio.sleep(0.05)
        navigated_while_closed, parked = handler.navigations, gate.parked(crawler)
        gate.open()
        await asyncio.wait_for(asyncio.gather(*downloads), 1.0)
        return navigated_while_closed, parked, len(handler.context_wrappers), handler.navigations

    assert _run(scenario) == (0, 3, 2, 3)  # none navigated while it drained; all three parked


def test_open_pages_are_counted_on_playwrights_implementation_object_a_dict_or_a_list():
    # Playwright 1.65 keeps a context's pages in a dict: counted through context.pages instead, the API wrappers it
    # builds were a sixth of the sampler's CPU in production (cProfile)
    from types import SimpleNamespace

    from pytest_crawlmem.probes import readings as probes

    class _Context:
        def __init__(self, pages) -> None:
            self._impl_obj = SimpleNamespace(_pages=pages)

        @property
        def pages(self):
            raise AssertionError("the API wrappers were built")

    assert probes._page_count(_Context({object(): None, object(): None})) == 2
    assert probes._page_count(_Context([object()])) == 1
