"""The stable dotted path of the measuring extension: ``EXTENSIONS = {"pytest_crawlmem.extension.CrawlMemExtension": 0}``.

The code lives in :mod:`pytest_crawlmem.measure.extension`; this path stays because users write it into settings.
"""

from pytest_crawlmem.measure.extension import CrawlMemExtension

__all__ = ["CrawlMemExtension"]
