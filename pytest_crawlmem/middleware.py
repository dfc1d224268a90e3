"""The stable dotted paths of the downloader middlewares (``DOWNLOADER_MIDDLEWARES``).

The code lives in :mod:`pytest_crawlmem.measure.middleware`; these paths stay because users write them into settings.
"""

from pytest_crawlmem.measure.middleware import CrawlMemDownloaderMiddleware, CrawlMemHttpCompressionMiddleware

__all__ = ["CrawlMemDownloaderMiddleware", "CrawlMemHttpCompressionMiddleware"]
