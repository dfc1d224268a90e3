"""What a crawl_cluster worker costs against a bare scrapy-redis worker, and what the ledger costs per request.

Three modes crawl the same catalog on one worker (so that Scrapy's 5 s idle heartbeat does not
decide who works), interleaved, ``--rounds`` times each, each against a fresh private Redis:

- ``bare``: ``scrapy crawl``-like worker (CrawlerProcess) on the scrapy-redis scheduler and dupefilter;
- ``ledger``: the same worker plus the ledger extension (Lua push/pop scripts, a record per finished request);
- ``cluster``: ``run_cluster`` with one worker, as the ``crawl_cluster`` fixture runs it (isolated, measured
  child, coordinator sampling Redis).

CPU is the children's user+system time (worker and redis-server, from ``RUSAGE_CHILDREN``); the
coordinator's own CPU (pytest process side) is reported apart. Peak RSS: a bare or ledger worker prints
its VmHWM (its whole life, imports included); a cluster worker's is the plugin's exact peak (from the
spider's opening). Ledger Redis bytes per request come
from ``MEMORY USAGE`` of the ledger keys at the end of the ``ledger`` runs.

    python benchmarks/cluster_cost.py --responses 1000 --rounds 3
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import latest  # noqa: E402
from bench_spiders import BASE_SETTINGS, Catalog, catalog_path  # noqa: E402

from pytest_crawlmem.cluster.redisserver import start_redis  # noqa: E402
from pytest_crawlmem.cluster.run import REDIS_DUPEFILTER, REDIS_SCHEDULER, WORKER_EXTENSION, ClusterOptions, run_cluster  # noqa: E402
from pytest_crawlmem.core.ledger import LedgerKeys  # noqa: E402
from pytest_crawlmem.harness.site import start_site  # noqa: E402

MODES = ("bare", "ledger", "cluster")


def bare_worker(url: str, redis_url: str, ledger: bool) -> None:
    """Child process: one scrapy-redis worker, like ``scrapy crawl``; with ``ledger``, the ledger extension too."""
    from scrapy.crawler import CrawlerProcess

    settings: dict[str, Any] = {**BASE_SETTINGS, "SCHEDULER": REDIS_SCHEDULER, "DUPEFILTER_CLASS": REDIS_DUPEFILTER,
                                "REDIS_URL": redis_url}
    if ledger:
        settings.update(EXTENSIONS={WORKER_EXTENSION: 0}, CRAWLMEM_CLUSTER_WORKER=0)
    process = CrawlerProcess(settings)
    process.crawl(Catalog, start_urls=[url])
    process.start()
    status = Path("/proc/self/status").read_text()
    peak_kib = next(int(line.split()[1]) for line in status.splitlines() if line.startswith("VmHWM:"))
    print(json.dumps({"peak_rss": peak_kib * 1024}))  # the worker's whole life: imports, crawl, close


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _self_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def run_bare(url: str, ledger: bool) -> dict[str, Any]:
    """One bare (or ledger) run against a fresh Redis: wall, children's CPU, responses, ledger bytes."""
    server = start_redis()
    try:
        if ledger:  # the crawl is over once idle: the worker closes at its first idle, as a bare one does
            server.client().set(LedgerKeys().done, 1)
        cpu, started = _children_cpu(), time.monotonic()
        out = subprocess.run([sys.executable, __file__, "--worker", url, server.url, "1" if ledger else "0"], check=True,
                             stdout=subprocess.PIPE, text=True).stdout
        peak_rss = json.loads(out.strip().splitlines()[-1])["peak_rss"]
        wall = time.monotonic() - started
        client = server.client()
        keys = LedgerKeys()
        counts = {k.decode(): int(v) for k, v in client.hgetall(keys.counts).items()}
        ledger_bytes = sum(int(client.memory_usage(k) or 0) for k in keys.all_keys(1) if client.exists(k))
        scheduled = sum(int(v) for v in client.hvals(keys.scheduled))
    finally:
        server.close()
    return {"wall_seconds": wall, "cpu_seconds": _children_cpu() - cpu, "responses": counts.get("responses:0"),
            "ledger_bytes": ledger_bytes, "scheduled": scheduled, "peak_rss": peak_rss}


def run_measured(url: str, report_dir: Path) -> dict[str, Any]:
    """One run through ``run_cluster`` with one worker."""
    cpu, own, started = _children_cpu(), _self_cpu(), time.monotonic()
    result = run_cluster(Catalog, start_urls=[url], settings=dict(BASE_SETTINGS), spider_kwargs={},
                         options=ClusterOptions(workers=1, report_dir=report_dir))
    wall = time.monotonic() - started
    return {"wall_seconds": wall, "cpu_seconds": _children_cpu() - cpu, "coordinator_cpu_seconds": _self_cpu() - own,
            "responses": result.responses, "lost": result.lost, "scheduled": result.scheduled,
            "ledger_bytes": max((s.ledger_bytes for s in result.redis_samples), default=0),
            "peak_rss": result.cluster_rss}


