"""The set-up that tests/ and examples/ share (the plugin itself comes from its pytest11 entry point).

- pytester, for the tests that run pytest in a subprocess (every test that starts a reactor or measures memory);
- a Hypothesis profile without per-example deadlines: the suite must pass on a loaded 2-core machine, where a
  property test's timing says nothing about the code;
- a report header naming what the figures depend on (Scrapy, Twisted, the browser the browser tests use);
- bytecode caches for the pytest and Python processes the tests start: with ``PYTHONDONTWRITEBYTECODE`` set
  (this machine's environment sets it) every inner pytest compiled and assertion-rewrote the whole plugin again,
  1.3 of its 2.9 CPU-seconds of start-up; the caches go to ``__pycache__`` (git-ignored);
- the ``quick`` marker on every test that starts no process (no crawl, no inner pytest, no site, no browser):
  ``pytest -m quick -n 2`` is the loop to run while editing (docs/contributing.md);
- the longest files first (``LONGEST_FIRST``), and pytest-xdist's reordering by test count off: under
  ``-n 2 --dist loadfile`` a worker takes a whole file, so a long file picked up last (xdist put one-test files
  last) kept one worker busy alone at the end; longest first, the two workers finish together.
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


#: The whole suite's longest files, longest first, ranked by each file's own run (`-p no:xdist`, one pytest at a time:
#: wall 117-31 s, CPU 68-21 s at the top), the tail by the suite's `-n 2 --dist loadfile` run. Files not named follow,
#: in collection order; a renamed file only loses its place. tests/test_governor_cgroup.py is left out: run early beside
#: test_keeping_line's and test_browser's crawls, its governed crawl was OOM-killed 1 s after it started (1 run in 2).
LONGEST_FIRST = (
    "tests/test_browser.py", "tests/test_keeping_line.py", "tests/test_leaks.py", "tests/test_plugin.py",
    "tests/test_cluster.py", "tests/test_production.py", "tests/test_replay.py",
    "examples/shop_project/tests/test_copies_agree.py", "tests/test_browser_hang.py", "tests/test_detection.py",
    "tests/test_first_hour.py", "tests/test_keeping_reach.py", "tests/test_replay_copies.py", "tests/test_governor_levers.py",
    "tests/test_declared_crawls.py", "tests/test_plateau_crawls.py", "tests/test_earlier_tests.py", "tests/test_large_project.py",
    "tests/test_governor_large.py", "tests/test_governor.py", "tests/test_xdist.py",
    "tests/test_log_capture.py", "tests/test_html.py", "tests/test_baseline.py", "tests/test_isolated.py",
    "examples/test_examples.py", "examples/test_browser_jobs.py", "tests/test_danger.py",
    "examples/test_playwright_books.py", "tests/test_browser_docs.py", "tests/test_backpressure_crawl.py",
)


def pytest_configure(config: pytest.Config) -> None:
    """Keep the collection order (``LONGEST_FIRST``) under ``--dist loadfile``: xdist would sort files by test count."""
    if getattr(config.option, "loadscopereorder", None) is not None:
        config.option.loadscopereorder = False


def longest_first(items: list[pytest.Item], root: Path) -> list[pytest.Item]:
    """``items`` with the files of ``LONGEST_FIRST`` first, in its order; within a file and after them, as collected."""
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}

    def key(item: pytest.Item) -> int:
        try:
            return rank.get(item.path.relative_to(root).as_posix(), len(rank))
        except ValueError:  # a path outside the repository
            return len(rank)

    return sorted(items, key=key)  # stable: the collection order within a rank


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark ``quick`` every test of tests/ that starts no process, unless it says ``@pytest.mark.slow``; longest first.

    examples/ are crawls a user reads: never quick, and no marker in them.
    """
    items[:] = longest_first(items, Path(__file__).parent)
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
