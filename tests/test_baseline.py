"""Baselines: file format, locking, tolerances, median comparison (pure), and save/compare through pytest."""

from __future__ import annotations

import json
import multiprocessing
import os
import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from spiders_source import SPIDERS

from pytest_crawlmem.core.budgets import BudgetError, resolve_budgets
from pytest_crawlmem.core.settings import resolve_settings
from pytest_crawlmem.core.units import UnitError
from pytest_crawlmem.harness import baseline as bl

MIB = 2**20
HERE = {"machine": "x86_64", "system": "Linux", "python": "cpython 3.11.2", "cpu_count": 2, "memory_gib": 23,
        "libc": "glibc 2.36"}


def runs(figure: str, *values: float) -> list[dict[str, float]]:
    return [{figure: v} for v in values]


# -- tolerances ------------------------------------------------------------------------------------


def test_tolerances_are_relative_percentages_or_absolute_amounts_by_figure():
    parsed = bl.parse_tolerances("peak_rss:10%, leak_per_response:1KiB,duration_seconds:5,responses:3",
                                 source="command line")
    assert parsed["peak_rss"] == bl.Tolerance("peak_rss", 10.0, relative=True)
    assert parsed["leak_per_response"] == bl.Tolerance("leak_per_response", 1024.0, relative=False)
    assert parsed["duration_seconds"].amount == 5.0
    assert parsed["responses"].amount == 3.0
    assert bl.parse_compare_fail("peak_rss:20%,rss_growth:32 MiB", source="m") == "peak_rss:20%,rss_growth:32MiB"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("peak_rss:ten%", "invalid tolerance 'peak_rss:ten%' from command line --crawlmem-compare-fail"),
        ("peak_rs:10%", "invalid tolerance 'peak_rs:10%' from command line --crawlmem-compare-fail: expected FIGURE:AMOUNT"),
        ("peak_rss", "invalid tolerance 'peak_rss' from"),
        ("leak_per_response:-1KiB", "invalid tolerance 'leak_per_response:-1KiB' from"),
        (",", "invalid tolerance ',' from"),
    ],
)
def test_a_bad_tolerance_names_the_entry_and_its_source(text, expected):
    with pytest.raises(UnitError, match="^" + re.escape(expected)):
        bl.parse_tolerances(text, source="command line --crawlmem-compare-fail")


@given(st.text(max_size=40))
def test_the_tolerance_parser_never_crashes_on_garbage(text):
    try:
        parsed = bl.parse_tolerances(text, source="fuzz")
    except UnitError as exc:
        assert "from fuzz" in str(exc)
    else:
        assert set(parsed) <= set(bl.FIGURES)


@given(st.sampled_from(sorted(bl.FIGURES)), st.integers(0, 10**6), st.booleans())
def test_a_tolerance_reads_back_from_its_canonical_form(figure, amount, relative):
    tolerance = bl.Tolerance(figure, float(amount), relative)
    again = bl.parse_tolerance(str(tolerance), source="round trip")
    assert again.figure == figure and again.relative == relative
    assert again == tolerance


def test_a_bad_compare_fail_in_a_marker_is_a_budget_error_naming_the_test():
    with pytest.raises(BudgetError, match=re.escape("invalid tolerance 'peak_rss:lots' from compare_fail in marker of t.py::t")):
        resolve_budgets([({"compare_fail": "peak_rss:lots"}, "marker of t.py::t")], {})
    budgets = resolve_budgets([({"compare_fail": "peak_rss:20%"}, "marker")], {})
    assert budgets.compare_fail == "peak_rss:20%"


def settings_from(cli: dict[str, object], ini: dict[str, object]):
    return resolve_settings(cli.get, ini.get, Path("/r"))


