"""Replay copies as a spider or a pipeline sees them: which copy a URL, request or response belongs to, and the URL it
copies (any process; ``from pytest_crawlmem.replay import copy_of, original_url``).

The room owns replay's Scrapy side: the download handler that asks the replay site (``handler``), the copies counted
per copy (``copies``) and the stand-in handler used while recording (``standin``). The pure plan and checks of a
replay live in ``core.replay`` and ``core.replay_copies``. May import: ``core``.

Copy K of a replayed recording is served under hosts ``crawlmem-copyK.<host>`` (docs/replay.md, *Copies*); copy 0 is
the original. Outside a replayed crawl every URL is copy 0 and its own original.
"""

from __future__ import annotations

from typing import Any

from pytest_crawlmem.core.replay import copy_of as _copy_of_url
from pytest_crawlmem.core.replay import original_url as _original_url

__all__ = ["copy_of", "original_url"]


def _url(thing: Any) -> str:
    url = thing if isinstance(thing, str) else getattr(thing, "url", None)
    if not isinstance(url, str):
        raise TypeError(f"expected a URL, a Request or a Response, got {type(thing).__name__}")
    return url


def copy_of(url_or_response: Any) -> int:
    """The replay copy a URL (or a Request, or a Response) belongs to: K on ``crawlmem-copyK.<host>``, else 0."""
    return _copy_of_url(_url(url_or_response))


def original_url(url_or_response: Any) -> str:
    """The URL a copy's URL (or Request, or Response) copies: ``https://crawlmem-copy3.www.shop.example/p/1`` ->
    ``https://www.shop.example/p/1``; any other URL as it is."""
    return _original_url(_url(url_or_response))
