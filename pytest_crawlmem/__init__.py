"""pytest-crawlmem: memory budgets and leak verdicts for real Scrapy crawls, as pytest tests.

The stable public surface is what ``__all__`` lists (docs/api.md): results, budgets and the fixtures'
types. Everything else (modules, their functions) may change between releases. Importing this package
imports neither pytest nor Scrapy.
"""

from __future__ import annotations

from pytest_crawlmem.core.budgets import Budgets, Violation
from pytest_crawlmem.core.cluster import ClusterResult, RedisSample
from pytest_crawlmem.core.ledger import Ledger, LostRequest
from pytest_crawlmem.core.models import Checkpoint, CrawlResult, DroppedResponse, Growth, GrowthSite, Sample
from pytest_crawlmem.core.protocols import BrowserJobFunction, ClusterFunction, CrawlFunction, FixtureSite, SweepFunction
from pytest_crawlmem.core.stops import HARNESS_STOPS
from pytest_crawlmem.core.sweep import SweepResult, SweepRow

__all__ = [
    "HARNESS_STOPS",
    "BrowserJobFunction",
    "Budgets",
    "Checkpoint",
    "ClusterFunction",
    "ClusterResult",
    "CrawlFunction",
    "CrawlResult",
    "DroppedResponse",
    "FixtureSite",
    "Growth",
    "GrowthSite",
    "Ledger",
    "LostRequest",
    "RedisSample",
    "Sample",
    "SweepFunction",
    "SweepResult",
    "SweepRow",
    "Violation",
]
__version__ = "0.1.0"
