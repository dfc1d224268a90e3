"""Readings of the process (/proc, glibc) and of Scrapy's engine internals.

This is the only module that knows where Scrapy keeps its queues and how Linux reports
memory. Every probe returns ``None`` instead of raising when its source is missing, so a
Scrapy upgrade degrades a figure instead of breaking a crawl. Runs in the crawl process.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import re
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypedDict

_PAGE_SIZE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def read_rss_bytes() -> int:
    """Return the resident set size of this process now."""
    try:
        with open("/proc/self/statm", "rb") as statm:
            return int(statm.read().split()[1]) * _PAGE_SIZE
    except (OSError, IndexError, ValueError):
        import psutil  # without /proc only (it is 0.9 MiB of modules)

        return int(psutil.Process().memory_info().rss)


class ProcessReading(TypedDict):
    """This process's own figures in a sample, by :class:`~pytest_crawlmem.core.models.Sample` field."""

    rss_bytes: int
    open_fds: int | None


def read_process() -> ProcessReading:
    """Read this process's own figures for a sample (sampler thread)."""
    return {"rss_bytes": read_rss_bytes(), "open_fds": read_open_fds()}


def read_open_fds() -> int | None:
    """File descriptors this process holds open now (``None`` without /proc)."""
    try:
        return len(os.listdir("/proc/self/fd"))
    except OSError:
        return None


def reset_peak_rss() -> bool:
    """Reset the kernel's RSS high-water mark (VmHWM); return whether it worked."""
    try:
        with open("/proc/self/clear_refs", "w") as clear_refs:
            clear_refs.write("5")
        return True
    except OSError:
        return False


