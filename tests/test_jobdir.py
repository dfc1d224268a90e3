"""JOBDIR: a crawl interrupted part-way and resumed loses and repeats nothing; its disk use is sampled and budgeted.

Each scenario runs real crawls in a subprocess (pytester), or a plain CrawlerProcess script
interrupted by SIGINT (Ctrl-C), as in production.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from spiders_source import CATALOG_SPIDER, PRODUCT_IDS_SPIDER

from pytest_crawlmem.core.growth import analyze
from pytest_crawlmem.core.models import Checkpoint
from pytest_crawlmem.probes.jobdir import JobdirMeter
from pytest_crawlmem.probes.readings import read_tree_bytes

SPIDERS = "import scrapy\n\n" + CATALOG_SPIDER + PRODUCT_IDS_SPIDER + '''

class CardsCatalog(ProductIds):
    """Hands each product's listing card (a Selector, which cannot be pickled) to the product callback."""

    name = "cards_catalog"

    def parse(self, response):
        for card in response.css("ul.products li"):
            yield response.follow(card.css("a.product")[0], callback=self.parse_card, cb_kwargs={"card": card})
        yield from response.follow_all(css="a.next")

    def parse_card(self, response, card):
        yield from self.parse_product(response)
'''

TESTS = '''
import json
import os

import pytest
from spiders import CardsCatalog, ProductIds as Catalog

PAGES, PER_PAGE = 30, 20
PRODUCTS = PAGES * PER_PAGE


def tree_bytes(path):
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, files in os.walk(path) for f in files)


def ids(path):
    return [json.loads(line)["id"] for line in path.read_text().splitlines()] if path.exists() else []


def run(crawl, spider, fixture_site, tmp_path, name, **settings):
    return crawl(spider, start_urls=[fixture_site.url(f"/catalog/?pages={PAGES}&per_page={PER_PAGE}")], settings={
        "JOBDIR": str(tmp_path / "job"), "LOG_LEVEL": "INFO",
        "FEEDS": {str(tmp_path / f"{name}.jsonl"): {"format": "jsonlines"}}, **settings})


# leak="fail": the resumed crawl drains a queue that waits on disk; it once read retained-objects (the drain was
# credited as freed memory, see test_draining_a_disk_queue_frees_no_memory_and_is_not_credited).
@pytest.mark.crawl_memory(jobdir_disk="1 MiB", leak="fail")
def test_an_interrupted_crawl_resumes_without_losing_or_repeating_an_item_or_a_request(crawl, fixture_site, tmp_path):
    first = run(crawl, Catalog, fixture_site, tmp_path, "first", CLOSESPIDER_ITEMCOUNT=150, CONCURRENT_REQUESTS=8)
    assert first.finish_reason == "closespider_itemcount"
    on_disk = tree_bytes(tmp_path / "job")
    # the closing sample is taken after the scheduler wrote its queue and the dupefilter closed requests.seen
    assert first.samples[-1].jobdir_bytes == on_disk > 0
    assert first.jobdir_disk >= on_disk
    persisted = first.stats["scheduler/enqueued/disk"] - first.stats["scheduler/dequeued/disk"]
    assert persisted > 0
    assert first.stats.get("scheduler/enqueued/memory", 0) == 0  # every request went to the disk queue

    second = run(crawl, Catalog, fixture_site, tmp_path, "second", CONCURRENT_REQUESTS=8)
    assert second.finish_reason == "finished"
    assert second.growth.checkpoints[0].scheduled == persisted  # the scheduler opened with the persisted queue
    assert all(c.disk_scheduled == c.scheduled for c in second.growth.checkpoints)  # every request waited on disk
    assert second.verdict in ("steady", "inconclusive"), second.growth.reason
    assert second.max_disk_scheduled > 0
    assert second.stats["scheduler/dequeued/disk"] - second.stats["scheduler/enqueued/disk"] == persisted
    assert second.stats["dupefilter/filtered"] >= 1  # the start URL: requests.seen kept it from being downloaded again

    first_ids, second_ids = ids(tmp_path / "first.jsonl"), ids(tmp_path / "second.jsonl")
    # items still in flight when the first crawl began to close were scraped and exported by it
    assert len(first_ids) == first.items_scraped >= 150
    assert len(second_ids) == second.items_scraped
    assert len(set(first_ids)) == len(first_ids) and len(set(second_ids)) == len(second_ids)
    assert not set(first_ids) & set(second_ids)
    assert set(first_ids) | set(second_ids) == set(range(1, PRODUCTS + 1))
    assert first.responses + second.responses == PAGES + PRODUCTS  # no page downloaded twice, none skipped
    assert second.jobdir_disk >= tree_bytes(tmp_path / "job") > 0


