"""The memory governor on real crawls of the fixture site: its levers move, nothing is lost, a close resumes.

Each scenario runs in a pytester subprocess. Pressure is made deterministic with the share settings: a budget of
10 GiB whose "act" share is 0.1% (10 MiB) puts every tick over it, whatever the machine's baseline RSS.
"""

from __future__ import annotations

import pytest

SPIDERS = '''
import scrapy


class Products(scrapy.Spider):
    """Discovers every product up front (start() has no backpressure: the scheduler fills at once)."""

    name = "products"
    count = 600

    async def start(self):
        for pid in range(1, self.count + 1):
            yield scrapy.Request(f"{self.base}/catalog/product/{pid}")

    def parse(self, response):
        yield {"id": int(response.url.rsplit("/", 1)[1])}


class Discovering(Products):
    """Discovers every product in the first product's callback: a backlog the start gate cannot hold back."""

    name = "discovering"

    async def start(self):
        yield scrapy.Request(f"{self.base}/catalog/product/1", callback=self.discover)

    def discover(self, response):
        yield from self.parse(response)
        for pid in range(2, self.count + 1):
            yield scrapy.Request(f"{self.base}/catalog/product/{pid}")


class Keeper(Products):
    """Keeps 200 kB of every response: retained objects the governor cannot free."""

    name = "keeper"
    count = 300
    kept = []

    def parse(self, response):
        self.kept.append(bytes(200_000))
        yield {"id": int(response.url.rsplit("/", 1)[1])}
'''

