"""pytest-crawlmem: memory budgets and leak verdicts for real Scrapy crawls, as pytest tests.

The stable public surface is what ``__all__`` lists (docs/api.md): results, budgets and the fixtures'
types. Everything else (modules, their functions) may change between releases. Importing this package
imports neither pytest nor Scrapy, and each public name loads its module when first used.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
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
#: Where each public name lives: it is imported when first asked for, so a crawl that only loads the governor (or
#: the measuring extension) does not load the verdicts, budgets and cluster models with it (3 MiB and 44 modules).
_HOMES = {
    "Budgets": "pytest_crawlmem.core.budgets",
    "Violation": "pytest_crawlmem.core.budgets",
    "ClusterResult": "pytest_crawlmem.core.cluster",
    "RedisSample": "pytest_crawlmem.core.cluster",
    "Ledger": "pytest_crawlmem.core.ledger",
    "LostRequest": "pytest_crawlmem.core.ledger",
    "Checkpoint": "pytest_crawlmem.core.models",
    "CrawlResult": "pytest_crawlmem.core.models",
    "DroppedResponse": "pytest_crawlmem.core.models",
    "Growth": "pytest_crawlmem.core.models",
    "GrowthSite": "pytest_crawlmem.core.models",
    "Sample": "pytest_crawlmem.core.models",
    "BrowserJobFunction": "pytest_crawlmem.core.protocols",
    "ClusterFunction": "pytest_crawlmem.core.protocols",
    "CrawlFunction": "pytest_crawlmem.core.protocols",
    "FixtureSite": "pytest_crawlmem.core.protocols",
    "SweepFunction": "pytest_crawlmem.core.protocols",
    "HARNESS_STOPS": "pytest_crawlmem.core.stops",
    "SweepResult": "pytest_crawlmem.core.sweep",
    "SweepRow": "pytest_crawlmem.core.sweep",
}


def __getattr__(name: str) -> Any:
    """The public names, imported when first asked for."""
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value
    return value
