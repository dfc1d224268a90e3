"""Misspelt fixture options are refused, spider arguments still pass (core.keywords, pure)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_crawlmem.core.keywords import edit_distance, misspelt_option, refuse_misspelt

CRAWL_OPTIONS = ("start_urls", "settings", "isolate", "project_settings", "replay", "replay_copies", "replay_latency",
                 "replay_drip", "replay_inflate")


@pytest.mark.parametrize(("keyword", "meant"), [
    ("replay_copy", "replay_copies"), ("start_url", "start_urls"), ("setting", "settings"), ("isolated", "isolate"),
    ("replya", "replay"), ("replay_latncy", "replay_latency"), ("isolation", "isolate"),
])
def test_a_keyword_near_an_option_or_in_its_namespace_is_a_typo(keyword, meant):
    assert misspelt_option(keyword, CRAWL_OPTIONS) == meant


@pytest.mark.parametrize("keyword", ["replay_speed", "replay_x", "isolate_me", "isolates"])
def test_every_keyword_in_an_option_namespace_is_refused(keyword):
    assert misspelt_option(keyword, CRAWL_OPTIONS) is not None


@pytest.mark.parametrize("keyword", ["category", "start_url_file", "max_pages", "base", "depth", "retries"])
def test_other_keywords_stay_spider_arguments(keyword):
    assert misspelt_option(keyword, CRAWL_OPTIONS) is None


def test_the_refusal_names_the_keyword_the_option_and_how_spider_arguments_pass():
    message = refuse_misspelt("crawl", ["category", "replay_copy"], CRAWL_OPTIONS)
    assert message is not None
    assert "replay_copy= (did you mean replay_copies=?)" in message and "category" not in message.split(":")[0]
    assert "scrapy crawl -a name=value" in message
    assert refuse_misspelt("crawl", ["category"], CRAWL_OPTIONS) is None


@given(st.text(alphabet="abc_", max_size=8), st.text(alphabet="abc_", max_size=8))
def test_edit_distance_is_symmetric_and_zero_only_for_equal_strings(a, b):
    assert edit_distance(a, b) == edit_distance(b, a)
    assert (edit_distance(a, b) == 0) == (a == b)
    assert edit_distance(a, b) <= max(len(a), len(b))


def test_an_adjacent_swap_is_one_edit():
    assert edit_distance("replay", "repaly") == 1


def test_a_keyword_the_spider_declares_is_its_argument_however_close_to_an_option():
    assert refuse_misspelt("crawl", ["start_url"], CRAWL_OPTIONS, declared={"start_url"}) is None
    assert refuse_misspelt("crawl", ["start_url"], CRAWL_OPTIONS) is not None
