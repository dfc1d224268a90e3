"""tracemalloc snapshots at drained checkpoints, and the allocation sites that grew between them.

Runs in the crawl process. Traces are grouped by the most recent frame in user code (not
the standard library, not an installed package, not the harness), so a leak allocated deep
inside Scrapy on behalf of a callback is charged to the callback's line when the stack
reaches it.
"""

from __future__ import annotations

import fnmatch
import functools
import linecache
import os
import site as _site
import sys
import sysconfig
import threading
import tracemalloc
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from itertools import pairwise

from pytest_crawlmem.core.models import GrowthSite

#: The package root (probes/' parent), as the interpreter names its files in tracebacks.
_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
#: This package's own files, every subpackage (an editable install is outside site-packages): never the user's code.
_PLUGIN_DIR = os.path.realpath(_PACKAGE_DIR)
_HARNESS = (
    _PACKAGE_DIR,
    "*/_pytest/*",
    "*/pluggy/*",
    tracemalloc.__file__,
    "<frozen importlib._bootstrap>",
    "<frozen importlib._bootstrap_external>",
    "*/linecache.py",
    "*/tracemalloc.py",
)
def _library_dirs() -> tuple[str, ...]:
    """Where Python's standard library and installed packages live (a venv's base Python included)."""
    paths = sysconfig.get_paths()
    dirs = {paths.get(k) for k in ("stdlib", "platstdlib", "purelib", "platlib")}
    dirs |= {os.path.dirname(os.__file__), os.path.dirname(sysconfig.__file__)}  # the stdlib a venv runs on
    dirs |= set(_site.getsitepackages()) | {_site.getusersitepackages()}
    return tuple(sorted({os.path.realpath(d) for d in dirs if d}))


_LIBRARY_DIRS = _library_dirs()
_STDLIB_DIRS = tuple(
    sorted({os.path.realpath(d) for d in (sysconfig.get_paths().get("stdlib"), os.path.dirname(os.__file__)) if d})
)


def _filters() -> list[tracemalloc.Filter]:
    return [
        tracemalloc.Filter(False, pattern if "*" in pattern or pattern.startswith("<") else pattern + "*")
        for pattern in _HARNESS
    ]


#: Held while tracing starts or stops and while a snapshot is taken, so that no two of these run at once: the kill_at
#: crawl of tests/test_danger.py died of a segfault (2 of 5 CI runs) with one thread grouping a snapshot just after the
#: other had stopped tracing. The cause is not proven (not reproduced locally in 10 runs nor in stress scripts).
TRACING_LOCK = threading.RLock()


def start_tracing(frames: int) -> None:
    """Start tracemalloc with ``frames`` frames per traceback (no snapshot is being taken meanwhile)."""
    with TRACING_LOCK:
        tracemalloc.start(frames)


def stop_tracing() -> None:
    """Stop tracemalloc once no snapshot is being taken."""
    with TRACING_LOCK:
        tracemalloc.stop()


def take_snapshot() -> tracemalloc.Snapshot:
    """Snapshot traced memory without the harness, pytest, pluggy, importlib and linecache.

    The same traces as ``filter_traces(_filters())``, decided once per file instead of once per trace: that method
    matches every filter's pattern against every trace's newest frame (fnmatch in Python), ~10% of a leaky test
    crawl's CPU. Falls back to it where the snapshot's raw traces are not where CPython keeps them.
    """
    with TRACING_LOCK:
        snapshot = tracemalloc.take_snapshot()
    raw = getattr(snapshot.traces, "_traces", None)
    if not isinstance(raw, list):
        return snapshot.filter_traces(_filters())
    return tracemalloc.Snapshot([trace for trace in raw if not _harness_frame(trace[2][0][0])], snapshot.traceback_limit)


@functools.lru_cache(maxsize=8192)
def _harness_frame(filename: str) -> bool:
    """Whether a trace whose newest frame is in ``filename`` is left out (what the exclusive ``_filters()`` decide)."""
    name = os.path.normcase(filename)
    name = name[:-1] if name.endswith(".pyc") else name
    return any(fnmatch.fnmatch(name, f.filename_pattern) for f in _filters())


def traced_files(snapshot: tracemalloc.Snapshot | None) -> set[str]:
    """The user's source files named by any frame of the snapshot's traces: the only files whose lines can have stored
    what the traced window saw grow (a project's thousands of other modules allocated nothing in it)."""
    if snapshot is None:
        return set()
    raw = getattr(snapshot.traces, "_traces", None)
    tracebacks = {id(t[2]): t[2] for t in raw} if isinstance(raw, list) else {}  # CPython shares equal tracebacks
    names = {frame[0] for traceback in tracebacks.values() for frame in traceback}
    if not isinstance(raw, list):
        names = {frame.filename for trace in snapshot.traces for frame in trace.traceback}
    return {name for name in names if name.endswith(".py") and is_user_file(name)}


