"""The memory governor against no governor, Scrapy's MemoryUsage and a Crawlee-style rule, side by side.

    nice -n 10 python benchmarks/governor.py [--quick] [--out benchmarks/results/governor.json]

Workloads (each crawl in a fresh process, a plain ``CrawlerProcess`` as ``scrapy crawl`` runs it, against one
fixture site):
- ``large``: 200 pages of 2 MiB (``/large/<id>?kb=2048``) at ``CONCURRENT_REQUESTS=64`` (64 per domain);
- ``catalog``: 20,000 products discovered up front by ``start()``, each request carrying its 16 KiB listing card
  in ``cb_kwargs`` (the backlog is what grows), ``CONCURRENT_REQUESTS=16``;
- ``slow``: 200 pages of 2 MiB at 64 through an item pipeline that waits 100 ms an item;
- ``browser``: 200 scrapy-playwright pages at ``CONCURRENT_REQUESTS=4`` on Debian's Chromium, each keeping 4 MiB in
  its context's IndexedDB (``/js/<id>?mode=store&kb=4096``: an incognito context holds it in memory after the page
  closes), all in the default context. Its peak is the browser tree's PSS (a sampler thread in the crawl process:
  PSS every second, RSS-estimated between; its CPU is taken out of the crawl's), and its budget is 768 MiB: the tree's
  floor (Playwright's driver, Chromium and a renderer per open page; ``benchmarks/browser_floor.py``) is 330-500 MiB
  with one page and 426-553 MiB with four on this machine, over 300 MiB before a page is stored
  (``--browser-budget-mib`` sets another). Only ``ungoverned``, ``governed`` and ``governed-rotate`` (the browser
  lever rotating contexts only, without its concurrency cap) run: MemoryUsage and the Crawlee-style rule read the
  crawl process, which a browser crawl's memory is not in.

- ``json``: 30 JSON documents of 5-20 MiB (``/json/<id>?kb=K``) at 32 in flight, each parsed with
  ``json.loads(response.text)`` in its callback;
- ``media``: 120 items whose file (8-16 MiB, ``/media/<id>.jpg``) the FilesPipeline downloads and stores, 32 per
  domain: its downloads go past the scheduler (``engine.download_async``);
- ``pipeline``: 120 small pages of 50 items, each carrying a 128 KiB attachment, through an async item pipeline that
  "uploads" each for 5 s, at 16;
- ``mix``: 200 pages of 2 MiB whose items carry the page's HTML, through a pipeline that waits 1 s an item, at 48
  (a 400 MiB budget);
- ``leak``: 600 pages of 512 KiB whose spider keeps every body (a real leak: nothing can hold it; the governor must
  close under the budget and count what it leaves);
- ``fits``: 2,000 small product pages at 16 (a crawl that fits: the governor must not slow it).

Modes, all at a 300 MiB budget (or the workload's own): ``ungoverned``; ``governed`` (``CRAWLMEM_BUDGET="300 MiB"`` with the
GovernorAddon); ``memusage`` (Scrapy's ``MEMUSAGE_LIMIT_MB=300``, checked every second instead of its default
60 s, which a crawl of seconds never reaches); ``crawlee`` (Crawlee's AutoscaledPool rule, written below: a
memory snapshot a second, and every 10 s concurrency -5% when over 20% of the last 30 s of snapshots were over
90% of the budget, +5% otherwise, up to CONCURRENT_REQUESTS); ``static-N``, CONCURRENT_REQUESTS=N without a
governor; and ``release-N``, CONCURRENT_REQUESTS=N with only the governor's StartGate middleware (it frees each
response's parse tree when its callback is done), to find the best static setting that fits the budget.

Each mode runs ``--repeat`` times (the governed one ``--governed-repeat``, doing nothing and the static settings
``--static-repeat``), in rounds: a load that drifts meets every mode. Before its rounds each workload is crawled once
ungoverned and not counted (``--no-warmup`` skips it): the first two crawls of an invocation ran 20-25% slower than
the same modes later, whatever the mode. The best static setting is the fastest, by the median of its runs' items a
second, of those whose every run fits the budget with every item.

The saved file (``--out``) holds the machine (CPUs, load average before and after, commit), a summary per workload and
mode (runs, median and range of the peak, items, items a second, the governor's CPU share; the best static setting
that fits and the governed throughput over it) and every run.

Figures per run: peak RSS (VmHWM of the crawl's process, and ``ru_maxrss`` of the child read by the parent with
``os.wait4``: from outside the crawl), items scraped, items lost (expected minus scraped),
items a second, the finish reason, and the governor's own CPU as a share of the crawl's CPU.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, ClassVar

import scrapy

ROOT = Path(__file__).resolve().parent.parent
BUDGET_MIB = 300
WORKLOADS: dict[str, dict[str, Any]] = {
    "large": {"expected": 200, "concurrency": 64},
    "catalog": {"expected": 20_000, "concurrency": 16},
    "slow": {"expected": 200, "concurrency": 64},
    "browser": {"expected": 200, "concurrency": 4, "budget_mib": 768,
                "modes": ("ungoverned", "governed", "governed-rotate")},
    "json": {"expected": 30, "concurrency": 32},
    "media": {"expected": 120, "concurrency": 32},
    "pipeline": {"expected": 6000, "concurrency": 16},
    "mix": {"expected": 200, "concurrency": 48, "budget_mib": 400},
    "leak": {"expected": 600, "concurrency": 16},
    "fits": {"expected": 2000, "concurrency": 16},
}
NEW_WORKLOADS = ("json", "media", "pipeline", "mix", "leak", "fits")
#: Plain Scrapy at CONCURRENT_REQUESTS=N (``static-N``), and with only the governor's parse-tree release (``release-N``:
#: the StartGate middleware, no budget): the static settings a crawl_sweep would choose among.
STATIC = {"large": (8,), "slow": (8,), "catalog": (), "browser": (), "json": (4, 8, 16), "media": (4, 8, 16),
          "pipeline": (2, 4, 8), "mix": (8, 16, 24), "leak": (), "fits": ()}
RELEASE = {"large": (16, 32, 48), "slow": (16, 32, 48), "catalog": (), "browser": (), **{name: () for name in NEW_WORKLOADS}}
#: The environment variable through which ``--browser-budget-mib`` reaches the crawl processes.
BROWSER_BUDGET_ENV = "GOVERNOR_BENCH_BROWSER_BUDGET_MIB"
#: KiB each browser page keeps in IndexedDB.
BROWSER_STORE_KB = 4096


def budget_mib(workload: str) -> int:
    """The budget of a workload's runs (the browser's covers its tree's floor; ``--browser-budget-mib`` sets it)."""
    if workload == "browser" and os.environ.get(BROWSER_BUDGET_ENV):
        return int(os.environ[BROWSER_BUDGET_ENV])
    return int(WORKLOADS[workload].get("budget_mib", BUDGET_MIB))