def test_requests_that_cannot_be_pickled_are_lost_when_the_crawl_resumes(crawl, fixture_site, tmp_path):
    first = run(crawl, CardsCatalog, fixture_site, tmp_path, "first", CLOSESPIDER_ITEMCOUNT=110, CONCURRENT_REQUESTS=2)
    unserializable = first.stats["scheduler/unserializable"]
    left_in_memory = first.stats["scheduler/enqueued/memory"] - first.stats["scheduler/dequeued/memory"]
    assert unserializable == first.stats["scheduler/enqueued/memory"] > 0
    assert left_in_memory > 0

    second = run(crawl, CardsCatalog, fixture_site, tmp_path, "second", CONCURRENT_REQUESTS=2)
    assert second.finish_reason == "finished"
    first_ids, second_ids = ids(tmp_path / "first.jsonl"), ids(tmp_path / "second.jsonl")
    assert not set(first_ids) & set(second_ids)
    lost = set(range(1, PRODUCTS + 1)) - set(first_ids) - set(second_ids)
    # the product requests waiting in the memory queue at the stop: marked seen in requests.seen, never persisted
    assert len(lost) == left_in_memory


@pytest.mark.crawl_memory(jobdir_disk="4 KiB")
def test_jobdir_disk_budget(crawl, fixture_site, tmp_path):
    result = run(crawl, Catalog, fixture_site, tmp_path, "only")
    assert result.items_scraped == PRODUCTS
'''


def test_jobdir_crawls_resume_exactly_lose_unpicklable_requests_and_keep_the_jobdir_disk_budget(pytester: pytest.Pytester):
    pytester.makepyfile(spiders=SPIDERS, test_resume=TESTS)
    outcome = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-v", timeout=300)
    outcome.assert_outcomes(passed=2, failed=1)
    outcome.stdout.fnmatch_lines([
        "*test_jobdir_disk_budget FAILED*",
        "*crawl_memory budget broken: JOBDIR grew to * KiB on disk, over the budget jobdir_disk=4.0 KiB (its disk request*",
    ])
    report_dir = pytester.path / ".crawlmem" / "test_resume.py__test_jobdir_disk_budget"
    report = json.loads((report_dir / "report.json").read_text())
    assert report["result"]["peaks"]["max_jobdir_bytes"] > 4096 and report["budgets"]["jobdir_disk"] == 4096
    page = (report_dir / "report.html").read_text()
    assert "JOBDIR on disk (peak)" in page and "<code>jobdir_disk</code>" in page


INTERRUPTED = '''
import json
import os
import signal
import sys

import scrapy
from scrapy.crawler import CrawlerProcess

base_url, jobdir, feed, samples, stop_after = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])

''' + CATALOG_SPIDER + PRODUCT_IDS_SPIDER + '''

class Interrupted(ProductIds):
    interrupted = False

    def parse_product(self, response):
        yield from super().parse_product(response)
        if stop_after and not self.interrupted and self.crawler.stats.get_value("item_scraped_count", 0) >= stop_after:
            self.interrupted = True
            os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C: Scrapy shuts down gracefully


