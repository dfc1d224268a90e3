"""What attribution costs in a large Scrapy project: the same crawls with 10 and with thousands of spider modules loaded.

    python benchmarks/large_project.py [--modules 10 5000] [--rounds 1] [--responses 600] [--production]
                                       [--spiders leaky filling clean] [--json /tmp/large_project.json]

A project is generated per module count (``large_project_source.write_project``); each crawl runs in a fresh process
(``--child``) that loads the project's ``SPIDER_MODULES`` as Scrapy's ``SpiderLoader`` does (every module imported,
timed) and crawls the fixture site's catalog (about ``--responses`` responses) through the plugin
(``run_crawl``, default mode; ``--production``: also with the extension from ``EXTENSIONS``, as ``scrapy crawl``
runs it) with attribution on (``CRAWLMEM_ATTRIBUTION_FRAMES`` 4) and off (0). Per crawl: wall
and CPU seconds of the crawl (not the loading), the longest reactor block (a 10 ms looping call's largest gap past its
interval, and the reactor thread's own CPU in that gap: a block whatever else loads the machine), the extension's
pause and self-CPU stats, the verdict, and for ``leaky`` whether the line named first is its keeping line. The
summary: what attribution adds (on - off, wall and CPU seconds) per spider and module count, side by side.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import latest
from childrun import run_child
from large_project_source import PACKAGE, marked_line, write_project

#: The reactor watchdog's interval: a gap past it is a block of the reactor thread.
TICK_SECONDS = 0.01


def child(args: argparse.Namespace) -> None:
    """One crawl in this process (fresh): load the project's spiders, crawl, print ``RESULT {json}``."""
    from harness import Crawl, measured, reactor, stop_reactor
    from scrapy.settings import Settings
    from scrapy.spiderloader import SpiderLoader
    from twisted.internet.task import LoopingCall

    from pytest_crawlmem.measure.runner import CrawlOptions

    sys.path.insert(0, str(args.project))
    modules = [f"{PACKAGE}.spiders"]
    loaded = time.perf_counter()
    loader = SpiderLoader.from_settings(Settings({"SPIDER_MODULES": modules}))
    load_seconds = time.perf_counter() - loaded
    spider = loader.load(args.spider)
    gaps: list[float] = []
    cpu_gaps: list[float] = []  # the reactor thread's own CPU in each gap: a block, whatever else runs on the machine
    last = [time.monotonic(), time.thread_time()]

    def tick() -> None:
        now, cpu_now = time.monotonic(), time.thread_time()
        gaps.append(now - last[0] - TICK_SECONDS)
        cpu_gaps.append(cpu_now - last[1])
        last[:] = [now, cpu_now]

    watchdog = LoopingCall(tick)
    reactor.callLater(0, watchdog.start, TICK_SECONDS, now=False)
    settings = {"SPIDER_MODULES": modules, "CRAWLMEM_ATTRIBUTION_FRAMES": args.frames}
    cpu, wall = time.process_time(), time.perf_counter()
    if args.production:  # as `scrapy crawl` runs it: the extension from EXTENSIONS, its production defaults
        verdict, named, holders, stats, responses = _production(spider, args.url, settings)
    else:
        crawl = Crawl(spider, {"start_urls": [args.url]}, settings)
        result = measured(crawl, CrawlOptions(report_dir=Path(tempfile.mkdtemp(prefix="large-project-"))), reports=False)
        verdict, responses, stats = result.verdict, result.responses, dict(result.stats or {})
        named = result.top_growth[0].location if result.top_growth else ""
        holders = [h.path for h in result.holders]
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    watchdog.stop()
    stop_reactor()
    keeps = marked_line(args.spider, "KEEPS") if args.spider == "leaky" else None
    record = {
        "modules_loaded": sum(1 for name in sys.modules if name.startswith(f"{PACKAGE}.spiders.")),
        "load_seconds": round(load_seconds, 2), "wall_seconds": round(wall, 3), "cpu_seconds": round(cpu, 3),
        "max_block_seconds": round(max(gaps, default=0.0), 3),
        "max_block_cpu_seconds": round(max(cpu_gaps, default=0.0), 3), "responses": responses, "verdict": verdict,
        "named": named, "keeping_named": None if keeps is None else named.endswith(keeps),
        "pause_max_seconds": stats.get("crawlmem/checkpoint_pause_max_seconds"),
        "pause_total_seconds": stats.get("crawlmem/checkpoint_pause_total_seconds"),
        "self_cpu_seconds": stats.get("crawlmem/status/self_cpu_seconds"),
        "attribution_seconds": stats.get("crawlmem/attribution_seconds"),
        "attribution_roots": stats.get("crawlmem/attribution_roots"),
        "attribution_files": stats.get("crawlmem/attribution_files"),
        "holders": holders,
    }
    print("RESULT " + json.dumps(record), flush=True)


def _production(spider: type, url: str, settings: dict[str, Any]) -> tuple[str, str, list[str], dict[str, Any], int]:
    """A crawl with the production extension (``EXTENSIONS``, ``CRAWLMEM_ENABLED``): verdict, the line named first,
    holders, the crawl's stats and its responses."""
    from bench_spiders import BASE_SETTINGS
    from harness import block_on
    from scrapy.crawler import CrawlerRunner

    runner = CrawlerRunner({**BASE_SETTINGS, **settings, "CRAWLMEM_ENABLED": True,
                            "EXTENSIONS": {"pytest_crawlmem.extension.CrawlMemExtension": 0}})
    crawler = runner.create_crawler(spider)
    block_on(runner.crawl(crawler, start_urls=[url]))
    stats = dict(crawler.stats.get_stats())
    ext = next(e for e in crawler.extensions.middlewares if type(e).__name__ == "CrawlMemExtension")
    sites = ext.attribution.growth_sites
    return (str(stats.get("crawlmem/verdict", "")), sites[0].location if sites else "",
            [h.path for h in ext.attribution.holders], stats, int(stats.get("response_received_count", 0)))