def test_the_command_line_tolerances_win_over_the_ini_and_bad_ones_name_their_source():
    assert settings_from({}, {}).compare_fail == bl.DEFAULT_TOLERANCES
    assert settings_from({}, {"crawlmem_compare_fail": "peak_rss:5%"}).compare_fail == "peak_rss:5%"
    cli = {"crawlmem_compare_fail": "rss_growth:1MiB", "crawlmem_save": "main", "crawlmem_compare": "old"}
    settings = settings_from(cli, {"crawlmem_compare_fail": "peak_rss:5%"})
    assert (settings.compare_fail, settings.save_name, settings.compare_name) == ("rss_growth:1MiB", "main", "old")
    with pytest.raises(ValueError, match="invalid tolerance 'peak_rss:ten%' from command line --crawlmem-compare-fail"):
        settings_from({"crawlmem_compare_fail": "peak_rss:ten%"}, {})
    with pytest.raises(ValueError, match="from ini crawlmem_compare_fail"):
        settings_from({}, {"crawlmem_compare_fail": "nonsense"})


def test_marker_tolerances_override_the_session_per_figure():
    merged = bl.merge_tolerances("peak_rss:10%,leak_per_response:1KiB", "peak_rss:20%")
    assert merged["peak_rss"].amount == 20.0
    assert merged["leak_per_response"].amount == 1024.0


# -- comparison ------------------------------------------------------------------------------------


def test_a_regression_is_judged_against_the_median_and_names_spread_and_tolerance():
    past = runs("peak_rss", 105.1 * MIB, 110.4 * MIB, 114.0 * MIB, 108.0 * MIB, 112.0 * MIB)
    tolerances = bl.parse_tolerances("peak_rss:10%", source="t")
    (finding,) = bl.compare_run({"peak_rss": 131.2 * MIB}, past, tolerances)
    assert finding.regressed and finding.median == 110.4 * MIB
    assert finding.message() == (
        "peak_rss regressed: 131.2 MiB against a baseline median of 110.4 MiB (105.1 to 114.0 MiB over 5 runs),"
        " over the tolerance +10%"
    )
    assert bl.compare_run({"peak_rss": 121 * MIB}, past, tolerances) == []  # within 10% of the median


def test_one_outlier_in_the_baseline_does_not_move_the_median():
    past = runs("leak_per_response", 200, 210, 190, 5000, 205)
    tolerances = bl.parse_tolerances("leak_per_response:1KiB", source="t")
    assert bl.compare_run({"leak_per_response": 900}, past, tolerances) == []
    (finding,) = bl.compare_run({"leak_per_response": 2300}, past, tolerances)
    assert finding.message().startswith("leak_per_response regressed: 2.2 KiB/response against a baseline median of 205 B/")
    assert "(190 B to 4.9 KiB over 5 runs), over the tolerance +1.0 KiB" in finding.message()


def test_an_improvement_beyond_the_tolerance_says_the_baseline_may_be_stale():
    tolerances = bl.parse_tolerances("peak_rss:10%", source="t")
    (finding,) = bl.compare_run({"peak_rss": 50 * MIB}, runs("peak_rss", 100 * MIB), tolerances)
    assert not finding.regressed
    assert finding.message() == (
        "peak_rss improved: 50.0 MiB against a baseline median of 100.0 MiB (100.0 MiB in 1 run),"
        " beyond the tolerance -10%: the baseline may be stale"
    )


def test_figures_missing_on_either_side_are_not_compared():
    tolerances = bl.parse_tolerances("traced_peak:1%,leak_per_response:1B", source="t")
    assert bl.compare_run({"traced_peak": None, "leak_per_response": 5000}, [{"traced_peak": 1}, {}], tolerances) == []


# -- the file --------------------------------------------------------------------------------------


def header() -> dict[str, object]:
    return bl.new_header("main", fingerprint=HERE, environment={"scrapy": "2.19"}, commit={"id": "abc", "dirty": False})


