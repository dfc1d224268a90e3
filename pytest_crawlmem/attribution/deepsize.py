"""The deep size of what a holder keeps: bytes as tracemalloc counts them and as the heap estimate does (crawl process).

Walks containers, instances' ``__dict__`` and slots from the roots, counting each object once, sampling large
containers. May import: ``core``.
"""

from __future__ import annotations

import itertools
import sys
import types
from collections import deque
from collections.abc import Iterable, Iterator
from typing import Any

from pytest_crawlmem.core.models import BLOCK_BYTES

#: Entries of a container measured one by one; a larger one is measured from this many spread over it.
SAMPLE_ENTRIES = 256
#: Objects measured per holder at most (a holder that reaches the whole process stops here).
MAX_OBJECTS = 50_000
#: Levels walked below the holder.
MAX_DEPTH = 8
#: pymalloc serves objects of this size or less (the heap estimate counts each at BLOCK_BYTES).
SMALL_OBJECT_BYTES = 512
_LEAVES = (str, bytes, bytearray, int, float, complex, bool, type(None), memoryview)
_NEVER = (type, types.ModuleType, types.FunctionType, types.BuiltinFunctionType, types.MethodType, types.CodeType,
          types.FrameType)


def _entries(value: Any) -> Iterator[Any]:
    if isinstance(value, dict):
        for key, item in list(value.items()):
            yield key
            yield item
    elif isinstance(value, (list, tuple, set, frozenset, deque)):
        yield from list(value)
    else:
        attrs = getattr(value, "__dict__", None)
        if isinstance(attrs, dict):
            yield attrs
        for name in _slots(type(value)):
            item = getattr(value, name, None)
            if item is not None:
                yield item


def _slots(kind: type) -> Iterator[str]:
    for klass in kind.__mro__:
        slots = vars(klass).get("__slots__", ())
        yield from ((slots,) if isinstance(slots, str) else slots)


def _sampled(value: Any) -> tuple[list[Any], float]:
    """The entries of ``value`` to walk and the weight of each (its share of the entries they stand for)."""
    if isinstance(value, (dict, list, tuple, set, frozenset, deque)) and len(value) > SAMPLE_ENTRIES:
        step = len(value) // SAMPLE_ENTRIES
        items = value.items() if isinstance(value, dict) else value
        picked = list(itertools.islice(items, 0, None, step))[:SAMPLE_ENTRIES]
        entries = [part for pair in picked for part in pair] if isinstance(value, dict) else picked
        return entries, len(value) / len(picked)
    return list(_entries(value)), 1.0


def deep_size(roots: list[Any], stop: Iterable[Any] = ()) -> tuple[int, int]:
    """Bytes the ``roots`` hold, counted once each: (as tracemalloc counts them, as the heap estimate counts them).

    ``stop``: objects not walked into, nor counted (the crawler, the spider and the components: what a holder refers to
    but does not hold).
    """
    seen: set[int] = {id(value) for value in stop}
    pending: list[tuple[Any, int, float]] = [(root, 0, 1.0) for root in roots]
    traced = heap = 0.0
    objects = 0
    while pending and objects < MAX_OBJECTS:
        value, depth, weight = pending.pop()
        if id(value) in seen or isinstance(value, _NEVER):
            continue
        seen.add(id(value))
        objects += 1
        try:
            size = sys.getsizeof(value)
        except TypeError:
            continue
        traced += weight * size
        heap += weight * (size if size > SMALL_OBJECT_BYTES else BLOCK_BYTES)
        if depth >= MAX_DEPTH or isinstance(value, _LEAVES):
            continue
        entries, share = _sampled(value)
        pending.extend((entry, depth + 1, weight * share) for entry in entries)
    return int(traced), int(heap)
