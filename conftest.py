"""The set-up that tests/ and examples/ share (the plugin itself comes from its pytest11 entry point).

- pytester, for the tests that run pytest in a subprocess (every test that starts a reactor or measures memory);
- a Hypothesis profile without per-example deadlines: the suite must pass on a loaded 2-core machine, where a
  property test's timing says nothing about the code;
- a report header naming what the figures depend on (Scrapy, Twisted, the browser the browser tests use);
- bytecode caches for the pytest and Python processes the tests start: with ``PYTHONDONTWRITEBYTECODE`` set
  (this machine's environment sets it) every inner pytest compiled and assertion-rewrote the whole plugin again,
  1.3 of its 2.9 CPU-seconds of start-up; the caches go to ``__pycache__`` (git-ignored);
- the ``quick`` marker on every test that starts no process (no crawl, no inner pytest, no site, no browser):
  ``pytest -m quick -n 2`` is the loop to run while editing (docs/contributing.md).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

pytest_plugins = ["pytester"]
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)  # for the processes the tests start (this one has compiled already)

try:  # the test extra; `pip install -e .` alone runs the examples, which need no Hypothesis
    from hypothesis import HealthCheck, settings
except ImportError:  # pragma: no cover
    pass
else:
    settings.register_profile("crawlmem", deadline=None, suppress_health_check=[HealthCheck.too_slow])
    settings.load_profile("crawlmem")


#: Fixtures that start a process (an inner pytest, the fixture site, a crawl, a browser, a cgroup): a test using one,
#: directly or through another fixture, is not quick.
PROCESS_FIXTURES = frozenset({
    "pytester", "fixture_site", "crawl", "crawl_sweep", "crawl_cluster", "browser_job",
    "inner", "site", "scenario", "real_reports", "cgroup",
})


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark ``quick`` every test of tests/ that starts no process, unless it says ``@pytest.mark.slow``.

    examples/ are crawls a user reads: never quick, and no marker in them.
    """
    tests = Path(__file__).parent / "tests"
    for item in items:
        if item.path.is_relative_to(tests) and PROCESS_FIXTURES.isdisjoint(getattr(item, "fixturenames", ())) \
                and item.get_closest_marker("slow") is None:
            item.add_marker(pytest.mark.quick)


def pytest_report_header(config: pytest.Config) -> list[str]:
    """Scrapy and Twisted versions, and the Chromium the browser tests drive."""
    import scrapy
    import twisted

    chromium = shutil.which("chromium") or "not installed (browser tests are skipped)"
    return [f"crawlmem: scrapy {scrapy.__version__}, twisted {twisted.__version__}, chromium {chromium}"]
