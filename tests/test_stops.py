"""One stop-reason vocabulary: the reason travels as data, never recovered from a sentence."""

from __future__ import annotations

import time
from pathlib import Path

from pytest_crawlmem.core import stops
from pytest_crawlmem.core.models import Sample
from pytest_crawlmem.core.sweep import SweepRow
from pytest_crawlmem.harness.isolated import IsolatedSpec, result_from_stream
from pytest_crawlmem.measure.runner import CrawlOptions
from pytest_crawlmem.probes.recording import Recording
from pytest_crawlmem.reports.jsonl import read_stop


def killed_child(tmp_path: Path, stop: tuple[str, str] | None) -> IsolatedSpec:
    """The stream an isolated child leaves when it dies mid-crawl (with a stop it had begun, or none)."""
    recording = Recording(tmp_path / "samples.jsonl")
    recording.header(spider="s", interval_seconds=0.1)
    recording.add_sample(Sample(0.1, 5, 0, 2**26))
    if stop is not None:
        recording.add_stop(*stop)
    recording.close()
    return IsolatedSpec("spiders", "S", None, None, {}, CrawlOptions(report_dir=tmp_path))


def test_the_stop_a_child_streamed_is_its_finish_reason_whatever_the_exit_message_says(tmp_path):
    spec = killed_child(tmp_path, (stops.TIMEOUT, stops.timeout_message(5)))
    assert read_stop(tmp_path / "samples.jsonl") == {"reason": stops.TIMEOUT, "message": stops.timeout_message(5)}
    result = result_from_stream(spec, "the isolated crawl process exited with code -9 (kill_at?)", 1.0, ())
    assert result.finish_reason == stops.TIMEOUT


def test_a_child_that_died_without_a_stop_is_killed_even_if_its_message_names_a_budget(tmp_path):
    spec = killed_child(tmp_path, None)
    assert result_from_stream(spec, "exited with code 1 near kill_at and timeout", 1.0, ()).finish_reason == stops.KILLED
    assert result_from_stream(spec, "killed by the parent", 1.0, (), stops.KILL_AT).finish_reason == stops.KILL_AT


def test_kill_at_is_checked_in_one_place():
    assert stops.over_kill_at(100, 100) and not stops.over_kill_at(99, 100)
    assert not stops.over_kill_at(10**12, None) and not stops.over_kill_at(10**12, 0)


def test_only_the_harness_reasons_mark_a_sweep_row_stopped():
    assert all(stops.is_harness_stop(reason) for reason in stops.HARNESS_STOPS)
    assert not stops.is_harness_stop("finished") and not stops.is_harness_stop("closespider_timeout")
    row = SweepRow("a", {}, 1, 1, 0, None, 1, 0, 0, 0, 0, 0, 1.0, "steady", stops.KILL_AT)
    assert row.stopped and not SweepRow("b", {}, 1, 1, 0, None, 1, 0, 0, 0, 0, 0, 1.0, "steady", "finished").stopped


def test_the_ceiling_fires_once_and_a_failing_sample_does_not_stop_the_sampler(tmp_path):
    from pytest_crawlmem.probes.meter import Ceiling, Sampler

    fired: list[tuple[str, str]] = []
    ceiling = Ceiling(100, lambda reason, message: fired.append((reason, message)))
    assert not ceiling.check(99, 1.0) and ceiling.check(100, 1.5) and not ceiling.check(200, 2.0)
    assert fired == [(stops.KILL_AT, stops.kill_at_message(100, 1.5))]
    recording = Recording(None)
    calls: list[int] = []

    def take() -> None:
        calls.append(1)
        if len(calls) == 1:
            raise OSError("no /proc")

    sampler = Sampler(take, 0.001, recording, name="test-sampler")
    sampler.start()
    deadline = time.monotonic() + 30
    while len(calls) < 3 and time.monotonic() < deadline:
        time.sleep(0.001)
    sampler.stop()
    assert len(calls) >= 3
    assert recording.errors[0] == "sample failed: OSError('no /proc')"


class FakePage:
    """A Playwright page as HandedPages sees it: open or closed."""

    def __init__(self) -> None:
        self.closed = False

    def is_closed(self) -> bool:
        return self.closed


def test_unclosed_pages_that_fill_every_context_stall_the_crawl_after_stall_seconds_and_again_after_each_more():
    from pytest_crawlmem.browser.pages import HandedPages

    pages = HandedPages(stall_seconds=5)
    page = FakePage()
    pages.add(page, "Forgetful.parse")
    assert pages.stall(10, 1.0, 1) is None  # progress: the clock restarts
    assert pages.stall(10, 5.9, 1) is None  # not 5 s yet
    assert pages.stall(10, 6.0, 0) is None  # a context has a free slot
    message = pages.stall(10, 6.0, 1, waiting=3)
    assert message is not None and message.startswith("1 pages handed to callbacks")
    assert "never closed by Forgetful.parse" in message and "while 3 request(s) waited for one" in message
    assert pages.stall(10, 7.0, 1) is None  # it fired: the next is due after another stall_seconds
    assert pages.stall(10, 11.0, 1) is not None  # the same stall, still there: a stop under way hears of it again
    page.closed = True
    assert pages.stall(10, 17.0, 1) is None and pages.open() == []


def test_a_timeout_tells_the_plugins_pauses_from_the_crawls_own_time():
    message = stops.timeout_message(90, paused_seconds=78.2, attribution_seconds=75.0)
    assert message == ("the crawl was still running after 90 s (the plugin paused it 78.2 s, 75.0 s of them finding what"
                       " leaks; its own time was 11.8 s), the budget timeout")
    assert stops.timeout_message(90, paused_seconds=0.4) == "the crawl was still running after 90 s, the budget timeout"
