"""pytest-crawlmem: memory budgets and leak verdicts for real Scrapy crawls, as pytest tests."""

from __future__ import annotations

from .budgets import Budgets, Violation
from .cluster import ClusterResult, RedisSample
from .ledger import Ledger, LostRequest
from .models import Checkpoint, CrawlResult, DroppedResponse, Growth, GrowthSite, Sample
from .sweep import SweepResult, SweepRow

__all__ = [
    "Budgets",
    "Checkpoint",
    "ClusterResult",
    "CrawlResult",
    "DroppedResponse",
    "Growth",
    "GrowthSite",
    "Ledger",
    "LostRequest",
    "RedisSample",
    "Sample",
    "SweepResult",
    "SweepRow",
    "Violation",
]
__version__ = "0.1.0"
