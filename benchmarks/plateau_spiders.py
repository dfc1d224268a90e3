"""Spiders whose memory fills a bounded cache and then stays flat: plateaus, which are no leak.

A module of its own, free of side effects (no reactor is installed on import). Both shapes are clean crawls the
verdict must call ``steady`` with its plateau clause ("filled to N and levelled off at response M"):

- ``LocalCachePlateau``: Scrapy's own ``scrapy.utils.datatypes.LocalCache(limit=200)`` on the spider, one entry per
  response keyed by its URL (the parsed response itself: Python objects and lxml's native tree); full after the
  first 200 responses, flat after.
- ``SqlitePlateau``: a row per response into an SQLite database on a file whose page cache is 1 MiB
  (``PRAGMA cache_size=-1024``): the cache's pages are native memory (SQLite's own allocations) and fill over the
  first ~480 responses, flat after.
"""

from __future__ import annotations

import sqlite3
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from bench_spiders import Catalog
from scrapy.utils.datatypes import LocalCache

#: LocalCachePlateau's bound (entries).
LOCAL_CACHE_LIMIT = 200
#: SqlitePlateau's page cache (KiB; SQLite reads a negative cache_size as KiB).
SQLITE_CACHE_KIB = 1024


class LocalCachePlateau(Catalog):
    """Keeps the last LOCAL_CACHE_LIMIT responses in Scrapy's LocalCache, keyed by URL."""

    name = "localcache_plateau"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.pages: LocalCache[str, Any] = LocalCache(limit=LOCAL_CACHE_LIMIT)

    def parse(self, response: Any) -> Iterator[Any]:
        """A listing page: cached, then followed."""
        self.pages[response.url] = response
        yield from super().parse(response)

    def parse_product(self, response: Any) -> Iterator[Any]:
        """A product page: cached, then scraped."""
        self.pages[response.url] = response
        yield from super().parse_product(response)


class SqlitePlateau(Catalog):
    """Stores every response's body (three times over, ~2 KiB a row) in an SQLite file with a 1 MiB page cache."""

    name = "sqlite_plateau"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.folder = tempfile.TemporaryDirectory(prefix="crawlmem-sqlite-")
        self.db = sqlite3.connect(Path(self.folder.name) / "pages.db")
        self.db.execute(f"PRAGMA cache_size=-{SQLITE_CACHE_KIB}")
        self.db.execute("CREATE TABLE pages (url TEXT PRIMARY KEY, body BLOB)")

    def _store(self, response: Any) -> None:
        with self.db:
            self.db.execute("INSERT OR REPLACE INTO pages VALUES (?, ?)", (response.url, response.body * 3))

    def parse(self, response: Any) -> Iterator[Any]:
        """A listing page: stored, then followed."""
        self._store(response)
        yield from super().parse(response)

    def parse_product(self, response: Any) -> Iterator[Any]:
        """A product page: stored, then scraped."""
        self._store(response)
        yield from super().parse_product(response)

    def closed(self, reason: str) -> None:
        """Close the database and remove its folder."""
        self.db.close()
        self.folder.cleanup()
