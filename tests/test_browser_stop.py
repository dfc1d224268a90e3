"""A stop that carries itself through (escalation.py) and the running verdict of production crawls (leakwatch.py)."""

from __future__ import annotations

import logging

import pytest

from pytest_crawlmem.core.models import Checkpoint
from pytest_crawlmem.measure.escalation import StopEscalation
from pytest_crawlmem.measure.leakwatch import LeakWatch

MIB = 2**20


class FakeClock:
    """callLater on a manual clock."""

    def __init__(self) -> None:
        self.calls: list[tuple[float, object]] = []

    def call_later(self, seconds: float, func):  # type: ignore[no-untyped-def]
        clock = self

        class Call:
            def active(self) -> bool:
                return (seconds, func) in clock.calls

            def cancel(self) -> None:
                clock.calls.remove((seconds, func))

        self.calls.append((seconds, func))
        return Call()

    def run_next(self) -> None:
        _, func = self.calls.pop(0)
        func()  # type: ignore[operator]


def test_a_stop_that_does_not_end_runs_each_step_in_turn_until_the_crawl_ends(caplog):
    clock, ended, ran = FakeClock(), [False], []
    steps = [(name, lambda name=name: ran.append(name) or f"did {name}") for name in ("pages", "contexts", "kill")]
    notes: list[str] = []
    stop = StopEscalation(steps, ended=lambda: ended[0], call_later=clock.call_later,
                          logger=logging.getLogger("test"), note=notes.append)
    stop.start()
    clock.run_next()
    assert ran == ["pages"]
    stop.escalate("the crawl was still running after 25 s, the budget timeout")  # the timeout: the next step at once
    assert ran == ["pages", "contexts"]
    assert "the budget timeout: did contexts" in notes[-1]
    ended[0] = True
    clock.run_next()
    assert ran == ["pages", "contexts"]  # the crawl ended: nothing more
    assert not clock.calls


def test_a_failing_step_does_not_stop_the_ones_after_it():
    clock, ran = FakeClock(), []

    def broken() -> str:
        raise RuntimeError("browser gone")

    stop = StopEscalation([("broken", broken), ("next", lambda: ran.append("next") or "next")], ended=lambda: False,
                          call_later=clock.call_later, logger=logging.getLogger("test"))
    stop.start()
    clock.run_next()
    clock.run_next()
    assert ran == ["next"] and "broken failed: RuntimeError('browser gone')" in stop.done[0]


def checkpoints(per_response: int, count: int = 7) -> list[Checkpoint]:
    at = [0, 100, 200, 300, 450, 675, 1000, 1500][:count]
    return [Checkpoint(responses=n, t_seconds=n / 100, rss_bytes=80 * MIB + n * per_response,
                       heap_bytes=40 * MIB + n * per_response, traced_bytes=None, scheduled=0,
                       live_refs={"HtmlResponse": 0}) for n in at]


def test_a_leaking_crawl_warns_once_and_again_only_when_the_verdict_changes(caplog):
    watch = LeakWatch(logging.getLogger("pytest_crawlmem.extension"))
    with caplog.at_level(logging.WARNING):
        for count in range(2, 8):
            watch.judge(checkpoints(8192, count))
    leaks = [r for r in caplog.records if "leak suspected" in r.getMessage()]
    assert len(leaks) == 1, [r.getMessage() for r in caplog.records]
    assert watch.verdict == "retained-objects" and watch.leak_suspected
    assert watch.per_response_bytes == pytest.approx(8192, rel=0.2)


def test_a_steady_crawl_never_warns(caplog):
    watch = LeakWatch(logging.getLogger("pytest_crawlmem.extension"))
    with caplog.at_level(logging.WARNING):
        for count in range(2, 8):
            watch.judge(checkpoints(0, count))
    assert not caplog.records
    assert watch.verdict == "steady" and not watch.leak_suspected


def test_the_ceiling_counts_the_browser_tree_with_the_crawl():
    from pytest_crawlmem.probes.meter import Ceiling

    stops: list[tuple[str, str]] = []
    ceiling = Ceiling(500 * MIB, lambda reason, message: stops.append((reason, message)))
    assert not ceiling.check(100 * MIB, 1.0, 300 * MIB)
    assert ceiling.check(100 * MIB, 2.0, 450 * MIB)
    assert stops == [("crawlmem_kill_at", "RSS of the crawl (100.0 MiB) and PSS of its browser tree (450.0 MiB) reached"
                      " 550.0 MiB at 2.0 s, the hard ceiling kill_at")]


def test_a_leak_warning_comes_again_when_the_verdict_changes_and_says_when_it_no_longer_holds(caplog):
    """Once, then when it changes: a leak that stops is said to no longer hold; one that starts again warns again."""
    watch = LeakWatch(logging.getLogger("pytest_crawlmem.extension"))
    at = [0, 100, 200, 300, 450, 675, 1000, 1500, 2250, 3375, 5000, 7500, 11000, 16000, 24000, 36000]
    leaking = [(100, 1000), (16000, 36000)]  # 8 KiB kept a response over these response counts, nothing between
    points: list[Checkpoint] = []
    grown, verdicts_seen = 0, []
    with caplog.at_level(logging.WARNING):
        for n in at:
            if points and any(start < n <= end for start, end in leaking):
                grown += (n - points[-1].responses) * 8192
            points.append(Checkpoint(responses=n, t_seconds=n / 100, rss_bytes=80 * MIB + grown,
                                     heap_bytes=40 * MIB + grown, traced_bytes=None, scheduled=0,
                                     live_refs={"HtmlResponse": 0}))
            watch.judge(points)
            verdicts_seen.append(watch.verdict)
    messages = [r.getMessage() for r in caplog.records]
    suspected = [m for m in messages if "leak suspected" in m]
    assert len(suspected) == 2, messages  # the first leak, and the second after it had stopped
    assert sum("the retained-objects verdict no longer holds" in m for m in messages) == 1, messages
    assert messages.index(suspected[0]) < next(i for i, m in enumerate(messages) if "no longer holds" in m) \
        < messages.index(suspected[1])
    assert "steady" in verdicts_seen and watch.verdict == "retained-objects" and watch.warnings == 2