def micro(requests: int) -> dict[str, Any]:
    """The ledger's own cost per request, without a crawl around it: push, pop and finish ``requests`` requests
    through scrapy-redis's PriorityQueue, bare and wrapped in the ledger, interleaved over 3 rounds (medians).

    Wall time is mostly Redis round trips (the worker waits for redis-server; on a loaded machine each one is a
    context switch); CPU time is this process's own work (pickling, hashing, redis-py)."""
    import scrapy
    from scrapy_redis.queue import PriorityQueue

    from pytest_crawlmem.cluster.worker import LedgerQueue, LedgerRecorder

    spider = scrapy.Spider(name="bench")
    made = [scrapy.Request(f"http://127.0.0.1/catalog/product/{i}") for i in range(requests)]
    timings: dict[str, list[float]] = {"bare": [], "ledger": []}
    cpu: dict[str, list[float]] = {"bare": [], "ledger": []}
    ledger_bytes = 0
    for _ in range(3):
        for mode in timings:
            server = start_redis()
            try:
                client = server.client()
                queue: Any = PriorityQueue(client, spider, "bench:requests")
                recorder = LedgerRecorder(client, 0, LedgerKeys())
                if mode == "ledger":
                    queue = LedgerQueue(queue, recorder)
                started, cpu_started = time.perf_counter(), time.process_time()
                for request in made:
                    queue.push(request)
                for _ in made:
                    popped = queue.pop()
                    if mode == "ledger":
                        recorder.finished(popped)
                timings[mode].append(time.perf_counter() - started)
                cpu[mode].append(time.process_time() - cpu_started)
                if mode == "ledger":
                    ledger_bytes = sum(int(client.memory_usage(k) or 0) for k in LedgerKeys().all_keys(1) if client.exists(k))
            finally:
                server.close()
    def per_request(values: list[float]) -> float:
        return statistics.median(values) / requests * 1e6

    return {"requests": requests, "round_trips_bare": 2, "round_trips_ledger": 3,
            "bare_wall_us_per_request": per_request(timings["bare"]),
            "ledger_wall_us_per_request": per_request(timings["ledger"]),
            "bare_cpu_us_per_request": per_request(cpu["bare"]), "ledger_cpu_us_per_request": per_request(cpu["ledger"]),
            "redis_bytes_per_request": ledger_bytes / requests}


def main() -> None:
    """Interleave the modes, print and save the medians."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--responses", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", type=Path, help="also write every run here (benchmarks/results/cluster_cost.json: the summary)")
    parser.add_argument("--micro", type=int, default=5000, help="requests of the ledger micro-benchmark (0: skip it)")
    args = parser.parse_args()
    micro_result = micro(args.micro) if args.micro else None
    if micro_result:
        print("micro", json.dumps({k: round(v, 2) for k, v in micro_result.items()}), flush=True)
    if not args.rounds:
        latest.save("cluster_cost", "micro", {"args": vars(args) | {"out": str(args.out)}, "ledger_micro": micro_result})
        return
    site = start_site()
    runs: dict[str, list[dict[str, Any]]] = {m: [] for m in MODES}
    try:
        url = site.url(catalog_path(args.responses))
        for index in range(args.rounds):
            for mode in MODES:
                if mode == "cluster":
                    run = run_measured(url, Path("/tmp") / f"crawlmem-cluster-cost-{os.getpid()}-{index}")
                else:
                    run = run_bare(url, ledger=mode == "ledger")
                runs[mode].append(run)
                print(mode, json.dumps({k: round(v, 4) if isinstance(v, float) else v for k, v in run.items()}), flush=True)
    finally:
        site.close()
    summary: dict[str, Any] = {}
    crawled = statistics.median(r["responses"] for r in runs["ledger"])  # a bare worker does not count: the same crawl
    for mode, items in runs.items():
        responses = statistics.median(r["responses"] or crawled for r in items)
        cpu = statistics.median(r["cpu_seconds"] for r in items)
        summary[mode] = {"wall_seconds": statistics.median(r["wall_seconds"] for r in items), "cpu_seconds": cpu,
                         "peak_rss": statistics.median(r["peak_rss"] for r in items),
                         "cpu_us_per_response": cpu / responses * 1e6 if responses else None, "responses": responses}
    bare = summary["bare"]
    for mode in ("ledger", "cluster"):
        summary[mode]["cpu_ratio_vs_bare"] = summary[mode]["cpu_seconds"] / bare["cpu_seconds"]
        summary[mode]["wall_ratio_vs_bare"] = summary[mode]["wall_seconds"] / bare["wall_seconds"]
    ledger_runs = runs["ledger"]
    summary["ledger"]["extra_cpu_us_per_request"] = (
        (summary["ledger"]["cpu_seconds"] - bare["cpu_seconds"]) / statistics.median(r["scheduled"] for r in ledger_runs) * 1e6)
    summary["ledger"]["redis_bytes_per_request"] = statistics.median(r["ledger_bytes"] / r["scheduled"] for r in ledger_runs)
    summary["cluster"]["coordinator_cpu_seconds"] = statistics.median(r["coordinator_cpu_seconds"] for r in runs["cluster"])
    summary["ledger_micro"] = micro_result
    print(json.dumps(summary, indent=2))
    document = {"args": vars(args) | {"out": str(args.out)}, "summary": summary, "runs": runs}
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(document, indent=2))
    latest.save("cluster_cost", "latest", document)


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        bare_worker(sys.argv[2], sys.argv[3], sys.argv[4] == "1")
    else:
        main()
