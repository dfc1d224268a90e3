"""The memory governor: keeps a running crawl inside its memory budget, losing nothing (crawl process).

Users write these dotted paths into settings: ``ADDONS = {"pytest_crawlmem.governor.GovernorAddon": 0}``,
``EXTENSIONS``, ``SCHEDULER``, ``SPIDER_MIDDLEWARES``. They load on first use, so the room's pure modules
(``policy``, ``context_policy``, ``browser_concurrency``) import without Scrapy.

Owns: the decision (``policy``: what a request costs, which lever, once a tick), the Scrapy extension and its addon
(``extension``, ``setup``), the levers (``gates`` on the downloader, ``admit`` by cost before the parse, ``spill`` of the
backlog to disk, ``contextlever`` for browser contexts) and its Prometheus gauges (``metrics``).
May import: ``core`` and ``probes``.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pytest_crawlmem.governor.extension import MemoryGovernor
    from pytest_crawlmem.governor.setup import GovernorAddon
    from pytest_crawlmem.governor.spill import SpillingScheduler, StartGate

__all__ = ["GovernorAddon", "MemoryGovernor", "SpillingScheduler", "StartGate"]
_HOMES = {"GovernorAddon": "setup", "MemoryGovernor": "extension", "SpillingScheduler": "spill", "StartGate": "spill"}


def __getattr__(name: str) -> Any:
    """The public classes, imported when first asked for (Scrapy's ``load_object`` asks by attribute)."""
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{home}"), name)
