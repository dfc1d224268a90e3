"""The stable dotted paths of the memory governor: ``ADDONS = {"pytest_crawlmem.governor.GovernorAddon": 0}``.

The code lives in :mod:`pytest_crawlmem.crawl.governor` and :mod:`pytest_crawlmem.crawl.spill`; these paths stay
because users write them into settings (``EXTENSIONS``, ``SCHEDULER``, ``SPIDER_MIDDLEWARES``, ``ADDONS``).
"""

from .crawl.governor import GovernorAddon, MemoryGovernor
from .crawl.spill import SpillingScheduler, StartGate

__all__ = ["GovernorAddon", "MemoryGovernor", "SpillingScheduler", "StartGate"]
