"""The memory governor's Prometheus gauges, served by the measuring extension's endpoint (crawl process).

``MemoryGovernor`` registers a :class:`GovernorCollector` on the registry of the measuring extension's
``MetricsServer`` when ``CRAWLMEM_PROMETHEUS_PORT`` is set; each scrape reads the governor's plain attributes.
"""

from __future__ import annotations

from collections.abc import Callable, Sized
from typing import TYPE_CHECKING, Any, Protocol

from pytest_crawlmem.governor.policy import Levers, Policy, PolicyConfig

if TYPE_CHECKING:
    from pytest_crawlmem.governor.contextlever import ContextLever


class GovernorState(Protocol):
    """What the gauges read of the governor (``governor/extension.py``'s ``MemoryGovernor``, which imports this module)."""

    crawler: Any
    config: PolicyConfig
    policy: Policy
    lever: ContextLever | None

    @property
    def decisions(self) -> Sized:
        """The decisions taken so far."""

    def _concurrency(self, levers: Levers) -> int: ...

#: (metric name, help, how to read it from the governor): the gauges of the governor's state.
GAUGES: tuple[tuple[str, str, Callable[[GovernorState], float]], ...] = (
    ("crawlmem_governor_budget_bytes", "The memory governor's budget", lambda g: g.config.budget_bytes),
    ("crawlmem_governor_concurrency", "Concurrency the governor set (downloader.total_concurrency)",
     lambda g: g._concurrency(g.policy.levers)),
    ("crawlmem_governor_max_active_size_bytes", "Scraper active size limit the governor set",
     lambda g: g.policy.levers.max_active_size),
    ("crawlmem_governor_start_gated", "1 while the governor holds start requests back",
     lambda g: int(g.policy.levers.gate_start)),
    ("crawlmem_governor_spilling", "1 while new requests spill to disk", lambda g: int(g.policy.levers.spill)),
    ("crawlmem_governor_decisions", "Decisions the governor took", lambda g: len(g.decisions)),
    ("crawlmem_governor_cost_in_flight_bytes", "Learned memory cost of an in-flight request",
     lambda g: g.policy.model.costs()[0]),
    ("crawlmem_governor_cost_queued_bytes", "Learned memory cost of a queued request",
     lambda g: g.policy.model.costs()[1]),
    ("crawlmem_governor_browser_pss_bytes", "The browser tree's PSS as the governor's browser lever last read it",
     lambda g: g.lever.tree_bytes if g.lever is not None else 0),
    ("crawlmem_governor_browser_rotations", "Browser contexts the governor rotated",
     lambda g: g.lever.rotations if g.lever is not None else 0),
)


class GovernorCollector:
    """A prometheus_client collector of the governor's gauges (metrics server thread; reads plain attributes)."""

    def __init__(self, governor: GovernorState, spider: str) -> None:
        self.governor = governor
        self.spider = spider

    def collect(self) -> Any:
        """Yield one gauge family per figure of :data:`GAUGES`."""
        from prometheus_client.core import GaugeMetricFamily

        for name, text, read in GAUGES:
            family = GaugeMetricFamily(name, text, labels=["spider"])
            family.add_metric([self.spider], float(read(self.governor)))
            yield family


def register_metrics(governor: GovernorState) -> bool:
    """Add the governor's gauges to the measuring extension's Prometheus endpoint, when it serves one; whether it did."""
    for extension in getattr(getattr(governor.crawler, "extensions", None), "middlewares", ()):
        registry = getattr(getattr(extension, "metrics", None), "registry", None)
        if registry is not None:
            registry.register(GovernorCollector(governor, getattr(governor.crawler.spider, "name", "?")))
            return True
    return False