class Large(scrapy.Spider):
    """200 pages of 2 MiB; an item per page, with the page's title."""

    name = "large"
    base = ""
    pages = 200

    async def start(self) -> Any:
        for page in range(self.pages):
            yield scrapy.Request(f"{self.base}/large/{page}?kb=2048", cb_kwargs={"page": page})

    def parse(self, response: Any, page: int) -> Any:
        yield {"id": page, "title": response.css("title::text").get(), "bytes": len(response.body)}


class Catalog(scrapy.Spider):
    """20,000 products known up front; each request carries its listing card (16 KiB of text)."""

    name = "catalog"
    base = ""
    products = 20_000

    async def start(self) -> Any:
        for pid in range(1, self.products + 1):
            card = f"<li data-id='{pid}'>" + "c" * 16 * 1024 + "</li>"
            yield scrapy.Request(f"{self.base}/catalog/product/{pid}", cb_kwargs={"card": card})

    def parse(self, response: Any, card: str) -> Any:
        yield {"id": int(response.url.rsplit("/", 1)[1]), "name": response.css("h1.name::text").get(),
               "card_bytes": len(card)}


class Stores(scrapy.Spider):
    """200 browser pages that each keep BROWSER_STORE_KB KiB in the context's IndexedDB, then render 20 products."""

    name = "stores"
    base = ""
    pages = 200

    async def start(self) -> Any:
        from scrapy_playwright.page import PageMethod

        for page in range(self.pages):
            yield scrapy.Request(f"{self.base}/js/{page}?mode=store&kb={BROWSER_STORE_KB}", cb_kwargs={"page": page},
                                 meta={"playwright": True, "playwright_page_methods": [
                                     PageMethod("wait_for_selector", "body[data-rendered]")]})

    def parse(self, response: Any, page: int) -> Any:
        yield {"id": page, "products": len(response.css("div.product"))}


