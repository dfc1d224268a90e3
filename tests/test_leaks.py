"""Each retention cause is detected, classified and attributed; clean crawls pass with leak="fail".

One inner pytest session (pytester, a subprocess) runs every spider; the tests here read its reports.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from inner_session import inner_session
from leak_suite_source import SUITE

LEAK_CASES = [
    "dedup_set", "kept_selectors", "meta_responses", "module_list", "signal_closure", "stats_requests", "unbounded_cache",
]
CLEAN_CASES = ["test_clean[bounded_cache]", "test_clean[slow_pipeline]", "test_clean_large_pages"]


@pytest.fixture
def inner(pytester: pytest.Pytester) -> tuple[pytest.RunResult, Path]:
    # 10 crawls of 630 responses: ~1 CPU-minute, 10 wall minutes on a machine at load average 20
    return inner_session(pytester, SUITE, "[pytest]\n", "-rA", timeout=1800)


def report(root: Path, test: str) -> dict:
    path = root / ".crawlmem" / ("test_suite.py__" + test.replace("[", "_").replace("]", "_")) / "report.json"
    return json.loads(path.read_text())


def leak_line(case: str) -> int:
    lines = SUITE.splitlines()
    marker = {"stats_requests": "debug/requests"}.get(case)
    owner = {"module_list": "RETAINED.append", "meta_responses": "self.kept.append", "unbounded_cache": "self.cache[",
             "signal_closure": "bucket.append", "dedup_set": "self.seen.add", "kept_selectors": "self.trees.append"}
    needle = marker or owner[case]
    return next(i for i, line in enumerate(lines, 1) if needle in line and "# LEAK" in line)


def test_the_inner_suite_ran_every_case(inner):
    outcome, _ = inner
    outcome.assert_outcomes(passed=10)


@pytest.mark.parametrize("case", LEAK_CASES)
def test_each_retention_cause_is_detected_as_retained_objects(inner, case):
    _, root = inner
    result = report(root, f"test_leak[{case}]")["result"]
    assert result["verdict"] == "retained-objects", result["growth"]["reason"]
    assert result["responses"] == 630


@pytest.mark.parametrize("case", [c for c in LEAK_CASES if c not in ("meta_responses", "kept_selectors")])
def test_python_level_retention_is_attributed_to_its_line(inner, case):
    _, root = inner
    result = report(root, f"test_leak[{case}]")["result"]
    sites = [s["location"] for s in result["top_growth"]]
    assert sites, result["growth"]
    assert sites[0].endswith(f"test_suite.py:{leak_line(case)}"), sites
    assert f"test_suite.py:{leak_line(case)}" in result["growth"]["reason"]


@pytest.mark.parametrize("case", ["meta_responses", "kept_selectors"])
def test_retained_scrapy_objects_are_named_in_the_verdict(inner, case):
    _, root = inner
    result = report(root, f"test_leak[{case}]")["result"]
    expected = {"meta_responses": "HtmlResponse +", "kept_selectors": "Selector"}[case]
    assert expected in result["growth"]["reason"] or any(
        expected.rstrip(" +") in s["location"] for s in result["top_growth"]
    ), result["growth"]["reason"]


@pytest.mark.parametrize(
    ("case", "holder", "held"),
    [("meta_responses", "class test_suite.MetaResponses .kept -> list[", "HtmlResponse"),
     ("kept_selectors", "class test_suite.KeptSelectors .trees -> list[", "Selector")],
)
def test_what_holds_leaked_scrapy_objects_is_named(inner, case, holder, held):
    _, root = inner
    result = report(root, f"test_leak[{case}]")["result"]
    paths = {r["class_name"]: r["path"] for r in result["retention"]}
    assert paths[held].startswith(holder) and paths[held].endswith(held), paths
    assert f"held by {holder}" in result["growth"]["reason"]


def test_only_the_crawls_own_objects_are_counted_after_it(inner):
    _, root = inner
    later = report(root, "test_leak[module_list]")["result"]  # runs after kept_selectors and meta_responses
    assert "Selector" not in later["live_refs"] and "HtmlResponse" not in later["live_refs"], later["live_refs"]
    assert later["retention"] == []


@pytest.mark.parametrize("case", CLEAN_CASES)
def test_clean_crawls_pass_with_leak_fail(inner, case):
    _, root = inner
    result = report(root, case)["result"]
    assert result["verdict"] in ("steady", "response-processing"), result["growth"]["reason"]
