"""Leak fingerprints and new leaks against a control, with real crawls (two inner pytest sessions in one directory).

The control session crawls a leaky spider (``Hoarder``: a list on the spider) and a clean one, and saves the baseline
``control``. The treatment session runs the same tests after an edit above the leak (blank lines and a comment move
its line down by 7), with the clean spider replaced by another leak (``Indexer``: a dict per URL); it saves
``treatment`` and compares with ``control`` under ``crawlmem_fail_on = new-leaks``. Each session writes its own report
folder, so ``crawlmem diff --new-leaks`` can compare the two runs' folders and their baselines.
"""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any, NamedTuple

import pytest
from spiders_source import CATALOG_SPIDER

from pytest_crawlmem.reports import cli

LEAK_A = 'self.kept.append(b"x" * 8192 + response.url.encode())  # LEAK A'
SPIDERS = "import scrapy\n\n" + CATALOG_SPIDER + f'''

class Hoarder(Catalog):
    kept = []

    def parse_product(self, response):
        {LEAK_A}
        yield from super().parse_product(response)


class Indexer(Catalog):
    index = {{}}

    def parse_product(self, response):
        self.index[response.url] = b"y" * 8192  # LEAK B
        yield from super().parse_product(response)
'''
MOVED = SPIDERS.replace("\nclass Hoarder(Catalog):", "\n\n\n\n\n# the leak moves down\n\n\nclass Hoarder(Catalog):")
SUITE = '''
import pytest
from spiders import *

LONG = "/catalog/?pages=30&per_page=20"  # 630 responses: a leak of 8 KiB a product page is judged


@pytest.mark.crawl_memory(leak="warn")
def test_first(crawl, fixture_site):
    crawl(Hoarder, start_urls=[fixture_site.url(LONG)])


@pytest.mark.crawl_memory(leak="warn")
def test_second(crawl, fixture_site):
    crawl(SECOND, start_urls=[fixture_site.url(PAGES)])
'''
CONTROL = SUITE.replace("SECOND, ", "Catalog, ").replace("PAGES", '"/catalog/?pages=2&per_page=20"')
TREATMENT = SUITE.replace("SECOND, ", "Indexer, ").replace("PAGES", "LONG")


class Run(NamedTuple):
    """One inner session: its output and where it wrote."""

    outcome: pytest.RunResult
    reports: Path
    junit: Path


class Runs(NamedTuple):
    control: Run
    treatment: Run
    root: Path


_RUNS: dict[str, Runs | BaseException] = {}


def session(pytester: pytest.Pytester, name: str, spiders: str, suite: str, *args: str) -> Run:
    (pytester.path / "spiders.py").write_text(spiders)
    (pytester.path / "test_suite.py").write_text(suite)
    junit = pytester.path / f"{name}.xml"
    outcome = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "-p", "no:xdist", "-v", f"--junitxml={junit}", f"--crawlmem-report-dir={name}-reports",
        "--crawlmem-baseline-dir=baselines", f"--crawlmem-save={name}", *args, "test_suite.py", timeout=1200)
    return Run(outcome, pytester.path / f"{name}-reports", junit)


@pytest.fixture
def runs(pytester: pytest.Pytester) -> Runs:
    """The control and treatment sessions, run once for the module by the first test that asks."""
    if "runs" not in _RUNS:
        try:
            pytester.makeini("[pytest]\ncrawlmem_fail_on = new-leaks\n")
            control = session(pytester, "control", SPIDERS, CONTROL)
            treatment = session(pytester, "treatment", MOVED, TREATMENT, "--crawlmem-compare=control")
            _RUNS["runs"] = Runs(control, treatment, pytester.path)
        except BaseException as exc:
            _RUNS["runs"] = exc
            raise
    found = _RUNS["runs"]
    if isinstance(found, BaseException):
        raise found
    return found


def result_of(run: Run, test: str) -> dict[str, Any]:
    report = run.reports / f"test_suite.py__{test}" / "report.json"
    return json.loads(report.read_text())["result"]  # type: ignore[no-any-return]


def fingerprint(run: Run, test: str) -> str:
    growth = result_of(run, test)["growth"]
    assert growth["verdict"] == "retained-objects", growth["reason"]
    assert len(growth["fingerprint"]) == 16, growth
    return str(growth["fingerprint"])


def test_the_same_leak_moved_down_by_an_edit_keeps_its_fingerprint(runs):
    before, after = fingerprint(runs.control, "test_first"), fingerprint(runs.treatment, "test_first")
    assert before == after
    line_before = result_of(runs.control, "test_first")["holders"][0]["line"]
    line_after = result_of(runs.treatment, "test_first")["holders"][0]["line"]
    assert int(line_after.rsplit(":", 1)[1]) == int(line_before.rsplit(":", 1)[1]) + 7  # the line did move
    basis = result_of(runs.treatment, "test_first")["growth"]["fingerprint_basis"]
    assert "function Hoarder.parse_product" in basis, basis
    assert 'code self.kept.append(b"x"*#+response.url.encode())' in basis, basis


