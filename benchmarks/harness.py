"""What the benchmark scripts share: the reactor, blocking on it, the crawl modes, timing, machine facts.

Importing this module installs Scrapy's asyncio reactor (as the plugin does under pytest).
Crawls are started from plain code and block until they end, like the ``crawl`` fixture:
the reactor runs in a greenlet and :func:`block_on` switches to it until a Deferred fires
(what pytest-twisted's ``blockon`` does), so the plugin's own ``run_crawl`` is measured,
not a copy of it.
"""

from __future__ import annotations

import gc
import os
import platform
import resource
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

from scrapy.utils.reactor import install_reactor

install_reactor("twisted.internet.asyncioreactor.AsyncioSelectorReactor")

import greenlet  # noqa: E402
import psutil  # noqa: E402
from scrapy.crawler import CrawlerRunner  # noqa: E402
from twisted.internet import reactor as _installed_reactor  # noqa: E402
from twisted.python.failure import Failure  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench_spiders import BASE_SETTINGS  # noqa: E402

from pytest_crawlmem.core.models import CrawlResult  # noqa: E402
from pytest_crawlmem.harness.isolated import run_isolated, spec_for  # noqa: E402
from pytest_crawlmem.measure.runner import CrawlOptions, run_crawl  # noqa: E402
from pytest_crawlmem.reports.report import write_reports  # noqa: E402

reactor: Any = _installed_reactor
_reactor_greenlet: greenlet.greenlet | None = None


def block_on(deferred: Any) -> Any:
    """Run the reactor until ``deferred`` fires; return its result (raise its failure)."""
    global _reactor_greenlet
    if _reactor_greenlet is None or _reactor_greenlet.dead:
        _reactor_greenlet = greenlet.greenlet(reactor.run)
    caller = greenlet.getcurrent()
    outcome: list[Any] = []

    def done(value: Any) -> None:
        outcome.append(value)
        if greenlet.getcurrent() is not caller:
            caller.switch()

    deferred.addBoth(done)
    if not outcome:
        _reactor_greenlet.switch()
    if isinstance(outcome[0], Failure):
        outcome[0].raiseException()
    return outcome[0]


def stop_reactor() -> None:
    """Stop the reactor if it was started (at the end of a script)."""
    if _reactor_greenlet is not None and not _reactor_greenlet.dead:
        reactor.callLater(0, reactor.stop)
        _reactor_greenlet.switch()


# -- the crawl modes ------------------------------------------------------------------------


@dataclass(frozen=True)
class Crawl:
    """One crawl to run: spider, spider arguments (``start_urls`` included) and settings."""

    spider: type
    kwargs: Mapping[str, Any]
    settings: Mapping[str, Any]


def bare(crawl: Crawl) -> None:
    """The crawl with Scrapy's CrawlerRunner alone: no extension, no middlewares of the plugin."""
    block_on(CrawlerRunner({**BASE_SETTINGS, **crawl.settings}).crawl(crawl.spider, **crawl.kwargs))


def measured(crawl: Crawl, options: CrawlOptions, *, isolate: bool = False, reports: bool = True) -> CrawlResult:
    """The crawl through the plugin, as the ``crawl`` fixture runs it: ``run_crawl`` (or ``run_isolated``), then the reports.

    ``options.report_dir`` must be set when ``reports`` is true; budgets are not checked
    (a few comparisons).
    """
    kwargs = dict(crawl.kwargs)
    start_urls = kwargs.pop("start_urls", None)
    settings = {**BASE_SETTINGS, **crawl.settings}
    if isolate:
        spec = spec_for(crawl.spider, start_urls=start_urls, settings=settings, spider_kwargs=kwargs, options=options)
        result = run_isolated(spec)
    else:
        result = run_crawl(crawl.spider, wait=block_on, start_urls=start_urls, settings=settings,
                           spider_kwargs=kwargs, options=options)
    if reports:
        assert options.report_dir is not None
        write_reports(options.report_dir, result, test_id=f"benchmarks::{crawl.spider.__name__}", budgets=None, violations=())
    return result


