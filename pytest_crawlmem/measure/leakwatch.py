"""The verdict of a running crawl, from its drained checkpoints so far: a WARNING when it shows a leak (crawl process).

Production crawls have no test to fail: at each drained checkpoint :class:`LeakWatch` judges the checkpoints so far
(``growth.analyze``, the same rules as a test's verdict), keeps the verdict and the growth per response for the
status line, the stats (``crawlmem/verdict``, ``crawlmem/growth_per_response``) and Prometheus, and logs one WARNING
when the verdict first shows the leak signature, then again only when it changes (as Scrapy's MemoryUsage warns once).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from pytest_crawlmem.core import verdicts
from pytest_crawlmem.core.declared import Declared
from pytest_crawlmem.core.defaults import DEFAULT_LEAK_PER_RESPONSE
from pytest_crawlmem.core.growth import analyze
from pytest_crawlmem.core.models import Checkpoint
from pytest_crawlmem.core.rules import decided_by
from pytest_crawlmem.core.setaside import judge_declared

#: The verdicts that are the leak signature: memory the queues do not explain.
LEAK_VERDICTS = verdicts.LEAKS


class LeakWatch:
    """Judges the checkpoints as they come (reactor thread); read by the status line and the metrics."""

    def __init__(self, logger: logging.Logger, *, leak_per_response: int | None = None, min_interval: int = 100,
                 expected_growth: Declared = ()) -> None:
        self.logger = logger
        self.expected_growth = expected_growth  # holders declared by design: set aside (core/setaside.py)
        self.leak_per_response = leak_per_response
        self.min_interval = min_interval
        self.verdict = ""  # "" until a checkpoint was judged
        self.reason = ""
        self.per_response_bytes: float | None = None
        self.decided_by = ""  # the evidence the verdict rests on (growth.decided_by)
        self.warned: str = ""  # the leak verdict last warned of
        self.warnings = 0

    def judge(self, checkpoints: Sequence[Checkpoint]) -> None:
        """Judge the drained checkpoints so far; warn when a leak verdict appears or changes. Never raises."""
        drained = [c for c in checkpoints if c.drained]
        if len(drained) < 3:
            return
        try:
            threshold = self.leak_per_response or DEFAULT_LEAK_PER_RESPONSE
            growth = judge_declared(drained, self.expected_growth, lambda points: analyze(
                points, min_interval=self.min_interval, leak_per_response=threshold, running=True))
        except Exception as exc:  # a verdict engine that fails must not stop the crawl
            self.reason = f"could not judge: {exc!r}"
            return
        self.verdict, self.reason, self.per_response_bytes = growth.verdict, growth.reason, growth.per_response_bytes
        self.decided_by = decided_by(growth)
        if growth.verdict in LEAK_VERDICTS and growth.verdict != self.warned:
            self.warned = growth.verdict
            self.warnings += 1
            self.logger.warning("crawlmem: leak suspected at %s responses: %s: %s", f"{drained[-1].responses:,}",
                                growth.verdict, growth.reason)
        elif growth.verdict not in LEAK_VERDICTS and self.warned and growth.verdict != verdicts.INCONCLUSIVE:
            self.logger.warning("crawlmem: the %s verdict no longer holds at %s responses: %s", self.warned,
                                f"{drained[-1].responses:,}", growth.verdict)
            self.warned = ""

    @property
    def leak_suspected(self) -> bool:
        """Whether the current verdict is the leak signature."""
        return self.verdict in LEAK_VERDICTS