def test_saving_writes_a_versioned_file_under_the_fingerprint_and_appends_runs(tmp_path):
    path = bl.baseline_path(tmp_path, "main", HERE)
    assert path == tmp_path / "baselines" / bl.fingerprint_hash(HERE) / "main.json"
    bl.save_runs(path, {"t.py::a": runs("peak_rss", 1)}, header())
    bl.save_runs(path, {"t.py::a": runs("peak_rss", 2), "t.py::b": runs("peak_rss", 3)}, header(), keep=2)
    bl.save_runs(path, {"t.py::a": runs("peak_rss", 4)}, header(), keep=2)
    document = json.loads(path.read_text())
    assert document["schema_version"] == bl.BASELINE_SCHEMA_VERSION
    assert document["fingerprint"] == HERE and document["commit"]["id"] == "abc"
    assert document["tests"] == {"t.py::a": runs("peak_rss", 2, 4), "t.py::b": runs("peak_rss", 3)}
    assert [p.name for p in path.parent.iterdir() if p.suffix == ".tmp"] == []
    assert bl.load_baseline(path).runs["t.py::b"] == [{"peak_rss": 3}]


def _writer(path: str, worker: int) -> None:
    for i in range(5):
        bl.save_runs(Path(path), {"shared": [{"peak_rss": worker * 100 + i}], f"own{worker}": [{"peak_rss": i}]}, header(),
                     keep=1000)


def test_concurrent_writers_lose_no_runs(tmp_path):
    path = tmp_path / "b" / "main.json"
    context = multiprocessing.get_context("fork")
    writers = [context.Process(target=_writer, args=(str(path), w)) for w in range(6)]
    for writer in writers:
        writer.start()
    for writer in writers:
        writer.join(30)
        assert writer.exitcode == 0
    tests = bl.load_baseline(path).runs
    assert sorted(r["peak_rss"] for r in tests["shared"]) == sorted(w * 100 + i for w in range(6) for i in range(5))
    assert all(len(tests[f"own{w}"]) == 5 for w in range(6))


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (None, "does not exist: save one first with --crawlmem-save NAME"),
        ("{not json", "is not valid JSON"),
        ('{"schema_version": 99, "tests": {}}', "has schema_version 99, newer than this pytest-crawlmem reads"),
        ('{"tests": {}}', "has no valid schema_version"),
        ('{"schema_version": 0, "tests": {}}', "which no release wrote"),
        ('{"schema_version": 1, "tests": []}', "has no valid 'tests' table"),
        ("[]", "is not a JSON object"),
    ],
)
def test_an_unusable_file_is_an_error_naming_it(tmp_path, content, expected):
    path = tmp_path / "main.json"
    if content is not None:
        path.write_text(content)
    with pytest.raises(bl.BaselineError) as caught:
        bl.load_baseline(path)
    assert str(path) in str(caught.value) and expected in str(caught.value)


def test_a_corrupt_file_is_not_overwritten_by_a_save(tmp_path):
    path = tmp_path / "main.json"
    path.write_text("{oops")
    with pytest.raises(bl.BaselineError, match="not valid JSON"):
        bl.save_runs(path, {"a": [{}]}, header())
    assert path.read_text() == "{oops"


def test_a_name_is_looked_up_for_this_machine_and_other_machines_are_named(tmp_path):
    elsewhere = {**HERE, "cpu_count": 8}
    bl.save_runs(bl.baseline_path(tmp_path, "main", elsewhere), {"a": [{}]}, bl.new_header(
        "main", fingerprint=elsewhere, environment={}, commit={}))
    with pytest.raises(bl.BaselineError) as caught:
        bl.find_baseline(tmp_path, "main", HERE)
    message = str(caught.value)
    assert str(bl.baseline_path(tmp_path, "main", HERE)) in message
    assert "cpu_count 8 in the baseline, 2 here" in message and "pass one's path" in message
    baseline, differences = bl.find_baseline(tmp_path, str(bl.baseline_path(tmp_path, "main", elsewhere)), HERE)
    assert differences == ["cpu_count 8 in the baseline, 2 here"] and "a" in baseline.runs
    with pytest.raises(bl.BaselineError, match=re.escape("invalid baseline name '../x'")):
        bl.baseline_path(tmp_path, "../x", HERE)


