"""A byte-bounded LRU cache for rendered small pages (site process)."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Hashable


class PageCache:
    """Keeps recently rendered page bodies up to ``max_bytes`` in total."""

    def __init__(self, max_bytes: int = 32 * 1024 * 1024, max_item_bytes: int = 1024 * 1024) -> None:
        self._entries: OrderedDict[Hashable, bytes] = OrderedDict()
        self._max_bytes = max_bytes
        self._max_item_bytes = max_item_bytes
        self.size_bytes = 0

    def __len__(self) -> int:
        return len(self._entries)

    def get_or_render(self, key: Hashable, render: Callable[[], bytes]) -> bytes:
        """Return the cached body for ``key``, rendering and storing it on a miss."""
        body = self._entries.get(key)
        if body is not None:
            self._entries.move_to_end(key)
            return body
        body = render()
        if len(body) <= self._max_item_bytes:
            self._entries[key] = body
            self.size_bytes += len(body)
            while self.size_bytes > self._max_bytes:
                _, evicted = self._entries.popitem(last=False)
                self.size_bytes -= len(evicted)
        return body
