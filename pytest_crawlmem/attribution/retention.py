"""What keeps a leaked object alive: a referrer path from a module, class or long-lived object.

Walks ``gc.get_referrers`` backwards from the leaked object, breadth first, bounded in
steps and time, until it reaches a root: a module's globals, a class's namespace, or
a closure held by a module-level registry. Runs in the crawl process after the crawl.
"""

from __future__ import annotations

import gc
import time
import types
from collections import deque
from collections.abc import Iterable
from itertools import pairwise
from typing import Any

from pytest_crawlmem.core.models import RetentionPath
from pytest_crawlmem.probes import readings as probes

_MAX_TEXT = 60


def _short(obj: Any) -> str:
    kind = type(obj).__name__
    if isinstance(obj, (str, bytes)):
        return f"{kind}({len(obj):,})"
    if isinstance(obj, (list, tuple, set, frozenset, dict, deque)):
        return f"{kind}[{len(obj):,}]"
    if isinstance(obj, types.FunctionType):
        return f"function {obj.__qualname__}"
    return kind


def _root_name(container: Any) -> str | None:
    """Name a container that is a root: a module's globals or a class's namespace."""
    if isinstance(container, dict):
        if "__name__" in container and "__spec__" in container:
            return f"module {container['__name__']}"
        if "__module__" in container and "__qualname__" in container:
            return f"class {container['__module__']}.{container['__qualname__']}"
    if isinstance(container, types.ModuleType):
        return f"module {container.__name__}"
    if isinstance(container, type):
        return f"class {container.__module__}.{container.__qualname__}"
    return None


def _edge(holder: Any, held: Any) -> str:
    """Describe how ``holder`` refers to ``held``: an attribute, a key, an index, a closure cell."""
    if isinstance(holder, dict):
        for key, value in holder.items():
            if value is held:
                return f"[{key!r}]"[:_MAX_TEXT] if not isinstance(key, str) else f".{key}" if key.isidentifier() else f"[{key!r}]"
        return "(dict key)"
    if isinstance(holder, (list, tuple, deque)):
        for index, value in enumerate(holder):
            if value is held:
                return f"[{index}]"
    if isinstance(holder, (set, frozenset)):
        return "(set member)"
    if isinstance(holder, types.CellType):
        return "(closure cell)"
    if isinstance(holder, types.FunctionType):
        return ".__closure__" if held is holder.__closure__ else "(function)"
    attrs = getattr(holder, "__dict__", None)
    if isinstance(attrs, dict):
        for key, value in attrs.items():
            if value is held:
                return f".{key}"
    for klass in type(holder).__mro__:
        slots = klass.__dict__.get("__slots__", ())
        for slot in (slots,) if isinstance(slots, str) else slots:
            if getattr(holder, slot, None) is held:
                return f".{slot}"
    return "->"


def retention_path(
    target: Any,
    *,
    max_depth: int = 10,
    max_expansions: int = 400,
    time_budget_seconds: float = 1.0,
    ignore: Iterable[Any] = (),
) -> str | None:
    """Return ``"class spiders.Hoarder .kept -> list[2,000] [17] -> HtmlResponse"`` or ``None``.

    Frames (the caller's locals) are not roots; the search stops at the first module or
    class namespace it reaches, or gives up after ``max_expansions`` referrer look-ups or
    ``time_budget_seconds``.
    """
    deadline = time.monotonic() + time_budget_seconds
    own: set[int] = set()
    queue: deque[tuple[Any, tuple[Any, ...]]] = deque([(target, (target,))])
    own.update({id(queue), id(own)})
    ignored = {id(x) for x in ignore}
    seen = {id(target)}
    expansions = 0
    while queue and expansions < max_expansions and time.monotonic() < deadline:
        current, chain = queue.popleft()
        if len(chain) > max_depth:
            continue
        expansions += 1
        referrers = gc.get_referrers(current)
        own.add(id(referrers))
        for holder in referrers:
            if id(holder) in seen or id(holder) in own or id(holder) in ignored:
                continue
            if isinstance(holder, types.FrameType) or holder is chain:
                continue
            seen.add(id(holder))
            root = _root_name(holder)
            if root is not None:
                return _format(root, holder, chain)
            queue.append((holder, (holder, *chain)))
        del referrers
    return None


def _is_namespace_of(cls: Any, container: Any) -> bool:
    """Whether ``container`` is the dict behind ``cls.__dict__``."""
    return isinstance(cls, type) and isinstance(container, dict) and any(
        referent is container for referent in gc.get_referents(cls)
    )


def _without_instance_dicts(chain: tuple[Any, ...]) -> tuple[Any, ...]:
    """Drop an object's own ``__dict__`` from the chain: ``Request .cb_kwargs``, not ``Request -> dict .cb_kwargs``.

    Python 3.10 keeps instance attributes in a dict the gc module reports as its own referrer; 3.11 and later
    refer from the object itself.
    """
    kept = [chain[0]]
    for holder in chain[1:]:
        if getattr(kept[-1], "__dict__", None) is holder and not isinstance(kept[-1], type):
            continue
        kept.append(holder)
    return tuple(kept)


def _format(root: str, root_container: Any, chain: tuple[Any, ...]) -> str:
    chain = _without_instance_dicts(chain)
    if len(chain) > 1 and _is_namespace_of(root_container, chain[0]):
        root_container, chain = chain[0], chain[1:]  # "class X .kept", not "class X -> dict .kept"
    parts = [f"{root} {_edge(root_container, chain[0])}".removesuffix(" ->")]
    for holder, held in pairwise(chain):
        parts.append(f"{_short(holder)} {_edge(holder, held)}".removesuffix(" ->"))
    parts.append(_short(chain[-1]))
    return " -> ".join(parts)


def find_retention(since: probes.Epoch, limit: int = 3, time_budget_seconds: float = 1.0) -> tuple[RetentionPath, ...]:
    """For the crawl's Scrapy objects still alive after it, what keeps one of each class alive.

    The newest object is tried first (usually held directly: a list a callback appends
    to), then the oldest, each with half the time budget.
    """
    found = []
    for class_name, count, candidates in probes.live_object_samples(since, limit):
        path = None
        while candidates and path is None:
            path = retention_path(candidates.pop(0), time_budget_seconds=time_budget_seconds / 2, ignore=[candidates])
        found.append(RetentionPath(class_name, count, path))
        del candidates
    return tuple(found)
