"""Recording from a stand-in: a download handler that fetches an origin's URLs from a local copy of the site and hands
the spider (and Scrapy's HTTP cache) responses under the original URLs (the ``scrapy crawl`` process of
``crawlmem record --stand-in``).

``GET https://www.shop.example/p/1?x=2`` is fetched as ``GET http://127.0.0.1:8000/p/1?x=2``; the stand-in's own
base URL in a textual body and in ``Location``-like headers becomes the origin again, as the real site would have
written it. URLs of other origins are downloaded as usual.
"""

from __future__ import annotations

import gzip
import inspect
import re
import zlib
from typing import Any

from scrapy import Request
from scrapy.core.downloader.handlers.http11 import HTTP11DownloadHandler
from scrapy.exceptions import NotConfigured
from scrapy.http import Response

from pytest_crawlmem.core.defaults import name_of
from pytest_crawlmem.core.standin import origin_of, read_stand_in_setting, stand_in_url

_TEXTUAL = re.compile(rb"^(text/|application/(.*\+)?(json|xml|javascript|ecmascript)|image/svg)", re.I)
_URL_HEADERS = (b"Location", b"Content-Location", b"Refresh", b"Link")


def _forms(base: str, origin: str) -> list[tuple[bytes, bytes]]:
    """The spellings of a stand-in's base URL in a body, with the origin's: absolute, JSON-escaped, scheme-relative."""
    bare_base, bare_origin = base.split("://", 1)[1], origin.split("://", 1)[1]
    pairs = [(base, origin), (base.replace("/", "\\/"), origin.replace("/", "\\/")), (f"//{bare_base}", f"//{bare_origin}")]
    return [(a.encode(), b.encode()) for a, b in pairs]


def _rewritten(data: bytes, forms: list[tuple[bytes, bytes]]) -> bytes:
    for old, new in forms:
        data = data.replace(old, new)
    return data


def restore_body(body: bytes, content_type: bytes, encoding: bytes, forms: list[tuple[bytes, bytes]]) -> bytes:
    """``body`` with the stand-in's base URL written as the origin (textual bodies; identity, gzip or deflate)."""
    if not _TEXTUAL.match(content_type or b"text/html"):
        return body
    kind = encoding.strip().lower()
    try:
        if kind in (b"", b"identity"):
            return _rewritten(body, forms)
        if kind in (b"gzip", b"x-gzip"):
            return gzip.compress(_rewritten(gzip.decompress(body), forms), mtime=0)
        if kind == b"deflate":
            return zlib.compress(_rewritten(zlib.decompress(body), forms))
    except (OSError, zlib.error, EOFError):  # a body that does not decode is kept as served
        return body
    return body


class _StandInBase(HTTP11DownloadHandler):
    """Fetches the URLs of CRAWLMEM_STAND_IN's origins from their stand-ins; other URLs as Scrapy's HTTP/1.1 handler."""

    def __init__(self, *args: Any) -> None:  # (crawler) on Scrapy >= 2.14, (settings, crawler) on 2.13
        crawler = args[-1]
        value = crawler.settings.get(name_of("stand_in"))
        if not value:
            raise NotConfigured(f"StandInDownloadHandler needs {name_of('stand_in')}")
        self._map = read_stand_in_setting(value)
        super().__init__(*args)

    def _local(self, request: Request) -> tuple[Request, str] | None:
        """``request`` addressed to its origin's stand-in (no proxy), and the stand-in's base URL; ``None``: no stand-in."""
        url = stand_in_url(request.url, self._map)
        if url is None:
            return None
        meta = {k: v for k, v in request.meta.items() if k != "proxy"}
        return request.replace(url=url, meta=meta), self._map[origin_of(request.url) or ""]

    def _restored(self, request: Request, response: Response, base: str) -> Response:
        """The stand-in's response under the original URL, its base URL written as the origin."""
        forms = _forms(base, origin_of(request.url) or "")
        headers = response.headers.copy()
        for name in _URL_HEADERS:
            values = headers.getlist(name)
            if values:
                headers.setlist(name, [_rewritten(v, forms) for v in values])
        body = restore_body(response.body, headers.get(b"Content-Type") or b"", headers.get(b"Content-Encoding") or b"", forms)
        if body is not response.body and headers.get(b"Content-Length") is not None:
            headers[b"Content-Length"] = str(len(body)).encode()
        return response.replace(url=request.url, headers=headers, body=body)


class _AsyncStandInHandler(_StandInBase):
    """The stand-in handler for Scrapy >= 2.14, whose handlers are coroutines."""

    async def download_request(self, request: Request) -> Response:
        """Fetch ``request`` from its origin's stand-in (or as usual); the response carries the original URL."""
        local = self._local(request)
        if local is None:
            return await super().download_request(request)
        response = await super().download_request(local[0])
        return self._restored(request, response, local[1])


class _DeferredStandInHandler(_StandInBase):
    """The stand-in handler for Scrapy 2.13, whose handlers take the spider and return a Deferred."""

    def download_request(self, request: Request, spider: Any) -> Any:  # type: ignore[override]
        """Fetch ``request`` from its origin's stand-in (or as usual); the response carries the original URL."""
        local = self._local(request)
        if local is None:
            return super().download_request(request, spider)  # type: ignore[call-arg]

        def done(result: Any) -> Any:
            return self._restored(request, result, local[1]) if isinstance(result, Response) else result

        deferred: Any = super().download_request(local[0], spider)  # type: ignore[call-arg]
        return deferred.addCallback(done)


#: Scrapy's dotted path to the stand-in handler (core.standin.STAND_IN_HANDLER_PATH), for this Scrapy's interface.
StandInDownloadHandler: type[_StandInBase] = (
    _AsyncStandInHandler if inspect.iscoroutinefunction(HTTP11DownloadHandler.download_request) else _DeferredStandInHandler
)
