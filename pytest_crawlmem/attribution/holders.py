"""Who keeps a leak: containers of the crawl that grew while it ran, at any depth below a root.

Runs in the crawl process, at the drained checkpoint that closes the attribution window (the crawl
is alive, nothing is in flight). The roots are the spider, the crawl's components (pipelines,
middlewares, extensions, the stats collector, the signal dispatcher), the user's modules and their
classes. Below each root attribute the walk goes down through containers (lists, dicts, sets, deques,
the user's own objects) up to ``MAX_DEPTH`` levels, and sums the entries of every container reached by
the same path pattern: ``spider.groups[…]["items"]`` is every ``items`` list of every group. An
``lru_cache`` wrapper counts its cache's entries. A pattern whose entries grew in step with the
responses of the window is a holder; the shallowest such pattern of a root attribute is the one named.
The line that stores into it is found by :mod:`keeping` (source analysis, checked against the
tracebacks of what the holder gained).
"""

from __future__ import annotations

import logging
import queue
import sys
import threading
import types
from collections import deque
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

from pytest_crawlmem.attribution.deepsize import deep_size
from pytest_crawlmem.attribution.keeping import Evidence, Store, entry_evidence, keeping_line, user_files
from pytest_crawlmem.attribution.paths import ANY, resolve
from pytest_crawlmem.attribution.paths import contents as _contents
from pytest_crawlmem.attribution.paths import steps as _steps
from pytest_crawlmem.attribution.scope import is_under
from pytest_crawlmem.core.models import Holder
from pytest_crawlmem.probes.snapshots import is_user_file

_CONTAINERS = (list, dict, set, deque)
#: A holder gained at least this share of the window's responses in entries (and at least MIN_ENTRIES).
MIN_SHARE = 0.2
MIN_ENTRIES = 10
#: Container levels walked below a root attribute (``self.shop["groups"][key]["items"]`` is 3).
MAX_DEPTH = 4
#: Containers visited per root attribute at most (a measurement must stay cheap on a big holder).
MAX_NODES = 20_000
#: A dict with at most this many string keys names them in a path (``["items"]``); a larger one is a map (``[…]``).
NAMED_KEYS = 16
#: Marks a general pattern (no key named) in :data:`Lengths`: a holder only when no named pattern of its attribute grew
#: (items spread over a few named groups, none of which grew enough alone).
GENERAL = "~"

#: ``{("spider", ".groups[…]['items']"): (id of the container or 0 for several, entries, containers)}``
Lengths = dict[tuple[str, str], tuple[int, int, int]]


def user_modules(projects: Sequence[str] = ()) -> dict[str, types.ModuleType]:
    """Modules whose file is the user's code (not the standard library, a package or the plugin); a module of the
    ``projects`` packages (``SPIDER_MODULES``) is the user's without asking where its file lies (thousands of them)."""
    found = {}
    for name, module in list(sys.modules.items()):
        path = getattr(module, "__file__", None)
        if isinstance(module, types.ModuleType) and path and (is_under(name, projects) or is_user_file(path)):
            found[name] = module
    return found


def user_classes(modules: Mapping[str, types.ModuleType]) -> dict[str, type]:
    """The classes the user's modules define, by ``class module.Name`` (their attributes can be registries)."""
    found: dict[str, type] = {}
    for name, module in modules.items():
        for value in list(vars(module).values()):
            if isinstance(value, type) and value.__module__ == name:
                found.setdefault(f"class {name}.{value.__qualname__}", value)
    return found


class QueuedRequests:
    """What the requests waiting in the scheduler pass on to each other, as a root of the walk: per key of their
    ``meta`` (and ``cb_kwargs``), the one container every request carrying that key shares (a history list handed
    from page to page: ``queued requests.meta['history']``). A key whose requests carry containers of their own is
    left out (each is a new container at every checkpoint, never one that grew)."""

    def __init__(self, requests: Sequence[Any]) -> None:
        self.meta = _shared(_carried(request, "meta") for request in requests)
        self.cb_kwargs = _shared(_carried(request, "cb_kwargs") for request in requests)


def _carried(request: Any, name: str) -> Any:
    """A request's ``meta`` or ``cb_kwargs`` without creating it: Scrapy makes the dict on first access."""
    private = f"_{name}"
    return getattr(request, private) if hasattr(request, private) else getattr(request, name, None)


