"""pytest-crawlmem: memory budgets and leak verdicts for real Scrapy crawls, as pytest tests.

The stable public surface is what ``__all__`` lists (docs/api.md): results, budgets and the fixtures'
types. Everything else (modules, their functions) may change between releases. Importing this package
imports neither pytest nor Scrapy.
"""

from __future__ import annotations

from .core.budgets import Budgets, Violation
from .core.cluster import ClusterResult, RedisSample
from .core.ledger import Ledger, LostRequest
from .core.models import Checkpoint, CrawlResult, DroppedResponse, Growth, GrowthSite, Sample
from .core.protocols import BrowserJobFunction, ClusterFunction, CrawlFunction, FixtureSite, SweepFunction
from .core.stops import HARNESS_STOPS
from .core.sweep import SweepResult, SweepRow

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
