"""The plateau rule on real crawls: a native page cache that filled and levelled off passes ``leak="fail"`` as
``steady``, saying where it levelled off; the same cache with a leak on top is still ``retained-objects``.

One inner pytest session (pytester, a subprocess) runs both crawls; the tests here read its outcome and reports.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from inner_session import inner_session
from plateau_suite_source import SUITE


@pytest.fixture
def inner(pytester: pytest.Pytester) -> tuple[pytest.RunResult, Path]:
    # 2 crawls of 1,197 responses: 30-60 s each on 2 shared cores
    return inner_session(pytester, SUITE, "[pytest]\n", "-rA", timeout=1200)


def report(root: Path, test: str) -> dict:
    return json.loads((root / ".crawlmem" / f"test_suite.py__{test}" / "report.json").read_text())


def test_both_crawls_got_the_verdict_their_inner_test_asserts(inner):
    outcome, _ = inner
    outcome.assert_outcomes(passed=2)


def test_a_page_cache_that_filled_and_levelled_off_is_steady_and_says_where(inner):
    _, root = inner
    growth = report(root, "test_page_cache")["result"]["growth"]
    assert growth["verdict"] == "steady", growth["reason"]
    assert "memory filled to " in growth["reason"] and "levelled off at response" in growth["reason"], growth["reason"]
    assert growth["detectable_per_response_bytes"] is not None


def test_a_leak_on_top_of_the_page_cache_is_not_excused(inner):
    _, root = inner
    growth = report(root, "test_page_cache_and_leak")["result"]["growth"]
    assert growth["verdict"] == "retained-objects", growth["reason"]
    assert "levelled off" not in growth["reason"]
