"""The plugin's own CPU on a browser crawl, before and after a change, side by side in one run.

    python benchmarks/browser_overhead.py [--rounds 3] [--pages 6] [--before DIR] [--json out.json]
    python benchmarks/browser_overhead.py --profile production [--pages 6]

Each crawl is scrapy-playwright's published example (examples/playwright_books.py: 32 in flight, 4 page
slots a context, a context per listing page, a screenshot per book) in a fresh process, in four modes
interleaved round by round: ``before``/``after`` code x ``test`` (the plugin's runner, as the ``crawl``
fixture runs it: a sample every 0.1 s asked) / ``production`` (Scrapy's CrawlerRunner with the extension
enabled in settings and its production defaults). ``--before DIR`` is a copy of the package to compare
with (``git archive <commit> pytest_crawlmem | tar -x -C DIR``); without it only ``after`` runs.

The plugin's own CPU is what the extension counts as its own (sampler and status threads,
``time.thread_time()``: ``crawlmem/status/self_cpu_seconds``), over the crawl process's CPU during the crawl
(``os.times()``, this process only: the browser's processes are not in it). Checkpoints run on the reactor
thread and are counted in their pauses (``crawlmem/checkpoint_pause_total_seconds``), not here. Each run also
gives the plugin's share of the whole crawl's CPU: its own CPU plus the checkpoints' readings of the browser tree
(reactor thread), over the crawl process's CPU plus its children's (``os.times()`` once the reactor stopped: the
driver, reaped, with the browser processes it reaped).

``--profile MODE`` runs one crawl of ``after-MODE`` with cProfile on what the extension counts as its own (each
sample on the sampler thread, each status line) and prints the calls that cost most.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import latest
from childrun import run_child

HERE = Path(__file__).resolve().parent
MODES = ("before-test", "after-test", "before-production", "after-production")
#: A crawl still running after this long is stopped (its finish reason says so): main's held page slots could hang one.
TIMEOUT_SECONDS = 240


def _profiled(profile_path: str) -> Any:
    """Profile the extension's own work (samples, status lines) with cProfile; return what writes the profile."""
    import cProfile

    from pytest_crawlmem.measure.status import StatusTicker
    from pytest_crawlmem.probes.meter import Sampler

    profiles = {name: cProfile.Profile(time.thread_time) for name in ("sampler", "status")}  # CPU, not wall time
    run_sample, emit = Sampler.run, StatusTicker.emit

    def sampler_run(self: Any) -> None:
        take = self.take

        def profiled_take() -> object:
            profiles["sampler"].enable()
            try:
                return take()
            finally:
                profiles["sampler"].disable()

        self.take = profiled_take
        run_sample(self)

    def profiled_emit(self: Any, *, log: bool = True) -> Any:
        profiles["status"].enable()
        try:
            return emit(self, log=log)
        finally:
            profiles["status"].disable()

    Sampler.run = sampler_run  # type: ignore[method-assign]
    StatusTicker.emit = profiled_emit  # type: ignore[method-assign]

    def write() -> None:
        import pstats

        stats = pstats.Stats(profiles["sampler"])
        stats.add(profiles["status"])
        stats.dump_stats(profile_path)

    return write


def _watch_tree_parts() -> dict[str, Any]:
    """Where the browser tree's readings go, by the thread that took them (the sampler's count in the plugin's own CPU,
    the reactor's are checkpoints'): CPU seconds, PSS readings (of the whole tree, or of processes new since the last
    one), RSS-only readings, rediscoveries; and readings put off past the tree's CPU share."""
    import threading

    from pytest_crawlmem.browser import tree as browsertree

    parts: dict[str, Any] = {}
    read_tree, discover = browsertree.read_tree, browsertree.TreeSampler.rescan

    def where() -> str:
        return "sampler" if threading.current_thread().name == "crawlmem-sampler" else "reactor"

    def counted_read_tree(pids: Any, *, detail: bool = True, **kwargs: Any) -> Any:
        started = time.thread_time()
        reading = read_tree(pids, detail=detail, **kwargs)
        key = f"{where()}_{'pss' if detail else 'rss'}"
        parts[key + "_readings"] = parts.get(key + "_readings", 0) + 1
        parts[key + "_processes"] = parts.get(key + "_processes", 0) + len(reading.processes)
        parts[key + "_cpu_seconds"] = parts.get(key + "_cpu_seconds", 0.0) + time.thread_time() - started
        return reading

    def counted_rescan(self: Any) -> Any:
        started = time.thread_time()
        kinds = discover(self)
        parts[f"{where()}_rescans"] = parts.get(f"{where()}_rescans", 0) + 1
        parts[f"{where()}_rescan_cpu_seconds"] = parts.get(f"{where()}_rescan_cpu_seconds", 0.0) + time.thread_time() - started
        parts["first_browser_seconds"] = parts.get("first_browser_seconds") or (
            round(time.monotonic() - parts["_started"], 2) if "browser" in kinds.values() else None)
        return kinds

    parts["_started"] = time.monotonic()
    browsertree.read_tree = counted_read_tree  # type: ignore[assignment]
    browsertree.TreeSampler.rescan = counted_rescan  # type: ignore[method-assign]
    pages = importlib.import_module("pytest_crawlmem.browser.pages")
    init = pages.CrawlBrowser.__init__

    def kept_init(self: Any, *args: Any, **kwargs: Any) -> None:
        init(self, *args, **kwargs)
        parts["_browser"] = self

    pages.CrawlBrowser.__init__ = kept_init
    return parts


