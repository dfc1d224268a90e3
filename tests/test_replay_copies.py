"""Replay copies that are checked: responses and items per copy, rules that name the recorded host, items that reach
the project's pipelines as new ones (``replay_item_keys``), and ``replay_copies="auto"`` saying what it got.

The pure checks are tested directly; the crawls run in one inner pytest session (a pytester subprocess) against the
replay site, on HAR recordings built here.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from inner_session import inner_session

from pytest_crawlmem.core import replay_copies as rc
from pytest_crawlmem.core.replay_copies import CopyCount, HostPattern

HTML = "text/html; charset=utf-8"
HOST = "www.shop.example"


# -- the pure checks -------------------------------------------------------------------------------------------------


def counts(*rows: tuple[int, int, int, int]) -> tuple[CopyCount, ...]:
    """(responses, yielded, scraped, dropped) per copy, copy 0 first."""
    return tuple(CopyCount(i, *row) for i, row in enumerate(rows))


def test_a_pattern_names_a_host_when_its_literal_text_holds_it():
    hosts = [HOST]
    assert rc.named_host(r"https://www\.shop\.example/p/", hosts) == HOST
    assert rc.named_host(r"^https?://(www\.)?shop\.example/p/\d+", hosts) == HOST  # a dotted suffix of the host
    assert rc.named_host(r"/p/\d+", hosts) is None
    assert rc.named_host(r"example", hosts) is None  # one label is no host
    assert rc.named_host(r"WWW\.SHOP\.EXAMPLE", hosts) == HOST


def test_copies_that_agree_give_no_warning_and_a_line_of_figures():
    per_copy = counts((11, 10, 10, 0), (11, 10, 10, 0), (10, 9, 9, 0))
    assert rc.copies_warning(per_copy) is None  # within 10% of the original
    assert rc.per_copy_line(per_copy) == (
        "3 copies: the original (copy 0) 11 responses, 10 items; copies 1-2: 10-11 responses, 9-10 items each")


def test_a_copy_short_of_responses_names_a_rule_the_plugin_cannot_adapt():
    per_copy = counts((11, 10, 10, 0), (1, 0, 0, 0), (1, 0, 0, 0))
    pattern = HostPattern("attribute PRODUCT_URL", r"https://www\.shop\.example/p/", HOST, adapted=False)
    message = rc.copies_warning(per_copy, patterns=(pattern,))
    assert message is not None
    assert message.startswith(
        "replay copies fell short of the original: copies 1-2 of 3 got 1 response and 0 items each, the original"
        " (copy 0) 11 responses and 10 items; likely cause: the spider's attribute PRODUCT_URL"
        r" 'https://www\\.shop\\.example/p/' names the recorded host www.shop.example, which copies"
        " (crawlmem-copyK.www.shop.example) do not match, and the plugin cannot adapt it")
    assert "pytest_crawlmem.replay.original_url" in message


def test_a_copy_short_of_responses_without_a_named_rule_points_at_host_comparisons_and_state():
    message = rc.copies_warning(counts((11, 10, 10, 0), (2, 1, 1, 0)), hosts=(HOST,))
    assert message is not None and "copy 1 of 2 got 2 responses and 1 item" in message
    assert "compares hosts or URLs with the recorded host www.shop.example" in message
    assert "state kept between copies" in message


def test_a_crawl_stopped_early_is_named_before_anything_else():
    message = rc.copies_warning(counts((11, 10, 10, 0), (3, 2, 2, 0)), finish_reason="closespider_pagecount")
    assert message is not None and "the crawl stopped early (closespider_pagecount)" in message


def test_items_dropped_by_a_pipeline_point_at_a_duplicates_filter_and_replay_item_keys():
    message = rc.copies_warning(counts((11, 10, 10, 0), (11, 10, 0, 10), (11, 10, 0, 10)))
    assert message == (
        "replay copies' items did not all reach the end of the item pipelines: of the 30 items the 3 copies yielded, 10"
        " went through (copy 0: 10, copies 1-2: 0 each); likely cause: an item pipeline dropped 20 of the copies' 30"
        " items, about every copy's but one copy's worth: a duplicates filter keyed on a field read from the page (the"
        " copies' items carry the original's ids) lets each item through once, whichever copy brings it first; pass"
        " crawl(..., replay_item_keys=[the fields it keys on]) so that each copy's items arrive as new ones")


@pytest.mark.parametrize("split", [(4, 3, 3), (2, 6, 2), (5, 5)])
def test_a_duplicates_filter_is_named_whichever_copy_brings_an_item_first(split):
    per_copy = counts(*((11, 10, n, 10 - n) for n in split))
    message = rc.copies_warning(per_copy)
    assert message is not None and "a duplicates filter keyed on a field read from the page" in message
    assert rc.short_copies(per_copy)


def test_a_filter_dropping_the_same_share_of_every_copy_is_no_shortfall():
    assert rc.copies_warning(counts((11, 10, 6, 4), (11, 10, 6, 4), (11, 10, 6, 4))) is None


def test_items_the_spider_did_not_yield_point_at_state_kept_between_copies():
    message = rc.copies_warning(counts((11, 10, 10, 0), (11, 0, 0, 0)))
    assert message is not None and "the spider yielded 0 items for the copies' pages against 10" in message
    assert "copy_of(response)" in message


def test_auto_says_what_it_got_against_what_it_asked_for():
    short = counts((301, 250, 250, 0), (1, 0, 0, 0))
    assert rc.auto_line(2, 301, short, wanted=600) == (
        'replay_copies="auto" chose 2 copies of the 301-response recording for 600 responses and got 302:'
        " copy 1 fell short (see the warning)")
    fine = counts((14, 10, 10, 0), (14, 10, 10, 0))
    assert rc.auto_line(2, 14, fine, wanted=28) == (
        'replay_copies="auto" chose 2 copies of the 14-response recording for 28 responses and got 28'
        " (every copy within 10% of the original)")
    partial = counts((10, 10, 10, 0), (10, 10, 10, 0))
    assert rc.auto_line(2, 14, partial, wanted=28) == (
        'replay_copies="auto" chose 2 copies of the 14-response recording for 28 responses and got 20: each copy'
        " crawls 10 of the recording's 14 responses; replay_copies=3 would reach 28")


@pytest.mark.parametrize("value,marked", [
    ("SKU-1", "SKU-1~crawlmem-copy3"), (17, 3_000_000_000_017), (["a", 2], ["a~crawlmem-copy3", 3_000_000_000_002]),
    (None, None), (1.5, 1.5),
])
def test_item_keys_are_marked_per_copy_keeping_their_type(value, marked):
    assert rc.mark_key(value, 3) == marked
    assert rc.mark_key(value, 0) == value


def test_item_keys_are_checked_with_their_name():
    assert rc.check_item_keys(["sku", "id"]) == ("sku", "id")
    assert rc.check_item_keys(None) == ()
    with pytest.raises(ValueError, match=r"invalid replay_item_keys 'sku': expected a list of item field names"):
        rc.check_item_keys("sku")


# -- replayed crawls --------------------------------------------------------------------------------------------------

SPIDERS = r'''
import re

import scrapy
from scrapy.exceptions import DropItem
from scrapy.linkextractors import LinkExtractor
from scrapy.spiders import CrawlSpider, Rule, SitemapSpider

SEEN = []


class ShopSitemap(SitemapSpider):
    name = "shop-sitemap"
    allowed_domains = ["shop.example"]
    sitemap_urls = ["https://www.shop.example/sitemap.xml"]
    sitemap_rules = [(r"https://www\.shop\.example/p/", "parse_product")]

    def parse_product(self, response):
        yield {"sku": response.css(".sku::text").get(), "url": response.url}


class ShopCrawl(CrawlSpider):
    name = "shop-crawl"
    allowed_domains = ["shop.example"]
    start_urls = ["https://www.shop.example/"]
    rules = [Rule(LinkExtractor(allow=r"https://www\.shop\.example/p/"), callback="parse_product")]

    def parse_product(self, response):
        yield {"sku": response.css(".sku::text").get(), "url": response.url}


class ShopHostCompare(scrapy.Spider):
    name = "shop-host"
    start_urls = ["https://www.shop.example/"]
    PRODUCT_URL = re.compile(r"https://www\.shop\.example/p/")

    def parse(self, response):
        for href in response.css("a::attr(href)").getall():
            url = response.urljoin(href)
            if self.PRODUCT_URL.match(url):
                yield scrapy.Request(url, self.parse_product)

    def parse_product(self, response):
        yield {"sku": response.css(".sku::text").get()}


class Dedup:
    def open_spider(self, spider=None):
        self.seen = set()

    def process_item(self, item, spider=None):
        SEEN.append(item["sku"])
        if item["sku"] in self.seen:
            raise DropItem(f"duplicate {item['sku']}")
        self.seen.add(item["sku"])
        return item
'''

SUITE = '''
import pytest
from spiders import SEEN, ShopCrawl, ShopHostCompare, ShopSitemap

PIPELINE = {"ITEM_PIPELINES": {"spiders.Dedup": 100}}


def figures(result):
    return [(c.copy, c.responses, c.items_scraped) for c in result.replay_per_copy]


@pytest.mark.parametrize("spider", [ShopSitemap, ShopCrawl], ids=["sitemap", "crawlspider"])
def test_rules_naming_the_host_match_the_copies(crawl, spider):
    result = crawl(spider, replay="shop.har", replay_copies=3)
    assert figures(result) == [(0, 11, 10), (1, 11, 10), (2, 11, 10)], figures(result)
    assert result.responses == 33 and result.items_scraped == 30
    assert [(p.where, p.host, p.adapted) for p in result.replay_rules][:1] == [
        ("sitemap_rules" if spider is ShopSitemap else "rules[0] LinkExtractor allow", "www.shop.example", True)]


def test_a_host_compared_in_the_spiders_code(crawl):
    result = crawl(ShopHostCompare, replay="shop.har", replay_copies=3)
    assert figures(result) == [(0, 11, 10), (1, 1, 0), (2, 1, 0)]


def test_auto_copies_of_a_spider_that_compares_hosts(crawl):
    result = crawl(ShopHostCompare, replay="shop.har", replay_copies="auto")
    assert result.replay_copies > 2 and result.replay_per_copy[1].responses == 1


def test_a_duplicates_pipeline_drops_the_copies_items(crawl):
    result = crawl(ShopSitemap, replay="shop.har", replay_copies=3, settings=PIPELINE)
    per_copy = result.replay_per_copy  # whichever copy brings a SKU first has it through
    assert [c.items_yielded for c in per_copy] == [10, 10, 10]
    assert sum(c.items_scraped for c in per_copy) == 10 and sum(c.items_dropped for c in per_copy) == 20


def test_item_keys_bring_the_copies_items_through_the_pipelines(crawl):
    SEEN.clear()
    result = crawl(ShopSitemap, replay="shop.har", replay_copies=3, settings=PIPELINE, replay_item_keys=["sku"])
    assert [(c.items_scraped, c.items_dropped) for c in result.replay_per_copy] == [(10, 0), (10, 0), (10, 0)]
    assert result.items_scraped == 30 and len(set(SEEN)) == 30
    assert "SKU-3~crawlmem-copy2" in SEEN and "SKU-3" in SEEN


def test_copy_of_and_original_url():
    from pytest_crawlmem.replay import copy_of, original_url
    assert copy_of("https://crawlmem-copy7.www.shop.example/p/1") == 7 and copy_of("https://www.shop.example/") == 0
    assert original_url("https://crawlmem-copy7.www.shop.example/p/1") == "https://www.shop.example/p/1"
'''


def har_entry(url: str, body: str, content_type: str = HTML) -> dict[str, Any]:
    return {"request": {"method": "GET", "url": url, "headers": []},
            "response": {"status": 200, "headers": [{"name": "Content-Type", "value": content_type}],
                         "content": {"mimeType": content_type, "text": body}}}


def shop_har(path: Path, products: int = 10) -> Path:
    """A shop with a sitemap and a home page that both list ``products`` product pages, each with its SKU."""
    urls = [f"https://{HOST}/p/{i}" for i in range(products)]
    sitemap = ('<?xml version="1.0" encoding="UTF-8"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
               + "".join(f"<url><loc>{u}</loc></url>" for u in urls) + "</urlset>")
    home = "<html>" + "".join(f'<a href="{u}">{i}</a>' for i, u in enumerate(urls)) + "</html>"
    entries = [har_entry(f"https://{HOST}/sitemap.xml", sitemap, "application/xml"), har_entry(f"https://{HOST}/", home)]
    entries += [har_entry(u, f'<html><h1>P{i}</h1><span class="sku">SKU-{i}</span></html>') for i, u in enumerate(urls)]
    path.write_text(json.dumps({"log": {"version": "1.2", "creator": {"name": "test"}, "entries": entries}}))
    return path


@pytest.fixture
def session(pytester: pytest.Pytester) -> tuple[pytest.RunResult, Path]:
    pytester.makepyfile(spiders=SPIDERS)
    shop_har(pytester.path / "shop.har")
    return inner_session(pytester, SUITE, "[pytest]\n", "-v", "-rA", timeout=900)


def test_every_replayed_crawl_of_the_session_passed(session):
    outcome, _ = session
    outcome.assert_outcomes(passed=7)


def test_a_spider_comparing_hosts_gets_a_warning_naming_its_pattern(session):
    text = session[0].stdout.str()
    assert re.search(r"CrawlMemWarning: replay copies fell short of the original: copies 1-2 of 3 got 1 response and 0"
                     r" items each, the original \(copy 0\) 11 responses and 10 items; likely cause: the spider's"
                     r" attribute PRODUCT_URL 'https://www\\\\\.shop\\\\\.example/p/' names the recorded host", text), text


def test_a_duplicates_pipeline_gets_a_warning_naming_replay_item_keys(session):
    text = session[0].stdout.str()
    assert "an item pipeline dropped 20 of the copies' 30 items" in text


def test_the_summary_gives_responses_and_items_per_copy_and_what_auto_got(session):
    text = session[0].stdout.str()
    assert ("test_suite.py::test_item_keys_bring_the_copies_items_through_the_pipelines: replay: 3 copies: the original"
            " (copy 0) 11 responses, 10 items; copies 1-2: 11 responses, 10 items each") in text
    assert re.search(r'test_suite.py::test_auto_copies_of_a_spider_that_compares_hosts: replay_copies="auto" chose \d+'
                     r" copies of the 12-response recording for 600 responses and got \d+: copies 1-\d+ fell short", text)


def test_report_html_gives_the_figures_per_copy(session):
    _, directory = session
    pages = [p.read_text() for p in directory.rglob("report.html") if "item_keys" in str(p)]
    assert pages and "copies 1-2: 11 responses, 10 items each" in pages[0]
