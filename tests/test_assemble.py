"""One result assembly: every path builds its CrawlResult the same way, and report.json round-trips."""

from __future__ import annotations

import ast
import inspect
import json
import math
import typing
from dataclasses import fields, replace
from pathlib import Path

import pytest

from pytest_crawlmem.core.assemble import Details, RunFacts, crawl_result, peaks_of
from pytest_crawlmem.core.budgets import Budgets
from pytest_crawlmem.core.growth import Analysis, analyze
from pytest_crawlmem.core.measurement import Measurement
from pytest_crawlmem.core.models import (
    AmplificationSummary,
    AmplifiedPage,
    BrowserSummary,
    Checkpoint,
    CrawlResult,
    DangerSnapshot,
    DroppedResponse,
    Growth,
    GrowthSite,
    Holder,
    LatencyDistribution,
    MaxsizeSuggestion,
    MediaSummary,
    Peaks,
    RetentionPath,
    Sample,
    ShotMismatch,
    ShotSummary,
    SizeDistribution,
)
from pytest_crawlmem.core.replay_copies import CopyCount, HostPattern
from pytest_crawlmem.harness.isolated import IsolatedSpec, result_from_stream
from pytest_crawlmem.measure import runner
from pytest_crawlmem.measure.runner import CrawlOptions
from pytest_crawlmem.probes.recording import Recording

BASE = 50 * 2**20


def stream_of_a_crawl_growing(path: Path, per_response: int, total: int = 2000) -> None:
    """Write the samples.jsonl a crawl retaining ``per_response`` bytes per response leaves before it is killed."""
    recording = Recording(path)
    recording.header(spider="grower", interval_seconds=0.1)
    for n in (0, 100, 200, 300, 450, 675, 1012, 1518, total):
        recording.add_checkpoint(Checkpoint(responses=n, t_seconds=n / 100, rss_bytes=BASE + n * per_response,
                                            heap_bytes=None, traced_bytes=BASE + n * per_response, scheduled=0))
    recording.close()


def test_a_killed_isolated_crawl_is_judged_against_the_tests_leak_per_response(tmp_path):
    stream_of_a_crawl_growing(tmp_path / "samples.jsonl", per_response=1500)
    options = CrawlOptions(report_dir=tmp_path, budgets=Budgets(leak_per_response=2048))
    spec = IsolatedSpec("spiders", "Grower", None, None, {}, options)
    result = result_from_stream(spec, "the isolated process was killed at the hard ceiling kill_at", 30.0, ())
    assert result.verdict == "steady"  # 1.5 KiB/response is under the test's 2 KiB (the default 1 KiB would flag it)
    loose = result_from_stream(IsolatedSpec("spiders", "Grower", None, None, {}, CrawlOptions(report_dir=tmp_path)),
                               "killed at kill_at", 30.0, ())
    assert loose.verdict == "retained-objects"


