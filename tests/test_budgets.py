"""Budget parsing, precedence and checks (pure)."""

from __future__ import annotations

import contextlib
import json
from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_crawlmem.core.budgets import (
    SPECS,
    BudgetError,
    Budgets,
    BudgetSpec,
    check_budgets,
    parse_budget,
    resolve_budgets,
    tracemalloc_frames,
)
from pytest_crawlmem.core.models import CrawlResult, DangerSnapshot, Growth, GrowthSite, Peaks
from pytest_crawlmem.core.units import parse_size

MIB = 2**20


def result(**overrides):
    values = dict(
        spider="s", samples=(), start_rss=100 * MIB, end_rss=120 * MIB, peak_rss=300 * MIB, traced_peak=None,
        responses=1000, items_scraped=900, duration_seconds=3.0, finish_reason="finished",
        peaks=Peaks(max_scheduled=50, max_inflight=16, max_active_size_bytes=2 * MIB),
        growth=Growth(verdict="steady", reason="flat", per_response_bytes=10.0),
    )
    values.update(overrides)
    return CrawlResult(**values)


def test_marker_values_override_ini_defaults_and_closest_marker_wins():
    budgets = resolve_budgets(
        [({"peak_rss": "200 MiB"}, "marker of test_a"), ({"peak_rss": "1 GiB", "max_inflight": 4}, "class marker")],
        {"peak_rss": 500 * MIB, "rss_growth": 10 * MIB},
    )
    assert budgets.peak_rss == 200 * MIB
    assert budgets.max_inflight == 4
    assert budgets.rss_growth == 10 * MIB


def test_an_unknown_budget_names_the_test_and_lists_known_ones():
    with pytest.raises(BudgetError, match=r"unknown budget 'peak_rs' in crawl_memory marker of t::x.*peak_rss"):
        parse_budget("peak_rs", "1 MB", source="crawl_memory marker of t::x")


def test_a_budget_that_is_not_enforced_yet_is_refused_rather_than_ignored(monkeypatch):
    monkeypatch.setitem(SPECS, "future_budget", BudgetSpec("future_budget", parse_size, "not checked yet", enforced=False))
    with pytest.raises(BudgetError, match="'future_budget' in marker is not enforced"):
        parse_budget("future_budget", 1, source="marker")


def test_jobdir_disk_fails_on_the_sampled_peak_and_a_crawl_without_jobdir_passes():
    assert resolve_budgets([({"jobdir_disk": "2 MiB"}, "marker of t::j")], {}).jobdir_disk == 2 * MIB
    over = result(peaks=Peaks(max_jobdir_bytes=3 * MIB))
    [violation] = check_budgets(Budgets(jobdir_disk=2 * MIB), over)
    assert violation.budget == "jobdir_disk" and (violation.measured, violation.limit) == (3 * MIB, 2 * MIB)
    assert violation.message.startswith("JOBDIR grew to 3.0 MiB on disk, over the budget jobdir_disk=2.0 MiB (")
    assert check_budgets(Budgets(jobdir_disk=3 * MIB), over) == []
    assert check_budgets(Budgets(jobdir_disk=1), result()) == []  # no JOBDIR, nothing measured: not failed


@pytest.mark.parametrize(("name", "value"), [("peak_rss", "lots"), ("max_inflight", -1), ("leak", "maybe")])
def test_a_bad_value_names_budget_value_and_source(name, value):
    with pytest.raises(BudgetError) as info:
        parse_budget(name, value, source="crawl_memory marker of t::y")
    assert name in str(info.value) and repr(value) in str(info.value) and "t::y" in str(info.value)


@given(st.dictionaries(st.text(max_size=12), st.one_of(st.text(max_size=12), st.integers(), st.none()), max_size=4))
def test_fuzzed_marker_arguments_parse_or_fail_with_budget_error(kwargs):
    with contextlib.suppress(BudgetError):
        resolve_budgets([(kwargs, "marker")], {})


def test_a_crawl_within_budgets_has_no_violations():
    budgets = Budgets(peak_rss=300 * MIB, rss_growth=20 * MIB, max_inflight=16, max_scheduled=50)
    assert check_budgets(budgets, result()) == []


@pytest.mark.parametrize(
    ("budgets", "expected"),
    [
        (Budgets(peak_rss=299 * MIB), "peak RSS was 300.0 MiB, over the budget peak_rss=299.0 MiB (200.0 MiB above"
                                      " the 100.0 MiB the process held when the crawl began)"),
        (Budgets(rss_growth=19 * MIB), "RSS growth was 20.0 MiB, over the budget rss_growth=19.0 MiB (from 100.0 MiB"
                                       " when the crawl began to 120.0 MiB at its end)"),
        (Budgets(traced_peak=MIB), "traced peak was 2.0 MiB, over the budget traced_peak=1.0 MiB"),
        (Budgets(max_scheduled=49), "the scheduler queue reached 50, over the budget max_scheduled=49"),
        (Budgets(max_inflight=15), "downloads in flight reached 16, over the budget max_inflight=15"),
        (Budgets(max_active_size=MIB), "scraper active size was 2.0 MiB, over the budget max_active_size=1.0 MiB"),
    ],
)
def test_each_breach_is_one_sentence_with_both_numbers(budgets, expected):
    violations = check_budgets(budgets, result(traced_peak=2 * MIB))
    assert [v.message.split(": ")[0] for v in violations] == [expected]  # queue budgets go on with cause and fix


