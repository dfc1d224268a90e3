"""The governor on crawls it was not tuned on (issue 53): enabled through EXTENSIONS alone, media downloads that
bypass the scheduler, items piling up inside a slow async item pipeline.

Each crawl is a plain ``CrawlerProcess`` (as ``scrapy crawl`` runs it) in a child process of a pytester subprocess;
its peak is the child's ``ru_maxrss`` read by the parent (``os.wait4``), from outside the crawl. The effects are
large: ungoverned, these crawls peak at 1.5-2.5x the 300 MiB budget, and the assertions are the budget with 5% over it
for the media and pipeline crawls (1.05x, the issue's target) and the budget itself for the others.
"""

from __future__ import annotations

import pytest

CHILD = '''
"""One crawl: python child_crawl.py WORKLOAD BASE_URL SETTINGS_JSON OUT_JSON (a plain CrawlerProcess)."""
import json
import sys

import scrapy
from scrapy import signals
from scrapy.crawler import CrawlerProcess

MIB = 2**20


class Large(scrapy.Spider):
    """128 pages of 2 MiB (two bursts of 64), each parsed for its title."""

    name = "large"

    async def start(self):
        for page in range(128):
            yield scrapy.Request(f"{self.base}/large/{page}?kb=2048", cb_kwargs={"page": page})

    def parse(self, response, page):
        yield {"id": page, "title": response.css("title::text").get()}


class Files(scrapy.Spider):
    """60 items whose file (8-16 MiB) the FilesPipeline downloads and stores: its downloads bypass the scheduler."""

    name = "files"

    async def start(self):
        yield scrapy.Request(f"{self.base}/catalog/product/1")

    def parse(self, response):
        for file_id in range(60):
            kb = 8192 + (file_id * 137) % 8192
            yield {"id": file_id, "file_urls": [f"{self.base}/media/{file_id}.jpg?kb={kb}"]}


class Attachments(scrapy.Spider):
    """60 small pages of 50 items each, every item carrying a 128 KiB attachment."""

    name = "attachments"

    async def start(self):
        for page in range(60):
            yield scrapy.Request(f"{self.base}/catalog/product/{page + 1}", cb_kwargs={"page": page})

    def parse(self, response, page):
        for n in range(50):
            yield {"id": page * 50 + n, "attachment": bytes([n]) * (128 * 1024)}


class Upload:
    """An async pipeline that uploads each item's attachment for 3 s (waits on the reactor)."""

    async def process_item(self, item):
        from scrapy.utils.defer import deferred_to_future
        from twisted.internet import reactor
        from twisted.internet.task import deferLater

        await deferred_to_future(deferLater(reactor, 3.0, lambda: None))
        item.pop("attachment", None)
        return item


def main():
    workload, base, raw, out = sys.argv[1:5]
    spider = {"large": Large, "files": Files, "attachments": Attachments}[workload]
    spider.base = base
    settings = {"LOG_LEVEL": "INFO", "ROBOTSTXT_OBEY": False, "TELNETCONSOLE_ENABLED": False,
                "MEMUSAGE_ENABLED": False, "LOGSTATS_INTERVAL": 0, **json.loads(raw)}
    process = CrawlerProcess(settings)
    crawler = process.create_crawler(spider)
    scraped = set()
    crawler.signals.connect(lambda item, **_: scraped.add(item["id"]), signal=signals.item_scraped, weak=False)
    process.crawl(crawler)
    process.start()
    stats = {k: v for k, v in crawler.stats.get_stats().items() if isinstance(v, (int, float, str))}
    with open(out, "w") as f:
        json.dump({"items": len(scraped), "stats": stats}, f)


if __name__ == "__main__":
    main()
'''