def every_field_result() -> CrawlResult:
    """A result with every field set (and a non-finite figure), as a browser crawl with media, shots and danger gives."""
    checkpoint = Checkpoint(responses=100, t_seconds=1.5, rss_bytes=BASE, heap_bytes=2**20, traced_bytes=3000, scheduled=7,
                            allocated_blocks=9, tracer_bytes=10, live_refs={"HtmlResponse": 2}, drained=False,
                            cost_seconds=0.25, browser_pss_bytes=11, browser_uss_bytes=12, open_pages=1, unclosed_pages=0,
                            open_contexts=1)
    site = GrowthSite("spiders.py:31", 4096, 12, 40.96, ("spiders.py:31", "  kept.append(x)"), in_user_code=False)
    retained = RetentionPath("HtmlResponse", 3, "class spiders.X .kept -> list[3] [0] -> HtmlResponse")
    return CrawlResult(
        spider="catalog", samples=(Sample(0.1, 1, 0, BASE, scheduled=3, backout=True),), start_rss=BASE, end_rss=BASE + 9,
        peak_rss=BASE + 99, traced_peak=5000, responses=100, items_scraped=50, duration_seconds=1.5,
        finish_reason="finished",
        peaks=Peaks(7, 4, 2048, 0.1, 2, 8192, 5),
        growth=Growth("retained-objects", "grew", "every interval >= 1024 B/response", 1500.5, (checkpoint,),
                      (1500.0, math.nan), "traced"),
        dropped=(DroppedResponse("http://x/1", "maxsize", 10),), status_counts={200: 99, 404: 1}, top_growth=(site,),
        live_refs={"HtmlResponse": 3}, retention=(retained,),
        holders=(Holder("spider.kept -> list[3]", 3, 100, "spiders.py:31"),),
        stats={"item_scraped_count": 50}, errors=("probe failed",), dropped_count=4, warnsize_warnings=1,
        response_sizes=SizeDistribution(100, 1, 2, 3, 4, 500), suggested_maxsize=MaxsizeSuggestion(8, 0),
        max_active_size_limit=4096, scheduled_per_response=0.5, retries=2, retries_max_reached=1,
        download_latency=LatencyDistribution(100, 0.1, 0.2, 0.3, 0.4),
        browser=BrowserSummary(100, 300, 90, 80, {"renderer": 60}, 4, 2, 1, 0, 10, 0.5),
        media=MediaSummary(("FilesPipeline",), 3, 1, (retained,)), replay_hits=5, replay_misses=1,
        replay_missed_urls=("http://x/2",),
        replay_per_copy=(CopyCount(0, 11, 10, 10, 0), CopyCount(1, 11, 10, 0, 10)),
        replay_rules=(HostPattern("sitemap_rules", r"https://www\.x/p/", "www.x", True),),
        shots=ShotSummary(2, {"clean": 1, "blocked": 1}, 2, {"clean": 1, "blocked": 1}, 20, 12, 1, 0,
                          (ShotMismatch("http://x/3", "blocked", True),)),
        parse_amplification=AmplificationSummary(2, 1.5, 2.5, 3.5, 10, 20, 30, (AmplifiedPage("http://x/4", 10, 35, 3.5),), 1),
        danger=DangerSnapshot(2**20, 1.0, BASE, BASE - 5, 50, 25, 3, 2, 1, 100, False, {"Request": 9}, 2.0, 20, BASE + 1,
                              (site,), ""),
    )


#: The keys of report.json's ``result`` object (schema_version 1): one per field, by its name, then the derived figures.
RESULT_KEYS = [
    "spider", "samples", "start_rss", "end_rss", "peak_rss", "traced_peak", "responses", "items_scraped",
    "duration_seconds", "finish_reason", "peaks", "growth", "dropped", "status_counts", "top_growth", "live_refs",
    "retention", "holders", "stats", "errors", "dropped_count", "warnsize_warnings", "response_sizes",
    "suggested_maxsize", "max_active_size_limit", "scheduled_per_response", "retries", "retries_max_reached",
    "download_latency", "browser", "media", "replay_hits", "replay_misses", "replay_missed_urls", "replay_copies",
    "replay_per_copy", "replay_rules", "shots", "parse_amplification", "danger", "isolated", "notes", "earlier_crawls",
    "verdict", "rss_growth", "peak_rss_above_start",
    "active_size_ratio",
]


def test_report_json_keys_are_the_result_fields_and_read_back_to_the_same_document():
    result = every_field_result()
    written = json.loads(json.dumps(result.to_json()))
    assert list(written) == RESULT_KEYS
    assert list(written["peaks"]) == [f.name for f in fields(Peaks)]  # max_active_size_bytes, as the field is named
    again = CrawlResult.from_json(written, samples=result.samples)
    assert json.loads(json.dumps(again.to_json())) == written
    assert again.verdict == "retained-objects" and again.status_counts == {200: 99, 404: 1}
    assert again.danger == result.danger and again.browser == result.browser and again.shots == result.shots
    assert again.peaks == result.peaks and again.retention == result.retention


