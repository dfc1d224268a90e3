"""crawl_cluster: scrapy-redis workers on a private Redis, the request ledger, injected worker failures."""

from __future__ import annotations

import importlib.util
import json
import shutil
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from spiders_source import CATALOG_SPIDER, HOARDER_SPIDER

from pytest_crawlmem.core.budgets import Budgets
from pytest_crawlmem.core.cluster import ClusterError, ClusterResult, RedisSample, check_cluster, cluster_verdict, parse_kill
from pytest_crawlmem.core.ledger import LedgerState, settle
from pytest_crawlmem.core.models import CrawlResult, Growth, Peaks
from pytest_crawlmem.core.replay import ReplayTarget
from pytest_crawlmem.harness.fixtures import fail_if_replay_found_nothing

needs_redis = pytest.mark.skipif(
    shutil.which("redis-server") is None or importlib.util.find_spec("scrapy_redis") is None,
    reason="redis-server or scrapy-redis is not installed (pip install -e '.[cluster]')",
)

SPIDERS = '''
import scrapy
from scrapy_redis.spiders import RedisSpider

''' + CATALOG_SPIDER + HOARDER_SPIDER + '''


class Fragile(Catalog):
    """Only the worker given the start URLs can start."""

    name = "fragile"

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        if not self.start_urls:
            raise RuntimeError("no start URLs here")


class SlowProducts(Catalog):
    """The catalog with every product page answered after 200 ms (``/slow/<id>``): listing pages run ahead, so the
    queue is long and a worker always has downloads in flight whatever the machine's pace."""

    name = "slow_products"

    def parse(self, response):
        for href in response.css("a.product::attr(href)").getall():
            yield response.follow(f"/slow/{href.rsplit('/', 1)[1]}?ms=200", callback=self.parse_product)
        yield from response.follow_all(css="a.next")


class Frontier(scrapy.Spider):
    """Follows every link of /explode/: requests are discovered far faster than they are fetched."""

    name = "frontier"

    async def start(self):
        for url in self.start_urls:
            yield scrapy.Request(url)

    def parse(self, response):
        yield from response.follow_all(css="a")


class RedisCatalog(RedisSpider):
    """The catalog's callbacks on a spider fed from redis (a subclass of Catalog would take its start(): start_urls)."""

    name = "redis_catalog"
    parse = Catalog.parse
    parse_product = Catalog.parse_product
'''


def run(pytester: pytest.Pytester, body: str, marker: str = "") -> pytest.RunResult:
    pytester.makepyfile(spiders=SPIDERS)
    pytester.makepyfile(test_cl=f"""
import re
import pytest
from spiders import *

{marker}
def test_it(crawl_cluster, fixture_site):
{body}
""")
    return pytester.runpytest_subprocess("-p", "no:cacheprovider", timeout=300)


@needs_redis
def test_a_clean_cluster_crawl_processes_every_request_once_and_the_ledger_balances(pytester):
    outcome = run(pytester, """
    url = fixture_site.url("/catalog/?pages=15&per_page=20")
    result = crawl_cluster(Catalog, workers=3, start_urls=[url], settings={"CONCURRENT_REQUESTS": 8})
    assert len(result.workers) == 3
    assert result.scheduled == result.processed == 315 and result.lost == 0 and result.lost_urls == ()
    assert result.ledger.balanced and result.taken == 315 and result.processed_twice == 0
    assert result.items_scraped == 300 and result.responses == 315
    assert result.redis_peak_memory > 0 and result.redis_samples[-1].dupefilter == 315  # read before the workers close
    assert result.cluster_rss == sum(w.peak_rss for w in result.workers)
    assert [e.how for e in result.ends] == ["finished"] * 3
    # the shared queue is in Redis: no worker is credited with it
    assert all(w.max_scheduled == 0 for w in result.workers)
    assert all(c.scheduled == 0 for w in result.workers for c in w.growth.checkpoints)
""", '@pytest.mark.crawl_memory(lost=0, redis_memory="64 MiB", cluster_rss="2 GiB", peak_rss="1 GiB")')
    outcome.assert_outcomes(passed=1)
    outcome.stdout.fnmatch_lines(["*test_cl.py::test_it ?cluster?*315*", "*test_cl.py::test_it ?worker 0?*"])
    base = pytester.path / ".crawlmem" / "test_cl.py__test_it"
    report = json.loads((base / "report.json").read_text())
    assert report["kind"] == "cluster" and report["ledger"]["balanced"] and report["ledger"]["lost"] == 0
    assert [w["worker"] for w in report["workers"]] == [0, 1, 2] and report["redis_samples"]
    # which worker gets how many is the machine's pace (at load 26 worker 0 started last and got none): their sum is not
    assert sum(json.loads((base / f"worker-{i}" / "report.json").read_text())["result"]["responses"] for i in range(3)) == 315
    html = (base / "report.html").read_text()
    assert "Ledger" in html and 'href="worker-0/report.html"' in html


