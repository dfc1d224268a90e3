"""The governor's close counts every request it leaves: none leaves the scheduler once it is counted (no crawl)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pytest_crawlmem.governor.extension import MemoryGovernor
from pytest_crawlmem.governor.gates import DownloadGate, PullHold

MIB = 2**20


class Downloader:
    """The downloader's two methods the gates wrap: Scrapy itself would let a request out (needs_backout False)."""

    def __init__(self) -> None:
        self.active: set[Any] = set()

    def needs_backout(self) -> bool:
        return False

    async def _enqueue_request(self, request: Any) -> Any:  # pragma: no cover - no download here
        return None


class NextCall:
    def __init__(self) -> None:
        self.scheduled = 0

    def schedule(self) -> None:
        self.scheduled += 1


class Engine:
    spider = None  # probes.close_spider() asks nothing of an engine without a spider

    def __init__(self) -> None:
        self._slot = type("Slot", (), {"nextcall": NextCall()})()


def test_a_paused_hold_closed_for_the_close_refuses_every_pull_and_never_kicks_the_engine() -> None:
    downloader, engine = Downloader(), Engine()
    hold = PullHold(downloader, engine, lambda: 0)
    hold.paused = True
    hold.hold_for_close()
    hold.paused = False
    hold.kick()
    hold.set_cap(0)
    assert downloader.needs_backout() is True
    assert engine._slot.nextcall.scheduled == 0


def test_the_tick_that_closes_lifts_the_pause_without_letting_a_counted_request_out(tmp_path: Path) -> None:
    """The leak workload's close counted 601 of 600 requests: the tick that decided the close lifted the pause (so
    downloads held at the door finish) and kicked the engine, which pulled one more request out of the scheduler
    before its close began; the count had already called that request queued, and it was crawled too."""
    from scrapy.utils.test import get_crawler

    crawler = get_crawler(settings_dict={"CRAWLMEM_BUDGET": "300 MiB", "JOBDIR": str(tmp_path)})
    governor = MemoryGovernor(crawler, budget_bytes=300 * MIB, interval_seconds=0.25)
    downloader, engine = Downloader(), Engine()
    crawler._engine = engine
    governor.download_gate = DownloadGate(downloader)
    governor.pull_hold = PullHold(downloader, engine, lambda: 0)
    governor._pause(True)  # over the close share
    assert downloader.needs_backout() is True
    governor._close(engine)  # the close decision (with JOBDIR: the queue is kept; without it, counted)
    governor._pause(False)  # as the same tick does once closing: held downloads go through
    assert governor.download_gate.paused is False
    assert downloader.needs_backout() is True, "the engine may pull a request the close counted as queued"
    assert engine._slot.nextcall.scheduled == 0