class Documents(scrapy.Spider):
    """30 JSON documents of 5-20 MiB, each parsed whole with json.loads in the callback."""

    name = "documents"
    base = ""

    async def start(self) -> Any:
        for doc in range(30):
            kb = 5120 + (doc * 2719) % (15 * 1024)
            yield scrapy.Request(f"{self.base}/json/{doc}?kb={kb}", cb_kwargs={"doc": doc})

    def parse(self, response: Any, doc: int) -> Any:
        document = json.loads(response.text)
        yield {"id": doc, "records": len(document["records"])}


class Files(scrapy.Spider):
    """120 items whose file of 8-16 MiB the FilesPipeline downloads and stores."""

    name = "files"
    base = ""

    async def start(self) -> Any:
        yield scrapy.Request(f"{self.base}/catalog/product/1")

    def parse(self, response: Any) -> Any:
        for file_id in range(120):
            kb = 8192 + (file_id * 1361) % 8192
            yield {"id": file_id, "file_urls": [f"{self.base}/media/{file_id}.jpg?kb={kb}"]}


class Attachments(scrapy.Spider):
    """120 small pages of 50 items, each carrying a 128 KiB attachment."""

    name = "attachments"
    base = ""

    async def start(self) -> Any:
        for page in range(120):
            yield scrapy.Request(f"{self.base}/catalog/product/{page + 1}", cb_kwargs={"page": page})

    def parse(self, response: Any, page: int) -> Any:
        for n in range(50):
            yield {"id": page * 50 + n, "attachment": bytes([n]) * (128 * 1024)}


class Carried(Large):
    """200 pages of 2 MiB whose items carry the page's HTML."""

    name = "carried"

    def parse(self, response: Any, page: int) -> Any:
        yield {"id": page, "title": response.css("title::text").get(), "html": response.text}


class Keeper(Large):
    """600 pages of 512 KiB; the spider keeps every body (a leak)."""

    name = "keeper"
    kept: ClassVar[list[bytes]] = []

    async def start(self) -> Any:
        for page in range(600):
            yield scrapy.Request(f"{self.base}/large/{page}?kb=512", cb_kwargs={"page": page})

    def parse(self, response: Any, page: int) -> Any:
        self.kept.append(response.body)
        yield {"id": page}


class Fits(scrapy.Spider):
    """2,000 small product pages."""

    name = "fits"
    base = ""

    async def start(self) -> Any:
        for pid in range(1, 2001):
            yield scrapy.Request(f"{self.base}/catalog/product/{pid}")

    def parse(self, response: Any) -> Any:
        yield {"id": int(response.url.rsplit("/", 1)[1]), "name": response.css("h1.name::text").get()}


class Upload:
    """Uploads each item's attachment for 5 s (waits on the reactor), then drops it from the item."""

    async def process_item(self, item: Any) -> Any:
        from scrapy.utils.defer import deferred_to_future
        from twisted.internet import reactor
        from twisted.internet.task import deferLater

        await deferred_to_future(deferLater(reactor, 5.0, lambda: None))
        item.pop("attachment", None)
        return item


class SlowStore:
    """Waits 1 s an item on the reactor (a slow store of the page's HTML)."""

    async def process_item(self, item: Any) -> Any:
        from scrapy.utils.defer import deferred_to_future
        from twisted.internet import reactor
        from twisted.internet.task import deferLater

        await deferred_to_future(deferLater(reactor, 1.0, lambda: None))
        item.pop("html", None)
        return item


class TreeWatch:
    """A thread reading the browser tree every 0.25 s (PSS every second): its peak, and the CPU the readings took."""

    def __init__(self) -> None:
        import threading

        from pytest_crawlmem.browser.tree import TreeSampler

        self.sampler = TreeSampler(None, detail_seconds=1.0)
        self.peak_read = 0  # the highest PSS read
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, name="tree-watch", daemon=True)
        self.thread.start()

    def run(self) -> None:
        while not self.stop.wait(0.25):
            reading = self.sampler.sample()
            if reading.pss_bytes is not None:
                self.peak_read = max(self.peak_read, reading.pss_bytes)

    def close(self) -> None:
        self.stop.set()
        self.thread.join()


