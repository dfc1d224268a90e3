"""The CRAWLMEM_* settings table: one place for defaults, checks that name the bad value, the docs generated from it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from scrapy.settings import Settings

from pytest_crawlmem.core.defaults import CRAWLMEM_DEFAULTS, SETTINGS, read_settings, settings_table

ROOT = Path(__file__).resolve().parent.parent
#: CRAWLMEM_ names that are not settings of the extension: the table itself, an environment variable, and the settings
#: of other components (testing.SlowPipeline; the replay download handler and middleware, set by the runner).
NOT_EXTENSION_SETTINGS = {"CRAWLMEM_DEFAULTS", "CRAWLMEM_CHROMIUM", "CRAWLMEM_SLOW_PIPELINE_DELAY_MS",
                          "CRAWLMEM_SLOW_PIPELINE_CPU_MS", "CRAWLMEM_REPLAY_URL", "CRAWLMEM_REPLAY_COPIES"}


def test_every_crawlmem_setting_the_package_reads_is_in_the_table():
    used = set()
    for path in (ROOT / "pytest_crawlmem").glob("*.py"):
        used |= set(re.findall(r"\bCRAWLMEM_[A-Z_]+[A-Z]\b", path.read_text()))
    assert used - NOT_EXTENSION_SETTINGS <= set(CRAWLMEM_DEFAULTS), used - NOT_EXTENSION_SETTINGS - set(CRAWLMEM_DEFAULTS)
    assert len({s.name for s in SETTINGS}) == len(SETTINGS)


def test_the_docs_table_is_the_generated_one():
    page = (ROOT / "docs" / "production.md").read_text()
    assert settings_table() in page, "regenerate it: python -m pytest_crawlmem.core.defaults"


def test_unset_settings_read_as_the_production_defaults():
    values = read_settings(Settings())
    assert values == dict(CRAWLMEM_DEFAULTS)
    assert values["CRAWLMEM_INTERVAL_SECONDS"] == 1.0 and values["CRAWLMEM_GC_FREEZE"] is False
    assert values["CRAWLMEM_TIMELINE_SAMPLES"] and values["CRAWLMEM_JSONL_MAX_BYTES"]


def test_settings_given_as_strings_are_parsed_as_scrapy_does():
    values = read_settings(Settings({"CRAWLMEM_INTERVAL_SECONDS": "0.5", "CRAWLMEM_GC_FREEZE": "true",
                                     "CRAWLMEM_TIMELINE_SAMPLES": "0", "CRAWLMEM_JSONL_MAX_BYTES": "0",
                                     "CRAWLMEM_PROMETHEUS_PORT": "9410"}))
    assert values["CRAWLMEM_INTERVAL_SECONDS"] == 0.5 and values["CRAWLMEM_GC_FREEZE"] is True
    assert values["CRAWLMEM_TIMELINE_SAMPLES"] == 0 and values["CRAWLMEM_PROMETHEUS_PORT"] == 9410


@pytest.mark.parametrize(("name", "value", "expected"), [
    ("CRAWLMEM_INTERVAL_SECONDS", 0, "expected at least"),
    ("CRAWLMEM_INTERVAL_SECONDS", "often", "expected float"),
    ("CRAWLMEM_TIMELINE_SAMPLES", 8, "expected at least 16 or 0 (off)"),
    ("CRAWLMEM_TIMELINE_SAMPLES", 2.5, "expected int"),
    ("CRAWLMEM_JSONL_MAX_BYTES", 1000, "expected at least 8388608 or 0 (off)"),
    ("CRAWLMEM_GC_FREEZE", "maybe", "expected bool"),
    ("CRAWLMEM_PROMETHEUS_PORT", 70000, "expected a port"),
    ("CRAWLMEM_LOG_INTERVAL_SECONDS", -1, "expected at least 0"),
])
def test_a_bad_value_is_an_error_naming_the_setting_and_the_value(name, value, expected):
    with pytest.raises(ValueError, match=re.escape(f"invalid {name} {value!r} from Scrapy settings: {expected}")):
        read_settings(Settings({name: value}))


def test_a_stream_budget_too_small_for_the_timeline_names_both_settings():
    with pytest.raises(ValueError, match=r"CRAWLMEM_JSONL_MAX_BYTES 16777216 .* CRAWLMEM_TIMELINE_SAMPLES 16384"):
        read_settings(Settings({"CRAWLMEM_JSONL_MAX_BYTES": 16 * 2**20, "CRAWLMEM_TIMELINE_SAMPLES": 16384}))
    with pytest.raises(ValueError, match="a bounded stream needs a bounded timeline"):
        read_settings(Settings({"CRAWLMEM_TIMELINE_SAMPLES": 0}))


def test_test_crawls_keep_the_gc_freeze_and_stay_quiet_unless_the_test_asks():
    from pytest_crawlmem.measure.runner import CrawlOptions, crawl_settings

    settings = crawl_settings(None, CrawlOptions())
    values = read_settings(settings)
    assert values["CRAWLMEM_GC_FREEZE"] is True and values["CRAWLMEM_LOG_INTERVAL_SECONDS"] == 0
    assert values["CRAWLMEM_INTERVAL_SECONDS"] == 0.1
    asked = read_settings(crawl_settings({"CRAWLMEM_LOG_INTERVAL_SECONDS": 5}, CrawlOptions()))
    assert asked["CRAWLMEM_LOG_INTERVAL_SECONDS"] == 5


def test_a_metrics_port_without_prometheus_client_is_an_error_naming_the_extra(monkeypatch):
    import sys

    from pytest_crawlmem.measure.metrics import MissingPrometheus, require_prometheus

    monkeypatch.setitem(sys.modules, "prometheus_client", None)  # what an environment without the extra sees
    with pytest.raises(MissingPrometheus, match=re.escape("pip install 'pytest-crawlmem[prometheus]'")):
        require_prometheus()
