"""Runs one Scrapy crawl in this process with the measuring extension and builds its CrawlResult.

Free of pytest: the caller passes ``wait``, which blocks until a Deferred fires
(``pytest_twisted.blockon`` under pytest). Runs in the crawl process, on the main thread.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from pytest_crawlmem.attribution.sourcecode import installed_version, read_keeping_code
from pytest_crawlmem.browser.settings import is_playwright_crawl, launch_options
from pytest_crawlmem.core.assemble import crawl_result
from pytest_crawlmem.core.budgets import BudgetLimits, Budgets
from pytest_crawlmem.core.declared import setting_text
from pytest_crawlmem.core.defaults import name_of, settings_of
from pytest_crawlmem.core.models import CrawlResult
from pytest_crawlmem.core.replay import ReplayTarget, replay_settings
from pytest_crawlmem.governor.extension import add_governor, governor_danger
from pytest_crawlmem.measure.extension import CrawlMemExtension
from pytest_crawlmem.measure.logcapture import spilled_log_capture
from pytest_crawlmem.measure.middleware import (
    COUNTING_HTTPCOMPRESSION_PATH,
    DOWNLOADER_MIDDLEWARE_ORDER,
    DOWNLOADER_MIDDLEWARE_PATH,
    HTTPCOMPRESSION_PATH,
    CrawlMemDownloaderMiddleware,
    CrawlMemHttpCompressionMiddleware,
)
from pytest_crawlmem.probes.amplification import SPIDER_MIDDLEWARE_ORDER, SPIDER_MIDDLEWARE_PATH
from pytest_crawlmem.replay.handler import replay_outcome

EXTENSION_PATH = "pytest_crawlmem.extension.CrawlMemExtension"

#: Settings every test crawl starts from, below the project's and the test's own.
DEFAULT_SETTINGS: dict[str, Any] = {
    "LOG_LEVEL": "INFO",
    "ROBOTSTXT_OBEY": False,
    "COOKIES_ENABLED": False,
    **settings_of(log_interval_seconds=0),  # no status lines in tests, unless the project or the test sets it
}
#: Settings a test crawl cannot turn back on: they would measure or kill the wrong thing.
FORCED_SETTINGS: dict[str, Any] = {
    "MEMUSAGE_ENABLED": False,  # reads ru_maxrss, the peak of the whole pytest process
    "TELNETCONSOLE_ENABLED": False,
    "REMOTE_CONTROL_ENABLED": False,
}
#: The priority of what the measurement needs: above Scrapy's "cmdline" (40), so neither the
#: test's settings nor a spider's custom_settings or update_settings() can switch it off.
MEASURING_PRIORITY = 50
#: The component settings the plugin adds entries to (never replaces).
COMPONENT_SETTINGS = ("EXTENSIONS", "DOWNLOADER_MIDDLEWARES", "SPIDER_MIDDLEWARES")


@dataclass(frozen=True)
class CrawlOptions(BudgetLimits):
    """How to measure one crawl."""

    report_dir: Path | None = None
    interval_seconds: float = 0.1
    tracemalloc_frames: int = 0
    checkpoints: bool = True
    budgets: Budgets = field(default_factory=Budgets)  # the test's: its limits and leak threshold are read from it
    project_settings: str | None = None  # the Scrapy project's settings module the crawl starts from
    replay: ReplayTarget | None = None  # a running replay site: the crawl downloads from it
    snapshot_at_bytes: int | None = None  # RSS at which the danger snapshot is taken (danger.json)
    base_settings: Mapping[str, Any] = field(default_factory=dict)  # under the project's and the test's (crawl_cluster)
    extensions: Mapping[str, int] = field(default_factory=dict)  # more of the plugin's extensions (crawl_cluster)
    governor: str | int | None = None  # CRAWLMEM_BUDGET of the memory governor (crawl(governor=...)); None: none


def crawl_settings(user_settings: Mapping[str, Any] | None, options: CrawlOptions) -> Any:
    """The settings a measured crawl starts from, as ``scrapy crawl -s NAME=VALUE`` builds them.

    Scrapy's defaults < the plugin's defaults < the project's settings module < the test's
    ``settings`` (at Scrapy's "cmdline" priority, like ``-s``) < what the measurement needs.
    The spider's ``custom_settings`` and ``update_settings()`` come in between when the
    crawler is created; :func:`add_measuring_components` then adds the plugin's components.
    """
    from scrapy.settings import Settings

    settings = Settings()
    settings.setdict({**DEFAULT_SETTINGS, **options.base_settings}, priority="default")
    if options.project_settings:
        settings.setmodule(options.project_settings, priority="project")
    settings.setdict(dict(user_settings or {}), priority="cmdline")
    settings.setdict({**FORCED_SETTINGS, **measuring_settings(options)}, priority=MEASURING_PRIORITY)
    return settings


def measuring_settings(options: CrawlOptions) -> dict[str, Any]:
    """The ``CRAWLMEM_*`` settings of a measured crawl."""
    # a max_amplification budget judges the worst callback: every one is measured, whatever the reads cost
    every_callback = {"amplification_share": 0.0} if options.budgets.max_amplification is not None else {}
    return settings_of(
        **every_callback,
        enabled=True,
        interval_seconds=options.interval_seconds,
        tracemalloc_frames=options.tracemalloc_frames,
        checkpoints=options.checkpoints,
        leak_per_response=options.leak_per_response,  # None: the default (defaults.py)
        expected_growth=setting_text(options.budgets.expected_growth) if options.budgets.expected_growth else None,
        jsonl=str(options.report_dir / "samples.jsonl") if options.report_dir else None,
        kill_at_bytes=options.kill_at_bytes or 0,
        timeout_seconds=options.timeout_seconds or 0.0,
        media_failures=True,
        gc_freeze=True,  # checkpoints walk the crawl's objects only (production leaves it off)
        snapshot_at_bytes=options.snapshot_at_bytes or 0,
    )


def add_measuring_components(settings: Any, options: CrawlOptions) -> None:
    """Add the plugin's extension and counters to a crawler's settings, after the spider's own.

    Scrapy replaces a dict setting set at a higher priority wholesale, so the plugin's entries
    are merged into whatever EXTENSIONS / DOWNLOADER_MIDDLEWARES the crawl ended up with: the
    user's components run exactly as declared, plus the plugin's. The merged dict is set at
    MEASURING_PRIORITY, so ``CrawlerRunner.crawl()``, which merges the runner's settings into
    the crawler again, cannot put the dict without the plugin's entries back.
    """
    base = settings.getdict("DOWNLOADER_MIDDLEWARES_BASE")
    ours = {
        "EXTENSIONS": {EXTENSION_PATH: 0, **options.extensions},
        "DOWNLOADER_MIDDLEWARES": counting_middlewares(settings.getdict("DOWNLOADER_MIDDLEWARES"), base),
        "SPIDER_MIDDLEWARES": {SPIDER_MIDDLEWARE_PATH: SPIDER_MIDDLEWARE_ORDER},  # parse amplification
    }
    for name in COMPONENT_SETTINGS:
        settings.set(name, {**with_stable_paths(settings.getdict(name)), **ours[name]}, priority=MEASURING_PRIORITY)
    if is_playwright_crawl({"DOWNLOAD_HANDLERS": settings.getdict("DOWNLOAD_HANDLERS")}):
        # the installed Chromium with CI-safe flags; never a browser download
        options_now = settings.getdict("PLAYWRIGHT_LAUNCH_OPTIONS")
        settings.set("PLAYWRIGHT_LAUNCH_OPTIONS", launch_options(options_now), priority=MEASURING_PRIORITY)
    if options.replay is not None:  # the replay handler and copies middleware, over the spider's own components
        for name, value in replay_settings(settings, options.replay).items():
            settings.set(name, value, priority=MEASURING_PRIORITY)
    budget = options.governor if options.governor is not None else settings.get(name_of("budget"))
    if budget not in (None, ""):  # the memory governor, its start gate and spilling scheduler (docs/governor.md)
        add_governor(settings, budget, priority=MEASURING_PRIORITY)
    if options.timeout_seconds:  # a response that never completes must not outlive the budget
        timeout = min(settings.getfloat("DOWNLOAD_TIMEOUT", 180), options.timeout_seconds)
        settings.set("DOWNLOAD_TIMEOUT", timeout, priority=MEASURING_PRIORITY)


def with_stable_paths(components: Mapping[Any, Any]) -> dict[Any, Any]:
    """``components`` with each of the plugin's own components keyed by its stable dotted path.

    Scrapy keys components by what the settings say, not by the class that loads, so the extension named
    ``pytest_crawlmem.measure.extension.CrawlMemExtension`` (or given as a class) beside the harness's
    ``pytest_crawlmem.extension.CrawlMemExtension`` would be built twice. Only keys naming this package are loaded.
    """
    from scrapy.utils.misc import load_object

    stable = {CrawlMemExtension: EXTENSION_PATH, CrawlMemDownloaderMiddleware: DOWNLOADER_MIDDLEWARE_PATH,
              CrawlMemHttpCompressionMiddleware: COUNTING_HTTPCOMPRESSION_PATH}
    keyed: dict[Any, Any] = {}
    for key, value in components.items():
        component: Any = key
        if isinstance(key, str) and key.startswith("pytest_crawlmem."):
            try:
                component = load_object(key)
            except (ImportError, NameError, AttributeError, ValueError):
                component = None  # Scrapy names the bad path when it builds the components
        keyed[stable.get(component, key) if isinstance(component, type) else key] = value
    return keyed


def counting_middlewares(user_middlewares: Mapping[str, Any] | None, base: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The user's DOWNLOADER_MIDDLEWARES plus the plugin's counters of dropped data.

    Scrapy's HttpCompressionMiddleware is swapped for its counting subclass at the same
    order, unless the user configured it (disabled it, moved it or replaced it) or the
    crawl's DOWNLOADER_MIDDLEWARES_BASE (``base``, Scrapy's by default) does not have it.
    """
    if base is None:
        from scrapy.settings.default_settings import DOWNLOADER_MIDDLEWARES_BASE

        base = DOWNLOADER_MIDDLEWARES_BASE
    middlewares = with_stable_paths(user_middlewares or {})
    middlewares.setdefault(DOWNLOADER_MIDDLEWARE_PATH, DOWNLOADER_MIDDLEWARE_ORDER)
    configured = HTTPCOMPRESSION_PATH in middlewares or COUNTING_HTTPCOMPRESSION_PATH in middlewares
    if not configured and base.get(HTTPCOMPRESSION_PATH) is not None:
        middlewares[HTTPCOMPRESSION_PATH] = None
        middlewares[COUNTING_HTTPCOMPRESSION_PATH] = base[HTTPCOMPRESSION_PATH]
    return middlewares


def run_crawl(
    spider_cls: type,
    *,
    wait: Callable[[Any], Any],
    start_urls: list[str] | None = None,
    settings: Mapping[str, Any] | None = None,
    spider_kwargs: Mapping[str, Any] | None = None,
    options: CrawlOptions = CrawlOptions(),
) -> CrawlResult:
    """Run ``spider_cls`` to the end with the measuring extension; return what it measured."""
    from scrapy.crawler import CrawlerRunner

    if options.report_dir is not None:
        options.report_dir.mkdir(parents=True, exist_ok=True)
        (options.report_dir / "samples.jsonl").unlink(missing_ok=True)
    kwargs = dict(spider_kwargs or {})
    if start_urls is not None:
        kwargs["start_urls"] = list(start_urls)
    runner = CrawlerRunner(crawl_settings(settings, options))
    crawler = runner.create_crawler(spider_cls)  # the spider's custom_settings / update_settings() are in now
    add_measuring_components(crawler.settings, options)
    started = time.monotonic()
    with spilled_log_capture():
        wait(runner.crawl(crawler, **kwargs))
    duration = time.monotonic() - started
    del runner
    held = [crawler]
    del crawler  # collect_result must hold the only reference, so it can let go of the crawl before counting what is alive
    return collect_result(held.pop(), spider_cls, duration, options)


def collect_result(crawler: Any, spider_cls: type, duration: float, options: CrawlOptions) -> CrawlResult:
    """Build the CrawlResult of a finished crawl from the extension's one measurement, once the crawler is let go of
    (crawl process)."""
    ext = _find_extension(crawler)
    stats = plain_stats(crawler.stats.get_stats())
    max_active_size = crawler.settings.getint("SCRAPER_SLOT_MAX_ACTIVE_SIZE")
    replayed = replay_outcome(crawler)
    governed = governor_danger(crawler)  # the evidence of a governor's close without JOBDIR (docs/governor.md)
    ext.crawler = None
    del crawler
    gc.collect()
    measured = replace(ext.measurement(), **replayed)
    if governed is not None and measured.danger is None:
        measured = replace(measured, danger=governed)
    return crawl_result(
        measured, spider=getattr(spider_cls, "name", spider_cls.__name__), duration_seconds=duration,
        interval_seconds=options.interval_seconds, stats=stats, leak_per_response=options.leak_per_response,
        max_active_size_limit=max_active_size, replay_copies=options.replay.copies if options.replay else 0,
        report_dir=options.report_dir, read_code=read_keeping_code, version_of=installed_version,
        expected_growth=options.budgets.expected_growth or (),
    )


def plain_stats(stats: Mapping[str, Any]) -> dict[str, Any]:
    """Scrapy's stats with every non-scalar value replaced by its (short) repr.

    A stats value can be anything a middleware put there, including requests: keeping
    it would keep the crawl alive after it ended.
    """
    scalars = (int, float, str, bool, type(None))
    return {k: v if isinstance(v, scalars) else repr(v)[:200] for k, v in stats.items()}


def _find_extension(crawler: Any) -> CrawlMemExtension:
    for middleware in crawler.extensions.middlewares:
        if isinstance(middleware, CrawlMemExtension):
            return middleware
    raise RuntimeError(f"the crawlmem extension did not start: check EXTENSIONS and {name_of('enabled')}")
