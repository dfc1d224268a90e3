"""pytest-crawlmem: memory budgets and leak verdicts for real Scrapy crawls, as pytest tests."""

from __future__ import annotations

from .budgets import Budgets, Violation
from .models import Checkpoint, CrawlResult, DroppedResponse, Growth, GrowthSite, Sample
from .sweep import SweepResult, SweepRow

__all__ = [
    "Budgets",
    "Checkpoint",
    "CrawlResult",
    "DroppedResponse",
    "Growth",
    "GrowthSite",
    "Sample",
    "SweepResult",
    "SweepRow",
    "Violation",
]
__version__ = "0.1.0"
