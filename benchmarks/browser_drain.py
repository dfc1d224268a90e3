"""How long a browser checkpoint takes to drain at 32 in flight (scrapy-playwright's published example).

    python benchmarks/browser_drain.py [--runs 3] [--pages 6] [--before DIR] [--json out.json]

Each run crawls examples/playwright_books.py (32 in flight, 4 page slots a context, a context per listing
page, a full-page screenshot per book) through the plugin's runner in a fresh process. For every mid-crawl
checkpoint it records the drain (from the pause to the moment nothing that holds a page or a response is in
flight, or the drain timeout) and the whole pause (the drain, the renderers' GC, the readings), and a trace of what
each checkpoint waited for (in flight, parked, pages, pages opened; every 100 ms of the first one). ``--before DIR``
is a copy of the package to compare with (``git archive <commit> pytest_crawlmem | tar -x -C DIR``): its crawls and
this checkout's alternate, run by run.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import latest
from childrun import run_child

HERE = Path(__file__).resolve().parent


def child(pages: int, code: str | None = None) -> dict[str, Any]:
    """One crawl in this (fresh) process: its checkpoints' drain and pause seconds (``code``: a copy of the package)."""
    if code:  # the package copy first: leave out the editable install's finder, which would win over sys.path
        sys.meta_path[:] = [f for f in sys.meta_path if "__editable__" not in str(getattr(f, "__module__", ""))]
        sys.path.insert(0, code)
    sys.path[:0] = [str(HERE), str(HERE.parent / "examples")]
    importlib.import_module("pytest_crawlmem")  # before harness, which puts this checkout first on sys.path
    import harness
    from playwright_books import BooksSpider, books_settings

    from pytest_crawlmem.browser.pages import CrawlBrowser
    from pytest_crawlmem.harness.site import start_site
    from pytest_crawlmem.measure.extension import CrawlMemExtension
    from pytest_crawlmem.measure.runner import CrawlOptions

    begun: list[float] = []
    drained_at: list[float] = []
    begin, collect = CrawlMemExtension._begin_checkpoint, CrawlBrowser.collect_garbage
    extensions: list[Any] = []
    wait = CrawlMemExtension._wait_for_drain

    traces: list[dict[str, Any]] = []

    def state(self: Any) -> dict[str, Any]:
        """What the crawl holds now: in flight, parked, pages, contexts, and what waits for a context."""
        from pytest_crawlmem.probes import readings as probes

        handlers = probes.playwright_handlers(self.crawler)
        lock = getattr(handlers[0], "context_launch_lock", None) if handlers else None
        reading = probes.read_pages(self.crawler)
        gate = self.pages.gate
        return {"t": round(time.monotonic() - begun[-1], 3), "inflight": len(self.crawler.engine.downloader.active),
                "parked": gate.parked(self.crawler) if gate.is_closed else 0,
                "lock_waiters": len(getattr(lock, "_waiters", None) or ()) + bool(lock and lock.locked()),
                "contexts": reading.contexts if reading else 0, "pages": reading.pages if reading else 0,
                "with_page": sum("playwright_page" in r.meta for r in self.crawler.engine.downloader.active),
                "scraping": len(getattr(self.crawler.engine.scraper.slot, "active", ()) or ())
                + len(getattr(self.crawler.engine.scraper.slot, "queue", ()) or ()),
                "browser": bool(handlers and hasattr(handlers[0], "browser")),
                "pages_opened": self.crawler.stats.get_value("playwright/page_count") or 0,
                "creating": sum(getattr(g, "creating", 0) for g in getattr(gate, "_gates", ()))}

    def timed_begin(self: Any) -> None:
        begun.append(time.monotonic())
        extensions[:] = [self]
        traces.append({"responses": self.responses, "begin": state(self)})
        begin(self)

    def traced_wait(self: Any, started: float) -> None:
        """Every 100 ms of every checkpoint's drain, what it still waits for (in full for the first one)."""
        steps = traces[-1].setdefault("during", [])
        if not steps or time.monotonic() - begun[-1] - steps[-1]["t"] >= 0.1:
            steps.append(state(self))
        wait(self, started)

    def timed_collect(self: Any, crawler: Any) -> Any:
        drained_at.append(time.monotonic())  # called once the drain ended (drained, or at the drain timeout)
        if traces and extensions:
            traces[-1]["end"] = state(extensions[0])
        return collect(self, crawler)

    CrawlMemExtension._begin_checkpoint = timed_begin  # type: ignore[method-assign]
    CrawlBrowser.collect_garbage = timed_collect  # type: ignore[method-assign]
    CrawlMemExtension._wait_for_drain = traced_wait  # type: ignore[method-assign]
    with start_site() as site, tempfile.TemporaryDirectory() as tmp:
        crawl = harness.Crawl(BooksSpider, {"base_url": site.base_url, "pages": pages}, books_settings(32, LOG_LEVEL="ERROR"))
        started = time.perf_counter()
        result = harness.measured(crawl, CrawlOptions(report_dir=Path(tmp)), reports=False)
        wall = time.perf_counter() - started
    harness.stop_reactor()
    middle = result.growth.checkpoints[1:-1]
    drains = [round(end - start, 3) for start, end in zip(begun, drained_at, strict=False)]
    for trace, drain in zip(traces, drains, strict=False):
        trace["waited_for"] = _waited_for(trace.get("during", []), drain)
    for trace in traces[1:]:  # the first checkpoint's trace is kept whole
        trace.pop("during", None)
    return {"items": result.items_scraped, "finish_reason": result.finish_reason, "errors": list(result.errors)[:5],
            "wall_seconds": round(wall, 1), "checkpoints": len(middle),
            "undrained": sum(not c.drained for c in middle), "drain_seconds": drains,
            "pause_seconds": [round(c.cost_seconds, 3) for c in middle], "traces": traces}