def test_the_fingerprint_and_commit_describe_this_machine_and_tolerate_no_git(tmp_path):
    here = bl.machine_fingerprint()
    assert here["cpu_count"] == os.cpu_count() and here["python"].startswith("cpython ")
    assert bl.fingerprint_hash(here) == bl.fingerprint_hash(dict(reversed(list(here.items()))))
    assert bl.commit_info(tmp_path) == {"id": None, "dirty": None}


# -- through pytest ---------------------------------------------------------------------------------

TWO_TESTS = """
import pytest
from spiders import *

def test_a(crawl, fixture_site):
    crawl({spider}, start_urls=[fixture_site.url("/catalog/?pages=5&per_page=20")])

@pytest.mark.crawl_memory(compare_fail="peak_rss:500%")
def test_b(crawl, fixture_site):
    crawl({spider}, start_urls=[fixture_site.url("/catalog/?pages=5&per_page=20")])
"""


@pytest.fixture
def suite(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makepyfile(spiders=SPIDERS)
    pytester.makepyfile(test_crawl=TWO_TESTS.format(spider="Catalog"))
    return pytester


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest_subprocess("-p", "no:cacheprovider", *args, timeout=300)


def test_saved_runs_merge_across_xdist_workers_and_an_unchanged_tree_passes(suite):
    outcome = run(suite, "-n", "2", "--crawlmem-save", "main")
    outcome.assert_outcomes(passed=2)
    outcome.stdout.fnmatch_lines(["baseline: 2 runs appended to *main.json"])  # one run from each worker, added up
    run(suite, "--crawlmem-save", "main").assert_outcomes(passed=2)
    (path,) = (suite.path / ".crawlmem" / "baselines").glob("*/main.json")
    document = json.loads(path.read_text())
    assert {k: len(v) for k, v in document["tests"].items()} == {"test_crawl.py::test_a": 2, "test_crawl.py::test_b": 2}
    assert document["tests"]["test_crawl.py::test_a"][0]["responses"] == 105
    outcome = run(suite, "--crawlmem-compare", "main", "--crawlmem-compare-fail", "peak_rss:20%,responses:0")
    outcome.assert_outcomes(passed=2)
    outcome.stdout.fnmatch_lines(["test_crawl.py::test_a: within tolerance of 2 runs: peak_rss * (median *, +20%),"
                                  " responses 105 (median 105, +0) of baseline *main.json"])


def test_a_bigger_crawl_fails_the_test_naming_the_figure_unless_its_marker_allows_it(suite):
    suite.makeini("[pytest]\ncrawlmem_compare_fail = peak_rss:20%\n")
    run(suite, "--crawlmem-save", "main").assert_outcomes(passed=2)
    suite.makepyfile(test_crawl=TWO_TESTS.format(spider="Ballast"))
    suite.makepyfile(test_new="from spiders import Catalog\n\ndef test_new(crawl, fixture_site):\n"
                              "    crawl(Catalog, start_urls=[fixture_site.url('/catalog/?pages=1&per_page=2')])\n")
    outcome = run(suite, "--crawlmem-compare", "main")
    outcome.assert_outcomes(passed=2, failed=1)
    outcome.stdout.fnmatch_lines([
        "*_ test_a _*",
        "*crawl_memory baseline: peak_rss regressed: * MiB above its start (from * MiB to * MiB) against a baseline"
        " median of * above the start (their start * MiB; * in 1 run), over the tolerance +20%*",
    ])
    outcome.stdout.fnmatch_lines(["test_new.py::test_new: not in baseline *main.json, not compared"])


def test_a_missing_baseline_or_bad_tolerance_is_a_usage_error(suite):
    outcome = run(suite, "--crawlmem-compare", "nothing")
    assert outcome.ret == pytest.ExitCode.USAGE_ERROR
    outcome.stderr.fnmatch_lines(["*baseline */baselines/*/nothing.json does not exist: save one first*"])
    outcome = run(suite, "--crawlmem-compare-fail", "peak_rss:ten%")
    assert outcome.ret == pytest.ExitCode.USAGE_ERROR
    outcome.stderr.fnmatch_lines(["*invalid tolerance 'peak_rss:ten%' from command line --crawlmem-compare-fail*"])
