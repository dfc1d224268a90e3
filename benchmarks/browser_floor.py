"""The browser tree's floor: PSS of headless Chromium (and Playwright's driver) with 1, 4 and 8 pages open.

    nice -n 10 python benchmarks/browser_floor.py [--pages 1,4,8] [--repeats 3] [--json out.json]

Launches the installed Chromium through Playwright with the options a crawl gets
(``pytest_crawlmem.browser.settings.launch_options``: headless, ``--disable-gpu``, ``--disable-dev-shm-usage``), in
one context as scrapy-playwright's default, opens N pages of the fixture site (``/js/<id>?mode=render``: 20
products rendered by script, the browser workload's page without its IndexedDB store), waits for each to render,
lets the tree settle for 2 s and reads every process's ``smaps_rollup``. The same with ``--renderer-process-limit=1``
(asking for one renderer process for every page; a launch option the user would set). Each size is read
``--repeats`` times with a fresh browser. It also prices the governor's readings of the tree as they are
(``TreeSampler``: RSS-only sample, rediscovery, PSS reading), per call. ``--estimate ROUNDS`` measures the PSS
estimate's error instead (see ``estimate_error``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import latest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from pytest_crawlmem.browser.settings import launch_options
from pytest_crawlmem.browser.tree import TreeSampler
from pytest_crawlmem.harness.site import start_site

MiB = 2**20


async def one(base: str, pages: int, extra_args: list[str], contexts: bool) -> dict[str, Any]:
    """Open ``pages`` rendered pages and read the tree's PSS by kind."""
    from playwright.async_api import async_playwright

    options = launch_options({"args": extra_args} if extra_args else None)
    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(**options)
        context = await browser.new_context()
        opened = []
        for index in range(pages):
            owner = await browser.new_context() if contexts else context
            page = await owner.new_page()
            await page.goto(f"{base}/js/{index}?mode=render")
            await page.wait_for_selector("body[data-rendered]")
            opened.append(page)
        await asyncio.sleep(2.0)
        sampler = TreeSampler(None, detail_seconds=0.0)
        reading = sampler.sample(detail=True)
        costs = price(sampler)
        await browser.close()
    kinds = reading.by_kind()
    return {"pages": pages, "args": extra_args, "context_per_page": contexts, "pss_bytes": reading.pss_bytes,
            "pss_without_driver_bytes": (reading.pss_bytes or 0) - kinds.get("driver", 0),
            "rss_bytes": reading.rss_bytes, "processes": len(reading.processes),
            "by_kind_bytes": kinds, "count_by_kind": reading.count_by_kind(), "costs": costs}


async def estimate_error(base: str, rounds: int, window: int, kb: int) -> list[dict[str, Any]]:
    """The governor's PSS estimate against PSS read at the same moment, on the browser workload's shape.

    One context; PSS is read once with one page open (the estimate's base), then ``rounds`` times ``window`` pages
    that each keep ``kb`` KiB in IndexedDB are opened together and closed: with the pages open and after they closed,
    the tree's RSS is read and estimated as PSS (the estimate before: all RSS growth whole; now: shared growth at the
    process's share of it), and its PSS is read for the truth, without re-basing the estimate.
    """
    from playwright.async_api import async_playwright

    from pytest_crawlmem.browser.tree import read_tree

    rows: list[dict[str, Any]] = []
    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(**launch_options())
        context = await browser.new_context()
        first = await context.new_page()
        await first.goto(f"{base}/js/0?mode=render")
        await first.wait_for_selector("body[data-rendered]")
        sampler = TreeSampler(None, detail_seconds=1e9)
        sampler.sample(detail=True)

        def compare(step: str, served: int) -> None:
            reading = sampler.sample(detail=False, read_new=False)
            truth = read_tree(list(sampler.kinds), detail=True, kinds=sampler.kinds).pss_bytes or 1
            old = sampler.estimate_pss_bytes(reading, split_shared=False)
            new = sampler.estimate_pss_bytes(reading)
            rows.append({"step": step, "pages": served, "pss_bytes": truth, "old_bytes": old, "new_bytes": new,
                         "rss_bytes": reading.rss_bytes, "old_ratio": round(old / truth, 3),
                         "new_ratio": round(new / truth, 3)})
            print(json.dumps({k: rows[-1][k] for k in ("step", "pages", "old_ratio", "new_ratio")}
                             | {"pss_mib": round(truth / MiB)}), flush=True)

        served = 0
        for _ in range(rounds):
            pages = [await context.new_page() for _ in range(window)]
            for page in pages:
                served += 1
                await page.goto(f"{base}/js/{served}?mode=store&kb={kb}")
            for page in pages:
                await page.wait_for_selector("body[data-rendered]")
            compare("open", served)
            for page in pages:
                await page.close()
            await asyncio.sleep(1.0)
            compare("closed", served)
        await browser.close()
    return rows


def price(sampler: TreeSampler, repeats: int = 20) -> dict[str, float]:
    """CPU seconds (median, thread time) of an RSS-only sample, a rediscovery and a PSS reading of this tree."""
    def timed(call: Any) -> float:
        cpus = []
        for _ in range(repeats):
            started = time.thread_time()
            call()
            cpus.append(time.thread_time() - started)
        return statistics.median(cpus)

    return {"rss_sample": timed(lambda: sampler.sample(detail=False, read_new=False)),
            "rescan": timed(sampler.rescan), "pss_sample": timed(lambda: sampler.sample(detail=True))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", default="1,4,8")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--estimate", type=int, default=0, metavar="ROUNDS",
                        help="measure the PSS estimate's error over ROUNDS rounds of 4 stored pages instead")
    args = parser.parse_args()
    site = start_site()
    if args.estimate:
        try:
            estimates = asyncio.run(estimate_error(site.base_url, args.estimate, 4, 4096))
        finally:
            site.close()
        if args.json:
            args.json.write_text(json.dumps({"estimates": estimates}, indent=1))
        latest.save("browser_estimate", "latest", {"estimates": estimates})
        return
    rows = []
    try:
        variants = [([], False), (["--renderer-process-limit=1"], False)]
        for extra, contexts in variants:
            for pages in (int(n) for n in args.pages.split(",")):
                for _ in range(args.repeats):
                    started = time.monotonic()
                    row = asyncio.run(one(site.base_url, pages, extra, contexts))
                    row["seconds"] = round(time.monotonic() - started, 1)
                    rows.append(row)
                    if args.json:
                        args.json.write_text(json.dumps({"runs": rows}, indent=1))
                    latest.save("browser_floor", "latest", {"runs": rows})
                    print(json.dumps({key: row[key] for key in ("pages", "args", "context_per_page", "processes", "seconds")}
                                     | {"pss_mib": round((row["pss_bytes"] or 0) / MiB, 1),
                                        "without_driver_mib": round(row["pss_without_driver_bytes"] / MiB, 1),
                                        "by_kind_mib": {k: round(v / MiB, 1) for k, v in row["by_kind_bytes"].items()},
                                        "costs_ms": {k: round(1000 * v, 3) for k, v in row["costs"].items()}}),
                          flush=True)
    finally:
        site.close()


if __name__ == "__main__":
    main()