class SlowPipeline:
    """Waits 100 ms an item on the reactor (a slow database)."""

    async def process_item(self, item: Any) -> Any:
        from scrapy.utils.defer import deferred_to_future
        from twisted.internet import reactor
        from twisted.internet.task import deferLater

        await deferred_to_future(deferLater(reactor, 0.1, lambda: None))
        return item


class CrawleeRule:
    """Crawlee's AutoscaledPool rule as a Scrapy extension: 5% steps every 10 s at a 90% threshold."""

    def __init__(self, crawler: Any, budget_bytes: int) -> None:
        self.crawler = crawler
        self.budget_bytes = budget_bytes
        self.max_concurrency = crawler.settings.getint("CONCURRENT_REQUESTS")
        self.desired = float(self.max_concurrency)
        self.snapshots: list[tuple[float, bool]] = []
        self.steps = 0
        self.tasks: list[Any] = []

    @classmethod
    def from_crawler(cls, crawler: Any) -> CrawleeRule:
        from scrapy import signals

        rule = cls(crawler, crawler.settings.getint("CRAWLEE_BUDGET_MB") * 2**20)
        crawler.signals.connect(rule.spider_opened, signal=signals.spider_opened)
        crawler.signals.connect(rule.spider_closed, signal=signals.spider_closed)
        return rule

    def spider_opened(self, spider: Any) -> None:
        from twisted.internet import task

        self.tasks = [task.LoopingCall(self.snapshot), task.LoopingCall(self.autoscale)]
        self.tasks[0].start(1.0, now=True)
        self.tasks[1].start(10.0, now=False)

    def spider_closed(self, spider: Any) -> None:
        for looping in self.tasks:
            if looping.running:
                looping.stop()
        self.crawler.stats.set_value("crawlee/steps", self.steps)
        self.crawler.stats.set_value("crawlee/concurrency", int(self.desired))

    def snapshot(self) -> None:
        now = time.monotonic()
        self.snapshots.append((now, rss_bytes() > 0.9 * self.budget_bytes))
        self.snapshots = [(t, over) for t, over in self.snapshots if now - t <= 30.0]

    def autoscale(self) -> None:
        overloaded = sum(over for _, over in self.snapshots) > 0.2 * len(self.snapshots)
        if overloaded:
            self.desired = max(1.0, self.desired * 0.95)
        else:
            self.desired = min(float(self.max_concurrency), self.desired * 1.05)
        self.steps += 1
        self.crawler.engine.downloader.total_concurrency = max(1, int(self.desired))


def rss_bytes() -> int:
    """RSS of this process now."""
    with open("/proc/self/statm", "rb") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def peak_rss_bytes() -> int:
    """VmHWM: this process's RSS peak."""
    with open("/proc/self/status", "rb") as status:
        for line in status:
            if line.startswith(b"VmHWM:"):
                return int(line.split()[1]) * 1024
    return 0


def mode_settings(workload: str, mode: str) -> dict[str, Any]:
    """The settings of one (workload, mode) run."""
    concurrency = WORKLOADS[workload]["concurrency"]
    if mode.startswith(("static-", "release-")):
        concurrency = int(mode.split("-", 1)[1])
    settings: dict[str, Any] = {
        "LOG_LEVEL": "INFO", "ROBOTSTXT_OBEY": False, "COOKIES_ENABLED": False, "TELNETCONSOLE_ENABLED": False,
        "MEMUSAGE_ENABLED": False, "CONCURRENT_REQUESTS": concurrency, "CONCURRENT_REQUESTS_PER_DOMAIN": concurrency,
        "LOGSTATS_INTERVAL": 0,
    }
    if workload == "slow":
        settings["ITEM_PIPELINES"] = {"__main__.SlowPipeline": 100}
    if workload == "media":
        settings.update({"ITEM_PIPELINES": {"scrapy.pipelines.files.FilesPipeline": 1}, "DOWNLOAD_MAXSIZE": 0,
                         "FILES_STORE": tempfile.mkdtemp(prefix="crawlmem-governor-files-")})
    if workload == "pipeline":
        settings["ITEM_PIPELINES"] = {"__main__.Upload": 100}
    if workload == "mix":
        settings["ITEM_PIPELINES"] = {"__main__.SlowStore": 100}
    if workload == "browser":
        from pytest_crawlmem.browser.settings import playwright_settings

        settings = playwright_settings(settings)
    if mode in ("governed", "governed-rotate"):
        settings.update({"CRAWLMEM_BUDGET": f"{budget_mib(workload)} MiB",
                         "ADDONS": {"pytest_crawlmem.governor.GovernorAddon": 0}})
    elif mode.startswith("release-"):
        settings["SPIDER_MIDDLEWARES"] = {"pytest_crawlmem.governor.StartGate": 1}
    elif mode == "memusage":
        settings.update({"MEMUSAGE_ENABLED": True, "MEMUSAGE_LIMIT_MB": budget_mib(workload),
                         "MEMUSAGE_CHECK_INTERVAL_SECONDS": 1})
    elif mode == "crawlee":
        settings.update({"EXTENSIONS": {"__main__.CrawleeRule": 0}, "CRAWLEE_BUDGET_MB": budget_mib(workload)})
    return settings


