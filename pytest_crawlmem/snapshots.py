"""tracemalloc snapshots at drained checkpoints, and the allocation sites that grew between them.

Runs in the crawl process. Traces are grouped by the most recent frame in user code (not
the standard library, not an installed package, not the harness), so a leak allocated deep
inside Scrapy on behalf of a callback is charged to the callback's line when the stack
reaches it.
"""

from __future__ import annotations

import linecache
import os
import sys
import sysconfig
import tracemalloc
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from itertools import pairwise

from .models import GrowthSite

_HARNESS = (
    os.path.dirname(os.path.abspath(__file__)),
    "*/_pytest/*",
    "*/pluggy/*",
    tracemalloc.__file__,
    "<frozen importlib._bootstrap>",
    "<frozen importlib._bootstrap_external>",
    "*/linecache.py",
    "*/tracemalloc.py",
)
_LIBRARY_DIRS = tuple(
    {os.path.realpath(p) for p in (sysconfig.get_paths().get("stdlib"), sysconfig.get_paths().get("purelib"),
                                    sysconfig.get_paths().get("platlib"), sys.base_prefix) if p}
)


def _filters() -> list[tracemalloc.Filter]:
    return [
        tracemalloc.Filter(False, pattern if "*" in pattern or pattern.startswith("<") else pattern + "*")
        for pattern in _HARNESS
    ]


def take_snapshot() -> tracemalloc.Snapshot:
    """Snapshot traced memory without the harness, pytest, pluggy, importlib and linecache."""
    return tracemalloc.take_snapshot().filter_traces(_filters())


#: This package's own files (an editable install is outside site-packages): never the user's code.
_PLUGIN_DIR = os.path.dirname(os.path.realpath(__file__))


def is_user_file(filename: str) -> bool:
    """Return whether ``filename`` is the user's code rather than Python's, an installed package's or the plugin's."""
    if filename.startswith("<"):
        return False
    path = os.path.realpath(filename)
    if path.startswith(_PLUGIN_DIR + os.sep):
        return False
    return not any(path.startswith(lib + os.sep) for lib in _LIBRARY_DIRS) and "site-packages" not in path


@dataclass
class _Group:
    size: int = 0
    count: int = 0
    biggest: int = 0
    traceback: tracemalloc.Traceback | None = None


def _display(filename: str) -> str:
    """A path relative to the working directory when it lies below it (spiders/catalog.py:31)."""
    relative = os.path.relpath(filename) if os.path.isabs(filename) else filename
    return filename if relative.startswith("..") else relative


def _site_of(traceback: Sequence[tracemalloc.Frame]) -> str:
    frames = list(traceback)
    for frame in reversed(frames):  # most recent first
        if is_user_file(frame.filename):
            return f"{_display(frame.filename)}:{frame.lineno}"
    recent = frames[-1] if frames else None
    return f"{recent.filename}:{recent.lineno}" if recent else "<unknown>"


def group_by_site(snapshot: tracemalloc.Snapshot | None) -> dict[str, _Group]:
    """Sum the snapshot's live memory per site (most recent user frame)."""
    groups: dict[str, _Group] = {}
    if snapshot is None:
        return groups
    for stat in snapshot.statistics("traceback"):
        group = groups.setdefault(_site_of(stat.traceback), _Group())
        group.size += stat.size
        group.count += stat.count
        if stat.size > group.biggest:
            group.biggest = stat.size
            group.traceback = stat.traceback
    return groups


def _format_traceback(traceback: tracemalloc.Traceback | None) -> tuple[str, ...]:
    """Source lines of a traceback, most recent first (reads files through linecache)."""
    if traceback is None:
        return ()
    return tuple(line.strip() for line in traceback.format(most_recent_first=True)[:16])


def growing_sites(
    snapshots: Sequence[tracemalloc.Snapshot | None],
    responses: Sequence[int],
    *,
    limit: int = 10,
    min_bytes: int = 1024,
) -> list[GrowthSite]:
    """Sites whose memory rose in every consecutive pair of ``snapshots`` (taken at ``responses``).

    ``None`` stands for the empty snapshot at the moment tracing started.
    """
    groups = [group_by_site(s) for s in snapshots]
    if len(groups) < 2:
        return []
    window = max(responses[-1] - responses[0], 1)
    sites = []
    tracebacks: dict[str, tracemalloc.Traceback | None] = {}
    for site, last in groups[-1].items():
        series = [g.get(site, _Group()) for g in groups]
        if all(b.size - a.size >= min_bytes for a, b in pairwise(series)):
            first = series[0]
            size_diff = last.size - first.size
            sites.append(
                GrowthSite(
                    location=site,
                    size_diff_bytes=size_diff,
                    count_diff=last.count - first.count,
                    bytes_per_response=round(size_diff / window, 1),
                    traceback=(),
                )
            )
            tracebacks[site] = last.traceback
    sites.sort(key=lambda s: s.size_diff_bytes, reverse=True)
    # format only the sites kept, then drop the source files linecache loaded for them (only those):
    # the crawl's memory must not grow because the harness looked at it
    cached = set(linecache.cache)
    top = [replace(site, traceback=_format_traceback(tracebacks[site.location])) for site in sites[:limit]]
    for filename in set(linecache.cache) - cached:
        linecache.cache.pop(filename, None)
    return top


def format_sites(sites: Iterable[GrowthSite]) -> str:
    """Render growth sites as the text of ``tracemalloc-diff.txt``."""
    lines = []
    for rank, site in enumerate(sites, 1):
        lines.append(
            f"#{rank} {site.location}: +{site.size_diff_bytes:,} B in {site.count_diff:+,} blocks"
            f" ({site.bytes_per_response:,.1f} B/response)"
        )
        lines.extend(f"    {frame}" for frame in site.traceback)
        lines.append("")
    return "\n".join(lines) or "no allocation site grew in every traced interval\n"
