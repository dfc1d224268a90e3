"""What earlier tests leave in the pytest process does not change a crawl's verdict or its baseline comparison.

Each inner session runs a first test that keeps 160 MiB in a module global (as a project's one-off lazy load stays
in the process), then a clean catalog crawl. The effects checked are 100+ MiB, far beyond what a CPU hog beside the
run or a run's noise moves (a clean crawl's peak varies by under 1 MiB: docs/baselines.md).
"""

from __future__ import annotations

import json
from collections import deque
from typing import ClassVar

import pytest
import scrapy
from spiders_source import SPIDERS

from pytest_crawlmem.core.carryover import CarryOver, class_containers
from pytest_crawlmem.harness import baseline as bl
from pytest_crawlmem.harness.session import baseline_caveats

MIB = 2**20

#: A first test keeping 160 MiB (touched), then the clean crawl; ``{marker}`` decorates the crawl.
LOADED_FIRST = """
import pytest
from spiders import *

HELD = []

def test_loads_once():
    HELD.append(bytearray(160 * 2**20))
    HELD[0][::4096] = b"1" * len(HELD[0][::4096])  # every page touched: it is resident

{marker}
def test_clean(crawl, fixture_site):
    crawl(Catalog, start_urls=[fixture_site.url("/catalog/?pages=5&per_page=20")])
"""

#: A spider deduplicating on a set kept on its class, crawled by two tests in one process.
CLASS_STATE = """
from spiders import *

class Dedup(Catalog):
    name = "dedup"
    seen = set()

    def parse_product(self, response):
        key = response.url.rsplit("/", 1)[1]
        if key in self.seen:
            return
        self.seen.add(key)
        yield from super().parse_product(response)

def test_first(crawl, fixture_site):
    assert crawl(Dedup, start_urls=[fixture_site.url("/catalog/?pages=5&per_page=20")]).items_scraped == 100

def test_second(crawl, fixture_site):
    result = crawl(Dedup, start_urls=[fixture_site.url("/catalog/?pages=5&per_page=20")])
    print("NOTES", result.notes)
    assert result.items_scraped == 100
"""

#: A spider that loads 160 MiB once per process, at its first product page, into a module global (a lazy load).
LAZY = """
from spiders import *

LOADED = []

class Lazy(Catalog):
    name = "lazy"

    def parse_product(self, response):
        if not LOADED:
            LOADED.append(bytearray(160 * 2**20))
            LOADED[0][::4096] = b"1" * len(LOADED[0][::4096])
        yield from super().parse_product(response)
"""

#: Two tests crawling it under the same rss_growth budget.
LAZY_TESTS = """
import pytest
from lazy import Lazy

@pytest.mark.crawl_memory(rss_growth="32 MiB")
@pytest.mark.parametrize("which", ["a", "b"])
def test_growth(crawl, fixture_site, which):
    crawl(Lazy, start_urls=[fixture_site.url("/catalog/?pages=5&per_page=20")])
"""


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest_subprocess("-p", "no:cacheprovider", *args, timeout=300)


def suite(pytester: pytest.Pytester, marker: str = "") -> pytest.Pytester:
    pytester.makepyfile(spiders=SPIDERS)
    pytester.makepyfile(test_order=LOADED_FIRST.format(marker=marker))
    return pytester


def test_a_clean_crawl_after_a_test_that_loaded_160_mib_is_no_regression_of_its_baseline_alone(pytester):
    suite(pytester)
    run(pytester, "-k", "test_clean", "--crawlmem-save", "main").assert_outcomes(passed=1, deselected=1)
    outcome = run(pytester, "--crawlmem-compare", "main", "-v")
    outcome.assert_outcomes(passed=2)
    outcome.stdout.fnmatch_lines(["test_order.py::test_clean: within tolerance of 1 run: peak_rss * above a start of *"])
    (path,) = (pytester.path / ".crawlmem" / "baselines").glob("*/main.json")
    (saved,) = json.loads(path.read_text())["tests"]["test_order.py::test_clean"]
    assert saved["peak_rss_above_start"] == saved["peak_rss"] - saved["start_rss"] > 0
    report = json.loads((pytester.path / ".crawlmem" / "test_order.py__test_clean" / "report.json").read_text())
    assert report["result"]["start_rss"] - saved["start_rss"] > 100 * 2**20  # the 160 MiB were there: the test can fail