#: A traced window shorter than this gives no growth site.
MIN_SITE_WINDOW_RESPONSES = 20


def is_user_file(filename: str) -> bool:
    """Return whether ``filename`` is the user's code rather than Python's, an installed package's or the plugin's."""
    return _kind(filename) == "user"


@functools.lru_cache(maxsize=8192)
def _kind(filename: str) -> str:
    """``user``, ``plugin``, ``stdlib`` or ``library`` (an installed package, or code without a file).

    Cached: a traced window asks about the same few hundred files for every frame of every trace.
    """
    if filename.startswith("<"):
        return "stdlib" if filename.startswith("<frozen") else "library"
    path = os.path.realpath(filename)
    if path.startswith(_PLUGIN_DIR + os.sep):
        return "plugin"
    if any(path.startswith(lib + os.sep) for lib in _STDLIB_DIRS) and "-packages" not in path:
        return "stdlib"
    if any(path.startswith(lib + os.sep) for lib in _LIBRARY_DIRS) or "site-packages" in path or "dist-packages" in path:
        return "library"
    return "user"


@dataclass
class _Group:
    size: int = 0
    count: int = 0
    biggest: int = 0
    traceback: tracemalloc.Traceback | None = None
    in_user_code: bool = True


def _display(filename: str) -> str:
    """A path relative to the working directory when it lies below it (spiders/catalog.py:31)."""
    relative = os.path.relpath(filename) if os.path.isabs(filename) else filename
    return filename if relative.startswith("..") else relative


@functools.lru_cache(maxsize=8192)
def _package_relative(filename: str) -> str:
    """An installed package's file from its package directory on (twisted/internet/endpoints.py)."""
    path = os.path.realpath(filename)
    for lib in sorted(_LIBRARY_DIRS, key=len, reverse=True):
        if path.startswith(lib + os.sep):
            return os.path.relpath(path, lib)
    return filename


def _site_of(traceback: Sequence[tracemalloc.Frame]) -> tuple[str, bool] | None:
    """The site to charge an allocation to, and whether it is the user's code; ``None`` for the plugin's own.

    Most recent frame first: the first user frame is the site. Standard-library frames are never a
    site; an allocation the plugin made (its frame comes before any user frame) is dropped; without a
    user frame, the most recent installed package's frame stands in, marked as not the user's.
    """
    library = None
    for frame in reversed(list(traceback)):
        kind = _kind(frame.filename)
        if kind == "user":
            return f"{_display(frame.filename)}:{frame.lineno}", True
        if kind == "plugin":
            return None
        if kind == "library" and library is None:
            library = frame
    if library is None:
        return None  # the standard library alone (an import, the interpreter's own caches)
    return f"{_package_relative(library.filename)}:{library.lineno}", False


def site_of(traceback: Sequence[tracemalloc.Frame]) -> tuple[str, bool] | None:
    """The site an allocation with this traceback is charged to (see :func:`_site_of`)."""
    return _site_of(traceback)


def group_by_site(snapshot: tracemalloc.Snapshot | None) -> dict[str, _Group]:
    """Sum the snapshot's live memory per site (most recent user frame); the plugin's own allocations are left out."""
    groups: dict[str, _Group] = {}
    if snapshot is None:
        return groups
    for stat in snapshot.statistics("traceback"):
        site = _site_of(stat.traceback)
        if site is None:
            continue
        group = groups.setdefault(site[0], _Group(in_user_code=site[1]))
        group.size += stat.size
        group.count += stat.count
        if stat.size > group.biggest:
            group.biggest = stat.size
            group.traceback = stat.traceback
    return groups


#: Objects owned by a queued request are followed this many references deep (url, meta, headers and their values).
_QUEUED_DEPTH = 3


def queued_share(requests: Iterable[object]) -> dict[str, int]:
    """Traced bytes per site of the scheduler's queued requests and what they own (url, meta, headers, cb_kwargs).

    Run at a drained checkpoint while tracing: what these requests hold was allocated for the queue, so a
    growth site's share of it is the scheduler's growth, not a leak. Containers and strings are followed from each
    request; functions, classes, modules and other Scrapy objects (the spider, a callback's owner) are not.
    """
    shares: dict[str, int] = {}
    seen: set[int] = set()
    stack = [(request, 0) for request in requests]
    while stack:
        obj, depth = stack.pop()
        if id(obj) in seen:
            continue
        seen.add(id(obj))
        traceback = tracemalloc.get_object_traceback(obj)
        site = _site_of(traceback) if traceback is not None else None
        if site is not None:
            shares[site[0]] = shares.get(site[0], 0) + sys.getsizeof(obj)
        if depth >= _QUEUED_DEPTH:
            continue
        owned = vars(obj) if depth == 0 and hasattr(obj, "__dict__") else obj
        for child in _owned(owned):
            stack.append((child, depth + 1))
    return shares