def test_a_leak_verdict_fails_warns_or_is_ignored_by_the_leak_budget():
    leaky = result(growth=Growth(verdict="retained-objects", reason="traced memory grew", per_response_bytes=2048.0))
    assert check_budgets(Budgets(leak="fail"), leaky)[0].fails
    assert not check_budgets(Budgets(leak="warn"), leaky)[0].fails
    assert check_budgets(Budgets(leak="off"), leaky) == []
    assert check_budgets(Budgets(leak="fail"), result()) == []


def test_max_open_fds_fails_a_real_crawl_on_its_sampled_peak_and_report_html_shows_its_row(pytester: pytest.Pytester):
    from spiders_source import SPIDERS

    pytester.makepyfile(spiders=SPIDERS)
    pytester.makepyfile(test_crawl="""
import pytest
from spiders import *

@pytest.mark.crawl_memory(max_open_fds=3)
def test_few(crawl, fixture_site):
    crawl(Catalog, start_urls=[fixture_site.url("/catalog/?pages=2&per_page=5")])

@pytest.mark.crawl_memory(max_open_fds=100000)
def test_many(crawl, fixture_site):
    crawl(Catalog, start_urls=[fixture_site.url("/catalog/?pages=2&per_page=5")])
""")
    outcome = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-p", "no:xdist", timeout=300)
    outcome.assert_outcomes(passed=1, failed=1)
    outcome.stdout.fnmatch_lines(["*crawl_memory budget broken: open file descriptors reached *, over the budget"
                                  " max_open_fds=3*"])
    few = pytester.path / ".crawlmem" / "test_crawl.py__test_few"
    measured = json.loads((few / "report.json").read_text())["result"]["peaks"]["max_open_fds"]
    assert measured > 3
    assert f"<td><code>max_open_fds</code></td><td>3</td><td>{measured:,}</td>" in (few / "report.html").read_text()


REPORT_VALUES = st.one_of(st.none(), st.booleans(), st.integers(-2**60, 2**60), st.floats(allow_nan=True),
                          st.text(max_size=12), st.lists(st.integers(), max_size=2))


@given(name=st.sampled_from(sorted(SPECS)), limit=REPORT_VALUES, figure=REPORT_VALUES, per=REPORT_VALUES)
def test_every_row_renders_whatever_a_hand_edited_report_holds(name, limit, figure, per):
    spec = SPECS[name]
    shown = [spec.show_limit(limit), spec.show_measured(figure, unit="pages", per_response=per)]
    text, style = spec.status(limit, shown[1], None)
    assert all(isinstance(s, str) and s for s in [*shown, text]) and style in ("pass", "muted")


def test_a_traced_peak_budget_turns_tracing_on_and_keeps_more_frames_asked_for():
    assert tracemalloc_frames(None, 0) == 0 and tracemalloc_frames(Budgets(peak_rss=MIB), 0) == 0
    assert tracemalloc_frames(Budgets(traced_peak=MIB), 0) == 1
    assert tracemalloc_frames(Budgets(traced_peak=MIB), 25) == 25


@pytest.mark.parametrize("isolated", [False, True])
def test_a_peak_rss_budget_the_process_was_over_before_the_crawl_says_so_and_names_no_line(isolated):
    danger = DangerSnapshot(threshold_bytes=80 * MIB, t_seconds=0.1, rss_bytes=310 * MIB, start_rss_bytes=304 * MIB,
                            responses=3, items=0, sites=(GrowthSite("pipelines/dedup.py:12", 2048, 4, 10.0),))
    crawled = result(start_rss=304 * MIB, end_rss=305 * MIB, peak_rss=310 * MIB, danger=danger, isolated=isolated)
    (violation,) = check_budgets(Budgets(peak_rss=12 * 10**6), crawled)
    where = "the crawl's fresh process" if isolated else "the process"
    assert violation.message.startswith(f"peak RSS was 310.0 MiB, over the budget peak_rss=11.4 MiB: {where} was already"
                                        " at 304.0 MiB before the crawl began (")
    assert violation.message.endswith("); the crawl itself added 6.0 MiB above its start")
    assert ("use --crawlmem-isolate / crawl(isolate=True)" in violation.message) is not isolated
    assert "dedup.py" not in violation.message and "danger" not in violation.message
    crossed_later = replace(crawled, start_rss=100 * MIB, danger=replace(danger, threshold_bytes=244 * MIB))
    (started_under,) = check_budgets(Budgets(peak_rss=305 * MIB), crossed_later)
    assert "dedup.py:12" in started_under.message  # crossed during the crawl: the snapshot's line stands


def test_a_kill_at_the_process_was_over_before_the_crawl_says_so():
    stopped = result(start_rss=304 * MIB, end_rss=305 * MIB, peak_rss=306 * MIB, finish_reason="crawlmem_kill_at",
                     stopped_because="RSS reached 306.0 MiB, over kill_at")
    (violation,) = check_budgets(Budgets(kill_at=200 * MIB), stopped)
    assert violation.message.endswith(": the process was already at 304.0 MiB before the crawl began (what pytest,"
                                      " Scrapy and earlier tests in this process hold; use --crawlmem-isolate /"
                                      " crawl(isolate=True) to measure the crawl in a fresh process); the crawl itself"
                                      " added 2.0 MiB above its start")
    (later,) = check_budgets(Budgets(kill_at=200 * MIB), replace(stopped, start_rss=100 * MIB))
    assert "before the crawl began" not in later.message