def child(workload: str, mode: str, base_url: str, out: Path) -> None:
    """Run one crawl in this process; write its figures to ``out``."""
    from scrapy import signals
    from scrapy.crawler import CrawlerProcess

    spider = {"large": Large, "catalog": Catalog, "slow": Large, "browser": Stores, "json": Documents, "media": Files,
              "pipeline": Attachments, "mix": Carried, "leak": Keeper, "fits": Fits}[workload]
    if mode == "governed-rotate":  # the browser lever rotates contexts only: no cap on concurrency
        from pytest_crawlmem.governor import extension as governor

        class RotateOnly(governor.ContextLever):
            def __init__(self, *args: Any, **kwargs: Any) -> None:
                super().__init__(*args, **{**kwargs, "base_concurrency": 0})

        governor.ContextLever = RotateOnly  # type: ignore[misc]
    spider.base = base_url
    settings = mode_settings(workload, mode)
    process = CrawlerProcess(settings)
    crawler = process.create_crawler(spider)
    scraped: set[int] = set()
    crawler.signals.connect(lambda item, **_: scraped.add(item["id"]), signal=signals.item_scraped, weak=False)
    watch = TreeWatch() if workload == "browser" else None
    cpu0, started = os.times(), time.monotonic()
    process.crawl(crawler)
    try:
        process.start()
    finally:
        if settings.get("FILES_STORE"):  # 1.5 GB of stored files a media run: 45 runs filled a 250 GB disk
            shutil.rmtree(settings["FILES_STORE"], ignore_errors=True)
    duration = time.monotonic() - started
    cpu1 = os.times()
    if watch is not None:
        watch.close()
    stats = crawler.stats.get_stats()
    governor_cpu = float(stats.get("crawlmem/governor/cpu_seconds", 0.0) or 0.0)
    crawl_cpu = (cpu1.user - cpu0.user) + (cpu1.system - cpu0.system)
    children_cpu = (cpu1.children_user - cpu0.children_user) + (cpu1.children_system - cpu0.children_system)
    browser: dict[str, Any] = {}
    if watch is not None:
        crawl_cpu -= watch.sampler.cpu_seconds  # the benchmark's own readings are not the crawl's
        browser = {"tree_peak_pss_bytes": watch.peak_read, "tree_peak_estimated_bytes": watch.sampler.peak_pss_bytes,
                   "tree_watch_cpu_seconds": round(watch.sampler.cpu_seconds, 3),
                   "governor_rotations": stats.get("crawlmem/governor/browser_rotations", 0),
                   "governor_contexts_closed": stats.get("crawlmem/governor/browser_contexts_closed", 0),
                   "governor_tree_peak_bytes": stats.get("crawlmem/governor/browser_peak_pss_bytes"),
                   "governor_tree_read_cpu_seconds": stats.get("crawlmem/governor/browser_read_cpu_seconds"),
                   "contexts": stats.get("playwright/context_count"),
                   "governor_tree_reads": stats.get("crawlmem/governor/browser_reads"),
                   "governor_tree_pss_reads": stats.get("crawlmem/governor/browser_pss_reads"),
                   "governor_browser_lowerings": stats.get("crawlmem/governor/decisions/browser_concurrency", 0),
                   "governor_browser_min_concurrency": stats.get("crawlmem/governor/browser_min_concurrency"),
                   "tree_cpu_seconds": round(children_cpu, 3)}  # Playwright's driver and Chromium, reaped at the end
    out.write_text(json.dumps({
        "workload": workload, "mode": mode, "items": len(scraped), "expected": WORKLOADS[workload]["expected"],
        "peak_rss_bytes": peak_rss_bytes(), "duration_seconds": round(duration, 2),
        "finish_reason": stats.get("finish_reason"), "crawl_cpu_seconds": round(crawl_cpu, 3),
        "governor_cpu_seconds": round(governor_cpu, 4),
        "governor_reclaim_seconds": stats.get("crawlmem/governor/reclaim_seconds", 0.0),
        "governor_signal_seconds": stats.get("crawlmem/governor/cpu_seconds/signals"),
        "governor_spill_seconds": stats.get("crawlmem/governor/cpu_seconds/spill"),
        "governor_trim_seconds": stats.get("crawlmem/governor/cpu_seconds/trim"),
        "governor_trims": stats.get("crawlmem/governor/trims"),
        "governor_ticks": stats.get("crawlmem/governor/ticks"),
        "governor_decisions": stats.get("crawlmem/governor/decisions", 0),
        "governor_min_concurrency": stats.get("crawlmem/governor/min_concurrency"),
        "governor_spilled": stats.get("crawlmem/governor/spilled", 0),
        "governor_reclaims": stats.get("crawlmem/governor/reclaims", 0),
        "governor_reclaimed_bytes": stats.get("crawlmem/governor/reclaimed_bytes", 0),
        "governor_concurrency": stats.get("crawlmem/governor/concurrency"),
        "crawlee_steps": stats.get("crawlee/steps"), **browser,
        "governor_peak_rss_bytes": stats.get("crawlmem/governor/peak_rss_bytes"),
        "governor_undone": {key.rsplit("/", 1)[1]: value for key, value in stats.items()
                            if key.startswith("crawlmem/governor/undone/")},
        "governor_download_gate_waits": stats.get("crawlmem/governor/download_gate_waits"),
        "governor_item_holds": stats.get("crawlmem/governor/item_holds"),
        "governor_cost_holds": stats.get("crawlmem/governor/cost_holds"),
        "governor_parse_amplification": stats.get("crawlmem/governor/parse_amplification"),
        "governor_unmeetable": stats.get("crawlmem/governor/unmeetable", 0),
        "governor_decision_kinds": {key.rsplit("/", 1)[1]: value for key, value in stats.items()
                                    if key.startswith("crawlmem/governor/decisions/")},
    }))