process = CrawlerProcess({
    "EXTENSIONS": {"pytest_crawlmem.extension.CrawlMemExtension": 0},
    "CRAWLMEM_ENABLED": True,
    "CRAWLMEM_JSONL": samples,
    "JOBDIR": jobdir,
    "FEEDS": {feed: {"format": "jsonlines"}},
    "CONCURRENT_REQUESTS": 8,
    "LOG_LEVEL": "INFO",
})
crawler = process.create_crawler(Interrupted)
process.crawl(crawler, start_urls=[base_url + "/catalog/?pages=20&per_page=20"])
process.start()
stats = crawler.stats.get_stats()
print(json.dumps({k: v for k, v in stats.items() if k.startswith(("scheduler/", "dupefilter/", "finish_reason", "item_"))}))
'''


Run = tuple[dict[str, Any], list[int], list[dict[str, Any]]]  # stats, item ids, samples


def _crawl_script(tmp_path: Path, base_url: str, name: str, stop_after: int) -> Run:
    script = tmp_path / "interrupted.py"
    script.write_text(INTERRUPTED)
    feed, samples = tmp_path / f"{name}.jsonl", tmp_path / f"{name}-samples.jsonl"
    args = [base_url, str(tmp_path / "job"), str(feed), str(samples), str(stop_after)]
    proc = subprocess.run([sys.executable, str(script), *args], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    stats = json.loads(proc.stdout.strip().splitlines()[-1])
    ids = [json.loads(line)["id"] for line in feed.read_text().splitlines()]
    records = [json.loads(line) for line in samples.read_text().splitlines()]
    return stats, ids, [r for r in records if r.get("kind") == "sample"]


def test_a_crawl_stopped_with_ctrl_c_resumes_from_its_jobdir_with_every_item_once(tmp_path: Path, fixture_site) -> None:
    first, first_ids, first_samples = _crawl_script(tmp_path, fixture_site.base_url, "first", stop_after=100)
    assert first["finish_reason"] == "shutdown"
    persisted = int(first["scheduler/enqueued/disk"]) - int(first["scheduler/dequeued/disk"])
    assert persisted > 0
    assert first_samples[-1]["jobdir_bytes"] == read_tree_bytes(str(tmp_path / "job"))

    second, second_ids, second_samples = _crawl_script(tmp_path, fixture_site.base_url, "second", stop_after=0)
    assert second["finish_reason"] == "finished"
    assert int(second["scheduler/dequeued/disk"]) - int(second["scheduler/enqueued/disk"]) == persisted
    assert len(first_ids) >= 100 and len(set(first_ids)) == len(first_ids) and len(set(second_ids)) == len(second_ids)
    assert not set(first_ids) & set(second_ids)
    assert set(first_ids) | set(second_ids) == set(range(1, 401))
    assert max(s["jobdir_bytes"] for s in second_samples) > 0

    rendered = subprocess.run([sys.executable, "-m", "pytest_crawlmem", "report", str(tmp_path / "second-samples.jsonl")],
                              capture_output=True, text=True, timeout=120)
    assert rendered.returncode == 0, rendered.stderr
    assert "JOBDIR on disk (peak)" in (tmp_path / "report.html").read_text()


def test_jobdir_size_is_the_sum_of_its_file_sizes_and_a_missing_directory_reads_none(tmp_path: Path) -> None:
    (tmp_path / "requests.queue" / "slot").mkdir(parents=True)
    (tmp_path / "requests.seen").write_bytes(b"f" * 41 * 3)
    (tmp_path / "requests.queue" / "slot" / "0").write_bytes(b"q" * 1000)
    (tmp_path / "requests.queue" / "active.json").write_text("[]")
    assert read_tree_bytes(str(tmp_path)) == 123 + 1000 + 2
    assert read_tree_bytes(str(tmp_path / "absent")) is None
    assert JobdirMeter(str(tmp_path)).read() == 1125


def test_a_costly_jobdir_walk_is_reused_until_its_cost_is_paid_off(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    clock = iter([0.0, 0.0, 1.0, 2.5, 3.0])
    walks: list[int] = []
    monkeypatch.setattr("pytest_crawlmem.probes.jobdir.time.monotonic", lambda: next(clock))
    monkeypatch.setattr("pytest_crawlmem.probes.jobdir.time.thread_time", lambda: len(walks) * 0.02)  # each walk: 20 ms of CPU

    def walk(path: str) -> int:
        walks.append(1)
        return 100 * len(walks)

    monkeypatch.setattr("pytest_crawlmem.probes.jobdir.probes.read_tree_bytes", walk)
    meter = JobdirMeter(str(tmp_path))
    readings = [meter.read() for _ in range(4)]
    assert len(walks) == 2 and readings == [100, 100, 100, 200]  # 20 ms walks: at most one every 2 s
    meter.expire()
    assert meter.read() == 300  # the closing sample walks whatever it costs



# A resumed JOBDIR crawl as measured (heap bytes, pymalloc blocks, scheduler length) when it read retained-objects at
# 2.5 KiB/response: its memory barely moved while its queue, all of it on disk, drained 275 -> 0.
RESUMED = [(0, 21582576, 439332, 177), (56, 21608880, 440063, 205), (104, 21614528, 440264, 241),
           (154, 21618464, 440487, 275), (231, 21619840, 440889, 218), (344, 21618944, 441029, 105),
           (449, 21637680, 441150, 0)]


@pytest.mark.parametrize("on_disk", [True, False])
def test_draining_a_disk_queue_frees_no_memory_and_is_not_credited(on_disk: bool) -> None:
    checkpoints = [Checkpoint(responses=n, t_seconds=float(n), rss_bytes=90 * 2**20, heap_bytes=heap, traced_bytes=None,
                              scheduled=queued, allocated_blocks=blocks, disk_scheduled=queued if on_disk else 0)
                   for n, heap, blocks, queued in RESUMED]
    growth = analyze(checkpoints)
    if on_disk:  # the pickled requests were never in memory: their drain explains nothing, and hides nothing
        assert growth.verdict == "steady", growth.reason
        assert max(growth.deltas_per_response) < 1024
    else:  # the same figures with the queue in memory: 1 KiB credited per request given back (a queue that held
        # them and freed nothing is memory kept elsewhere)
        assert growth.verdict == "retained-objects", growth.reason