TESTS = '''
import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import scrapy

MIB = 2**20
BUDGET = {"CRAWLMEM_BUDGET": "300 MiB"}
ADDON = {"ADDONS": {"pytest_crawlmem.governor.GovernorAddon": 0}}


def crawl(workload, fixture_site, tmp_path, settings):
    """Run one crawl in a child process; its figures, its log and its peak RSS (ru_maxrss, read from outside)."""
    out = tmp_path / f"{workload}.json"
    log = tmp_path / f"{workload}.log"
    with open(log, "w") as err:
        child = subprocess.Popen([sys.executable, str(Path(__file__).parent / "child_crawl.py"), workload,
                                  fixture_site.base_url, json.dumps(settings), str(out)], stderr=err)
        _, status, usage = os.wait4(child.pid, 0)
    child.returncode = os.waitstatus_to_exitcode(status)
    text = log.read_text()
    assert child.returncode == 0, text[-3000:]
    figures = json.loads(out.read_text())
    figures["peak_bytes"] = usage.ru_maxrss * 1024
    figures["log"] = text
    print(f"{workload}: peak {figures['peak_bytes'] / MIB:,.0f} MiB, {figures['items']} items,"
          f" finish {figures['stats'].get('finish_reason')}")
    return figures


def test_enabled_through_extensions_alone_it_installs_its_levers_and_holds_the_budget(fixture_site, tmp_path):
    burst = {"CONCURRENT_REQUESTS": 64, "CONCURRENT_REQUESTS_PER_DOMAIN": 64}
    run = crawl("large", fixture_site, tmp_path, {**burst, **BUDGET,
                                                  "EXTENSIONS": {"pytest_crawlmem.governor.MemoryGovernor": 0}})
    assert run["items"] == 128
    assert "levers: concurrency, scraper active size, start gate, spill to disk" in run["log"]
    assert run["peak_bytes"] < 300 * MIB, f"peak {run['peak_bytes'] / MIB:,.0f} MiB over the 300 MiB budget"


def test_media_downloads_that_bypass_the_scheduler_keep_the_governors_limit(fixture_site, tmp_path):
    media = {"CONCURRENT_REQUESTS": 32, "CONCURRENT_REQUESTS_PER_DOMAIN": 32, "FILES_STORE": str(tmp_path / "files"),
             "ITEM_PIPELINES": {"scrapy.pipelines.files.FilesPipeline": 1}, "DOWNLOAD_MAXSIZE": 0}
    run = crawl("files", fixture_site, tmp_path, {**media, **BUDGET, **ADDON})
    assert run["items"] == 60 and run["stats"]["finish_reason"] == "finished"
    assert run["stats"]["file_count"] == 60
    assert run["peak_bytes"] <= 1.05 * 300 * MIB, f"peak {run['peak_bytes'] / MIB:,.0f} MiB over 1.05x the budget"


class Products(scrapy.Spider):
    """600 products read from start()."""

    name = "products"

    async def start(self):
        for pid in range(1, 601):
            # The first 100 are read slowly, so the start gate usually closes while start() has more to read (read at
            # once, all 600 were in the queue before it in 3 of 11 runs beside other crawls; still once in a CI run
            # this way); the rest read at once, well within the close's 2 s count.
            if pid <= 100:
                await asyncio.sleep(0.01)
            yield scrapy.Request(f"{self.base}/catalog/product/{pid}")

    def parse(self, response):
        yield {"id": int(response.url.rsplit("/", 1)[1])}


def test_a_close_counts_every_request_it_leaves_uncrawled_start_requests_too(crawl, fixture_site, tmp_path):
    Products.base = fixture_site.base_url
    result = crawl(Products, settings={"CONCURRENT_REQUESTS": 2, "DOWNLOAD_DELAY": 0.01, "LOG_LEVEL": "INFO",
                                       "CRAWLMEM_GOVERNOR_INTERVAL_SECONDS": 0.05, "CRAWLMEM_BUDGET": "10 GiB",
                                       # over the act share at once (the start gate closes), closing 3 s later
                                       "CRAWLMEM_GOVERNOR_HIGH_SHARE": 0.001, "CRAWLMEM_GOVERNOR_LOW_SHARE": 0.0005,
                                       "CRAWLMEM_GOVERNOR_CLOSE_SHARE": 0.002})
    assert result.finish_reason == "memory_budget"
    stats = result.stats
    unread, queued = stats["crawlmem/governor/undone/unread_start_requests"], stats["crawlmem/governor/undone/queued_requests"]
    # unread is > 0 when the gate closed before start() ran out (most runs); on a loaded machine start() can run out
    # first (a fresh-clone CI run): then the queue holds the rest, and the sum below still has to add up
    assert stats["crawlmem/governor/undone/start_counted"] == 1 and unread >= 0
    assert 0 < result.items_scraped < 600
    assert result.items_scraped + queued + unread == 600  # every product: crawled, or counted as not crawled
    record = json.loads((result.report_dir / "governor.json").read_text())
    assert record["undone"]["unread_start_requests"] == unread


def test_items_piling_up_in_a_slow_async_pipeline_are_bounded(fixture_site, tmp_path):
    slow = {"CONCURRENT_REQUESTS": 16, "ITEM_PIPELINES": {"child_crawl.Upload": 100}}
    run = crawl("attachments", fixture_site, tmp_path, {**slow, **BUDGET, **ADDON})
    assert run["items"] == 3000 and run["stats"]["finish_reason"] == "finished"
    # 1.05x the budget, the issue's target: governed it peaked at 477 MiB before the pipeline lever, 285-296 MiB since
    assert run["peak_bytes"] <= 1.05 * 300 * MIB, f"peak {run['peak_bytes'] / MIB:,.0f} MiB over 1.05x the budget"
'''


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_the_governor_on_crawls_it_was_not_tuned_on(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(child_crawl=CHILD, test_levers_governed=TESTS)
    outcome = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-v", "-s", "-W", "ignore::DeprecationWarning",
                                            timeout=900)
    print("\n".join(outcome.outlines[-40:]))
    outcome.assert_outcomes(passed=4)


@pytest.mark.parametrize("kb", [1, 64, 5 * 1024])
def test_the_fixture_sites_json_documents_are_valid_json_of_exactly_k_kib(kb: int) -> None:
    import json

    from fixture_sites.jsondoc import json_chunks

    body = b"".join(json_chunks(3, kb * 1024, 64 * 1024))
    assert len(body) == kb * 1024
    document = json.loads(body)
    assert document["id"] == 3 and len(document["records"]) >= kb * 8