@needs_redis
def test_a_redis_spider_reads_its_seeded_start_urls(pytester):
    outcome = run(pytester, """
    url = fixture_site.url("/catalog/?pages=3&per_page=10")
    result = crawl_cluster(RedisCatalog, workers=2, start_urls=[url])
    assert result.processed == 33 and result.lost == 0 and result.items_scraped == 30 and result.ledger.balanced
""")
    outcome.assert_outcomes(passed=1)


@needs_redis
def test_a_sigkilled_worker_loses_the_requests_it_took_and_the_lost_budget_names_them(pytester):
    outcome = run(pytester, """
    url = fixture_site.url("/catalog/?pages=15&per_page=20")
    # no drained checkpoint (nothing in flight) where the kill may land, and slow products: the killed worker always
    # holds requests (with the catalog's fast products, worker 0 once had finished all 36 it took when killed)
    result = crawl_cluster(SlowProducts, workers=2, start_urls=[url], kill={"worker": 0, "after_responses": 30},
                           settings={"CRAWLMEM_CHECKPOINT_MIN_RESPONSES": 100000})
    ledger = result.ledger
    assert result.ends[0].how == "killed" and result.ends[0].responses_at_signal >= 30
    assert result.workers[0].finish_reason == "crawlmem_killed"
    assert ledger.lost_in_workers >= 1 and ledger.taken == ledger.processed + ledger.lost_in_workers
    assert ledger.balanced and result.lost == len(result.lost_urls) >= 1
    assert all(r.where == "worker" and r.worker == 0 for r in ledger.lost_urls)
    assert result.processed < 315
""", "@pytest.mark.crawl_memory(lost=0)")
    outcome.assert_outcomes(failed=1)
    outcome.stdout.fnmatch_lines([
        "*crawl_memory budget broken: * requests were lost, over the budget lost=0:"
        " http://127.0.0.1:*/* (taken by worker 0, which never finished it)*",
        "FAILED test_cl.py::test_it - Failed: crawl_memory budget broken*",  # the body's asserts held
    ])


@needs_redis
@pytest.mark.parametrize("persist", [False, True])
def test_sigterm_deletes_the_shared_queue_unless_the_scheduler_persists(pytester, persist):
    outcome = run(pytester, f"""
    url = fixture_site.url("/catalog/?pages=3&per_page=100")  # 100 products a page: the queue is full at the signal
    # 50 ms a request: one worker alone takes 15 s, so the other wakes (Scrapy's 5 s heartbeat) while the queue is
    # full; without it, a CI run under load once had worker 1 take the start request and all 303 before worker 0 woke
    result = crawl_cluster(Catalog, workers=2, start_urls=[url], kill={{"worker": 0, "after_responses": 10, "signal": "TERM"}},
                           settings={{"SCHEDULER_PERSIST": {persist}, "CONCURRENT_REQUESTS": 2, "DOWNLOAD_DELAY": 0.05}})
    ledger = result.ledger
    assert result.ends[0].how == "terminated" and result.workers[0].finish_reason == "shutdown"
    assert ledger.balanced and ledger.lost_in_workers == 0  # a graceful close finishes what it took
    if {persist}:
        assert result.lost == 0 and result.processed == 303 and result.items_scraped == 300
    else:
        assert ledger.flushes[0] >= 1 and ledger.removed_from_queue >= 1 and result.lost >= 1
        assert all(r.where == "queue" for r in ledger.lost_urls)
""")
    outcome.assert_outcomes(passed=1)


