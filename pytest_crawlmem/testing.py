"""The stable path of the test helpers: ``ITEM_PIPELINES = {"pytest_crawlmem.testing.SlowPipeline": 300}``.

The code lives in :mod:`pytest_crawlmem.measure.testing`.
"""

from pytest_crawlmem.measure.testing import SlowPipeline, burn_cpu

__all__ = ["SlowPipeline", "burn_cpu"]
