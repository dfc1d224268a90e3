"""One settings table: the extension reads one typed config built from it, and the runner writes settings from it."""

from __future__ import annotations

import typing
from dataclasses import fields

import pytest

from pytest_crawlmem.browser.pages import BROWSER_MIN_INTERVAL_SECONDS
from pytest_crawlmem.core.budgets import Budgets
from pytest_crawlmem.core.defaults import (
    CHECKPOINT_MIN_RESPONSES,
    CRAWLMEM_DEFAULTS,
    SETTINGS,
    CrawlMemConfig,
    name_of,
    settings_of,
)
from pytest_crawlmem.measure.extension import CrawlMemExtension
from pytest_crawlmem.measure.runner import DEFAULT_SETTINGS, CrawlOptions, crawl_settings, measuring_settings

#: Rows whose unset value is derived when the config is read (``CrawlMemConfig.from_settings``).
DERIVED = {"browser": False, "checkpoint_min_responses": CHECKPOINT_MIN_RESPONSES}


def test_the_config_has_one_typed_attribute_a_row_of_the_table_in_its_order():
    hints = typing.get_type_hints(CrawlMemConfig)
    assert [f.name for f in fields(CrawlMemConfig)] == [spec.attr for spec in SETTINGS]
    for spec in SETTINGS:
        kinds = set(typing.get_args(hints[spec.attr])) - {type(None)} or {hints[spec.attr]}
        assert kinds == {spec.kind}, spec.name


def test_the_default_config_is_the_tables_defaults():
    config = CrawlMemConfig.of()
    for spec in SETTINGS:
        expected = DERIVED[spec.attr] if spec.attr in DERIVED else CRAWLMEM_DEFAULTS[spec.name]
        assert getattr(config, spec.attr) == expected, spec.name
    assert CrawlMemConfig.of(browser=True).checkpoint_min_responses == 20  # browser crawls are judged in 20 pages


def test_what_the_runner_writes_is_what_the_extension_reads():
    options = CrawlOptions(interval_seconds=0.25, tracemalloc_frames=2, checkpoints=False,
                           budgets=Budgets(leak_per_response=4096, kill_at=2**30, timeout=30.0), snapshot_at_bytes=2**29)
    written = measuring_settings(options)
    assert set(written) <= set(CRAWLMEM_DEFAULTS) and set(DEFAULT_SETTINGS) - {"LOG_LEVEL", "ROBOTSTXT_OBEY",
                                                                                 "COOKIES_ENABLED"} <= set(CRAWLMEM_DEFAULTS)
    config = CrawlMemConfig.from_settings(crawl_settings({}, options))
    assert (config.enabled, config.interval_seconds, config.tracemalloc_frames, config.checkpoints) == (True, 0.25, 2, False)
    assert (config.leak_per_response, config.kill_at_bytes, config.timeout_seconds) == (4096, 2**30, 30.0)
    assert (config.snapshot_at_bytes, config.gc_freeze, config.media_failures, config.log_interval_seconds) == (
        2**29, True, True, 0.0)


def test_the_extension_takes_its_values_from_the_config():
    ext = CrawlMemExtension(None, CrawlMemConfig.of(interval_seconds=0.05, browser=True, leak_per_response=4096,
                                                    drain_timeout_seconds=2.0))
    assert ext.interval_seconds == BROWSER_MIN_INTERVAL_SECONDS and ext.config.checkpoint_min_responses == 20
    assert ext.leaks.leak_per_response == 4096 and ext.config.drain_timeout_seconds == 2.0 and ext.pages is not None
    plain = CrawlMemExtension(None)
    assert plain.interval_seconds == CRAWLMEM_DEFAULTS["CRAWLMEM_INTERVAL_SECONDS"] and plain.pages is None


def test_a_name_not_in_the_table_and_a_bad_value_are_refused_naming_the_setting():
    assert name_of("kill_at_bytes") == "CRAWLMEM_KILL_AT_BYTES"
    with pytest.raises(KeyError, match="no CRAWLMEM_\\* setting 'kill_at'"):
        settings_of(kill_at=1)
    with pytest.raises(ValueError, match="invalid CRAWLMEM_INTERVAL_SECONDS 'soon' from Scrapy settings: expected float"):
        CrawlMemConfig.of(interval_seconds="soon")


def test_a_test_crawl_without_leak_per_response_leaves_the_default_to_the_table():
    assert measuring_settings(CrawlOptions())["CRAWLMEM_LEAK_PER_RESPONSE"] is None
    assert measuring_settings(CrawlOptions(budgets=Budgets(leak_per_response=4096)))["CRAWLMEM_LEAK_PER_RESPONSE"] == 4096