def child(mode: str, pages: int, code: str | None, profile_path: str | None = None) -> dict[str, Any]:
    """Run one crawl in this process (a fresh one) and return its figures."""
    if code:  # the package copy first: leave out the editable install's finder, which would win over sys.path
        sys.meta_path[:] = [f for f in sys.meta_path if "__editable__" not in str(getattr(f, "__module__", ""))]
        sys.path.insert(0, code)
    sys.path[:0] = [str(HERE), str(HERE.parent / "examples")]
    importlib.import_module("pytest_crawlmem")  # before harness, which puts this checkout first on sys.path
    import harness
    from playwright_books import BooksSpider, books_settings
    from scrapy.crawler import CrawlerRunner

    import pytest_crawlmem
    from pytest_crawlmem.core.budgets import Budgets
    from pytest_crawlmem.harness.site import start_site
    from pytest_crawlmem.measure.runner import CrawlOptions

    assert not code or pytest_crawlmem.__file__.startswith(code), pytest_crawlmem.__file__
    write_profile = _profiled(profile_path) if profile_path else None
    collectors: list[Any] = []  # the sampler's and the status line's CollectorTime (code that has one)
    meter = importlib.import_module("pytest_crawlmem.probes.meter")
    if hasattr(meter, "CollectorTime"):
        collector_init = meter.CollectorTime.__init__

        def counted_init(self: Any) -> None:
            collector_init(self)
            collectors.append(self)

        meter.CollectorTime.__init__ = counted_init
    tree_parts = _watch_tree_parts()
    settings = books_settings(32, LOG_LEVEL="ERROR")
    with start_site() as site, tempfile.TemporaryDirectory() as tmp:
        kwargs = {"base_url": site.base_url, "pages": pages}
        before, started = os.times(), time.perf_counter()
        if mode.endswith("-test"):
            result = harness.measured(harness.Crawl(BooksSpider, kwargs, settings),
                                      CrawlOptions(report_dir=Path(tmp), budgets=Budgets(timeout=TIMEOUT_SECONDS)),
                                      reports=False)
            stats, items = result.stats, result.items_scraped
        else:
            runner = CrawlerRunner({**settings, "EXTENSIONS": {"pytest_crawlmem.extension.CrawlMemExtension": 0},
                                    "CRAWLMEM_ENABLED": True, "CRAWLMEM_JSONL": str(Path(tmp) / "samples.jsonl"),
                                    "CRAWLMEM_TIMEOUT_SECONDS": TIMEOUT_SECONDS})
            crawler = runner.create_crawler(BooksSpider)
            harness.block_on(runner.crawl(crawler, **kwargs))
            stats, items = crawler.stats.get_stats(), crawler.stats.get_value("item_scraped_count")
        wall, after = time.perf_counter() - started, os.times()
    harness.stop_reactor()
    ended = os.times()  # the driver (our child) reaped by now: its CPU and the browser's it reaped are the children's
    if write_profile is not None:
        write_profile()
    process_cpu = (after.user + after.system) - (before.user + before.system)
    children_cpu = (ended.children_user + ended.children_system) - (before.children_user + before.children_system)
    own = float(stats.get("crawlmem/status/self_cpu_seconds") or 0.0)
    tree = _tree_figures(tree_parts)
    checkpoint_readings = float(tree.get("reactor_pss_cpu_seconds") or 0.0) + float(tree.get("reactor_rescan_cpu_seconds")
                                                                                    or 0.0)
    whole = process_cpu + children_cpu
    return {"mode": mode, "finish_reason": stats.get("finish_reason"), "wall_seconds": round(wall, 2),
            "items": items, "process_cpu_seconds": round(process_cpu, 3),
            "own_cpu_seconds": round(own, 4), "own_share": round(own / process_cpu, 4) if process_cpu else None,
            "collections_in_own_seconds": round(sum(c.seconds for c in collectors), 4) if collectors else None,
            "samples": stats.get("crawlmem/samples"), "checkpoints": stats.get("crawlmem/checkpoints"),
            "undrained_checkpoints": stats.get("crawlmem/undrained_checkpoints"),
            "checkpoint_pause_total_seconds": stats.get("crawlmem/checkpoint_pause_total_seconds"),
            "checkpoint_pause_max_seconds": stats.get("crawlmem/checkpoint_pause_max_seconds"),
            "children_cpu_seconds": round(children_cpu, 3),
            "checkpoint_tree_readings_cpu_seconds": round(checkpoint_readings, 4),
            "plugin_share_of_whole_crawl": round((own + checkpoint_readings) / whole, 4) if whole else None,
            "tree": tree}


