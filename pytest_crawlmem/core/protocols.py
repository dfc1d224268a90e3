"""The types of what the fixtures return, for annotating tests (``def test_x(crawl: CrawlFunction)``); typing only.

Imports neither pytest nor Scrapy, so ``from pytest_crawlmem import CrawlFunction`` costs nothing at run time.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any, Protocol

from pytest_crawlmem.core.cluster import ClusterResult
from pytest_crawlmem.core.models import CrawlResult
from pytest_crawlmem.core.sweep import DEFAULT_ISOLATE, SweepResult, Variants


class FixtureSite(Protocol):
    """What the ``fixture_site`` fixture gives: the local site's base URL and URLs on it."""

    base_url: str  # http://127.0.0.1:PORT, no trailing slash

    def url(self, path: str) -> str:
        """``base_url + path``."""
        ...


class CrawlFunction(Protocol):
    """The callable the ``crawl`` fixture returns."""

    def __call__(
        self,
        spider_cls: type | str,
        *,
        start_urls: list[str] | None = None,
        settings: Mapping[str, Any] | None = None,
        isolate: bool = False,
        project_settings: bool | str | None = None,
        replay: str | Path | None = None,
        replay_copies: int | str = 1,
        replay_latency: float | str | None = None,
        replay_drip: int | str | None = None,
        replay_inflate: float | None = None,
        governor: str | int | None = None,
        **spider_kwargs: Any,
    ) -> CrawlResult: ...


class SweepFunction(Protocol):
    """The callable the ``crawl_sweep`` fixture returns."""

    def __call__(
        self,
        spider_cls: type | str,
        variants: Variants,
        *,
        start_urls: list[str] | None = None,
        settings: Mapping[str, Any] | None = None,
        isolate: bool = DEFAULT_ISOLATE,
        replay: str | Path | None = None,
        replay_copies: int = 1,
        **spider_kwargs: Any,
    ) -> SweepResult: ...


class BrowserJobHandle(Protocol):
    """What a ``browser_job`` function gets (``browser/job.BrowserJob`` is the one implementation)."""

    browser: Any  # the launched Playwright browser
    base_url: str | None  # the fixture site's, when the test uses ``fixture_site``
    pages_done: int

    def url(self, path: str) -> str:
        """``base_url + path``."""
        ...

    def page_done(self, count: int = 1) -> None:
        """Count pages (growth is judged per page)."""
        ...

    def open_pages(self) -> list[Any]:
        """Every open page of every context of the browser."""
        ...

    async def checkpoint(self) -> None:
        """Take a drained checkpoint (renderer GC on every open page first)."""
        ...


class BrowserJobFunction(Protocol):
    """The callable the ``browser_job`` fixture returns."""

    def __call__(
        self, func: Callable[[BrowserJobHandle], Awaitable[Any]], *, launch: Mapping[str, Any] | None = None
    ) -> CrawlResult: ...


class ClusterFunction(Protocol):
    """The callable the ``crawl_cluster`` fixture returns."""

    def __call__(
        self,
        spider_cls: type | str,
        *,
        workers: int = 3,
        start_urls: list[str] | None = None,
        settings: Mapping[str, Any] | None = None,
        kill: Mapping[str, Any] | None = None,
        project_settings: bool | str | None = None,
        replay: str | Path | None = None,
        replay_copies: int = 1,
        **spider_kwargs: Any,
    ) -> ClusterResult: ...