def test_an_older_report_without_the_newer_figures_still_reads():
    old = {k: v for k, v in json.loads(json.dumps(every_field_result().to_json())).items()
           if k not in {"holders", "replay_hits", "replay_misses", "replay_missed_urls", "replay_copies", "shots",
                        "parse_amplification", "danger", "media", "browser"}}
    result = CrawlResult.from_json(old)
    assert result.responses == 100 and result.peak_rss == BASE + 99 and result.holders == () and result.danger is None
    assert result.growth.checkpoints[0].live_refs == {"HtmlResponse": 2}


#: The CrawlResult fields :func:`assemble` fills from the run's facts, samples and verdict (the rest are ``Details``).
FROM_FACTS = {"spider", "samples", "start_rss", "end_rss", "peak_rss", "traced_peak", "responses", "items_scraped",
              "duration_seconds", "finish_reason", "peaks", "growth", "errors", "stopped_because", "report_dir"}


def test_assembly_details_are_exactly_the_result_fields_the_facts_do_not_give_each_with_the_fields_type():
    hints = typing.get_type_hints(CrawlResult)
    details = typing.get_type_hints(Details)
    assert set(details) == {f.name for f in fields(CrawlResult)} - FROM_FACTS
    assert all(details[name] == hints[name] for name in details)


def test_what_judge_passes_to_analyze_is_every_keyword_of_analyze_but_the_threshold_each_with_its_type():
    parameters = inspect.signature(analyze).parameters
    hints, analysis = typing.get_type_hints(analyze), typing.get_type_hints(Analysis)
    keywords = {name for name, p in parameters.items() if p.kind is inspect.Parameter.KEYWORD_ONLY}
    assert set(analysis) == keywords - {"leak_per_response"}
    assert all(analysis[name] == hints[name] for name in analysis)


def test_each_peak_is_the_largest_reading_of_the_sample_field_it_names_and_its_default_when_none_was_read():
    sample_fields, checkpoint_fields = {f.name for f in fields(Sample)}, {f.name for f in fields(Checkpoint)}
    named = {f.name: f.metadata for f in fields(Peaks) if "sample" in f.metadata}
    assert set(named) == {f.name for f in fields(Peaks)} - {"backout_seconds"}  # a sum of sampled time, not a peak
    assert all(m["sample"] in sample_fields and m["checkpoint"] in checkpoint_fields | {None} for m in named.values())
    samples = [Sample(t_seconds=0.1, responses=1, items=0, rss_bytes=1, scheduled=5, inflight=3, open_fds=9,
                      backout=True, span=2),
               Sample(t_seconds=0.2, responses=2, items=0, rss_bytes=1, scheduled=None, inflight=7, media_cached=4)]
    checkpoints = [Checkpoint(responses=0, t_seconds=0.0, rss_bytes=1, heap_bytes=None, traced_bytes=None, scheduled=11)]
    assert peaks_of(samples, checkpoints, 0.5) == Peaks(max_scheduled=11, max_inflight=7, backout_seconds=1.0,
                                                        max_media_cached=4, max_open_fds=9)
    assert peaks_of(samples, (), 0.5).max_scheduled == 5 and peaks_of((), (), 0.5) == Peaks()


#: The measurement's fields that only the judgement reads: every other one reaches the result by its name.
JUDGED_ONLY = {"checkpoints", "checkpoint_min_responses", "kept", "download_excess"}


def test_a_measured_field_reaches_the_result_by_its_name_unless_only_the_judgement_reads_it():
    named = {f.name for f in fields(CrawlResult)} | {f.name for f in fields(RunFacts)}
    assert {f.name for f in fields(Measurement)} - named == JUDGED_ONLY


