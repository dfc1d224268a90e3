"""What the plugin says: budget errors, breach messages, the terminal's baseline notes, a test failing on its own."""

from __future__ import annotations

from pathlib import Path

import pytest
from spiders_source import SPIDERS

from pytest_crawlmem.core.budgets import BudgetError, Budgets, check_budgets, parse_budget
from pytest_crawlmem.core.models import CrawlResult, Growth, Peaks
from pytest_crawlmem.harness import baseline as bl
from pytest_crawlmem.harness.session import CrawlRecord, SummaryRow, merge_notes, unreported_budgets


def a_crawl(max_scheduled: int, report_dir: Path | None = None) -> CrawlResult:
    """A crawl's result with only the figures these messages read."""
    return CrawlResult(spider="s", samples=(), start_rss=2**26, end_rss=2**26, peak_rss=2**26, traced_peak=None,
                       responses=100, items_scraped=0, duration_seconds=1.0, finish_reason="finished",
                       peaks=Peaks(max_scheduled=max_scheduled), growth=Growth("steady", "flat"), report_dir=report_dir)


@pytest.mark.parametrize(("name", "guess"), [("peak_rs", "peak_rss"), ("max_schedule", "max_scheduled"),
                                             ("rss_grwth", "rss_growth"), ("timout", "timeout")])
def test_a_typod_budget_name_gets_a_did_you_mean(name, guess):
    with pytest.raises(BudgetError, match=rf"unknown budget '{name}' in marker of t::x: did you mean '{guess}'\?"):
        parse_budget(name, "1 MiB", source="marker of t::x")


def test_an_unknown_budget_far_from_every_name_lists_the_known_ones():
    with pytest.raises(BudgetError) as error:
        parse_budget("colour", 1, source="ini crawlmem_colour")
    assert "did you mean" not in str(error.value) and "known budgets: " in str(error.value)
    assert "peak_rss" in str(error.value)


@pytest.mark.parametrize(("name", "value"), [("peak_rss", "-5 MiB"), ("rss_growth", -1), ("max_scheduled", -3),
                                             ("timeout", "-2 min"), ("max_inflight", " -1")])
def test_a_negative_budget_says_it_must_not_be_negative(name, value):
    with pytest.raises(BudgetError, match=rf"invalid {name} {value!r} in marker of t::x: must not be negative$"):
        parse_budget(name, value, source="marker of t::x")


def test_a_max_scheduled_breach_gives_its_cause_and_the_fix():
    result = a_crawl(1_200)
    (violation,) = check_budgets(Budgets(max_scheduled=100), result)
    assert violation.message.startswith("the scheduler queue reached 1,200, over the budget max_scheduled=100: ")
    assert "faster than they are downloaded" in violation.message and "fix: " in violation.message
    assert "JOBDIR" in violation.message


def test_baseline_ranges_read_as_ranges_not_minus_signs():
    past = [{"leak_per_response": -745.0}, {"leak_per_response": -736.0}, {"leak_per_response": -740.0}]
    tolerances = bl.parse_tolerances("leak_per_response:10B", source="t")
    (finding,) = bl.compare_run({"leak_per_response": 900.0}, past, tolerances)
    assert "(-745 to -736 B over 3 runs)" in finding.message()


def test_a_compare_within_tolerance_says_so_with_the_figures():
    past = [{"peak_rss": 100 * 2**20}, {"peak_rss": 104 * 2**20}]
    tolerances = bl.parse_tolerances("peak_rss:10%", source="t")
    assert bl.within_tolerance({"peak_rss": 105 * 2**20}, past, tolerances) == (
        "within tolerance of 2 runs: peak_rss 105.0 MiB (median 102.0 MiB, +10%)"
    )
    assert bl.within_tolerance({"peak_rss": 200 * 2**20}, past, tolerances) is None
    assert bl.within_tolerance({}, past, tolerances) is None


def test_runs_appended_by_several_xdist_workers_are_added_up():
    notes = ["baseline: 1 run appended to /r/main.json", "baseline: 1 run appended to /r/main.json",
             "baseline: 3 runs appended to /r/other.json", "t::a: not in baseline /r/main.json, not compared",
             "t::a: not in baseline /r/main.json, not compared"]
    assert merge_notes(notes) == ["t::a: not in baseline /r/main.json, not compared",
                                  "baseline: 2 runs appended to /r/main.json", "baseline: 3 runs appended to /r/other.json"]


def test_a_test_failing_on_its_own_still_lists_its_broken_budgets_and_report(tmp_path: Path):
    result = a_crawl(500, tmp_path)
    budgets = Budgets(max_scheduled=10)
    record = CrawlRecord("t::x", result, budgets, check_budgets(budgets, result))
    text = unreported_budgets([record])
    assert text.splitlines()[0].startswith("crawl_memory budget broken: the scheduler queue reached 500")
    assert text.splitlines()[-1] == f"report: {tmp_path}"
    assert unreported_budgets([]) == ""


def test_an_assertion_failure_prints_the_broken_budgets_and_the_report_path(pytester: pytest.Pytester):
    pytester.makepyfile(spiders=SPIDERS)
    pytester.makepyfile(test_crawl="""
import pytest
from spiders import *

@pytest.mark.crawl_memory(max_scheduled=5)
def test_it(crawl, fixture_site):
    result = crawl(Catalog, start_urls=[fixture_site.url("/catalog/?pages=10&per_page=20")])
    assert result.items_scraped == 1, "the test's own assertion"
""")
    outcome = pytester.runpytest_subprocess("-p", "no:cacheprovider", timeout=300)
    outcome.assert_outcomes(failed=1)
    outcome.stdout.fnmatch_lines([
        "*the test's own assertion*",
        "*- crawl_memory: budgets and reports of this test's crawls -*",
        "crawl_memory budget broken: the scheduler queue reached *, over the budget max_scheduled=5: *fix: *",
        "report: *test_crawl.py__test_it",
    ])


def test_several_crawls_of_one_test_are_told_apart_in_the_summary():
    record = CrawlRecord("t::x", a_crawl(3), None, [])
    first, second = SummaryRow.of(record, "1: s"), SummaryRow.of(record, "2: s")
    assert first.cells(verbose=False)[0] == "t::x (crawl 1: s)" and second.cells(verbose=False)[0] == "t::x (crawl 2: s)"
    assert SummaryRow.of(record).cells(verbose=False)[0] == "t::x"