#: The plugin's modes: name -> (CrawlOptions fields, isolate).
MODES: dict[str, tuple[dict[str, Any], bool]] = {
    "sampling": ({"checkpoints": False}, False),  # sampler thread and exact peak only
    "default": ({}, False),  # + drained checkpoints and the attribution window (what `crawl` does)
    "traced-1": ({"tracemalloc_frames": 1}, False),  # + tracemalloc for the whole crawl (a traced_peak budget)
    "traced-10": ({"tracemalloc_frames": 10}, False),  # --crawlmem-tracemalloc-frames=10
    "isolated": ({}, True),  # the default mode in a child process (isolate=True)
}


def run_mode(mode: str, crawl: Crawl, report_root: Path) -> CrawlResult | None:
    """Run ``crawl`` bare (``mode == "bare"``) or in one of :data:`MODES`; the result when measured."""
    if mode == "bare":
        bare(crawl)
        return None
    if mode == "bare-frozen":  # what the plugin does to the GC, without the plugin: its intrinsic cost shows
        gc.collect()
        gc.freeze()
        try:
            bare(crawl)
        finally:
            gc.unfreeze()
        return None
    fields, isolate = MODES[mode]
    report_dir = Path(tempfile.mkdtemp(prefix=f"{mode}-", dir=report_root))
    return measured(crawl, CrawlOptions(report_dir=report_dir, **fields), isolate=isolate)


# -- timing -------------------------------------------------------------------------------------


@dataclass
class Timing:
    """Wall time and CPU time (this process's threads plus reaped children) of one block."""

    wall: float = 0.0
    cpu: float = 0.0
    site_cpu: float = 0.0


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


@contextmanager
def timed(site_pid: int | None = None) -> Iterator[Timing]:
    """Time the block: wall, CPU of this process and of the children it reaped (an isolated crawl), the site's CPU.

    The fixture site is a child too, but it is reaped only when it stops, so its CPU never
    counts in ``cpu``; it is read separately through psutil.
    """
    site = psutil.Process(site_pid) if site_pid else None
    timing = Timing()
    site_before = sum(site.cpu_times()[:2]) if site else 0.0
    cpu_before = time.process_time() + _children_cpu()
    wall_before = time.perf_counter()
    try:
        yield timing
    finally:
        timing.wall = time.perf_counter() - wall_before
        timing.cpu = time.process_time() + _children_cpu() - cpu_before
        timing.site_cpu = (sum(site.cpu_times()[:2]) - site_before) if site else 0.0


def median(values: list[float]) -> float:
    """The median (0.0 when empty)."""
    return statistics.median(values) if values else 0.0


def rounds(modes: list[str], pairs: int) -> Iterator[tuple[int, str]]:
    """Interleave the modes: every round runs each mode once, the order rotated by one per round."""
    for i in range(pairs):
        k = i % len(modes)
        for mode in modes[k:] + modes[:k]:
            yield i, mode


# -- machine facts ---------------------------------------------------------------------------------


def _version(package: str) -> str | None:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


def machine_info() -> dict[str, Any]:
    """CPU count, Python, Scrapy and Twisted versions, platform, memory, load average."""
    return {
        "cpu_count": os.cpu_count(),
        "python": platform.python_version(),
        "implementation": sys.implementation.name,
        "scrapy": _version("scrapy"),
        "twisted": _version("twisted"),
        "pytest_crawlmem": _version("pytest-crawlmem"),
        "platform": platform.platform(),
        "machine": platform.machine(),
        "memory_gib": round(psutil.virtual_memory().total / 2**30, 1),
        "load_average": [round(x, 2) for x in os.getloadavg()],
    }


def load_average() -> list[float]:
    """The 1, 5 and 15 minute load averages (how shared the machine was)."""
    return [round(x, 2) for x in os.getloadavg()]


def progress(message: str) -> None:
    """Print a progress line at once (stdout)."""
    print(message, flush=True)