def measurement_of(result: CrawlResult) -> Measurement:
    """The Measurement a crawl would hand back for ``result`` (its checkpoints those of its growth)."""
    return Measurement(
        samples=result.samples, checkpoints=result.growth.checkpoints, errors=result.errors,
        finish_reason=result.finish_reason, stopped_because="stopped at kill_at", start_rss=result.start_rss,
        end_rss=result.end_rss, peak_rss=result.peak_rss, traced_peak=result.traced_peak, responses=result.responses,
        items_scraped=result.items_scraped, checkpoint_min_responses=100, top_growth=result.top_growth,
        holders=result.holders, retention=result.retention, live_refs=result.live_refs, dropped=result.dropped,
        dropped_count=result.dropped_count, warnsize_warnings=result.warnsize_warnings,
        response_sizes=result.response_sizes, suggested_maxsize=result.suggested_maxsize,
        download_latency=result.download_latency, browser=result.browser, media=result.media, shots=result.shots,
        parse_amplification=result.parse_amplification, danger=result.danger, replay_hits=result.replay_hits,
        replay_misses=result.replay_misses, replay_missed_urls=result.replay_missed_urls,
        replay_per_copy=result.replay_per_copy, replay_rules=result.replay_rules,
    )


def test_a_crawls_result_is_its_measurement_judged_and_assembled_every_measured_field_in_place():
    expected = every_field_result()
    stats = {"downloader/response_status_count/200": 99, "downloader/response_status_count/404": 1, "retry/count": 2,
             "retry/max_reached": 1}
    result = crawl_result(measurement_of(expected), spider="catalog", duration_seconds=1.5, interval_seconds=0.1,
                          stats=stats, max_active_size_limit=4096, replay_copies=2, report_dir=Path("/r"))
    for name in {f.name for f in fields(CrawlResult)} - {"peaks", "growth", "scheduled_per_response", "stats"}:
        if name not in ("stopped_because", "report_dir", "replay_copies"):
            assert getattr(result, name) == getattr(expected, name), name
    assert result.stopped_because == "stopped at kill_at" and result.report_dir == Path("/r") and result.replay_copies == 2
    assert result.stats == stats and result.peaks.max_scheduled == 7  # read from the checkpoint, as every path reads them
    assert result.growth.checkpoints == expected.growth.checkpoints and result.growth.rule == "too-few-checkpoints"


@pytest.mark.parametrize("leak_per_response, verdict", [(None, "retained-objects"), (2048, "steady")])
def test_a_measured_leak_is_judged_at_the_tests_threshold_and_names_what_holds_it(leak_per_response, verdict):
    checkpoints = tuple(Checkpoint(responses=n, t_seconds=n / 100, rss_bytes=BASE + n * 1500, heap_bytes=None,
                                   traced_bytes=BASE + n * 1500, scheduled=0)
                        for n in (0, 100, 200, 300, 450, 675, 1012, 1518, 2000))
    measured = replace(measurement_of(every_field_result()), checkpoints=checkpoints, responses=2000, danger=None,
                       media=None, browser=None, dropped=())
    result = crawl_result(measured, spider="s", duration_seconds=20.0, interval_seconds=0.1, stats={},
                          leak_per_response=leak_per_response)
    assert result.verdict == verdict
    if verdict == "retained-objects":
        assert "held by spider.kept -> list[3] gained 3 entries" in result.growth.reason and "Fix:" in result.growth.reason


def test_the_runner_reads_one_figure_of_the_extension_its_measurement():
    """One fact, one place: the runner takes what the crawl measured from ``ext.measurement()`` alone."""
    tree = ast.parse(Path(runner.__file__).read_text(encoding="utf-8"))
    read = {node.attr for node in ast.walk(tree) if isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name) and node.value.id == "ext"}
    assert read == {"measurement", "crawler"}  # crawler: set to None, so the crawl can be let go of before measuring