def test_another_leak_has_another_fingerprint_and_a_clean_crawl_none(runs):
    assert fingerprint(runs.treatment, "test_second") != fingerprint(runs.treatment, "test_first")
    assert result_of(runs.control, "test_second")["growth"]["fingerprint"] == ""


def test_the_fingerprint_is_in_the_verbose_summary_the_junit_properties_and_report_html(runs):
    first, second = fingerprint(runs.treatment, "test_first"), fingerprint(runs.treatment, "test_second")
    table = runs.treatment.outcome.stdout.str().split("crawl memory =", 1)[1]
    header = next(line for line in table.splitlines() if line.startswith("test "))
    assert "fingerprint" in header.split()
    for test, value in (("test_first", first), ("test_second", second)):
        row = next(line for line in table.splitlines() if line.startswith(f"test_suite.py::{test}"))
        assert value in row.split(), row
    properties = {
        case.get("name"): {p.get("name"): p.get("value") for p in case.iter("property")}
        for case in ET.parse(runs.treatment.junit).getroot().iter("testcase")
    }
    assert properties["test_first"]["crawlmem_leak_fingerprint"] == first
    assert properties["test_second"]["crawlmem_leak_fingerprint"] == second
    html = (runs.treatment.reports / "test_suite.py__test_first" / "report.html").read_text()
    assert f'<code class="fingerprint">{first}</code>' in html


def test_compared_with_new_leaks_only_the_new_leak_fails(runs):
    outcome = runs.treatment.outcome
    outcome.assert_outcomes(passed=1, failed=1)
    stdout = outcome.stdout.str()
    second = fingerprint(runs.treatment, "test_second")
    assert f"crawl_memory baseline: new retained-objects leak {second} at " in stdout
    assert f"known retained-objects leak {fingerprint(runs.treatment, 'test_first')}" in stdout
    runs.control.outcome.assert_outcomes(passed=2)


def new_leaks(root: Path, capsys: pytest.CaptureFixture[str], control: str, treatment: str) -> tuple[int, str]:
    status = cli.main(["diff", "--new-leaks", str(root / control) if "/" in control or control.endswith("reports")
                       else control, str(root / treatment) if treatment.endswith("reports") else treatment,
                       "--baseline-dir", str(root / "baselines")])
    return status, capsys.readouterr().out


def test_diff_new_leaks_exits_1_on_a_treatment_that_adds_a_leak_and_0_on_the_same_leaks(runs, capsys):
    second = fingerprint(runs.treatment, "test_second")
    first = fingerprint(runs.treatment, "test_first")
    status, out = new_leaks(runs.root, capsys, "control-reports", "treatment-reports")
    assert status == 1, out
    assert f"NEW   {second} retained-objects in test_suite.py::test_second" in out, out
    assert f"known {first}" in out, out
    status, out = new_leaks(runs.root, capsys, "control", "treatment")  # the same, from the baselines
    assert status == 1, out
    assert f"NEW   {second}" in out, out
    status, out = new_leaks(runs.root, capsys, "treatment-reports", "control-reports")  # no leak the other lacks
    assert status == 0, out
    assert "no new leak" in out and f"gone  {second}" in out, out
    status, out = new_leaks(runs.root, capsys, "treatment", "treatment-reports")
    assert status == 0, out


def test_each_leak_carries_its_trace_in_report_json_report_html_and_the_failure(runs):
    first = result_of(runs.treatment, "test_first")
    trace = first["growth"]["leak_trace"]
    assert [(hop["reference"], hop["in_fingerprint"]) for hop in trace["hops"]][:2] == [("spider", True), (".kept", True)]
    assert trace["hops"][1]["holds"].startswith("list, +"), trace
    entries = trace["hops"][2]  # what one entry costs (8 KiB and the URL), not part of the fingerprint
    assert entries["reference"] == "[*]" and not entries["in_fingerprint"] and len(trace["hops"]) == 3, trace
    assert re.fullmatch(r"8\.\d KiB each \(traced at the keeping line\)", entries["holds"]), entries
    assert (trace["line"], trace["function"], trace["code"], trace["code_in_fingerprint"]) == (
        first["holders"][0]["line"], "Hoarder.parse_product", LEAK_A, True)
    html = (runs.treatment.reports / "test_suite.py__test_first" / "report.html").read_text()
    assert '<ol class="leak-trace">' in html and '<li class="hop in-fp"><code class="ref">.kept</code> list, +' in html
    second = fingerprint(runs.treatment, "test_second")
    failure = runs.treatment.outcome.stdout.str().split("crawl_memory baseline: new retained-objects leak", 1)[1]
    lines = failure.splitlines()
    assert lines[1] == f"crawl_memory leak trace (<- fingerprint: what fingerprint {second} is built from):", lines[:6]
    assert re.fullmatch(r"  spider +<- fingerprint", lines[2]), lines[2]
    assert re.fullmatch(r"    \.index +dict, \+[\d,]+ entries in [\d,]+ responses +<- fingerprint", lines[3]), lines[3]
    stored = next(line for line in lines if line.startswith("  stored at "))
    assert re.fullmatch(r'  stored at spiders\.py:\d+ in Indexer\.parse_product: self\.index\[response\.url\] = b"y" \* 8192'
                        r"  # LEAK B +<- fingerprint", stored), stored