def run_one(workload: str, mode: str, base_url: str, scratch: Path, timeout: float = 900) -> dict[str, Any]:
    """One (workload, mode) crawl in a fresh process; its figures, or what killed it."""
    out = scratch / f"{workload}-{mode}.json"
    out.unlink(missing_ok=True)
    command = [sys.executable, __file__, "--child", workload, mode, base_url, str(out)]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    started = time.monotonic()
    with tempfile.TemporaryFile("w+") as stderr:
        child_process = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=stderr, text=True)
        timer = __import__("threading").Timer(timeout, child_process.kill)
        timer.start()
        try:
            _, status, usage = os.wait4(child_process.pid, 0)  # ru_maxrss: the child's peak, read from outside it
        finally:
            timer.cancel()
        child_process.returncode = returncode = os.waitstatus_to_exitcode(status)
        stderr.seek(0)
        error = stderr.read()[-2000:]
    outside = usage.ru_maxrss * 1024
    if returncode != 0 or not out.exists():
        timed_out = returncode == -9 and time.monotonic() - started >= timeout
        reason = f"timeout {timeout:.0f} s" if timed_out else f"exit {returncode}"
        return {"workload": workload, "mode": mode, "items": 0, "expected": WORKLOADS[workload]["expected"],
                "peak_rss_bytes": 0, "peak_rss_outside_bytes": outside,
                "duration_seconds": round(time.monotonic() - started, 2), "finish_reason": reason, "error": error}
    figures: dict[str, Any] = json.loads(out.read_text())
    figures["peak_rss_outside_bytes"] = outside
    return figures


