"""Growth declared by design on real crawls: a set that grows ~1.6 KiB a response fails undeclared, passes declared
(from the ini file, or on a pipeline by its class name), still lets a 4.8 KiB/response leak beside it be caught and
named, and is named as a leak when it grows beyond its declaration.

One inner pytest session (pytester, a subprocess) runs the five crawls; the tests here read its outcome and reports.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from declared_suite_source import INI, SUITE
from inner_session import inner_session


@pytest.fixture
def inner(pytester: pytest.Pytester) -> tuple[pytest.RunResult, Path]:
    # 5 crawls of 630 responses
    return inner_session(pytester, SUITE, INI, "-rA", timeout=1500)


def growth(root: Path, test: str) -> dict:
    return json.loads((root / ".crawlmem" / f"test_suite.py__{test}" / "report.json").read_text())["result"]["growth"]


def line_of(needle: str) -> int:
    return next(i for i, line in enumerate(SUITE.splitlines(), 1) if needle in line)


def test_every_inner_test_passed(inner):
    outcome, _ = inner
    outcome.assert_outcomes(passed=5)


def test_the_set_undeclared_is_a_leak(inner):
    _, root = inner
    found = growth(root, "test_undeclared")
    assert found["verdict"] == "retained-objects", found["reason"]
    assert "held by spider.seen_ids" in found["reason"], found["reason"]
    assert found["declared"] == []


def test_the_set_declared_in_the_ini_is_set_aside_and_said_so(inner):
    _, root = inner
    found = growth(root, "test_declared_in_the_ini")
    assert found["verdict"] == "steady", found["reason"]
    assert "set aside as declared: spider.seen_ids " in found["reason"], found["reason"]
    (declared,) = found["declared"]
    assert declared["holder"] == "spider.seen_ids" and not declared["over"]
    assert 1200 < declared["per_response_bytes"] < 2048, declared


def test_a_leak_beside_the_declared_set_is_caught_and_named(inner):
    _, root = inner
    found = growth(root, "test_declared_beside_a_leak")
    assert found["verdict"] == "retained-objects", found["reason"]
    assert found["per_response_bytes"] > 3 * 1024, found["reason"]
    assert "held by spider.kept" in found["reason"], found["reason"]
    assert "held by spider.seen_ids" not in found["reason"] and "over its declared" not in found["reason"]
    assert "set aside as declared: spider.seen_ids " in found["reason"]
    assert f"test_suite.py:{line_of('# LEAK')}" in found["reason"], found["reason"]


def test_the_set_over_its_declaration_is_a_leak_named_as_such(inner):
    _, root = inner
    found = growth(root, "test_declared_too_small")
    assert found["verdict"] == "retained-objects", found["reason"]
    assert found["reason"].startswith("spider.seen_ids grew "), found["reason"]
    assert "/response, over its declared 400 B/response" in found["reason"]
    assert f"test_suite.py:{line_of('# BY DESIGN')}" in found["reason"], found["reason"]
    assert found["declared"][0]["over"]


def test_a_pipeline_set_declared_by_its_class_name_is_set_aside(inner):
    _, root = inner
    found = growth(root, "test_declared_pipeline")
    assert found["verdict"] == "steady", found["reason"]
    assert "set aside as declared: pipeline DuplicatesPipeline.ids_seen " in found["reason"], found["reason"]