@needs_redis
def test_a_leak_is_judged_per_worker_without_the_shared_queue(pytester):
    outcome = run(pytester, """
    url = fixture_site.url("/catalog/?pages=30&per_page=40")  # 1,230 responses: one of two workers gets 615 or more
    result = crawl_cluster(Hoarder, workers=2, start_urls=[url], settings={"CONCURRENT_REQUESTS": 8})
    assert result.verdict == "retained-objects" and result.reason.startswith("worker ")
    judged = [w for w in result.workers if w.responses >= 615]
    assert judged and all(w.verdict == "retained-objects" for w in judged)
    # the shared Redis queue is not the worker's scheduler: it explains a small part of the growth at most
    explained = re.search(r"scheduler's growing queue explains ([0-9.]+) KiB/response", judged[0].growth.reason)
    assert explained and float(explained.group(1)) * 1024 < judged[0].growth.per_response_bytes / 4
""", '@pytest.mark.crawl_memory(leak="warn")')
    outcome.assert_outcomes(passed=1)
    outcome.stdout.fnmatch_lines(["*test_cl.py::test_it ?cluster?*1,230*retained-objects*"])


@needs_redis
def test_a_cluster_whose_only_worker_is_killed_ends_with_the_queue_left_as_lost(pytester):
    outcome = run(pytester, """
    url = fixture_site.url("/catalog/?pages=3&per_page=100")
    result = crawl_cluster(Catalog, workers=1, start_urls=[url],
                           settings={"CONCURRENT_REQUESTS": 2, "CRAWLMEM_CHECKPOINT_MIN_RESPONSES": 100000},
                           kill={"worker": 0, "after_responses": 5})
    ledger = result.ledger
    assert result.duration_seconds < 60 and ledger.balanced
    assert ledger.left_in_queue >= 50 and ledger.lost_in_workers >= 1
    assert result.lost == ledger.left_in_queue + ledger.lost_in_workers
    assert {r.where for r in ledger.lost_urls} == {"worker", "left"}
""")
    outcome.assert_outcomes(passed=1)


@needs_redis
def test_a_frontier_that_outgrows_the_workers_is_a_backlog_in_redis_and_what_is_left_is_lost(pytester):
    outcome = run(pytester, """
    url = fixture_site.url("/explode/0?fanout=20")
    result = crawl_cluster(Frontier, workers=2, start_urls=[url],
                           settings={"CLOSESPIDER_PAGECOUNT": 60, "SCHEDULER_PERSIST": True})
    assert result.verdict == "scheduler-backlog", result.reason
    assert "the shared Redis queue peaked at" in result.reason
    assert result.max_queue >= 1000 and result.ledger.left_in_queue >= 1000 and result.ledger.balanced
    assert result.lost == result.ledger.left_in_queue + result.ledger.lost_in_workers
    assert all(w.max_scheduled == 0 for w in result.workers)
""", '@pytest.mark.crawl_memory(max_scheduled=500)')
    outcome.assert_outcomes(failed=1)
    outcome.stdout.fnmatch_lines(["*crawl_memory budget broken: the shared Redis queue reached * requests,"
                                  " over the budget max_scheduled=500*",
                                  "FAILED test_cl.py::test_it - Failed: crawl_memory budget broken*"])  # not an assert


@needs_redis
def test_a_worker_that_crashes_fails_the_test_with_its_error(pytester):
    outcome = run(pytester, """
    crawl_cluster(Fragile, workers=2, start_urls=[fixture_site.url("/catalog/?pages=2&per_page=5")])
""")
    outcome.assert_outcomes(failed=1)
    outcome.stdout.fnmatch_lines(["*worker 1 of the cluster crashed (exit code 1)*", "*RuntimeError: no start URLs here*"])


