"""Downloader middlewares that count dropped data into the extension's ledger (crawl process).

Scrapy drops a response silently in three places; each is counted here, by URL, with the size seen:

- DOWNLOAD_MAXSIZE over a declared Content-Length: the handler raises ``DownloadCancelledError`` (Twisted's
  ``CancelledError`` before Scrapy 2.15: ``probes.DOWNLOAD_CANCELLED``)
  whose message carries the size (:class:`CrawlMemDownloaderMiddleware`, ``process_exception``);
- DOWNLOAD_MAXSIZE passed while a body streams in: the download is cancelled with an empty
  ``DownloadCancelledError``; the bytes received so far come from the ``bytes_received`` signal;
- a body over DOWNLOAD_MAXSIZE once decompressed (a gzip bomb): ``HttpCompressionMiddleware``
  raises ``IgnoreRequest`` from ``process_response``, which no other middleware sees, so the
  runner swaps in :class:`CrawlMemHttpCompressionMiddleware`, the same class with a counter.

DOWNLOAD_WARNSIZE warnings (wire size, and size after decompression) are counted, not dropped.
"""

from __future__ import annotations

import weakref
from typing import Any

from scrapy import signals
from scrapy.downloadermiddlewares.httpcompression import HttpCompressionMiddleware
from scrapy.exceptions import IgnoreRequest, NotConfigured
from scrapy.http import Response

from pytest_crawlmem.core.dropped import CANCELLED, DECOMPRESSION, MAXSIZE_DECLARED, MAXSIZE_STREAMED, DropLedger, declared_size
from pytest_crawlmem.measure.extension import CrawlMemExtension
from pytest_crawlmem.probes.readings import DOWNLOAD_CANCELLED, legacy_declared_size

DOWNLOADER_MIDDLEWARE_PATH = "pytest_crawlmem.middleware.CrawlMemDownloaderMiddleware"
#: Nearest the downloader (after HttpCacheMiddleware, 900): it sees every download exception first.
DOWNLOADER_MIDDLEWARE_ORDER = 950
HTTPCOMPRESSION_PATH = "scrapy.downloadermiddlewares.httpcompression.HttpCompressionMiddleware"
COUNTING_HTTPCOMPRESSION_PATH = "pytest_crawlmem.middleware.CrawlMemHttpCompressionMiddleware"


def find_ledger(crawler: Any) -> DropLedger | None:
    """The ledger of the crawl's measuring extension, or ``None`` when it is not enabled."""
    extensions = getattr(crawler, "extensions", None)
    for extension in getattr(extensions, "middlewares", ()):
        if isinstance(extension, CrawlMemExtension):
            return extension.ledger
    return None


class CrawlMemDownloaderMiddleware:
    """Counts responses cancelled by DOWNLOAD_MAXSIZE and responses over DOWNLOAD_WARNSIZE."""

    def __init__(self, ledger: DropLedger, *, maxsize: int, warnsize: int) -> None:
        self.ledger = ledger
        self.maxsize = maxsize
        self.warnsize = warnsize
        self._received: weakref.WeakKeyDictionary[Any, int] = weakref.WeakKeyDictionary()

    @classmethod
    def from_crawler(cls, crawler: Any) -> CrawlMemDownloaderMiddleware:
        """Attach to the measuring extension's ledger; NotConfigured without the extension."""
        ledger = find_ledger(crawler)
        if ledger is None:
            raise NotConfigured("the crawlmem extension is not enabled")
        settings = crawler.settings
        middleware = cls(ledger, maxsize=settings.getint("DOWNLOAD_MAXSIZE"), warnsize=settings.getint("DOWNLOAD_WARNSIZE"))
        crawler.signals.connect(middleware.bytes_received, signal=signals.bytes_received)
        return middleware

    def bytes_received(self, data: bytes, request: Any, spider: Any = None) -> None:
        """Add a chunk's length to its request's running total (a weak dict: dies with the request)."""
        self._received[request] = self._received.get(request, 0) + len(data)

    def process_response(self, request: Any, response: Any, spider: Any = None) -> Any:
        """Count a body over DOWNLOAD_WARNSIZE as it came off the wire (before decompression)."""
        warnsize = request.meta.get("download_warnsize", self.warnsize)
        if warnsize and len(response.body) > warnsize:
            self.ledger.warn()
        return response

    def process_exception(self, request: Any, exception: Exception, spider: Any = None) -> None:
        """Record a download DOWNLOAD_MAXSIZE cancelled, declared or streamed; let the exception go on."""
        if not isinstance(exception, DOWNLOAD_CANCELLED):
            return None
        declared = declared_size(str(exception))
        declared = legacy_declared_size(str(exception)) if declared is None else declared
        if declared is not None:
            self.ledger.drop(request.url, MAXSIZE_DECLARED, declared)
            return None
        received = self._received.pop(request, None)
        maxsize = request.meta.get("download_maxsize", self.maxsize)
        streamed = bool(maxsize) and received is not None and received > maxsize
        self.ledger.drop(request.url, MAXSIZE_STREAMED if streamed else CANCELLED, received)
        return None


class CrawlMemHttpCompressionMiddleware(HttpCompressionMiddleware):
    """Scrapy's HttpCompressionMiddleware, counting bodies dropped or warned about once decompressed."""

    ledger: DropLedger | None = None

    @classmethod
    def from_crawler(cls, crawler: Any) -> Any:
        """Build Scrapy's middleware, attached to the measuring extension's ledger (if enabled)."""
        middleware = super().from_crawler(crawler)
        middleware.ledger = find_ledger(crawler)
        return middleware

    def process_response(self, request: Any, response: Any, spider: Any = None) -> Any:
        """Decompress as Scrapy does; record the response when the decompression limit ignores it."""
        try:  # Scrapy 2.13 requires the spider argument, 2.14+ deprecate it
            result = (super().process_response(request, response) if spider is None
                      else super().process_response(request, response, spider))
        except IgnoreRequest as exc:
            if self.ledger is not None:
                self.ledger.drop(response.url, DECOMPRESSION, getattr(exc.__cause__, "decompressed_size", None))
            raise
        if self.ledger is not None and result is not response and isinstance(result, Response):
            warnsize = request.meta.get("download_warnsize", self._warn_size)
            if warnsize and len(response.body) < warnsize <= len(result.body):  # Scrapy's own condition
                self.ledger.warn()
        return result
