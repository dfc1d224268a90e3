"""What measuring a Chromium process tree costs, and how much summed RSS over-counts it.

    python benchmarks/browser_tree_cost.py [--pages 1,5,20] [--repeats 30] [--json out.json]

Launches Debian's Chromium through Playwright (async API, one context, like
scrapy-playwright's default), opens 1, 5 and 20 pages with content, and at each size
times ``read_tree(detail=True)`` (smaps_rollup: RSS/PSS/USS) against
``read_tree(detail=False)`` (statm: RSS), per call and per process, wall and CPU. From
those it prices the sampler's schedule (PSS every 1 s, RSS every 0.1 s, rediscovery every
2 s) as a share of one CPU, then checks the price by running a real ``TreeSampler`` on
that schedule in a thread for a few seconds. It also reports summed RSS / summed PSS
(the double-count factor), PSS per page, and PSS of a page in a context of its own.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import platform
import shutil
import statistics
import sys
import threading
import time
from collections.abc import Callable
from importlib import metadata
from pathlib import Path
from typing import Any

import latest
import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from pytest_crawlmem.browser.tree import TreeReading, TreeSampler, classify, discover_browser_tree, read_tree

MiB = 2**20
PSS_INTERVAL_SECONDS = 1.0
RSS_INTERVAL_SECONDS = 0.1
RESCAN_INTERVAL_SECONDS = 2.0
PAGE_HTML = "<html><body><h1>Catalog</h1><ul>{items}</ul><script>{script}</script></body></html>".format(
    items="".join(f"<li><a href='/product/{i}'>Product {i}</a><p>{'lorem ipsum ' * 20}</p></li>" for i in range(300)),
    script="window.products = Array.from({length: 5000}, (_, i) => ({id: i, name: 'product ' + i}));",
)


def _timed(call: Any, repeats: int) -> tuple[float, float]:
    """Median wall and CPU seconds of ``call()`` over ``repeats`` runs."""
    walls, cpus = [], []
    for _ in range(repeats):
        wall, cpu = time.perf_counter(), time.thread_time()
        call()
        walls.append(time.perf_counter() - wall)
        cpus.append(time.thread_time() - cpu)
    return statistics.median(walls), statistics.median(cpus)


def measure_costs(repeats: int) -> dict[str, Any]:
    """Time detail and RSS-only reads and rediscovery of the tree as it is now."""
    kinds = discover_browser_tree()
    pids = list(kinds)
    detail_wall, detail_cpu = _timed(lambda: read_tree(pids, kinds=kinds), repeats)
    rss_wall, rss_cpu = _timed(lambda: read_tree(pids, detail=False, kinds=kinds), repeats * 10)
    scan_wall, scan_cpu = _timed(discover_browser_tree, repeats)
    reading = read_tree(pids, kinds=kinds)
    per_second_cpu = (detail_cpu / PSS_INTERVAL_SECONDS
                      + rss_cpu * (1 / RSS_INTERVAL_SECONDS - 1 / PSS_INTERVAL_SECONDS)
                      + scan_cpu / RESCAN_INTERVAL_SECONDS)
    return {
        "processes": len(pids),
        "count_by_kind": reading.count_by_kind(),
        "detail_wall_seconds": detail_wall,
        "detail_cpu_seconds": detail_cpu,
        "detail_cpu_seconds_per_process": detail_cpu / len(pids),
        "rss_wall_seconds": rss_wall,
        "rss_cpu_seconds": rss_cpu,
        "rss_cpu_seconds_per_process": rss_cpu / len(pids),
        "detail_cpu_seconds_per_gib_rss": detail_cpu / (reading.rss_bytes / 2**30),
        "discover_wall_seconds": scan_wall,
        "discover_cpu_seconds": scan_cpu,
        "schedule_cpu_share": per_second_cpu,
        "reading": _summary(reading),
        "foreign_browser_processes": foreign_browser_processes(set(pids)),
    }


def foreign_browser_processes(ours: set[int]) -> int:
    """Browser processes on the machine outside our tree: they share the binary's pages, lowering our PSS.

    Crashpad handlers are left out: each browser, ours too, detaches two of them to init.
    """
    count = 0
    for process in psutil.process_iter(["name", "cmdline"]):
        kind = classify(process.info["name"] or "", process.info["cmdline"] or [])
        if process.pid not in ours and kind not in (None, "crashpad"):
            count += 1
    return count


def _summary(reading: TreeReading) -> dict[str, Any]:
    pss = reading.pss_bytes or 0
    return {
        "rss_bytes": reading.rss_bytes,
        "pss_bytes": pss,
        "uss_bytes": reading.uss_bytes,
        "pss_anon_bytes": reading.pss_anon_bytes,
        "double_count_factor": reading.rss_bytes / pss if pss else None,
        "pss_by_kind": reading.by_kind(),
    }


def run_sampler(seconds: float) -> dict[str, Any]:
    """Run a TreeSampler on the 1 s PSS / 0.1 s RSS schedule in a thread; return its CPU share."""
    sampler = TreeSampler(rescan_seconds=RESCAN_INTERVAL_SECONDS, detail_seconds=PSS_INTERVAL_SECONDS)
    stop = threading.Event()

    def loop() -> None:
        while not stop.is_set():
            sampler.sample()
            stop.wait(RSS_INTERVAL_SECONDS)

    thread = threading.Thread(target=loop, name="tree-sampler")
    started = time.perf_counter()
    thread.start()
    time.sleep(seconds)
    stop.set()
    thread.join()
    elapsed = time.perf_counter() - started
    return {"seconds": elapsed, "samples": sampler.samples, "detail_samples": sampler.detail_samples,
            "rescans": sampler.rescans, "cpu_seconds": sampler.cpu_seconds, "cpu_share": sampler.cpu_seconds / elapsed,
            "peak_pss_bytes": sampler.peak_pss_bytes, "peak_rss_bytes": sampler.peak_rss_bytes}


async def _settle(page: Any) -> None:
    await page.request_gc()


async def run(chromium: str, page_counts: list[int], repeats: int, sampler_seconds: float) -> dict[str, Any]:
    """Open pages in steps, measuring at each step; then price a context of its own."""
    from playwright.async_api import async_playwright

    sizes: dict[str, Any] = {}
    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(executable_path=chromium, args=["--disable-gpu"])
        try:
            context = await browser.new_context()
            pages: list[Any] = []
            for count in page_counts:
                while len(pages) < count:
                    page = await context.new_page()
                    await page.set_content(PAGE_HTML)
                    pages.append(page)
                for page in pages:
                    await _settle(page)
                await asyncio.sleep(0.5)  # let the spare renderer and the pages settle
                sizes[str(count)] = measure_costs(repeats)
                print(f"  {count} pages measured", file=sys.stderr)
            sampler = await asyncio.to_thread(run_sampler, sampler_seconds)
            before = read_tree(discover_browser_tree())
            extra_contexts = 3
            for _ in range(extra_contexts):
                own = await browser.new_context()
                page = await own.new_page()
                await page.set_content(PAGE_HTML)
                await _settle(page)
            await asyncio.sleep(0.5)
            after = read_tree(discover_browser_tree())
            version = browser.version
        finally:
            await browser.close()
    return {"sizes": sizes, "sampler": sampler, "browser_version": version,
            "pss_per_page_in_own_context_bytes": ((after.pss_bytes or 0) - (before.pss_bytes or 0)) / extra_contexts,
            "pss_anon_per_page_in_own_context_bytes":
                ((after.pss_anon_bytes or 0) - (before.pss_anon_bytes or 0)) / extra_contexts}


def per_page(sizes: dict[str, Any], key: str) -> dict[str, float]:
    """Bytes of ``key`` (pss_bytes, pss_anon_bytes) added per page between consecutive sizes."""
    counts = sorted(int(count) for count in sizes)
    steps = {}
    for low, high in itertools.pairwise(counts):
        added = (sizes[str(high)]["reading"][key] or 0) - (sizes[str(low)]["reading"][key] or 0)
        steps[f"{low}->{high}"] = added / (high - low)
    return steps


def format_table(result: dict[str, Any]) -> str:
    """The results as a text table (sizes in MiB, times in ms)."""
    columns: list[tuple[str, str, int, Callable[[str, dict[str, Any]], object]]] = [  # header, unit, width, cell
        ("pages", "", 5, lambda count, size: count),
        ("procs", "", 5, lambda count, size: size["processes"]),
        ("PSS read", "ms CPU", 9, lambda count, size: f"{size['detail_cpu_seconds'] * 1e3:.2f}"),
        ("per proc", "ms CPU", 9, lambda count, size: f"{size['detail_cpu_seconds_per_process'] * 1e3:.2f}"),
        ("RSS read", "ms CPU", 9, lambda count, size: f"{size['rss_cpu_seconds'] * 1e3:.3f}"),
        ("per proc", "ms CPU", 9, lambda count, size: f"{size['rss_cpu_seconds_per_process'] * 1e3:.3f}"),
        ("discover", "ms CPU", 9, lambda count, size: f"{size['discover_cpu_seconds'] * 1e3:.2f}"),
        ("CPU share", "", 9, lambda count, size: f"{size['schedule_cpu_share']:.2%}"),
        ("sum RSS", "MiB", 8, lambda count, size: f"{size['reading']['rss_bytes'] / MiB:.0f}"),
        ("sum PSS", "MiB", 8, lambda count, size: f"{size['reading']['pss_bytes'] / MiB:.0f}"),
        ("sum USS", "MiB", 8, lambda count, size: f"{size['reading']['uss_bytes'] / MiB:.0f}"),
        ("PSS anon", "MiB", 8, lambda count, size: f"{(size['reading']['pss_anon_bytes'] or 0) / MiB:.0f}"),
        ("RSS/PSS", "", 7, lambda count, size: f"{size['reading']['double_count_factor']:.2f}"),
        ("foreign", "", 7, lambda count, size: size["foreign_browser_processes"]),
    ]
    lines = [
        f"Chromium {result['browser_version']}; {result['machine']['cpu_count']} CPUs; medians; "
        f"schedule: PSS every {PSS_INTERVAL_SECONDS:g} s, RSS every {RSS_INTERVAL_SECONDS:g} s, "
        f"rediscovery every {RESCAN_INTERVAL_SECONDS:g} s",
        " ".join(f"{header:>{width}}" for header, _, width, _ in columns),
        " ".join(f"{unit:>{width}}" for _, unit, width, _ in columns),
    ]
    for count, size in result["sizes"].items():
        lines.append(" ".join(f"{cell(count, size)!s:>{width}}" for _, _, width, cell in columns))
    sampler = result["sampler"]
    lines.append(
        f"TreeSampler run at {max(int(c) for c in result['sizes'])} pages: {sampler['samples']} samples "
        f"({sampler['detail_samples']} PSS, {sampler['rescans']} rescans) in {sampler['seconds']:.1f} s, "
        f"CPU share {sampler['cpu_share']:.2%}"
    )
    per_gib = ", ".join(f"{size['detail_cpu_seconds_per_gib_rss'] * 1e3:.0f}" for size in result["sizes"].values())
    lines.append(f"PSS read CPU per GiB of summed RSS (the kernel walks every resident page): {per_gib} ms")
    for key, label in (("pss_per_page", "PSS"), ("pss_anon_per_page", "PSS anon")):
        steps = ", ".join(f"{step}: {added / MiB:.1f} MiB" for step, added in result[key].items())
        lines.append(f"{label} per page (one shared context): {steps}")
    lines.append(f"Per page in a context of its own: PSS {result['pss_per_page_in_own_context_bytes'] / MiB:.1f} MiB, "
                 f"PSS anon {result['pss_anon_per_page_in_own_context_bytes'] / MiB:.1f} MiB")
    lines.append("foreign = browser processes of other trees on the machine while measuring; they share the binary's "
                 "pages and lower this tree's PSS, so compare PSS only between runs with none")
    return "\n".join(lines)


def machine_info() -> dict[str, Any]:
    """CPU count, memory, kernel, Python and the versions of psutil and playwright."""
    def version(name: str) -> str | None:
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            return None

    return {
        "cpu_count": os.cpu_count(),
        "memory_gib": round(psutil.virtual_memory().total / 2**30, 1),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "psutil": version("psutil"),
        "playwright": version("playwright"),
        "load_average": [round(x, 2) for x in os.getloadavg()],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--pages", default="1,5,20", help="page counts to measure at (ascending)")
    parser.add_argument("--repeats", type=int, default=30, help="detail reads per size (RSS reads: 10x)")
    parser.add_argument("--sampler-seconds", type=float, default=5.0)
    default_chromium = "/usr/bin/chromium" if os.path.exists("/usr/bin/chromium") else shutil.which("chromium")
    parser.add_argument("--chromium", default=default_chromium)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    if not args.chromium:
        parser.error("no Chromium found: pass --chromium PATH")
    page_counts = sorted(int(count) for count in args.pages.split(","))
    result = asyncio.run(run(args.chromium, page_counts, args.repeats, args.sampler_seconds))
    result["pss_per_page"] = per_page(result["sizes"], "pss_bytes")
    result["pss_anon_per_page"] = per_page(result["sizes"], "pss_anon_bytes")
    result["machine"] = machine_info()
    result["schedule"] = {"pss_interval_seconds": PSS_INTERVAL_SECONDS, "rss_interval_seconds": RSS_INTERVAL_SECONDS,
                          "rescan_interval_seconds": RESCAN_INTERVAL_SECONDS}
    result["schema_version"] = 1
    print(format_table(result))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=2) + "\n")
    latest.save("browser_tree_cost", "latest", result)


if __name__ == "__main__":
    main()