def _shared(mappings: Iterator[Any]) -> dict[str, Any]:
    """The containers one string key maps to in every mapping that has it, when that is one and the same container."""
    found: dict[str, dict[int, Any]] = {}
    for mapping in mappings:
        for key, value in list(mapping.items()) if isinstance(mapping, dict) else ():
            if isinstance(key, str) and isinstance(value, _CONTAINERS):
                found.setdefault(key, {})[id(value)] = value
    return {key: next(iter(values.values())) for key, values in found.items() if len(values) == 1}


def _is_user_object(value: Any) -> bool:
    """An instance of a class from the user's code (walked through its ``__dict__``), not a class or module."""
    if isinstance(value, (type, types.ModuleType, types.FunctionType, types.MethodType)):
        return False
    if isinstance(value, logging.Filterer):  # a logger (or handler) kept by the registry: its filters and handlers
        return True
    module = sys.modules.get(type(value).__module__)
    return hasattr(value, "__dict__") and is_user_file(getattr(module, "__file__", "") or "")


def _attributes(obj: Any) -> Iterator[tuple[str, Any]]:
    if isinstance(obj, (types.ModuleType, type)):
        yield from ((f".{k}", v) for k, v in list(vars(obj).items()) if not k.startswith("__"))
        return
    attrs = getattr(obj, "__dict__", None)
    if isinstance(attrs, dict):
        yield from ((f".{k}", v) for k, v in list(attrs.items()))
    for klass in type(obj).__mro__:  # class attributes the instance shares (``kept = []`` on the spider class)
        if klass is object or not is_user_file(getattr(sys.modules.get(klass.__module__), "__file__", "") or ""):
            continue
        yield from ((f".{k}", v) for k, v in list(vars(klass).items()) if not k.startswith("__"))


def cache_size(value: Any) -> int | None:
    """Entries of a ``functools.lru_cache`` / ``cache`` wrapper (``None`` for anything else)."""
    info = getattr(value, "cache_info", None)
    if info is None or not callable(info) or not hasattr(value, "__wrapped__"):
        return None
    try:
        return int(info().currsize)
    except Exception:
        return None


def _length(value: Any) -> int | None:
    if isinstance(value, _CONTAINERS):
        return len(value)
    if isinstance(value, queue.Queue):  # its rows wait in ``.queue`` (a deque; a list for a PriorityQueue)
        return len(value.queue)
    return cache_size(value)


class ThreadArguments:
    """A live thread's container arguments, as a root of the walk: ``thread writer.arg0`` is the queue a writer
    thread was started with (what it should have drained)."""

    def __init__(self, thread: threading.Thread) -> None:
        for i, value in enumerate(tuple(getattr(thread, "_args", ()) or ())):
            if _length(value) is not None:
                setattr(self, f"arg{i}", value)
        for key, value in dict(getattr(thread, "_kwargs", {}) or {}).items():
            if isinstance(key, str) and key.isidentifier() and _length(value) is not None:
                setattr(self, key, value)


def python_roots() -> dict[str, Any]:
    """Where Python itself keeps what a crawl hands it: the logging module's registry of loggers (one per
    ``logging.getLogger(name)``, for good) and the container arguments of the live threads but this one."""
    roots: dict[str, Any] = {"logging.Logger.manager": logging.Logger.manager}
    current = threading.current_thread()
    for thread in threading.enumerate():
        owner = getattr(getattr(thread, "_target", None), "__module__", None) or ""
        if thread is not current and not owner.startswith("pytest_crawlmem"):  # the plugin's own sampler is no holder
            arguments = ThreadArguments(thread)
            if vars(arguments):
                roots[f"thread {thread.name}"] = arguments
    return roots