def table(rows: list[dict[str, Any]]) -> str:
    """The Markdown table of the runs, and per workload the best static setting that fits the budget."""
    lines = ["| workload | mode | peak RSS (ru_maxrss from outside; browser: tree PSS) | items | lost | items/s | finish"
             " | crawl CPU | governor CPU |",
             "|---|---|---|---|---|---|---|---|---|"]
    for row in rows:
        share = "-"
        if row.get("governor_cpu_seconds") and row.get("crawl_cpu_seconds"):
            share = (f"{row['governor_cpu_seconds']:.3f} s ({100 * row['governor_cpu_seconds'] / row['crawl_cpu_seconds']:.1f}%)")
        lines.append(f"| {row['workload']} | {row['mode']} | {peak(row) / 2**20:,.0f} MiB |"
                     f" {row['items']:,} | {row['expected'] - row['items']:,} | {rate(row):,.1f} |"
                     f" {row['finish_reason']} | {row.get('crawl_cpu_seconds', 0):,.1f} s | {share} |")
    for workload in dict.fromkeys(row["workload"] for row in rows):
        best = best_static([row for row in rows if row["workload"] == workload])
        governed = [row for row in rows if row["workload"] == workload and row["mode"] == "governed"]
        versus = ""
        if best is not None and governed and best[1]:
            shares = ", ".join(f"{100 * rate(row) / best[1]:.0f}%" for row in governed)
            versus = f"; governed {', '.join(f'{rate(row):,.1f}' for row in governed)} items/s: {shares} of it"
        lines.append("")
        lines.append(f"- `{workload}`: best static setting within {budget_mib(workload)} MiB: "
                     + (f"{best[0]} at {best[1]:,.1f} items/s (median){versus}" if best else "none fits"))
    return "\n".join(lines)


def summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Per workload and mode: the runs, the median and range of the peak (MiB, from outside), items, items/s and the
    governor's CPU share (%), and per workload the best static setting that fits its budget."""
    from statistics import median

    def spread(values: list[float]) -> dict[str, float]:
        return {"median": round(median(values), 2), "min": round(min(values), 2), "max": round(max(values), 2)}

    out: dict[str, Any] = {}
    for workload in dict.fromkeys(row["workload"] for row in rows):
        mine = [row for row in rows if row["workload"] == workload]
        modes: dict[str, Any] = {}
        for mode in dict.fromkeys(row["mode"] for row in mine):
            runs = [row for row in mine if row["mode"] == mode]
            cpu = [100 * row["governor_cpu_seconds"] / row["crawl_cpu_seconds"] for row in runs
                   if row.get("governor_cpu_seconds") and row.get("crawl_cpu_seconds")]
            modes[mode] = {"runs": len(runs), "peak_mib": spread([peak(row) / 2**20 for row in runs]),
                           "peak_over_budget": spread([peak(row) / 2**20 / budget_mib(workload) for row in runs]),
                           "items": spread([float(row["items"]) for row in runs]), "expected": runs[0]["expected"],
                           "items_per_second": spread([rate(row) for row in runs]),
                           "finish_reasons": sorted({str(row["finish_reason"]) for row in runs}),
                           "load_average": spread([float(row.get("load_average", 0.0)) for row in runs]),
                           **({"governor_cpu_percent": spread(cpu)} if cpu else {})}
        best = best_static(mine)
        governed = [rate(row) for row in mine if row["mode"] == "governed"]
        out[workload] = {"budget_mib": budget_mib(workload), "modes": modes,
                         "best_static": None if best is None else {
                             "mode": best[0], "items_per_second": round(best[1], 2),
                             "governed_ratio": spread([value / best[1] for value in governed]) if governed and best[1]
                             else None}}
    return out


def best_static(rows: list[dict[str, Any]]) -> tuple[str, float] | None:
    """Of one workload's runs: the fastest setting (doing nothing or a static one) whose every run fits the budget
    and delivers every item, by the median of its runs' items a second; None when none fits."""
    from statistics import median

    runs: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        if row["mode"] == "ungoverned" or row["mode"].startswith(("static-", "release-")):
            runs.setdefault(row["mode"], []).append(row)
    fits = [(mode, median(rate(row) for row in mine)) for mode, mine in runs.items()
            if all(peak(row) <= budget_mib(row["workload"]) * 2**20 and row["items"] == row["expected"] for row in mine)]
    return max(fits, key=lambda fit: fit[1], default=None)


def peak(row: dict[str, Any]) -> int:
    """A run's peak: the browser tree's PSS, else ru_maxrss read from outside the crawl (else its own VmHWM)."""
    return int(row.get("tree_peak_pss_bytes") or row.get("peak_rss_outside_bytes") or row["peak_rss_bytes"])


