"""The status line of a production crawl: one ``name=value`` token a figure, sizes in core.units' units."""

from __future__ import annotations

import re

import pytest

from pytest_crawlmem.measure.status import Status

MIB = 2**20


def status(**figures: object) -> Status:
    values: dict[str, object] = {"t_seconds": 1.0, "rss_bytes": 102 * MIB, "peak_rss_bytes": 110 * MIB, "scheduled": 0,
                                 "inflight": 3, "active_size_bytes": 15360, "backout": False, "responses": 5, "items": 2,
                                 "retries": 0}
    return Status(**{**values, **figures})  # type: ignore[arg-type]


def test_sizes_use_the_units_helper_and_every_figure_is_one_token():
    line = status(browser_pss_bytes=3 * 2**30, open_pages=3, open_contexts=1, stream_bytes=512,
                  verdict="steady", growth_per_response_bytes=12.3).line()
    assert " active=15.0KiB " in line and "rss=102.0MiB peak=110.0MiB " in line, line
    assert " stream=512B " in line and " browser_pss=3.0GiB " in line and " growth=12B/response" in line, line
    tokens = line.removeprefix("crawlmem: ").split(" ")
    assert all(re.fullmatch(r"[a-z_0-9]+=\S+", token) for token in tokens), tokens


def test_unknown_figures_read_as_a_dash():
    line = status(active_size_bytes=None).line()
    assert " active=- " in line and " jobdir=- " in line, line


def test_the_checkpoints_metric_counts_what_its_description_says():
    from pytest_crawlmem.core.models import Checkpoint
    from pytest_crawlmem.measure.metrics import FIGURES
    from pytest_crawlmem.probes.recording import Recording

    recording = Recording(None)
    for responses, drained in ((0, True), (20, False), (40, True), (41, True)):  # opening, undrained, drained, closing
        recording.add_checkpoint(Checkpoint(responses=responses, t_seconds=responses / 10, rss_bytes=80 * MIB,
                                            heap_bytes=40 * MIB, traced_bytes=None, scheduled=0, drained=drained))
    (description,) = [m[2] for m in FIGURES if m[0] == "crawlmem_checkpoints"]
    assert "drained or not" in description and "opening and closing" in description
    assert recording.timeline.checkpoints_added == 4


def test_the_metrics_carry_the_running_verdict_and_the_browser_figures():
    pytest.importorskip("prometheus_client", reason="the prometheus extra is not installed")
    from prometheus_client import CollectorRegistry, generate_latest

    from pytest_crawlmem.measure.metrics import _Collector

    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Collector(lambda: status(verdict="retained-objects", growth_per_response_bytes=8192.0,
                                                leak_suspected=True, browser_pss_bytes=600 * MIB, open_pages=4,
                                                open_contexts=2, checkpoints=5, undrained_checkpoints=1), "books"))
    values = _scraped(generate_latest(registry).decode())
    assert values['crawlmem_leak_suspected{spider="books"}'] == 1 and values['crawlmem_checkpoints_total{spider="books"}'] == 5
    assert values['crawlmem_growth_per_response_bytes{spider="books"}'] == 8192, values
    assert values['crawlmem_undrained_checkpoints_total{spider="books"}'] == 1, values
    assert values['crawlmem_browser_pss_bytes{spider="books"}'] == 600 * MIB, values
    assert values['crawlmem_browser_open_pages{spider="books"}'] == 4, values
    assert values['crawlmem_browser_open_contexts{spider="books"}'] == 2, values
    steady = CollectorRegistry(auto_describe=False)
    steady.register(_Collector(lambda: status(verdict="steady", growth_per_response_bytes=0.0, leak_suspected=False),
                               "books"))
    values = _scraped(generate_latest(steady).decode())
    assert values['crawlmem_leak_suspected{spider="books"}'] == 0, values
    assert not any(name.startswith("crawlmem_browser_") for name in values), values  # not a browser crawl


def _scraped(text: str) -> dict[str, float]:
    return {line.rsplit(" ", 1)[0]: float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
            if line and not line.startswith("#")}
