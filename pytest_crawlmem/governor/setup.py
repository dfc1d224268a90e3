"""How the memory governor is turned on: its budget, the components it needs, RSS reads (crawl process).

``GovernorAddon`` (``ADDONS``) and :func:`add_components` put the governor, its start gate and its spilling
scheduler into a crawl's settings; :class:`~pytest_crawlmem.governor.extension.MemoryGovernor` calls the same function
from ``from_crawler`` when it was enabled through ``EXTENSIONS`` alone (the settings are not frozen yet then).
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from pytest_crawlmem.core.cgroup import auto_budget, limit_files, parse_proc_cgroup, smallest_limit
from pytest_crawlmem.core.defaults import name_of
from pytest_crawlmem.core.units import UnitError, parse_size
from pytest_crawlmem.governor.spill import SCHEDULER_PATH, START_GATE_ORDER, START_GATE_PATH
from pytest_crawlmem.probes import readings as probes

BUDGET = name_of("budget")  # the setting that turns the governor on
GOVERNOR_PATH = "pytest_crawlmem.governor.MemoryGovernor"
ADDON_PATH = "pytest_crawlmem.governor.GovernorAddon"
DEFAULT_SCHEDULER = "scrapy.core.scheduler.Scheduler"
_PAGE_SIZE = os.sysconf("SC_PAGE_SIZE")


def read_cgroup_limit() -> int | None:
    """The memory limit of this process's cgroup (v2 ``memory.max`` or v1 ``memory.limit_in_bytes``), if any."""
    try:
        paths = parse_proc_cgroup(Path("/proc/self/cgroup").read_text(encoding="ascii"))
    except OSError:
        return None
    texts: list[str | None] = []
    for name in limit_files(paths):
        try:
            texts.append(Path(name).read_text(encoding="ascii"))
        except OSError:
            texts.append(None)
    return smallest_limit(texts)


def resolve_budget(raw: Any) -> int | None:
    """``CRAWLMEM_BUDGET`` as bytes: a size, or ``"auto"`` (80% of the cgroup limit; None when there is none)."""
    if isinstance(raw, str) and raw.strip().lower() == "auto":
        return auto_budget(read_cgroup_limit())
    try:
        budget = parse_size(raw, source=BUDGET)
    except UnitError as exc:
        raise ValueError(f"invalid {BUDGET} {raw!r} from Scrapy settings: {exc}") from None
    if budget <= 0:
        raise ValueError(f"invalid {BUDGET} {raw!r} from Scrapy settings: expected a size above 0")
    return budget


def _clock_overhead() -> float:
    """The median of 31 empty spans timed by two ``thread_time()`` reads (~0.9 us), taken out of each timed call."""
    spans = []
    for _ in range(31):
        began = time.thread_time()
        spans.append(time.thread_time() - began)
    return sorted(spans)[15]


class _Statm:
    """RSS from a kept ``/proc/self/statm`` fd (``os.pread``: 2.2 us a read)."""

    def __init__(self) -> None:
        try:
            self.fd: int | None = os.open("/proc/self/statm", os.O_RDONLY)
        except OSError:
            self.fd = None

    def rss_bytes(self) -> int:
        if self.fd is None:
            return probes.read_rss_bytes()
        return int(os.pread(self.fd, 128, 0).split()[1]) * _PAGE_SIZE

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


class _Status:
    """VmHWM, the kernel's RSS high-water mark, from a kept ``/proc/self/status`` fd (None without /proc)."""

    def __init__(self) -> None:
        try:
            self.fd: int | None = os.open("/proc/self/status", os.O_RDONLY)
        except OSError:
            self.fd = None

    def peak_bytes(self) -> int | None:
        if self.fd is None:
            return None
        text = os.pread(self.fd, 4096, 0)
        at = text.find(b"VmHWM:")
        if at < 0:
            return None
        return int(text[at + 6:text.index(b"kB", at)]) * 1024

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


class GovernorAddon:
    """``ADDONS = {"pytest_crawlmem.governor.GovernorAddon": 0}``: the governor, its scheduler and start gate."""

    def update_settings(self, settings: Any) -> None:
        """Add the three components when CRAWLMEM_BUDGET is set (a custom SCHEDULER is kept: no spilling)."""
        if not settings.get(BUDGET):
            return
        add_components(settings)


def add_governor(settings: Any, budget: str | int, *, priority: int) -> None:
    """Govern a crawl at ``budget``: set CRAWLMEM_BUDGET and add the components (the test runner's settings)."""
    settings.set(BUDGET, budget, priority=priority)
    add_components(settings)


def add_components(settings: Any) -> None:
    """Merge the governor, the start gate and (over Scrapy's own scheduler) the spilling one into ``settings``."""
    for name, path, order in (("EXTENSIONS", GOVERNOR_PATH, 0), ("SPIDER_MIDDLEWARES", START_GATE_PATH, START_GATE_ORDER)):
        priority = settings.getpriority(name) or 0
        settings.set(name, {**settings.getdict(name), path: order}, priority=max(priority, 20))
    if settings.get("SCHEDULER") in (DEFAULT_SCHEDULER, SCHEDULER_PATH):
        settings.set("SCHEDULER", SCHEDULER_PATH, priority=max(settings.getpriority("SCHEDULER") or 0, 20))