@needs_redis
def test_clusters_run_side_by_side_under_xdist_each_on_its_own_redis(pytester):
    pytester.makepyfile(spiders=SPIDERS)
    pytester.makepyfile(test_cl="""
import pytest
from spiders import Catalog

@pytest.mark.parametrize("pages", [2, 3, 4])
def test_it(crawl_cluster, fixture_site, pages):
    result = crawl_cluster(Catalog, workers=2, start_urls=[fixture_site.url(f"/catalog/?pages={pages}&per_page=10")])
    assert result.processed == pages * 11 and result.lost == 0 and result.processed_twice == 0
""")
    outcome = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-n", "2", timeout=300)
    outcome.assert_outcomes(passed=3)
    rows = [line for line in outcome.stdout.lines if line.startswith("test_cl.py::test_it[")]
    assert len(rows) == 9, outcome.stdout.str()  # a cluster row and two worker rows per test, merged on the controller


@needs_redis
def test_no_worker_or_redis_server_outlives_the_session(pytester, monkeypatch):
    import subprocess
    import sys
    import tempfile
    import time
    from pathlib import Path

    import psutil

    pytester.makepyfile(spiders=SPIDERS, test_procs="""
from spiders import Catalog

def test_killed(crawl_cluster, fixture_site):
    # 315 responses: at 84, worker 1 once took all of them before worker 0 got its first (the kill never fired);
    # at 30 ms a request one worker alone takes 9 s, and the other wakes within Scrapy's 5 s heartbeat
    crawl_cluster(Catalog, workers=2, start_urls=[fixture_site.url("/catalog/?pages=15&per_page=20")],
                  kill={"worker": 0, "after_responses": 5}, settings={"DOWNLOAD_DELAY": 0.03})
""")
    started = time.time() - 1
    # this session's temp dirs only (clusters of other tests may run beside it under xdist), short enough for a socket
    own_tmp = Path(tempfile.mkdtemp(prefix="cm-own-"))
    monkeypatch.setenv("TMPDIR", str(own_tmp))
    inner = pytester.popen([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "test_procs.py"],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    out, _ = inner.communicate(timeout=300)
    assert inner.returncode == 0, out.decode()[-2000:]
    leftovers = []
    for proc in psutil.process_iter(["cmdline", "create_time"]):
        cmdline = " ".join(proc.info["cmdline"] or [])  # redis-server's title names its socket, in its temp dir
        if ("crawlmem-redis-" in cmdline or "crawlmem-cluster-" in cmdline) and proc.info["create_time"] >= started \
                and str(own_tmp) in cmdline:
            leftovers.append(cmdline)
    shutil.rmtree(own_tmp, ignore_errors=True)
    assert leftovers == []


def test_a_spider_a_worker_cannot_import_is_a_clear_error_before_anything_starts():
    import scrapy

    from pytest_crawlmem.cluster.run import ClusterOptions, run_cluster

    class Local(scrapy.Spider):
        name = "local"

    with pytest.raises(ClusterError, match=r"runs every worker in a process of its own: .* move it to module level"):
        run_cluster(Local, start_urls=None, settings=None, spider_kwargs={}, options=ClusterOptions())


def test_the_cluster_deadline_is_the_tests_timeout_budget():
    from pytest_crawlmem.cluster.run import ClusterOptions
    from pytest_crawlmem.measure.runner import CrawlOptions

    assert ClusterOptions(worker_options=CrawlOptions(budgets=Budgets(timeout=7))).timeout_seconds == 7
    assert ClusterOptions().timeout_seconds is None  # no budget: the cluster's own default deadline


def test_a_bad_kill_plan_is_a_clear_error():
    with pytest.raises(ClusterError, match=r"invalid kill worker 3 .*expected an index from 0 to 2"):
        parse_kill({"worker": 3, "after_responses": 1}, 3)
    with pytest.raises(ClusterError, match="invalid kill signal 'HUP'"):
        parse_kill({"worker": 0, "after_responses": 1, "signal": "HUP"}, 3)
    with pytest.raises(ClusterError, match="unknown: \\['after'\\]"):
        parse_kill({"worker": 0, "after": 1}, 3)
    assert parse_kill(None, 3) is None
    assert parse_kill({"worker": 1, "after_responses": 500}, 3).describe() == "SIGKILL of worker 1 after 500 responses"


def _state(**kwargs):
    base = dict(scheduled={}, urls={}, taken={}, processed={})
    base.update(kwargs)
    return LedgerState(**base)


def test_the_ledger_names_requests_lost_in_a_dead_worker_and_deleted_from_the_queue():
    urls = {e: f"http://x/{e}" for e in "abcdef"}
    ledger = settle(_state(
        scheduled=dict.fromkeys("abcdef", 1), urls=urls,
        taken={0: {"a": 1, "b": 1}, 1: {"c": 1, "d": 1}}, processed={0: {"a": 1, "b": 1}, 1: {"c": 1}},
        left={"f": 1}, flushes={0: 1},
    ))
    assert (ledger.scheduled, ledger.taken, ledger.processed) == (6, 4, 3)
    assert (ledger.lost_in_workers, ledger.removed_from_queue, ledger.left_in_queue, ledger.lost) == (1, 1, 1, 3)
    assert ledger.balanced
    assert [r.describe() for r in ledger.lost_urls] == [
        "http://x/d (taken by worker 1, which never finished it)",
        "http://x/e (deleted from the shared queue before any worker took it)",
        "http://x/f (still in the shared queue when the cluster ended)",
    ]


def test_retries_are_not_work_done_twice_but_a_refetch_is():
    ledger = settle(_state(
        scheduled={"a": 1, "a2": 1, "b": 1, "b2": 1},
        urls={"a": "http://x/a", "a2": "http://x/a", "b": "http://x/b", "b2": "http://x/b"},
        taken={0: {"a": 1, "a2": 1, "b": 1, "b2": 1}}, processed={0: {"a": 1, "a2": 1, "b": 1, "b2": 1}},
        retries=frozenset({"a2"}),
    ))
    assert ledger.processed_twice == 1 and ledger.twice_urls == ("http://x/b",) and ledger.lost == 0


def test_a_start_url_popped_and_never_scheduled_is_lost():
    ledger = settle(_state(seeded_urls=("http://x/1", "http://x/2", "http://x/3"), left_start_urls=("http://x/3",),
                           scheduled={"a": 1}, urls={"a": "http://x/1"}, taken={0: {"a": 1}}, processed={0: {"a": 1}}))
    assert ledger.lost == ledger.lost_start_urls == 1 and ledger.lost_urls[0].where == "start"


@given(st.lists(st.tuples(st.integers(0, 2), st.sampled_from(["push", "pop", "finish", "flush"])), max_size=60))
def test_whatever_happens_the_ledger_balances_and_lost_is_scheduled_less_processed(events):
    queue: list[str] = []
    scheduled: dict[str, int] = {}
    taken: dict[int, dict[str, int]] = {0: {}, 1: {}, 2: {}}
    processed: dict[int, dict[str, int]] = {0: {}, 1: {}, 2: {}}
    holding: dict[int, list[str]] = {0: [], 1: [], 2: []}
    for n, (worker, event) in enumerate(events):
        if event == "push":
            queue.append(f"e{n}")
            scheduled[f"e{n}"] = 1
        elif event == "pop" and queue:
            entry = queue.pop(0)
            taken[worker][entry] = 1
            holding[worker].append(entry)
        elif event == "finish" and holding[worker]:
            processed[worker][holding[worker].pop(0)] = 1
        elif event == "flush":
            queue.clear()
    ledger = settle(_state(scheduled=scheduled, urls={e: e for e in scheduled}, taken=taken, processed=processed,
                           left=dict.fromkeys(queue, 1)))
    assert ledger.balanced
    assert ledger.lost == ledger.scheduled - ledger.processed == len(ledger.lost_urls)
    assert ledger.lost_in_workers == sum(len(h) for h in holding.values())


def _worker(verdict: str, reason: str = "r", peak: int = 100) -> CrawlResult:
    return CrawlResult("s", (), 1, 1, peak, None, 10, 5, 1.0, "finished", Peaks(), Growth(verdict, reason))


def _cluster(workers, samples=(), **ledger) -> ClusterResult:
    settled = settle(_state(**ledger))
    verdict, reason = cluster_verdict(workers, samples, settled)
    return ClusterResult("s", tuple(workers), tuple(samples), settled, verdict, reason, 1.0, redis_peak_memory=2**20)


def test_a_replayed_cluster_or_crawl_that_found_none_of_its_urls_fails_naming_the_first_and_its_report():
    target = ReplayTarget("http://127.0.0.1:1", 1, "/r/shop.har", {"hosts": ["www.shop.example"]})
    missed = replace(_worker("steady"), replay_misses=2, replay_missed_urls=("https://books.example/", "https://b/2"),
                     report_dir=Path("/reports/w0"))
    cluster = replace(_cluster([missed, missed]), report_dir=Path("/reports/cluster"))
    for result, report in ((missed, "/reports/w0"), (cluster, "/reports/cluster")):
        with pytest.raises(pytest.fail.Exception, match=rf"answered none of the crawl's 2 requests: the first was"
                                                        rf" https://books.example/.*; report: {report}"):
            fail_if_replay_found_nothing(target, result)
    fail_if_replay_found_nothing(target, replace(cluster, workers=(replace(missed, replay_hits=1),)))
    fail_if_replay_found_nothing(None, cluster)  # not replayed


def test_the_cluster_verdict_is_a_worker_leak_first_then_a_backlog_in_redis():
    assert _cluster([_worker("steady"), _worker("retained-objects", "grew")]).reason == "worker 1: grew"
    samples = [RedisSample(1.0, 1500, 2**20, 10, 0, 10, 10)]
    backlog = _cluster([_worker("steady")], samples, scheduled={str(i): 1 for i in range(2000)})
    assert backlog.verdict == "scheduler-backlog" and "peaked at 1,500 requests (75% of the 2,000 scheduled)" in backlog.reason
    assert _cluster([_worker("steady"), _worker("inconclusive")]).verdict == "steady"
    assert _cluster([_worker("inconclusive")]).verdict == "inconclusive"


def test_cluster_budgets_name_both_numbers():
    result = _cluster([_worker("steady", peak=600 * 2**20), _worker("steady", peak=600 * 2**20)],
                      [RedisSample(1.0, 30, 2**20, 10, 0, 10, 10)],
                      scheduled={"a": 1}, urls={"a": "http://x/a"}, taken={0: {"a": 1}}, processed={})
    budgets = Budgets(lost=0, redis_memory=2**19, cluster_rss=2**30, max_scheduled=10)
    messages = [v.message for v in check_cluster(budgets, result)]
    assert messages == [  # in the order of the budgets' rows
        "the shared Redis queue reached 30 requests, over the budget max_scheduled=10",
        "1 request was lost, over the budget lost=0: http://x/a (taken by worker 0, which never finished it)",
        "Redis used 1.0 MiB at its peak (queue up to 30 requests, dupefilter up to 10 fingerprints),"
        " over the budget redis_memory=512.0 KiB",
        "the workers' peak RSS summed to 1.2 GiB (worker 0 600.0 MiB, worker 1 600.0 MiB), over the budget cluster_rss=1.0 GiB",
    ]


@needs_redis
def test_ctrl_c_closes_every_worker_writes_the_cluster_report_and_stops_the_session(pytester):
    import signal
    import subprocess
    import sys
    import time

    import psutil

    pytester.makepyfile(spiders=SPIDERS, test_endless="""
from spiders import Catalog

def test_it(crawl_cluster, fixture_site):
    crawl_cluster(Catalog, workers=2, start_urls=[fixture_site.url("/catalog/?pages=100000&per_page=5")])
""")
    base = pytester.path / ".crawlmem" / "test_endless.py__test_it"
    samples = base / "worker-0" / "samples.jsonl"
    log = pytester.path / "session.log"
    session = pytester.popen([sys.executable, "-m", "pytest", "-p", "no:cacheprovider"], stdout=log.open("wb"),
                             stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 120
        while (not samples.exists() or len(samples.read_text().splitlines()) < 30) and time.monotonic() < deadline:
            time.sleep(0.2)
        started = psutil.Process(session.pid).children(recursive=True)
        session.send_signal(signal.SIGINT)
        session.wait(timeout=90)
    finally:
        if session.poll() is None:
            session.kill()
    text = log.read_text()
    assert session.returncode == 2, text
    assert "KeyboardInterrupt: interrupted by SIGINT (Ctrl-C)" in text, text
    report = json.loads((base / "report.json").read_text())
    assert report["kind"] == "cluster" and report["ledger"]["balanced"] and report["ledger"]["processed"] >= 10
    assert report["workers"][0]["finish_reason"] == "crawlmem_interrupted"
    assert not [p for p in started if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]


def test_leak_not_judged_is_one_cluster_warning_not_one_per_idle_worker():
    from pytest_crawlmem.core.cluster import check_worker

    idle, busy = _worker("inconclusive"), _worker("inconclusive")
    result = _cluster([busy, idle])
    assert check_worker(Budgets(), 1, idle) == []
    warnings = [v for v in check_cluster(Budgets(), result) if v.budget == "leak"]
    assert [(v.fails, v.message) for v in warnings] == [
        (False, 'leak="fail" could not judge any worker\'s memory; no worker crawled long enough of its own to judge its'
                " growth: the busiest, worker 0 (10 responses): r")]
    assert check_cluster(Budgets(), _cluster([_worker("steady"), idle])) == []


def test_the_cluster_summary_takes_each_peak_from_its_workers_and_the_scheduled_one_from_the_shared_queue():
    """A field of Peaks is never silently 0 in the summary row (it was rebuilt from two fields by hand)."""
    from types import SimpleNamespace

    from pytest_crawlmem.core.cluster import cluster_peaks
    from pytest_crawlmem.core.models import Peaks

    workers = [SimpleNamespace(peaks=Peaks(max_scheduled=0, max_inflight=3, max_active_size_bytes=10, backout_seconds=1.5)),
               SimpleNamespace(peaks=Peaks(max_inflight=5, max_disk_scheduled=4, max_jobdir_bytes=7))]
    peaks = cluster_peaks(SimpleNamespace(workers=workers, max_queue=42))  # type: ignore[arg-type]
    assert peaks == Peaks(max_scheduled=42, max_inflight=5, max_active_size_bytes=10, backout_seconds=1.5,
                          max_disk_scheduled=4, max_jobdir_bytes=7, max_media_cached=None)


def test_the_cluster_summary_is_assembled_like_every_result_with_summed_rss_and_the_cluster_verdict():
    from pytest_crawlmem.core.cluster import cluster_peaks, cluster_summary

    cluster = _cluster([_worker("steady", peak=100), _worker("retained-objects", "grew", peak=250)])
    summary = cluster_summary(cluster)
    assert (summary.spider, summary.finish_reason, summary.samples) == ("s x2", "cluster", ())
    assert (summary.start_rss, summary.end_rss, summary.peak_rss) == (2, 2, 350)
    assert (summary.responses, summary.items_scraped) == (20, 10)
    assert summary.verdict == cluster.verdict == "retained-objects" and summary.growth.reason == "worker 1: grew"
    assert summary.peaks == cluster_peaks(cluster)


@needs_redis
def test_a_long_tmpdir_still_gives_redis_a_socket_path_it_accepts(tmp_path, monkeypatch):
    import tempfile

    from pytest_crawlmem.cluster.redisserver import SOCKET_PATH_MAX, start_redis

    long_tmp = tmp_path / ("d" * 60) / ("e" * 60)  # over the 108 bytes a Unix socket's path may have
    long_tmp.mkdir(parents=True)
    monkeypatch.setattr(tempfile, "tempdir", str(long_tmp))
    server = start_redis()
    try:
        assert len(str(server.socket_path)) < SOCKET_PATH_MAX
        assert server.process.poll() is None
    finally:
        server.close()
    assert not server.socket_path.parent.exists()