class _Walk:
    """One measurement: every container pattern below the roots, with its entries and containers."""

    def __init__(self) -> None:
        self.lengths: Lengths = {}
        self.seen: set[int] = set()
        self.nodes = 0

    def root(self, root_name: str, root: Any) -> None:
        for edge, value in _attributes(root):
            self.nodes = 0
            self.value(root_name, edge, edge, value, 0)

    def value(self, root_name: str, pattern: str, general: str, value: Any, depth: int) -> None:
        if id(value) in self.seen or self.nodes >= MAX_NODES:
            return
        length = _length(value)
        if length is None:
            if depth < MAX_DEPTH and _is_user_object(value):  # self.state = State() on the spider, a Group() in a list
                self.seen.add(id(value))
                for edge, inner in list(vars(value).items()):
                    self.value(root_name, f"{pattern}.{edge}", f"{general}.{edge}", inner, depth + 1)
            return
        self.seen.add(id(value))
        self.nodes += 1
        self._count((root_name, pattern[:160]), value, length)
        if general != pattern:  # the same container under the pattern that names no key: GENERAL marks it
            self._count((root_name, GENERAL + general[:160]), value, length)
        value = _contents(value)
        if depth >= MAX_DEPTH or not isinstance(value, (list, dict, deque)):
            return
        for child_pattern, child_general, child in _children(pattern, general, value):
            if _length(child) is not None or _is_user_object(child):
                self.value(root_name, child_pattern, child_general, child, depth + 1)

    def _count(self, key: tuple[str, str], value: Any, length: int) -> None:
        ident, entries, containers = self.lengths.get(key, (id(value), 0, 0))
        self.lengths[key] = (ident if containers == 0 else 0, entries + length, containers + 1)


def _children(pattern: str, general: str, value: Any) -> Iterator[tuple[str, str, Any]]:
    """(pattern, general pattern, child) of a container's entries: a record's keys are named (``["items"]``), a map's
    and a sequence's are not (``[…]``); the general pattern names none."""
    if isinstance(value, dict):
        items = list(value.items())
        named = len(items) <= NAMED_KEYS and all(isinstance(k, str) and k.isidentifier() for k, _ in items)
        for key, child in items:
            yield (f"{pattern}[{key!r}]" if named else pattern + ANY), general + ANY, child
    else:
        for child in list(value):
            yield pattern + ANY, general + ANY, child


def container_lengths(roots: Mapping[str, Any]) -> Lengths:
    """Entries and containers of every container pattern below each root (a container is counted under its first path)."""
    walk = _Walk()
    for root_name, root in roots.items():
        walk.root(root_name, root)
    return walk.lengths


def grown(before: Lengths, after: Lengths, responses: int) -> list[tuple[tuple[str, str], int, int, int]]:
    """Patterns whose entries grew in step with ``responses``: (root and pattern, gained, entries, containers).

    A pattern of one container must be the same container at both ends (a list replaced by a fresh one did not grow).
    Of nested growing patterns one is kept: the shallower (``.cache`` rather than ``.cache[…]``, its new records) unless
    the deeper's existing containers gained more than twice as many entries (``.groups[…]["items"]`` rather than
    ``.groups``, which gained a key per new group).
    """
    need = max(MIN_ENTRIES, int(MIN_SHARE * responses))
    found = []
    filled: dict[tuple[str, str], float] = {}  # entries added to containers already there (not new ones, filled)
    for path, (ident, entries, containers) in after.items():
        start = before.get(path, (0, 0, 0))  # a pattern that was not there yet grew from nothing
        if (ident and start[0] and ident != start[0]) or entries - start[1] < need:
            continue
        found.append((path, entries - start[1], entries, containers))
        filled[path] = entries - start[1] - max(0, containers - start[2]) * entries / max(containers, 1)
    named = [f for f in found if not f[0][1].startswith(GENERAL)]
    for (root, pattern), gained, entries, containers in found:
        general = pattern.removeprefix(GENERAL)
        if pattern.startswith(GENERAL) and not any(
                r == root and _attribute(p) == _attribute(general) for (r, p), *_ in named):
            named.append(((root, general), gained, entries, containers))
            filled[(root, general)] = filled[(root, pattern)]
    found = named
    # of nested patterns that both grew, the one the entries went into: the shallower, unless the deeper's existing
    # containers gained far more (items appended to groups that were there, not new records stored whole)
    def deeper_wins(deep: tuple[tuple[str, str], int, int, int], shallow: tuple[tuple[str, str], int, int, int]) -> bool:
        return filled[deep[0]] > 2 * shallow[1]

    kept = [f for f in found
            if not any(_below(f[0], o[0]) and not deeper_wins(f, o) for o in found)
            and not any(_below(o[0], f[0]) and deeper_wins(o, f) for o in found)]
    kept.sort(key=lambda entry: entry[1], reverse=True)
    return kept


