"""The set-up that tests/ and examples/ share (the plugin itself comes from its pytest11 entry point).

- pytester, for the tests that run pytest in a subprocess (every test that starts a reactor or measures memory);
- a Hypothesis profile without per-example deadlines: the suite must pass on a loaded 2-core machine, where a
  property test's timing says nothing about the code;
- a report header naming what the figures depend on (Scrapy, Twisted, the browser the browser tests use).
"""

from __future__ import annotations

import shutil

import pytest

pytest_plugins = ["pytester"]

try:  # the test extra; `pip install -e .` alone runs the examples, which need no Hypothesis
    from hypothesis import HealthCheck, settings
except ImportError:  # pragma: no cover
    pass
else:
    settings.register_profile("crawlmem", deadline=None, suppress_health_check=[HealthCheck.too_slow])
    settings.load_profile("crawlmem")


def pytest_report_header(config: pytest.Config) -> list[str]:
    """Scrapy and Twisted versions, and the Chromium the browser tests drive."""
    import scrapy
    import twisted

    chromium = shutil.which("chromium") or "not installed (browser tests are skipped)"
    return [f"crawlmem: scrapy {scrapy.__version__}, twisted {twisted.__version__}, chromium {chromium}"]