def _waited_for(steps: list[dict[str, Any]], drain: float) -> dict[str, float]:
    """Where a drain's time went, from its trace (a step every 100 ms): until the last download not parked ended
    (pages navigating, plain downloads), until the last callback ended, and after both (nothing left but the parked:
    the checkpoint's own latency, or work not seen here)."""
    downloads = callbacks = 0.0
    for step, after in zip(steps, [*steps[1:], {"t": drain}], strict=False):
        if step["inflight"] - step["parked"] > 0:
            downloads = after["t"]
        if step["scraping"] > 0:
            callbacks = after["t"]
    busy = max(downloads, callbacks)
    return {"downloads_until": round(min(downloads, drain), 3), "callbacks_until": round(min(callbacks, drain), 3),
            "after_both": round(max(0.0, drain - busy), 3)}


def _summary(label: str, runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Drains within 1 s, checkpoints drained, median and max drain, the first checkpoints' drains."""
    drains = sorted(d for run in runs for d in run["drain_seconds"])
    if not drains:
        return {}
    checkpoints = sum(run["checkpoints"] for run in runs)
    summary = {"runs": len(runs), "checkpoints": checkpoints,
               "drained": checkpoints - sum(run["undrained"] for run in runs),
               "within_1s": sum(d <= 1.0 for d in drains), "drains": len(drains),
               "median_drain_seconds": drains[len(drains) // 2], "max_drain_seconds": drains[-1],
               "first_drain_seconds": [run["drain_seconds"][0] for run in runs if run["drain_seconds"]]}
    waits = [trace["waited_for"] for run in runs for trace in run["traces"] if "waited_for" in trace]
    if waits:
        for key in ("downloads_until", "callbacks_until", "after_both"):
            values = sorted(w[key] for w in waits)
            summary[f"median_{key}_seconds"] = values[len(values) // 2]
        summary["after_both_total_seconds"] = round(sum(w["after_both"] for w in waits), 3)
    print(f"{label}: {summary['drained']} of {checkpoints} checkpoints drained, {summary['within_1s']} of"
          f" {len(drains)} drains within 1 s (median {summary['median_drain_seconds']} s, max {drains[-1]} s);"
          f" first checkpoints {summary['first_drain_seconds']} s; medians: downloads until"
          f" {summary.get('median_downloads_until_seconds')} s, callbacks until {summary.get('median_callbacks_until_seconds')}"
          f" s, after both {summary.get('median_after_both_seconds')} s", flush=True)
    return summary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--pages", type=int, default=6)
    parser.add_argument("--before", help="a copy of the package to compare with (its parent directory)")
    parser.add_argument("--json")
    parser.add_argument("--part", default='after', help="the part of benchmarks/results/browser_drain.json this run replaces")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--code", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print("RESULT " + json.dumps(child(args.pages, args.code)), flush=True)
        return
    labels = ["before", "after"] if args.before else ["after"]
    runs: dict[str, list[dict[str, Any]]] = {label: [] for label in labels}
    for i in range(args.runs):
        for label in labels[i % len(labels):] + labels[:i % len(labels)]:
            command = [sys.executable, __file__, "--child", "--pages", str(args.pages)]
            if label == "before":
                command += ["--code", str(Path(args.before).resolve())]
            run = run_child(command, label)
            if run is None:
                continue
            runs[label].append(run)
            print(f"{label}: {run['checkpoints']} checkpoints, {run['undrained']} undrained; drains"
                  f" {run['drain_seconds']} s; pauses {run['pause_seconds']} s; crawl {run['wall_seconds']} s,"
                  f" {run['items']} items, {run['finish_reason']}; waited for (downloads, callbacks, after both)"
                  f" {[tuple(t['waited_for'].values()) for t in run['traces'] if 'waited_for' in t]}", flush=True)
    summary = {label: _summary(label, mine) for label, mine in runs.items()}
    document = {"pages": args.pages, "summary": summary, "runs": runs.get("after", []),
                "before_runs": runs.get("before", []), "load_average": [round(x, 2) for x in os.getloadavg()]}
    if args.json:
        Path(args.json).write_text(json.dumps(document, indent=2))
    latest.save("browser_drain", args.part, document)


if __name__ == "__main__":
    main()