def summarize(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Per spider and module count: the median on/off figures and what attribution adds (wall and CPU seconds)."""
    table: dict[str, Any] = {}
    for row in runs:
        name = row["spider"] + (" (production)" if row.get("production") else "")
        cell = table.setdefault(name, {}).setdefault(str(row["modules"]), {"on": [], "off": []})
        cell["on" if row["frames"] else "off"].append(row)
    for cells in table.values():
        for key, cell in cells.items():
            on, off = cell.pop("on"), cell.pop("off")
            cells[key] = {
                **{f"{name}_on": _median(on, name) for name in ("wall_seconds", "cpu_seconds", "max_block_seconds",
                                                                 "pause_max_seconds", "pause_total_seconds",
                                                                 "self_cpu_seconds", "attribution_seconds",
                                                                 "attribution_roots", "attribution_files",
                                                                 "max_block_cpu_seconds")},
                "wall_seconds_off": _median(off, "wall_seconds"), "cpu_seconds_off": _median(off, "cpu_seconds"),
                "max_block_seconds_off": _median(off, "max_block_seconds"),
                "max_block_cpu_seconds_off": _median(off, "max_block_cpu_seconds"),
                "added_wall_seconds": _added(on, off, "wall_seconds"), "added_cpu_seconds": _added(on, off, "cpu_seconds"),
                "verdicts_on": sorted(r["verdict"] for r in on), "keeping_named": [r["keeping_named"] for r in on],
                "load_seconds": _median(on + off, "load_seconds"),
            }
    return table


def _median(rows: list[dict[str, Any]], key: str) -> float | None:
    values = sorted(r[key] for r in rows if r.get(key) is not None)
    return values[len(values) // 2] if values else None


def _added(on: list[dict[str, Any]], off: list[dict[str, Any]], key: str) -> float | None:
    a, b = _median(on, key), _median(off, key)
    return None if a is None or b is None else round(a - b, 3)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--modules", type=int, nargs="+", default=[10, 5000])
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--responses", type=int, default=600)
    parser.add_argument("--spiders", nargs="+", default=["leaky", "filling", "clean"])
    parser.add_argument("--production", action="store_true", help="also crawl with the production extension")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--part", default='default', help="the part of benchmarks/results/large_project.json this run replaces")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--project", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--spider", help=argparse.SUPPRESS)
    parser.add_argument("--frames", type=int, default=4, help=argparse.SUPPRESS)
    parser.add_argument("--url", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args)
        return
    from bench_spiders import catalog_path
    from harness import machine_info, progress

    from pytest_crawlmem.harness.site import start_site

    runs: list[dict[str, Any]] = []
    with start_site() as site, tempfile.TemporaryDirectory(prefix="crawlmem-large-") as tmp:
        url = site.url(catalog_path(args.responses, per_page=20))
        projects = {n: Path(tmp) / f"project-{n}" for n in args.modules}
        for n, root in projects.items():
            write_project(root, n)
        for i in range(args.rounds):  # interleaved: every round runs each cell once, side by side
            for spider, production in [(s, p) for p in [False, *[True] * args.production] for s in args.spiders]:
                for n, root in projects.items():
                    for frames in (4, 0):
                        command = [sys.executable, __file__, "--child", "--project", str(root), "--spider", spider,
                                   "--frames", str(frames), "--url", url, *["--production"] * production]
                        result = run_child(command, label=f"{spider} {n} {frames}", timeout=1800)
                        if result is None:
                            continue
                        runs.append({"round": i, "spider": spider, "production": production, "modules": n,
                                     "frames": frames, **result})
                        progress(f"round {i} {spider:8s}{' prod' * production} modules {n:5d} frames {frames}:"
                                 f" {result['wall_seconds']:6.1f} s wall, {result['cpu_seconds']:6.1f} CPU-s,"
                                 f" block {result['max_block_seconds']:.2f} s (CPU {result['max_block_cpu_seconds']:.2f} s),"
                                 f" pause max {result['pause_max_seconds']} s, {result['verdict']}, named {result['named']}")
                        if args.json:  # after every crawl: a cut-off run keeps what it measured
                            _write(args.json, machine_info(), args, runs)
    table = summarize(runs)
    for spider, cells in table.items():
        for n, cell in cells.items():
            print(f"{spider:8s} {n:>5s} modules: +{cell['added_wall_seconds']} s wall, +{cell['added_cpu_seconds']} CPU-s"
                  f" with attribution; block {cell['max_block_seconds_on']} s (off {cell['max_block_seconds_off']}),"
                  f" its CPU {cell['max_block_cpu_seconds_on']} s (off {cell['max_block_cpu_seconds_off']});"
                  f" {cell['verdicts_on']} keeping {cell['keeping_named']}")
    if args.json:
        _write(args.json, machine_info(), args, runs)
    latest.save("large_project", args.part, {"modules": args.modules, "responses": args.responses, "rounds": args.rounds,
                                             "table": table, "runs": runs})


def _write(path: Path, machine: dict[str, Any], args: argparse.Namespace, runs: list[dict[str, Any]]) -> None:
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=False).stdout
    out = {"schema_version": 1, "machine": machine, "commit": commit.strip(), "modules": args.modules,
           "responses": args.responses, "rounds": args.rounds, "table": summarize(runs), "runs": runs}
    path.write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
