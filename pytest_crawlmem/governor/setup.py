"""How the memory governor is turned on: its budget, the components it needs, RSS reads (crawl process).

``GovernorAddon`` (``ADDONS``) and :func:`add_components` put the governor, its start gate and its spilling
scheduler into a crawl's settings; :class:`~pytest_crawlmem.governor.extension.MemoryGovernor` calls the same function
from ``from_crawler`` when it was enabled through ``EXTENSIONS`` alone (the settings are not frozen yet then).
"""

from __future__ import annotations

import math
import os
import time
from pathlib import Path
from typing import Any

try:
    import resource
except ImportError:  # Windows: no /proc there either, so no VmHWM to read
    resource = None  # type: ignore[assignment]

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


class _Statm:
    """RSS from a kept ``/proc/self/statm`` fd (``os.pread``: 1-2 us a read alone, 6-18 us inside a busy crawl)."""

    def __init__(self) -> None:
        try:
            self.fd: int | None = os.open("/proc/self/statm", os.O_RDONLY)
        except OSError:
            self.fd = None
        self._last = 0  # the last reading
        self._read_at = -math.inf  # when it was taken (time.monotonic())
        self._added = 0  # bytes said to have arrived since (add())

    def rss_bytes(self) -> int:
        """RSS now (a read)."""
        value = probes.read_rss_bytes() if self.fd is None else int(os.pread(self.fd, 128, 0).split()[1]) * _PAGE_SIZE
        self._last, self._read_at, self._added = value, time.monotonic(), 0
        return value

    def recent_bytes(self, max_age: float) -> int:
        """The last reading and what :meth:`add` said arrived since, while the reading is younger than ``max_age``
        seconds; else a read. A burst of questions in one reactor turn shares one read."""
        if time.monotonic() - self._read_at < max_age:
            return self._last + self._added
        return self.rss_bytes()

    def add(self, nbytes: int) -> None:
        """Memory arrived since the last reading (a response's body)."""
        self._added += nbytes

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


class _Status:
    """VmHWM, the kernel's RSS high-water mark, from a kept ``/proc/self/status`` fd (None without /proc).

    :meth:`high_bytes` reads the file (34-46 us in a busy crawl, the costliest read of a tick) only when
    ``getrusage``'s ``ru_maxrss`` (a 1 us system call) moved: it is the larger of VmHWM and the peak that exited
    threads recorded, so while it is not above the last VmHWM read, VmHWM cannot rise without it rising too. When it
    is above (a peak from before VmHWM was reset), every call reads the file."""

    def __init__(self) -> None:
        try:
            self.fd: int | None = os.open("/proc/self/status", os.O_RDONLY)
        except OSError:
            self.fd = None
        self._maxrss_kib = -1  # ru_maxrss at the last read of the file, while it tracks VmHWM (-1: read the file)
        self._high: int | None = None
        self.reads = 0  # reads of the file

    def peak_bytes(self) -> int | None:
        """VmHWM now, from the file."""
        if self.fd is None:
            return None
        self.reads += 1
        text = os.pread(self.fd, 4096, 0)
        at = text.find(b"VmHWM:")
        if at < 0:
            return None
        return int(text[at + 6:text.index(b"kB", at)]) * 1024

    def high_bytes(self) -> int | None:
        """VmHWM now, read from the file only when ``ru_maxrss`` says it may have moved."""
        if self.fd is None or resource is None:
            return self.peak_bytes()
        maxrss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        if maxrss == self._maxrss_kib and self._high is not None:
            return self._high
        high = self._high = self.peak_bytes()
        self._maxrss_kib = maxrss if high is not None and maxrss * 1024 <= high else -1
        return high

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