TESTS = '''
import json

import pytest
from spiders import Discovering, Keeper, Products

GOVERNED = {"ADDONS": {"pytest_crawlmem.governor.GovernorAddon": 0}, "CRAWLMEM_GOVERNOR_INTERVAL_SECONDS": 0.05}
#: Every tick is over the act share (10 MiB of 10 GiB) and under the close share: the levers stay at their floors.
PRESSED = {**GOVERNED, "CRAWLMEM_BUDGET": "10 GiB", "CRAWLMEM_GOVERNOR_HIGH_SHARE": 0.001,
           "CRAWLMEM_GOVERNOR_LOW_SHARE": 0.0005, "CRAWLMEM_GOVERNOR_CLOSE_SHARE": 0.999}


def ids(path):
    return [json.loads(line)["id"] for line in path.read_text().splitlines()] if path.exists() else []


def run(crawl, spider, fixture_site, tmp_path, name, **settings):
    spider.base = fixture_site.base_url
    return crawl(spider, settings={"CONCURRENT_REQUESTS": 16, "LOG_LEVEL": "INFO",
                                   "FEEDS": {str(tmp_path / f"{name}.jsonl"): {"format": "jsonlines"}}, **settings})


def test_a_budget_never_approached_changes_nothing(crawl, fixture_site, tmp_path):
    plain = run(crawl, Products, fixture_site, tmp_path, "plain")
    governed = run(crawl, Products, fixture_site, tmp_path, "governed", **GOVERNED, CRAWLMEM_BUDGET="64 GiB")
    assert sorted(ids(tmp_path / "plain.jsonl")) == sorted(ids(tmp_path / "governed.jsonl")) == list(range(1, 601))
    assert plain.finish_reason == governed.finish_reason == "finished"
    assert governed.stats["crawlmem/governor/budget_bytes"] == 64 * 2**30
    assert governed.stats["crawlmem/governor/ticks"] >= 1
    assert "crawlmem/governor/decisions" not in governed.stats
    assert governed.stats["crawlmem/governor/concurrency"] == 16  # CONCURRENT_REQUESTS, never moved
    assert "crawlmem/governor/spilled" not in governed.stats
    assert governed.stats.get("scheduler/enqueued/disk", 0) == 0
    assert governed.stats["scheduler/enqueued/memory"] == plain.stats["scheduler/enqueued/memory"]


def test_under_pressure_every_lever_moves_and_no_item_is_lost(crawl, fixture_site, tmp_path):
    # the backlog comes from a callback, which the start gate does not hold back: from start() the gate closed as
    # soon as the first items were read (RSS is over the act share at once), and on a loaded machine the backlog
    # then stayed under the spill threshold (no spill in 1 of 9 runs beside a CPU hog)
    result = run(crawl, Discovering, fixture_site, tmp_path, "pressed", **PRESSED)
    assert result.finish_reason == "finished"
    scraped = ids(tmp_path / "pressed.jsonl")
    assert sorted(scraped) == list(range(1, 601))  # each product once
    stats = result.stats
    assert stats["crawlmem/governor/min_concurrency"] == 1
    assert stats["crawlmem/governor/decisions/in_flight"] >= 1
    assert stats["crawlmem/governor/decisions/backlog"] >= 1
    assert stats["crawlmem/governor/spilled"] > 0  # the memory queue went to disk ...
    assert stats["scheduler/dequeued/disk"] >= stats["crawlmem/governor/spilled"]  # ... and came back
    assert "crawlmem/governor/decisions/close" not in stats


def test_memory_neither_in_flight_nor_queued_is_reported_as_retained(crawl, fixture_site, tmp_path):
    result = run(crawl, Keeper, fixture_site, tmp_path, "keeper", **PRESSED)
    assert result.finish_reason == "finished"
    assert len(ids(tmp_path / "keeper.jsonl")) == 300
    assert result.stats["crawlmem/governor/decisions/retained"] == 1
    assert result.stats["crawlmem/governor/retained_bytes"] > 0


def test_a_close_at_the_hard_limit_with_jobdir_resumes_with_nothing_lost(crawl, fixture_site, tmp_path):
    job = {"JOBDIR": str(tmp_path / "job"), "CONCURRENT_REQUESTS": 2, "DOWNLOAD_DELAY": 0.01}
    first = run(crawl, Products, fixture_site, tmp_path, "first", **job, **GOVERNED, CRAWLMEM_BUDGET="10 GiB",
                CRAWLMEM_GOVERNOR_CLOSE_SHARE=0.001)
    assert first.finish_reason == "memory_budget"
    assert first.stats["crawlmem/governor/decisions/close"] == 1
    second = run(crawl, Products, fixture_site, tmp_path, "second", **job)
    assert second.finish_reason == "finished"
    first_ids, second_ids = ids(tmp_path / "first.jsonl"), ids(tmp_path / "second.jsonl")
    assert 0 < len(first_ids) < 600
    assert not set(first_ids) & set(second_ids)
    assert sorted(first_ids + second_ids) == list(range(1, 601))


def test_a_close_without_jobdir_leaves_the_danger_snapshot_as_evidence(crawl, fixture_site, tmp_path):
    result = run(crawl, Products, fixture_site, tmp_path, "nojob", **GOVERNED, CONCURRENT_REQUESTS=2,
                 DOWNLOAD_DELAY=0.01, CRAWLMEM_BUDGET="10 GiB", CRAWLMEM_GOVERNOR_CLOSE_SHARE=0.001)
    assert result.finish_reason == "memory_budget"
    assert 0 < len(ids(tmp_path / "nojob.jsonl")) < 600
    assert result.danger is not None and "memory governor" in result.danger.note
    assert result.danger.scheduled > 0 and result.danger.rss_bytes > 0  # the requests the close loses
    danger = json.loads((result.report_dir / "danger.json").read_text())
    assert danger["scheduled"] == result.danger.scheduled
    assert json.loads((result.report_dir / "governor.json").read_text())["danger"]["rss_bytes"] > 0


def test_crawl_governor_records_its_decisions_on_report_htmls_timeline(crawl, fixture_site, tmp_path):
    Products.base = fixture_site.base_url
    shares = {k: v for k, v in PRESSED.items() if "SHARE" in k}
    result = crawl(Products, governor="10 GiB", settings={"CONCURRENT_REQUESTS": 16, **shares})
    assert result.items_scraped == 600
    record = json.loads((result.report_dir / "governor.json").read_text())
    assert record["budget_bytes"] == 10 * 2**30
    kinds = {d["kind"] for d in record["decisions"]}
    assert "in_flight" in kinds and all(d["message"] for d in record["decisions"])
    html = (result.report_dir / "report.html").read_text()
    assert 'class="marker governor in_flight"' in html and "memory governor decision" in html


def test_a_governed_variant_of_a_sweep(crawl_sweep, fixture_site):
    Products.base = fixture_site.base_url
    shares = {k: v for k, v in PRESSED.items() if "SHARE" in k}
    sweep = crawl_sweep(Products, {"plain": {}, "governed": {"CRAWLMEM_BUDGET": "10 GiB", **shares}},
                        base=fixture_site.base_url)  # a spider argument: the variants run isolated
    assert sweep.results["plain"].items_scraped == sweep.results["governed"].items_scraped == 600
    assert "crawlmem/governor/decisions" not in sweep.results["plain"].stats
    assert sweep.results["governed"].stats["crawlmem/governor/decisions/in_flight"] >= 1


def test_a_bad_budget_fails_before_the_crawl(crawl):
    crawl(Products, governor="lots")
'''


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_the_governor_on_real_crawls(pytester: pytest.Pytester):
    pytester.makepyfile(spiders=SPIDERS, test_governed=TESTS)
    outcome = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-v", "-W", "ignore::DeprecationWarning",
                                            timeout=900)  # eight crawls: 160-280 s at load averages of 15-40
    outcome.assert_outcomes(passed=7, failed=1)
    outcome.stdout.fnmatch_lines(["*crawl(governor='lots'): invalid CRAWLMEM_BUDGET 'lots' from Scrapy settings*"])