def test_a_peak_rss_budget_the_process_was_over_before_the_crawl_says_so_and_names_no_line(pytester):
    suite(pytester, marker='@pytest.mark.crawl_memory(peak_rss="150 MiB", rss_growth="32 MiB")')
    run(pytester, "-k", "test_clean").assert_outcomes(passed=1, deselected=1)  # alone, the crawl keeps both budgets
    outcome = run(pytester)
    outcome.assert_outcomes(passed=1, failed=1)
    outcome.stdout.fnmatch_lines([
        "*crawl_memory budget broken: peak RSS was * MiB, over the budget peak_rss=150.0 MiB: the process was already"
        " at * MiB before the crawl began (what pytest, Scrapy and earlier tests in this process hold; use"
        " --crawlmem-isolate / crawl(isolate=True) to measure the crawl in a fresh process); the crawl itself added"
        " * MiB above its start",
    ])
    failure = outcome.stdout.str().split("crawl_memory budget broken", 1)[1].split("short test summary", 1)[0]
    assert "top site" not in failure and "rss_growth" not in failure  # no line blamed; the growth budget kept
    run(pytester, "--crawlmem-isolate").assert_outcomes(passed=2)


def test_a_spider_whose_class_kept_state_from_an_earlier_crawl_is_named_when_it_scrapes_nothing(pytester):
    pytester.makepyfile(spiders=SPIDERS)
    pytester.makepyfile(test_state=CLASS_STATE)
    outcome = run(pytester, "-s")
    outcome.assert_outcomes(passed=1, failed=1)
    sentence = ("Dedup.seen (a set on the class) still held 100 entries from an earlier crawl in this process"
                " (test_state.py::test_first); this crawl scraped 0 items (that one 100)")
    outcome.stdout.fnmatch_lines([f"*NOTES ('{sentence}*"])
    outcome.stdout.fnmatch_lines(["*_ test_second _*", f"*{sentence}*"])  # in the failure
    outcome.stdout.fnmatch_lines(["*crawl memory*", f"test_state.py::test_second: {sentence}*"])  # in the summary


def test_a_one_off_load_in_the_first_crawl_is_said_to_be_the_first_crawls_and_isolation_judges_every_crawl_alike(
        pytester):
    pytester.makepyfile(spiders=SPIDERS, lazy=LAZY, test_lazy=LAZY_TESTS)
    outcome = run(pytester)
    outcome.assert_outcomes(passed=1, failed=1)  # in one process, whichever runs first pays the load
    outcome.stdout.fnmatch_lines([
        "*_ test_growth?a? _*",
        "crawl_memory budget broken: RSS growth was 16?.* MiB, over the budget rss_growth=32.0 MiB (from * when the"
        " crawl began to * at its end); this was the first crawl in this pytest process: what the project loads once"
        " and keeps (imports, module-level caches of its pipelines and middlewares) counts in its growth and in no"
        " later crawl's, so whichever test runs first pays it; use --crawlmem-isolate / crawl(isolate=True)*",
    ])
    run(pytester, "--crawlmem-isolate").assert_outcomes(failed=2)  # isolated, every crawl pays it: the same verdict


# -- pure: the class containers and the notes ---------------------------------------------------------


class Base(scrapy.Spider):
    name = "base"
    seen: ClassVar[set[str]] = set()
    custom_settings: ClassVar[dict[str, int]] = {"CONCURRENT_ITEMS": 4}  # a dict that no crawl changes


class Child(Base):
    name = "child"
    pages: ClassVar[deque[str]] = deque()
    label = "not a container"


def test_the_containers_of_a_spider_class_and_its_bases_outside_scrapy_are_read_with_their_sizes():
    Base.seen.clear()
    found = class_containers(Child)
    assert {c.name: (c.kind, c.size) for c in found.values()} == {
        "Child.pages": ("deque", 0), "Base.seen": ("set", 0), "Base.custom_settings": ("dict", 1)}
    assert not any(key.startswith("scrapy") for key in found)  # Spider's own attributes are Scrapy's


