"""What one in-process crawl leaves to the next in the pytest process: state on spider classes (pytest process)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import pytest

from pytest_crawlmem.core.carryover import CarryOver, class_containers
from pytest_crawlmem.core.models import CrawlResult

#: The session's memory of which crawl filled which class container (one per pytest process, xdist worker).
CARRY_OVER_KEY = pytest.StashKey[CarryOver]()


def watching_class_state(config: pytest.Config, test_id: str, spider_cls: type) -> Callable[[CrawlResult], CrawlResult]:
    """Read the spider class's containers now (before the crawl); the returned function reads them after it and
    adds to the result's ``notes`` what an earlier crawl left there, when it changed what this crawl got, and how many
    crawls this process ran before it (``earlier_crawls``)."""
    ledger = config.stash.setdefault(CARRY_OVER_KEY, CarryOver())
    before, earlier = class_containers(spider_cls), ledger.crawls

    def after(result: CrawlResult) -> CrawlResult:
        notes = ledger.after_crawl(test_id, before, class_containers(spider_cls), items=result.items_scraped,
                                   responses=result.responses)
        return replace(result, notes=result.notes + tuple(notes), earlier_crawls=earlier)

    return after