def test_the_governors_constructor_defaults_are_the_settings_table_defaults():
    import inspect

    from pytest_crawlmem.core.defaults import CRAWLMEM_DEFAULTS
    from pytest_crawlmem.governor import MemoryGovernor

    parameters = inspect.signature(MemoryGovernor.__init__).parameters
    for name in ("min_concurrency", "high_share", "low_share", "close_share", "start_concurrency"):
        assert parameters[name].default == CRAWLMEM_DEFAULTS["CRAWLMEM_GOVERNOR_" + name.upper()], name


def test_a_budget_is_a_size_or_auto_and_a_bad_one_names_the_setting():
    from pytest_crawlmem.governor.extension import read_cgroup_limit, resolve_budget

    assert resolve_budget("300 MiB") == 300 * 2**20
    assert resolve_budget(2**30) == 2**30
    limit = read_cgroup_limit()
    assert resolve_budget("auto") == (int(limit * 0.8) if limit else None)
    with pytest.raises(ValueError, match="invalid CRAWLMEM_BUDGET '300 potatoes' from Scrapy settings"):
        resolve_budget("300 potatoes")
    with pytest.raises(ValueError, match="above 0"):
        resolve_budget("0 MiB")


def test_the_governors_gauges_join_the_measuring_extensions_prometheus_registry():
    from types import SimpleNamespace

    from prometheus_client import CollectorRegistry, generate_latest
    from scrapy.settings import Settings

    from pytest_crawlmem.governor import MemoryGovernor

    registry = CollectorRegistry(auto_describe=False)
    measuring = SimpleNamespace(metrics=SimpleNamespace(registry=registry))
    crawler = SimpleNamespace(settings=Settings({"CONCURRENT_REQUESTS": 16}), spider=SimpleNamespace(name="shop"),
                              extensions=SimpleNamespace(middlewares=[object(), measuring]))
    governor = MemoryGovernor(crawler, budget_bytes=300 * 2**20, interval_seconds=0.25)
    governor._register_metrics()
    governor._register_metrics()  # once only
    text = generate_latest(registry).decode()
    assert 'crawlmem_governor_budget_bytes{spider="shop"} 3.145728e+08' in text
    assert 'crawlmem_governor_concurrency{spider="shop"} 16.0' in text  # CONCURRENT_REQUESTS
    assert 'crawlmem_governor_spilling{spider="shop"} 0.0' in text
    assert 'crawlmem_governor_browser_rotations{spider="shop"} 0.0' in text  # no browser: no lever yet


def test_the_start_gate_frees_a_responses_parse_tree_once_its_callback_is_done():
    from scrapy.http import HtmlResponse

    from pytest_crawlmem.governor import StartGate

    def callback(response):
        yield {"title": response.css("title::text").get()}

    async def agen(response):
        for item in callback(response):
            yield item

    async def drain(gate, response):
        return [item async for item in gate.process_spider_output_async(response, agen(response))]

    def run_coroutine(coroutine):  # nothing in it awaits: one send runs it to the end, no event loop needed
        try:
            coroutine.send(None)
        except StopIteration as done:
            return done.value
        raise AssertionError("the coroutine waited")

    gate = StartGate()
    for run in ("sync", "async"):
        response = HtmlResponse("http://x/", body=b"<html><title>t</title></html>", encoding="utf-8")
        if run == "sync":
            output = gate.process_spider_output(response, callback(response))
            assert next(output) == {"title": "t"}
            assert response._cached_selector is not None  # the callback is not done: its tree stands
            assert list(output) == []
        else:
            assert run_coroutine(drain(gate, response)) == [{"title": "t"}]
        assert response._cached_selector is None, run  # the Response-Selector cycle is broken
        assert response.css("title::text").get() == "t"  # a later read parses again