def _owned(obj: object) -> list[object]:
    """The values a queued request (or a container it owns) holds; a request's slots are read by name."""
    if isinstance(obj, dict):
        return [*obj.keys(), *obj.values()]
    if isinstance(obj, (list, tuple, set, frozenset)):
        return list(obj)
    slots = [getattr(obj, name, None) for cls in type(obj).__mro__ for name in getattr(cls, "__slots__", ())]
    if slots:
        return [value for value in slots if isinstance(value, (str, bytes, dict, list, tuple))]
    data = getattr(obj, "__dict__", None)  # scrapy's Headers is a dict subclass (caught above)
    return [value for value in data.values() if isinstance(value, (str, bytes, dict, list, tuple))] if data else []


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
    min_responses: int = MIN_SITE_WINDOW_RESPONSES,
    queued: Mapping[str, int] | None = None,
    queued_before: Mapping[str, int] | None = None,
) -> list[GrowthSite]:
    """Sites whose memory rose in every consecutive pair of ``snapshots`` (taken at ``responses``): see :func:`site_growth`."""
    return site_growth(snapshots, responses, limit=limit, min_bytes=min_bytes, min_responses=min_responses,
                       queued=queued, queued_before=queued_before)[0]


def site_growth(
    snapshots: Sequence[tracemalloc.Snapshot | None],
    responses: Sequence[int],
    *,
    limit: int = 10,
    min_bytes: int = 1024,
    min_responses: int = MIN_SITE_WINDOW_RESPONSES,
    queued: Mapping[str, int] | None = None,
    queued_before: Mapping[str, int] | None = None,
) -> tuple[list[GrowthSite], int]:
    """Sites whose memory rose in every consecutive pair of ``snapshots`` (taken at ``responses``), and what all of
    them grew by in the last interval (bytes: the crawl's Python-level growth once tracing's start-up churn is past).

    ``None`` stands for the empty snapshot at the moment tracing started. A window of fewer than
    ``min_responses`` responses gives no site (a per-response figure needs responses behind it).
    ``queued`` (from :func:`queued_share` at the last snapshot) is the scheduler's share per site, ``queued_before``
    its share at the one before (the window's middle): netted out of the intervals they fall in, so the requests a
    callback queued do not outrank the line that keeps a leak.
    Sites in the user's code come first, then those without a user frame, each by growth.
    """
    queued = queued or {}
    before = queued_before if queued_before is not None and len(snapshots) > 2 else None
    if len(snapshots) < 2 or responses[-1] - responses[0] < min_responses:
        return [], 0
    groups = [group_by_site(s) for s in snapshots]
    window = max(responses[-1] - responses[0], 1)
    sites = []
    last_interval = 0
    tracebacks: dict[str, tracemalloc.Traceback | None] = {}
    for site, last in groups[-1].items():
        series = [g.get(site, _Group()) for g in groups]
        share = queued.get(site, 0)
        growth = [b.size - a.size for a, b in pairwise(series)]
        if before is not None:
            growth[-1] -= share - before.get(site, 0)
            growth[-2] -= before.get(site, 0)
        else:
            growth[-1] -= share
        if all(g >= min_bytes for g in growth):
            last_interval += growth[-1]
            first = series[0]
            size_diff = last.size - first.size - share
            sites.append(
                GrowthSite(
                    location=site,
                    size_diff_bytes=size_diff,
                    count_diff=last.count - first.count,
                    bytes_per_response=round(size_diff / window, 1),
                    traceback=(),
                    in_user_code=last.in_user_code,
                )
            )
            tracebacks[site] = last.traceback
    sites.sort(key=lambda s: (s.in_user_code, s.size_diff_bytes), reverse=True)
    # format only the sites kept, then drop the source files linecache loaded for them (only those):
    # the crawl's memory must not grow because the harness looked at it
    cached = set(linecache.cache)
    top = [replace(site, traceback=_format_traceback(tracebacks[site.location])) for site in sites[:limit]]
    for filename in set(linecache.cache) - cached:
        linecache.cache.pop(filename, None)
    return top, last_interval