def _attribute(pattern: str) -> str:
    """The root attribute a pattern starts with (``.groups`` of ``.groups[…]['items']``)."""
    return _steps(pattern)[0] if pattern else ""


def _below(path: tuple[str, str], other: tuple[str, str]) -> bool:
    """Whether ``path`` is a pattern below ``other`` (same root, a longer pattern starting with it)."""
    return path[0] == other[0] and len(path[1]) > len(other[1]) and path[1].startswith(other[1]) \
        and path[1][len(other[1])] in "[."


def describe_path(root_name: str, pattern: str, kind: str, entries: int, containers: int) -> str:
    """``spider.kept -> list[907]``; several containers: ``spider.groups[…]['items'] -> 10 lists[1,200]``."""
    many = f"{containers:,} {kind}s" if containers > 1 else kind
    return f"{root_name}{pattern} -> {many}[{entries:,}]"


def entries_bytes(containers: Sequence[Any], limit: int = 32) -> float | None:
    """What one entry of ``containers`` holds on average (bytes, deep, as tracemalloc counts them), from their newest
    ``limit`` entries (``None`` when they have none): what the holder keeps, wherever it was allocated."""
    sampled: list[Any] = []
    entries = 0
    for container in containers:
        contents = _contents(container)
        if isinstance(contents, dict):
            pairs = list(contents.items())[-limit:]
            sampled += [part for pair in pairs for part in pair]
            entries += len(pairs)
        elif isinstance(contents, (list, deque)):
            newest = list(contents)[-limit:]
            sampled += newest
            entries += len(newest)
        if entries >= limit:
            break
    if not entries:
        return None
    stop = [logging.Logger.manager, logging.root, *containers]  # a logger's parent chain is not what it keeps
    traced, _ = deep_size(sampled, stop=stop)
    del sampled
    return traced / entries


def find_keepers(
    roots: Mapping[str, Any], before: Lengths, responses: int, *, prefer: Sequence[str] = (), limit: int = 3,
    library: Sequence[str] = (), files: Iterable[str] | None = None, parsed: dict[str, list[Store]] | None = None,
) -> list[tuple[Holder, Evidence]]:
    """The container patterns of ``roots`` that grew since ``before`` (taken ``responses`` responses ago), each with the
    line that stores into it and the evidence of its newest entries (their allocation sites, while tracing).

    ``prefer``: the growth sites of the window, to pick the keeping line among several. ``library``: root names that are
    Scrapy's own objects (the stats collector, the signal dispatcher): their holders come after the user's. ``files``:
    the user's source files searched for the storing line besides each root's own (every loaded one when ``None``);
    ``parsed`` receives each file parsed, once for all holders.
    """
    if responses <= 0:
        return []
    found = grown(before, container_lengths(roots), responses)
    found.sort(key=lambda f: f[0][0] in library)  # stable: by gain within each group
    searched = user_files() if files is None else sorted(set(files))
    parsed = {} if parsed is None else parsed
    keepers = []
    for (root_name, pattern), gained, entries, containers in found[:limit]:
        root = roots[root_name]
        targets = resolve(root, pattern, limit=8)
        evidence = entry_evidence(targets)
        kind = type(targets[0]).__name__ if targets else "container"
        line = keeping_line(root, pattern, targets[0] if targets else None, prefer, evidence, searched, parsed)
        each = entries_bytes(targets)
        holder = Holder(path=describe_path(root_name, pattern, kind, entries, containers), gained=gained,
                        responses=responses, line=line,
                        entries_bytes_per_response=None if each is None else round(each * gained / responses, 1))
        keepers.append((holder, evidence))
        del targets
    return keepers


def find_holders(
    roots: Mapping[str, Any], before: Lengths, responses: int, *, prefer: Sequence[str] = (), limit: int = 3,
    library: Sequence[str] = (),
) -> tuple[Holder, ...]:
    """The holders of :func:`find_keepers`, without their evidence."""
    return tuple(h for h, _ in find_keepers(roots, before, responses, prefer=prefer, limit=limit, library=library))