def _tree_figures(parts: dict[str, Any]) -> dict[str, Any]:
    """The figures of :func:`_watch_tree_parts`, rounded, with the readings put off past the tree's CPU share."""
    browser = parts.get("_browser")
    figures = {key: round(value, 4) if isinstance(value, float) else value for key, value in parts.items()
               if not key.startswith("_")}
    figures["deferred_readings"] = getattr(browser, "deferred_readings", None)
    return figures


def _print_profile(mode: str, pages: int) -> None:
    """One ``after-<mode>`` crawl with its own work profiled: its figures and the costliest calls."""
    import pstats

    with tempfile.TemporaryDirectory() as tmp:
        path = str(Path(tmp) / "own.prof")
        run = run_child([sys.executable, __file__, "--child", f"after-{mode}", "--pages", str(pages),
                         "--profile-path", path], mode)
        if run is None:
            return
        print(f"own {run['own_cpu_seconds']} s of {run['process_cpu_seconds']} s ({run['own_share']:.1%}),"
              f" {run['samples']} samples, wall {run['wall_seconds']} s; tree {run.get('tree')}", flush=True)
        pstats.Stats(path).sort_stats("tottime").print_stats(25)
        pstats.Stats(path).sort_stats("cumulative").print_stats(30)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--pages", type=int, default=6)
    parser.add_argument("--before", help="a copy of the package to compare with (its parent directory)")
    parser.add_argument("--json")
    parser.add_argument("--part", default='latest', help="the part of benchmarks/results/browser_overhead.json this run replaces")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--code", help=argparse.SUPPRESS)
    parser.add_argument("--profile", choices=("test", "production"), help="one crawl, its own CPU profiled")
    parser.add_argument("--profile-path", help=argparse.SUPPRESS)
    parser.add_argument("--modes", nargs="+", choices=MODES, help="only these modes (default: all four)")
    args = parser.parse_args()
    if args.child:
        print("RESULT " + json.dumps(child(args.child, args.pages, args.code, args.profile_path)), flush=True)
        return
    if args.profile:
        _print_profile(args.profile, args.pages)
        return
    modes = [m for m in (args.modes or MODES) if args.before or m.startswith("after")]
    runs: list[dict[str, Any]] = []
    for i in range(args.rounds):
        k = i % len(modes)
        for mode in modes[k:] + modes[:k]:
            command = [sys.executable, __file__, "--child", mode, "--pages", str(args.pages)]
            if mode.startswith("before"):
                command += ["--code", str(Path(args.before).resolve())]
            run = run_child(command, mode)
            if run is None:
                continue
            runs.append(run)
            print(f"{mode:18} wall {run['wall_seconds']:6.1f} s  process CPU {run['process_cpu_seconds']:6.2f} s  own"
                  f" {run['own_cpu_seconds']:6.3f} s ({run['own_share']:.1%})  checkpoints {run['checkpoints']}"
                  f" (undrained {run['undrained_checkpoints']}, pauses {run['checkpoint_pause_total_seconds']} s)"
                  f" items {run['items']} {run['finish_reason']}; collections in it (left out)"
                  f" {run.get('collections_in_own_seconds')} s; tree {run.get('tree')}", flush=True)
            if run.get("plugin_share_of_whole_crawl") is not None:
                print(f"{mode:18} with the checkpoints' tree readings ({run['checkpoint_tree_readings_cpu_seconds']} s):"
                      f" {run['plugin_share_of_whole_crawl']:.1%} of the whole crawl's CPU (process"
                      f" {run['process_cpu_seconds']} s + children {run['children_cpu_seconds']} s)", flush=True)
    summary = {}
    for mode in modes:
        mine = [r for r in runs if r["mode"] == mode]
        if mine:
            summary[mode] = {"runs": len(mine), "own_share_median": round(statistics.median(r["own_share"] for r in mine), 4),
                             "own_share_max": max(r["own_share"] for r in mine),
                             "wall_median_seconds": round(statistics.median(r["wall_seconds"] for r in mine), 1)}
            print(f"{mode:18} own CPU {summary[mode]['own_share_median']:.1%} of the crawl process's (median of"
                  f" {len(mine)}, max {summary[mode]['own_share_max']:.1%})")
    document = {"pages": args.pages, "rounds": args.rounds, "summary": summary, "runs": runs,
                "load_average": [round(x, 2) for x in os.getloadavg()]}
    if args.json:
        Path(args.json).write_text(json.dumps(document, indent=2))
    latest.save("browser_overhead", args.part, document)


if __name__ == "__main__":
    main()