def rate(row: dict[str, Any]) -> float:
    """Items a second of one run."""
    return float(row["items"] / row["duration_seconds"]) if row["duration_seconds"] else 0.0


def runs_of(mode: str, args: argparse.Namespace) -> int:
    """How many runs of ``mode`` the command line asks for."""
    if mode == "governed" and args.governed_repeat:
        return int(args.governed_repeat)
    if (mode == "ungoverned" or mode.startswith(("static-", "release-"))) and args.static_repeat:
        return int(args.static_repeat)
    return int(args.repeat)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--child", nargs=4, metavar=("WORKLOAD", "MODE", "BASE_URL", "OUT"))
    parser.add_argument("--workloads", default="large,catalog,slow")
    parser.add_argument("--no-static", action="store_true", help="skip the static-N runs")
    parser.add_argument("--timeout", type=float, default=900, help="seconds a crawl may take (a loaded machine)")
    parser.add_argument("--browser-budget-mib", type=int, help="the browser workload's budget (default 768)")
    parser.add_argument("--repeat", type=int, default=1, help="runs of each mode")
    parser.add_argument("--governed-repeat", type=int, default=0, help="runs of the governed mode (default: --repeat)")
    parser.add_argument("--static-repeat", type=int, default=0,
                        help="runs of doing nothing and of each static setting (default: --repeat)")
    parser.add_argument("--modes", default="", help="run only these modes (comma-separated), e.g. governed,crawlee")
    parser.add_argument("--no-warmup", action="store_true",
                        help="skip the uncounted ungoverned crawl of each workload before its rounds")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "governor.json")
    parser.add_argument("--table", action="store_true", help="print the table of a saved --out file and exit")
    args = parser.parse_args()
    if args.table:
        print(table(json.loads(args.out.read_text())["runs"]))
        return
    if args.browser_budget_mib:
        os.environ[BROWSER_BUDGET_ENV] = str(args.browser_budget_mib)
    if args.child:
        workload, mode, base_url, out = args.child
        child(workload, mode, base_url, Path(out))
        return
    sys.path.insert(0, str(ROOT))
    from pytest_crawlmem.harness.site import start_site

    site = start_site()
    scratch = Path(tempfile.mkdtemp(prefix="crawlmem-governor-bench-"))
    rows = []
    began, load_before = time.time(), [round(value, 2) for value in os.getloadavg()]
    try:
        for workload in args.workloads.split(","):
            modes = list(WORKLOADS[workload].get("modes", ("ungoverned", "governed", "memusage", "crawlee")))
            modes += [] if args.no_static else [f"static-{n}" for n in STATIC[workload]]
            modes += [] if args.no_static else [f"release-{n}" for n in RELEASE[workload]]
            if args.modes:
                modes = [mode for mode in modes if mode in args.modes.split(",")]
            counts = {mode: runs_of(mode, args) for mode in modes}
            if not args.no_warmup and modes:  # the first crawls of an invocation ran 20-25% slower whatever their mode
                warm = run_one(workload, "ungoverned", site.base_url, scratch, args.timeout)  # (the site, the OS's caches)
                print(f"warm-up {workload}: {warm['duration_seconds']} s (not counted)", flush=True)
            for round_ in range(max(counts.values(), default=0)):  # in rounds: a load that drifts meets every mode
                for mode in [mode for mode in modes if counts[mode] > round_]:
                    row = run_one(workload, mode, site.base_url, scratch, args.timeout)
                    row["load_average"] = round(os.getloadavg()[0], 1)
                    row["budget_mib"] = budget_mib(workload)
                    rows.append(row)
                    print(json.dumps(row), flush=True)
    finally:
        site.close()
    machine = {"cpus": os.cpu_count(), "load_average_before": load_before,
               "load_average_after": [round(value, 2) for value in os.getloadavg()],
               "started_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(began)),
               "seconds": round(time.time() - began), "python": sys.version.split()[0], "scrapy": scrapy.__version__,
               "commit": subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True,
                                        text=True).stdout.strip()}
    args.out.write_text(json.dumps({"budget_mib": BUDGET_MIB, "machine": machine, "summary": summary(rows),
                                    "runs": rows}, indent=1))
    print(table(rows))


if __name__ == "__main__":
    main()