def test_a_container_an_earlier_crawl_filled_is_named_only_when_the_next_crawl_got_far_less():
    Base.seen.clear()
    ledger = CarryOver()
    empty = class_containers(Child)
    Base.seen.update(str(i) for i in range(2000))
    filled = class_containers(Child)
    assert ledger.after_crawl("t.py::first", empty, filled, items=2000, responses=2100) == []
    assert ledger.after_crawl("t.py::same", filled, filled, items=1990, responses=2100) == []  # as much: no note
    (note,) = ledger.after_crawl("t.py::second", filled, filled, items=0, responses=2100)
    assert note.startswith("Base.seen (a set on the class) still held 2,000 entries from an earlier crawl in this"
                           " process (t.py::first); this crawl scraped 0 items (that one 2,000): keep such state")
    (fewer,) = ledger.after_crawl("t.py::third", filled, filled, items=1990, responses=40)
    assert "this crawl got 40 responses (that one 2,100)" in fewer
    Base.seen.clear()
    assert ledger.after_crawl("t.py::cleared", class_containers(Child), class_containers(Child), items=0,
                              responses=0) == []  # it started empty: nothing carried over


# -- pure: the baseline compares the peak above the crawl's start --------------------------------------


def figures(start: float, peak: float, **more: object) -> dict[str, object]:
    return {"start_rss": start, "peak_rss": peak, "peak_rss_above_start": peak - start, **more}


def test_the_peak_is_compared_above_the_start_so_what_earlier_tests_left_is_no_regression():
    past = [figures(80 * MIB, 95 * MIB), figures(81 * MIB, 95.5 * MIB)]
    tolerances = bl.parse_tolerances("peak_rss:10%", source="t")
    assert bl.compare_run(figures(240 * MIB, 255 * MIB), past, tolerances) == []
    kept = bl.within_tolerance(figures(240 * MIB, 255 * MIB), past, tolerances)
    assert kept == ("within tolerance of 2 runs: peak_rss 15.0 MiB above a start of 240.0 MiB (median 14.8 MiB"
                    " above 80.5 MiB, +10%)")
    (finding,) = bl.compare_run(figures(240 * MIB, 280 * MIB), past, tolerances)  # 40 MiB above: over 10% of 95 MiB
    assert finding.regressed and finding.message() == (
        "peak_rss regressed: 40.0 MiB above its start (from 240.0 MiB to 280.0 MiB) against a baseline median of"
        " 14.8 MiB above the start (their start 80.5 MiB; 14.5 to 15.0 MiB over 2 runs), over the tolerance +10%")


def test_a_baseline_saved_without_the_start_compares_the_absolute_peak_with_a_note(tmp_path):
    old = [{"peak_rss": 95 * MIB}]
    tolerances = bl.parse_tolerances("peak_rss:10%,rss_growth:32MiB", source="t")
    (finding,) = bl.compare_run(figures(240 * MIB, 255 * MIB), old, tolerances)
    assert finding.message().startswith("peak_rss regressed: 255.0 MiB against a baseline median of 95.0 MiB (")
    (note,) = baseline_caveats(figures(240 * MIB, 255 * MIB), old, tolerances, tmp_path / "main.json")
    assert note.startswith(f"baseline {tmp_path / 'main.json'} has no start RSS (saved by an older")
    isolated = [figures(80 * MIB, 95 * MIB, isolated=True)]
    (differs,) = baseline_caveats(figures(80 * MIB, 95 * MIB, isolated=False), isolated, tolerances, tmp_path)
    assert differs.startswith("the baseline's crawls ran isolated (--crawlmem-isolate) and this one in the pytest")
    second = [figures(80 * MIB, 95 * MIB, earlier_crawls=1), figures(80 * MIB, 95 * MIB, earlier_crawls=3)]
    (first,) = baseline_caveats(figures(80 * MIB, 95 * MIB, earlier_crawls=0), second, tolerances, tmp_path)
    assert first.startswith("this crawl was the first in its pytest process and the baseline's were not: what the"
                            " project loads once and keeps counts in the rss_growth of a process's first crawl only")
    assert baseline_caveats(figures(80 * MIB, 95 * MIB, earlier_crawls=2), second, tolerances, tmp_path) == []
    assert baseline_caveats(figures(80 * MIB, 95 * MIB, earlier_crawls=None), second, tolerances, tmp_path) == []