def read_peak_rss() -> int | None:
    """Return VmHWM, the exact RSS peak since the last reset, or ``None`` without /proc."""
    try:
        with open("/proc/self/status", "rb") as status:
            for line in status:
                if line.startswith(b"VmHWM:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


class _MallInfo2(ctypes.Structure):
    _fields_ = [
        (name, ctypes.c_size_t)
        for name in ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost")
    ]


def _load_libc() -> Any:
    """glibc by its soname; else as ``find_library`` finds it (it runs ``ldconfig -p`` in a subprocess)."""
    try:
        return ctypes.CDLL("libc.so.6")
    except OSError:
        pass
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        return ctypes.CDLL(name)
    except OSError:
        return None


_LIBC = _load_libc()
_MALLINFO2 = getattr(_LIBC, "mallinfo2", None)
if _MALLINFO2 is not None:
    _MALLINFO2.restype = _MallInfo2
_MALLOC_TRIM = getattr(_LIBC, "malloc_trim", None)


def read_malloc_in_use_bytes() -> int | None:
    """Return bytes glibc's malloc has handed out and not had back (heap + mmapped chunks)."""
    if _MALLINFO2 is None:
        return None
    info = _MALLINFO2()
    return int(info.uordblks + info.hblkhd)


def malloc_trim() -> bool:
    """Give freed heap memory back to the kernel so RSS reflects what is in use."""
    if _MALLOC_TRIM is None:
        return False
    _MALLOC_TRIM(ctypes.c_size_t(0))
    return True


def _download_cancelled() -> tuple[type[BaseException], ...]:
    """What a download cancelled at DOWNLOAD_MAXSIZE raises: DownloadCancelledError (Scrapy >= 2.15), before it Twisted's."""
    from scrapy import exceptions
    from twisted.internet.defer import CancelledError

    new = getattr(exceptions, "DownloadCancelledError", None)
    return (new,) if isinstance(new, type) else (CancelledError,)


#: The exception types of a download DOWNLOAD_MAXSIZE cancelled, on this Scrapy.
DOWNLOAD_CANCELLED: tuple[type[BaseException], ...] = _download_cancelled()


_LEGACY_EXPECTED_SIZE = re.compile(r"expected response size \((\d+)\) larger than download max size")


def legacy_declared_size(message: str) -> int | None:
    """The Content-Length in Scrapy < 2.15's DOWNLOAD_MAXSIZE message (``expected response size (N) larger ...``)."""
    match = _LEGACY_EXPECTED_SIZE.search(message)
    return int(match.group(1)) if match else None


def _engine(crawler: Any) -> Any:
    """Return the crawler's engine or ``None`` (``crawler.engine`` raises before crawl())."""
    return getattr(crawler, "_engine", None) or getattr(crawler, "engine", None)


def _scheduler(engine: Any) -> Any:
    scheduler = getattr(engine, "scheduler", None)  # public in Scrapy 2.19
    if scheduler is None:
        slot = getattr(engine, "_slot", None) or getattr(engine, "slot", None)
        scheduler = getattr(slot, "scheduler", None)  # Scrapy 2.13-2.18
    return scheduler


def scheduler_of(crawler: Any) -> Any:
    """The crawl's scheduler (``engine.scheduler`` from Scrapy 2.19, ``engine._slot.scheduler`` before), or ``None``."""
    engine = _engine(crawler)
    return _scheduler(engine) if engine is not None else None


@dataclass(frozen=True, slots=True)
class QueueReading:
    """The engine's queue sizes at one moment; ``None`` where a probe failed."""

    scheduled: int | None = None
    disk_scheduled: int | None = None
    inflight: int | None = None
    slot_queued: int | None = None
    active_size_bytes: int | None = None
    backout: bool | None = None


def _attempt(func: Any, *args: Any) -> Any:
    """Call ``func``; return ``None`` if Scrapy's internals changed or moved under it."""
    for _ in range(2):  # a second try covers "changed size during iteration" from another thread
        try:
            return func(*args)
        except Exception:
            continue
    return None


def _in_process_len(scheduler: Any) -> int:
    """Requests this process's scheduler holds: 0 for scrapy-redis, whose queue is shared in Redis (not this worker's)."""
    if any(cls.__module__.startswith("scrapy_redis") for cls in type(scheduler).__mro__):
        return 0
    return len(scheduler)


def _disk_len(scheduler: Any) -> int:
    dqs = getattr(scheduler, "dqs", None)
    return len(dqs) if dqs is not None else 0


def queued_requests(crawler: Any) -> list[Any]:
    """The Requests waiting in the scheduler's memory queues (Scrapy 2.19 internals, read defensively; [] if moved)."""
    engine = _engine(crawler)
    mqs = getattr(_scheduler(engine), "mqs", None) if engine is not None else None
    return (_attempt(_queued_in, mqs, 0) or []) if mqs is not None else []


def _queued_in(queue: Any, depth: int) -> list[Any]:
    """Requests in a (downloader-aware) priority queue: its per-slot and per-priority queues' ``q`` deques."""
    found: list[Any] = []
    if depth > 3:
        return found
    for name in ("pqueues", "queues", "_start_queues"):
        for inner in list((getattr(queue, name, None) or {}).values()):
            found.extend(_queued_in(inner, depth + 1))
    items = getattr(queue, "q", None)
    if items is not None and not isinstance(items, (str, bytes)):
        found.extend(list(items))
    return found


def _slot_queued(engine: Any) -> int:
    return sum(len(slot.queue) for slot in list(engine.downloader.slots.values()))


def read_queues(crawler: Any) -> QueueReading:
    """Read scheduler length, in-flight downloads, slot queues and scraper active bytes."""
    engine = _engine(crawler)
    if engine is None:
        return QueueReading()
    scheduler = _scheduler(engine)
    scraper_slot = getattr(getattr(engine, "scraper", None), "slot", None)
    return QueueReading(
        scheduled=_attempt(_in_process_len, scheduler) if scheduler is not None else None,
        disk_scheduled=_attempt(_disk_len, scheduler) if scheduler is not None else None,
        inflight=_attempt(lambda: len(engine.downloader.active)),
        slot_queued=_attempt(_slot_queued, engine),
        active_size_bytes=getattr(scraper_slot, "active_size", None),
        backout=_attempt(scraper_slot.needs_backout) if scraper_slot is not None else None,
    )


def is_drained(crawler: Any, parked: int = 0) -> bool:
    """Return whether no download is in flight and the scraper holds no response or item.

    Downloads the engine started for components (media pipelines' ``engine.download_async``) count too:
    they are in the engine slot's ``inprogress`` from before they reach the downloader until their
    response (or a redirect's final one) is handed back. ``parked`` downloads (a browser crawl's, waiting for a
    page slot the checkpoint holds) hold no page and no response: they do not keep the crawl from draining.
    """
    engine = _engine(crawler)
    if engine is None:
        return True
    scraper_slot = getattr(getattr(engine, "scraper", None), "slot", None)
    inflight = len(engine.downloader.active)
    inprogress = _attempt(lambda: len(engine._slot.inprogress)) or 0
    return inflight <= parked and inprogress <= parked and (scraper_slot is None or scraper_slot.is_idle())


def scraper_busy(crawler: Any) -> bool:
    """Whether the scraper holds a response or an item (its callbacks, the item pipelines): a drain's cheap first test."""
    engine = _engine(crawler)
    scraper_slot = getattr(getattr(engine, "scraper", None), "slot", None)
    return bool(scraper_slot is not None and not scraper_slot.is_idle())


def callbacks_running(crawler: Any) -> dict[str, int]:
    """The responses in the scraper (queued for or in their callbacks), counted by callback (``Class.method``)."""
    engine = _engine(crawler)
    scraper = getattr(engine, "scraper", None)
    scraper_slot = getattr(scraper, "slot", None)
    spider = getattr(crawler, "spider", None)
    counts: dict[str, int] = {}
    requests = list(getattr(scraper_slot, "active", ()) or ()) + [entry[1] for entry in getattr(scraper_slot, "queue", ())]
    for request in requests:
        callback = getattr(request, "callback", None) or getattr(spider, "parse", None)
        func = getattr(callback, "__func__", callback)
        name = str(getattr(func, "__qualname__", None) or getattr(callback, "__name__", "") or "?")
        counts[name] = counts.get(name, 0) + 1
    return counts


def pause_engine(crawler: Any) -> bool:
    """Stop the engine from starting new downloads; return whether it could be paused."""
    engine = _engine(crawler)
    if engine is None or not getattr(engine, "running", False):
        return False
    engine.pause()
    return True


#: Loop iterations a staged resume waits at most for its first step's downloads to start (:func:`resume_engine`).
RESUME_STEP_POLLS = 10


def resume_engine(crawler: Any, call_later: Callable[..., Any] | None = None) -> None:
    """Undo :func:`pause_engine` and wake the engine's scheduling loop; with ``call_later`` (the reactor's), in two steps.

    A drained checkpoint leaves the downloader idle. On the asyncio reactor a download slot counts a request as
    transferring only once its download task starts, a loop iteration after the slot hands it out, so an engine that
    refills an idle downloader in one go starts CONCURRENT_REQUESTS downloads in one slot, past its concurrency
    (CONCURRENT_REQUESTS_PER_DOMAIN): 16 at once instead of 8, new connections opened and old ones dropped, at every
    checkpoint (tests/test_resume.py). Scrapy's own crawl meets that once, at its start. The two steps: the engine
    fills the downloader up to one slot's concurrency, then up to CONCURRENT_REQUESTS once those downloads started
    (or RESUME_STEP_POLLS iterations passed). A total concurrency set meanwhile (the governor's) stands.
    """
    engine = _engine(crawler)
    if engine is None:
        return
    engine.unpause()
    slot = getattr(engine, "_slot", None)
    if slot is None:
        return
    downloader = engine.downloader
    total = getattr(downloader, "total_concurrency", 0)
    step = _attempt(_slot_concurrency, downloader)
    if call_later is None or not isinstance(total, int) or not step or not 0 < step < total:
        slot.nextcall.schedule()
        return
    downloader.total_concurrency = step

    def second_step(polls: int) -> None:
        if downloader.total_concurrency != step:  # set meanwhile (the governor): theirs stands
            return
        if polls and not _attempt(_downloads_started, downloader):
            call_later(0, second_step, polls - 1)
            return
        downloader.total_concurrency = total
        slot.nextcall.schedule()

    slot.nextcall.schedule()
    call_later(0, second_step, RESUME_STEP_POLLS)


def _slot_concurrency(downloader: Any) -> int:
    """The least concurrency of the downloader's slots, a new slot's included."""
    default = int(getattr(downloader, "ip_concurrency", 0) or downloader.domain_concurrency)
    return min([default, *(int(s.concurrency) for s in downloader.slots.values())])


def _downloads_started(downloader: Any) -> bool:
    """Whether every request in the downloader is transferring or queued in its slot (none handed out, not started)."""
    placed = sum(len(s.transferring) + len(s.queue) for s in downloader.slots.values())
    return bool(downloader.active) and placed >= len(downloader.active)


class _FinishedSet(set[Any]):
    """The engine's set of requests in progress, calling back when one leaves it (its callback and output are done)."""

    __slots__ = ("on_finished",)

    def __init__(self, elements: Any, on_finished: Any) -> None:
        super().__init__(elements)
        self.on_finished = on_finished

    def remove(self, element: Any) -> None:
        super().remove(element)
        self.on_finished(element)

    def discard(self, element: Any) -> None:
        if element in self:
            self.remove(element)


def watch_finished_requests(crawler: Any, on_finished: Any) -> bool:
    """Call ``on_finished(request)`` as each request leaves the engine's in-progress set; return whether it could.

    Scrapy removes a request from ``engine._slot.inprogress`` once it is downloaded and its callback's
    output handled (requests scheduled, items through the pipelines). Call after ``spider_opened``.
    """
    slot: Any = getattr(_engine(crawler), "_slot", None)
    current = getattr(slot, "inprogress", None)
    if not isinstance(current, set):
        return False
    slot.inprogress = _FinishedSet(current, on_finished)
    return True


def is_idle(crawler: Any) -> bool:
    """Whether the engine has nothing left to do: no start request, download, callback or scheduled request."""
    engine = _engine(crawler)
    try:
        return bool(engine is not None and engine.spider is not None and engine.spider_is_idle())
    except Exception:
        return False


@dataclass(frozen=True, slots=True)
class Epoch:
    """A moment, in both clocks trackref has used (monotonic_ns in Scrapy 2.19, time() before)."""

    monotonic_ns: int
    wall_seconds: float

    @classmethod
    def now(cls) -> Epoch:
        """This moment."""
        return cls(time.monotonic_ns(), time.time())

    def precedes(self, stamp: float) -> bool:
        """Whether a trackref creation stamp is at or after this moment."""
        return stamp >= (self.monotonic_ns if isinstance(stamp, int) else self.wall_seconds)


def _tracked(since: Epoch | None) -> list[tuple[type, list[tuple[Any, float]]]]:
    """Live tracked objects by class, created at or after ``since`` (all if ``None``)."""
    from scrapy.utils import trackref

    found = []
    for cls, refs in list(trackref.live_refs.items()):
        objects = [(obj, stamp) for obj, stamp in list(refs.items()) if since is None or since.precedes(stamp)]
        if objects:
            found.append((cls, objects))
    return found


def close_spider(crawler: Any, reason: str) -> bool:
    """Ask the engine to close the spider now (as CLOSESPIDER_* does); return whether it could."""
    engine = _engine(crawler)
    if engine is None or getattr(engine, "spider", None) is None:
        return False
    if hasattr(engine, "close_spider_async"):  # Scrapy 2.14+
        from scrapy.utils.defer import deferred_from_coro

        deferred_from_coro(engine.close_spider_async(reason=reason))
    else:  # pragma: no cover - Scrapy 2.13
        engine.close_spider(engine.spider, reason)
    return True


def live_ref_counts(since: Epoch | None = None) -> dict[str, int]:
    """Live Scrapy objects (Request, Response, Selector, Item...) by class, created since ``since``."""
    return {cls.__name__: len(objects) for cls, objects in _tracked(since)}


def live_object_samples(since: Epoch | None = None, limit: int = 3) -> list[tuple[str, int, list[Any]]]:
    """Per tracked Scrapy class (spiders excepted), most numerous first: count, newest and oldest instance."""
    from scrapy import Spider

    found = []
    for cls, objects in _tracked(since):
        if issubclass(cls, Spider):
            continue
        ordered = sorted(objects, key=lambda pair: pair[1])
        picks = [ordered[-1][0]] if len(ordered) == 1 else [ordered[-1][0], ordered[0][0]]
        found.append((cls.__name__, len(objects), picks))
    found.sort(key=lambda entry: entry[1], reverse=True)
    return found[:limit]


# -- scrapy-playwright: its download handler's contexts and pages (read defensively) ----------


def loaded_handlers(crawler: Any) -> dict[str, Any] | None:
    """The download handlers the crawl's downloader loaded so far, by scheme (None if Scrapy's internals moved)."""
    downloader = getattr(_engine(crawler), "downloader", None)
    loaded = getattr(getattr(downloader, "handlers", None), "_handlers", None)
    return loaded if isinstance(loaded, dict) else None


def playwright_handlers(crawler: Any) -> list[Any]:
    """Return the crawl's loaded scrapy-playwright download handlers (empty without them)."""
    loaded = loaded_handlers(crawler) or {}
    found: list[Any] = []
    for handler in list(loaded.values()):
        if hasattr(handler, "context_wrappers") and all(handler is not h for h in found):
            found.append(handler)
    return found


@dataclass(frozen=True, slots=True)
class PageReading:
    """Open browser contexts and pages; ``full_contexts`` have no free page slot left; ``waiting`` downloads wait
    for a page slot (PLAYWRIGHT_MAX_PAGES_PER_CONTEXT) or a context (PLAYWRIGHT_MAX_CONTEXTS)."""

    contexts: int = 0
    pages: int = 0
    full_contexts: int = 0
    waiting: int = 0


#: The futures a checkpoint's page gate queued to hold page slots (:class:`pytest_crawlmem.browser.slots.PageGate`):
#: never a download's, never failed by :func:`release_slot_waiters`.
_HOLDS: weakref.WeakSet[Any] = weakref.WeakSet()


def _waiters(semaphore: Any) -> list[Any]:
    """The futures of the downloads waiting on an ``asyncio.Semaphore`` (its private ``_waiters``; empty if it moved)."""
    return [f for f in list(getattr(semaphore, "_waiters", None) or ()) if not f.done() and f not in _HOLDS]


def parked_downloads(crawler: Any) -> int:
    """Downloads waiting for a page slot or a context of scrapy-playwright (they hold no page)."""
    reading = read_pages(crawler)
    return reading.waiting if reading is not None else 0


def _slot_semaphores(handler: Any) -> list[Any]:
    semaphores = [wrapper.semaphore for wrapper in list(handler.context_wrappers.values())]
    if hasattr(handler, "context_semaphore"):
        semaphores.append(handler.context_semaphore)
    return semaphores


def _page_count(context: Any) -> int:
    """A Playwright context's open pages, counted on its implementation object when it has one (``context.pages``
    builds a list of API wrappers: a sixth of the sampler's CPU on a browser crawl in production, per cProfile)."""
    impl_pages = getattr(getattr(context, "_impl_obj", None), "_pages", None)  # a dict since Playwright 1.5x
    return len(impl_pages) if isinstance(impl_pages, (list, dict)) else len(context.pages)


def _read_pages(handlers: list[Any]) -> PageReading:
    contexts = pages = full = waiting = 0
    for handler in handlers:
        for wrapper in list(handler.context_wrappers.values()):
            contexts += 1
            pages += _page_count(wrapper.context)
            full += bool(wrapper.semaphore.locked())
        waiting += sum(len(_waiters(semaphore)) for semaphore in _slot_semaphores(handler))
    return PageReading(contexts, pages, full, waiting)


class SlotWaitReleased(Exception):
    """A download waiting for a browser page slot was failed by crawlmem: its crawl is being stopped."""


def release_slot_waiters(crawler: Any) -> int:
    """Fail the downloads waiting for a page slot or a context of scrapy-playwright; return how many (reactor thread).

    A waiter of a context that was closed is never woken (scrapy-playwright releases the slot of the context now
    under that name). Its wait is failed with :class:`SlotWaitReleased`, an ``Exception``: the download fails, its
    errback runs and it leaves the engine, so a closing spider can close. (Cancelling it would raise
    ``CancelledError``, which Scrapy's downloader does not catch: the request would never leave.)
    """
    released = 0
    for handler in _attempt(playwright_handlers, crawler) or []:
        for future in _attempt(lambda h=handler: [f for s in _slot_semaphores(h) for f in _waiters(s)]) or []:
            future.set_exception(SlotWaitReleased("the crawl is stopping: crawlmem failed this wait for a page slot"))
            released += 1
    return released


def shorten_download_waits(crawler: Any, seconds: float) -> int:
    """Make scrapy-playwright wait at most ``seconds`` for a download after an aborted navigation; return for how many
    handlers (reactor thread). A page closed mid-navigation fails with ``net::ERR_ABORTED``, which scrapy-playwright
    takes for a download starting and waits for it ``PLAYWRIGHT_DOWNLOAD_TIMEOUT`` (30 s by default)."""
    shortened = 0
    for handler in _attempt(playwright_handlers, crawler) or []:
        config = getattr(handler, "config", None)
        if config is not None and hasattr(config, "download_timeout_secs"):
            config.download_timeout_secs = min(config.download_timeout_secs, seconds)
            shortened += 1
    return shortened


def close_browser_connection(crawler: Any) -> int:
    """Close Playwright's connection to the crawl's browser, failing every call still waiting for an answer; return
    how many were (reactor thread). The last resort of a stop: a call to a killed browser may never be answered."""
    failed = 0
    for handler in _attempt(playwright_handlers, crawler) or []:
        # the browser object is gone once it disconnected (PLAYWRIGHT_RESTART_DISCONNECTED_BROWSER): its Playwright's
        # connection is the same one
        owner = getattr(handler, "browser", None) or getattr(getattr(handler, "browser_provider", None), "playwright", None)
        connection = getattr(getattr(owner, "_impl_obj", owner), "_connection", None)  # behind the async API's wrapper
        if connection is None or not hasattr(connection, "close"):
            continue
        failed += len(getattr(connection, "_callbacks", None) or {})
        _attempt(connection.close, "crawlmem stopped the crawl: the browser no longer answered")
    return failed


def browser_contexts(crawler: Any) -> list[Any]:
    """Every open Playwright browser context of the crawl's scrapy-playwright handlers (reactor thread)."""
    contexts: list[Any] = []
    for handler in _attempt(playwright_handlers, crawler) or []:
        contexts.extend(wrapper.context for wrapper in list(handler.context_wrappers.values()))
    return contexts


def crawl_ended(crawler: Any) -> bool:
    """Whether the crawl has ended: its engine stopped and let go of its caller (``True`` once the crawler is gone)."""
    engine = _engine(crawler) if crawler is not None else None
    if engine is None:
        return True
    closewait = getattr(engine, "_closewait", None)
    return bool(getattr(closewait, "called", False))


def read_pages(crawler: Any) -> PageReading | None:
    """Count the open contexts and pages of scrapy-playwright (``None`` if its internals moved)."""
    handlers = _attempt(playwright_handlers, crawler)
    if not handlers:
        return None
    reading: PageReading | None = _attempt(_read_pages, handlers)
    return reading


def open_pages(crawler: Any) -> list[Any]:
    """Every open Playwright page of the crawl's scrapy-playwright contexts (reactor thread)."""
    pages: list[Any] = []
    for handler in _attempt(playwright_handlers, crawler) or []:
        for wrapper in list(handler.context_wrappers.values()):
            pages.extend(page for page in wrapper.context.pages if not page.is_closed())
    return pages


# -- JOBDIR on disk, and media pipelines' caches (read defensively) ---------------------------


def read_tree_bytes(path: str) -> int | None:
    """Sum the sizes of the files under ``path`` (apparent sizes); ``None`` if it is not a directory.

    Files and directories that vanish while it walks (Scrapy rewrites its queues) are skipped.
    """
    if not os.path.isdir(path):
        return None
    total = 0
    pending = [path]
    while pending:
        try:
            with os.scandir(pending.pop()) as entries:
                for entry in entries:
                    try:
                        if entry.is_dir(follow_symlinks=False):
                            pending.append(entry.path)
                        elif entry.is_file(follow_symlinks=False):
                            total += entry.stat(follow_symlinks=False).st_size
                    except OSError:
                        continue
        except OSError:
            continue
    return total


def media_pipelines(crawler: Any) -> list[Any]:
    """The crawl's item pipelines that are MediaPipelines (FilesPipeline, ImagesPipeline, subclasses)."""
    try:
        from scrapy.pipelines.media import MediaPipeline
    except ImportError:  # pragma: no cover - Pillow-free installs still have it; a future Scrapy may move it
        return []
    engine = _engine(crawler)
    itemproc = getattr(getattr(engine, "scraper", None), "itemproc", None)
    return [p for p in list(getattr(itemproc, "middlewares", None) or ()) if isinstance(p, MediaPipeline)]


def _media_cache(pipeline: Any) -> Any:
    """A media pipeline's per-spider cache: fingerprint -> FileInfo or Failure (``SpiderInfo.downloaded``)."""
    return getattr(getattr(pipeline, "spiderinfo", None), "downloaded", None)


def media_downloads(crawler: Any, pipelines: list[Any]) -> list[tuple[str, str, int]]:
    """The media pipelines' downloads in flight or waiting in a download slot: (pipeline class, URL, retries so far),
    told by their fingerprints in each pipeline's ``spiderinfo.downloading`` (reactor thread; [] if Scrapy moved it)."""
    engine = _engine(crawler)
    if engine is None or not pipelines:
        return []

    def read() -> list[tuple[str, str, int]]:
        downloader = engine.downloader
        requests = list(downloader.active) + [r for s in list(downloader.slots.values()) for r, _ in list(s.queue)]
        found = []
        for pipeline in pipelines:
            downloading = getattr(getattr(pipeline, "spiderinfo", None), "downloading", None) or set()
            fingerprint = getattr(pipeline, "_fingerprinter", None)
            if not downloading or fingerprint is None:
                continue
            for request in requests:
                if fingerprint.fingerprint(request) in downloading:
                    found.append((type(pipeline).__name__, request.url, int(request.meta.get("retry_times", 0))))
        return found

    return _attempt(read) or []


def read_media_cached(pipelines: list[Any]) -> int | None:
    """Entries in the media pipelines' caches (``len`` only: safe from the sampler thread); ``None`` without one."""
    if not pipelines:
        return None
    caches = [_media_cache(p) for p in pipelines]
    return sum(_attempt(len, c) or 0 for c in caches if c is not None)


def media_cache_failures(pipelines: list[Any]) -> list[tuple[str, Any]]:
    """The failures cached by each media pipeline, as (pipeline class name, Failure) pairs (reactor thread)."""
    from twisted.python.failure import Failure

    found: list[tuple[str, Any]] = []
    for pipeline in pipelines:
        cache = _media_cache(pipeline)
        values = _attempt(lambda c=cache: list(c.values())) if cache is not None else None
        found.extend((type(pipeline).__name__, v) for v in values or () if isinstance(v, Failure))
    return found


def objects_kept_by_failure(failure: Any) -> list[tuple[Any, str]]:
    """Scrapy objects (requests, responses) a Failure keeps alive through its exceptions' tracebacks, with the route.

    Follows the exception, its ``__context__`` and ``__cause__`` chain, and the local variables of every
    frame in their tracebacks: where Scrapy 2.19's media pipelines keep a failed download's request
    and response (the cache clears the outer traceback, not the one of the exception it wraps).
    """
    from scrapy import Spider
    from scrapy.utils.trackref import object_ref

    found: list[tuple[Any, str]] = []
    seen: set[int] = set()
    pending: list[tuple[Any, str]] = [(getattr(failure, "value", None), "Failure .value")]
    visited: set[int] = set()
    while pending:
        exc, route = pending.pop()
        if not isinstance(exc, BaseException) or id(exc) in visited:
            continue
        visited.add(id(exc))
        route = f"{route} -> {type(exc).__name__}"
        tb = exc.__traceback__
        while tb is not None:
            frame = tb.tb_frame
            for name, value in list(frame.f_locals.items()):
                if isinstance(value, object_ref) and not isinstance(value, Spider) and id(value) not in seen:
                    seen.add(id(value))
                    found.append((value, f"{route} .__traceback__ -> frame {frame.f_code.co_name} .{name}"))
            tb = tb.tb_next
        pending.append((exc.__cause__, f"{route} .__cause__"))
        pending.append((exc.__context__, f"{route} .__context__"))
    return found


def crawl_roots(crawler: Any) -> dict[str, Any]:
    """The spider and the crawl's components (pipelines, middlewares, extensions), by a name for messages.

    The plugin's own components are left out. Read at a drained checkpoint (reactor thread).
    """
    engine = _engine(crawler)
    roots: dict[str, Any] = {}
    spider = getattr(crawler, "spider", None)
    if spider is not None:
        roots["spider"] = spider
    scraper = getattr(engine, "scraper", None)
    managers = (
        ("pipeline", getattr(scraper, "itemproc", None)),
        ("spider middleware", getattr(scraper, "spidermw", None)),
        ("downloader middleware", getattr(getattr(engine, "downloader", None), "middleware", None)),
        ("extension", getattr(crawler, "extensions", None)),
    )
    for kind, manager in managers:
        for component in list(getattr(manager, "middlewares", None) or ()):
            if not type(component).__module__.startswith("pytest_crawlmem"):
                roots.setdefault(f"{kind} {type(component).__name__}", component)
    return roots
