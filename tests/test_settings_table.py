"""One settings table: the extension's plain-value constructor defaults to defaults.CRAWLMEM_DEFAULTS."""

from __future__ import annotations

import inspect

from pytest_crawlmem.core.budgets import Budgets
from pytest_crawlmem.core.defaults import CRAWLMEM_DEFAULTS
from pytest_crawlmem.crawl.extension import CrawlMemExtension
from pytest_crawlmem.crawl.runner import CrawlOptions, measuring_settings

#: Constructor parameters whose setting has no plain default (derived from other settings, or a path).
DERIVED = {"crawler", "jsonl_path", "checkpoint_min_responses", "browser", "prometheus_port"}
#: A parameter's setting, where its name is not the setting's with units spelled out.
SETTING_OF = {"checkpoints": "CRAWLMEM_CHECKPOINTS", "gc_freeze": "CRAWLMEM_GC_FREEZE"}


def test_every_constructor_default_is_the_settings_table_default():
    checked = 0
    for name, parameter in inspect.signature(CrawlMemExtension.__init__).parameters.items():
        if name in DERIVED or name == "self":
            continue
        setting = SETTING_OF.get(name, "CRAWLMEM_" + name.upper())
        assert setting in CRAWLMEM_DEFAULTS, f"{name}: no {setting} in defaults.py"
        assert parameter.default == CRAWLMEM_DEFAULTS[setting], name
        checked += 1
    assert checked >= 15


def test_a_test_crawl_without_leak_per_response_leaves_the_default_to_the_table():
    assert measuring_settings(CrawlOptions())["CRAWLMEM_LEAK_PER_RESPONSE"] is None
    assert measuring_settings(CrawlOptions(budgets=Budgets(leak_per_response=4096)))["CRAWLMEM_LEAK_PER_RESPONSE"] == 4096
