"""The plugin's own share of the crawl thread's busy time, read within one run: immune to the machine's speed.

    pip install py-spy
    python benchmarks/overhead_profile.py [--crawls 3] [--pages 50] [--mode default] [--json out.json]

``overhead.py`` compares whole crawls, and on a shared 2-core machine one core's speed moves by +-20% from one second
to the next, so a single round's ratio spans 0.7-1.4x and a median of 30 rounds still moves by a few percent. Here one
process runs ``--crawls`` crawls in ``--mode`` under py-spy (a sampling profiler in another process: the crawl runs
unchanged), and every sample of the reactor thread is put in one of three heaps: idle (waiting in ``select``), the
plugin's own code (the innermost frame of this package, with no Scrapy, Twisted or spider frame under it: the
extension's hooks, the checkpoints' collection and reads, the parse amplification's reads and wrapper), or the crawl.
A slow second slows the plugin and the crawl alike, so the share does not move with it.

Not counted (a floor, not the whole cost): Scrapy's own dispatch of a signal to the plugin's receivers and the async
generator layer its spider middleware adds (their frames are Scrapy's), and the main thread's work after the crawl
(the result and the reports, about 0.05 s a crawl).
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

import latest

PACKAGE = "pytest_crawlmem"
#: Frames under the plugin's innermost frame that make the sample the crawl's (a callback the plugin wraps).
CRAWL_CODE = ("scrapy/", "twisted/", "bench_spiders", "parsel/", "lxml", "w3lib/")
REACTOR = "AsyncioSelectorReactor.run"


def classify(stack: list[str]) -> tuple[str, str]:
    """``("idle" | "plugin" | "crawl" | "other", the plugin's outermost frame)`` of one py-spy stack (outermost first)."""
    if not stack or REACTOR not in stack[0]:
        return "other", ""
    if "select" in stack[-1]:
        return "idle", ""
    mine = [i for i, frame in enumerate(stack) if PACKAGE in frame]
    if not mine or any(code in frame for frame in stack[mine[-1] + 1:] for code in CRAWL_CODE):
        return "crawl", ""
    return "plugin", re.sub(r":\d+\)$", ")", re.sub(r"\(.*?" + PACKAGE + "/", "(", stack[mine[0]]))


def shares(raw: str) -> dict[str, Any]:
    """The heaps of a py-spy ``--format raw`` file's reactor-thread samples, and the plugin's share of the busy ones."""
    heaps: Counter[str] = Counter()
    sites: Counter[str] = Counter()
    for line in raw.splitlines():
        stack, _, count = line.rstrip().rpartition(" ")
        if not stack or not count.isdigit():
            continue
        heap, site = classify(stack.split(";"))
        heaps[heap] += int(count)
        if site:
            sites[site] += int(count)
    busy = heaps["plugin"] + heaps["crawl"]
    return {"samples": dict(heaps), "busy": busy, "plugin_share": round(heaps["plugin"] / busy, 4) if busy else None,
            "idle_share": round(heaps["idle"] / (busy + heaps["idle"]), 4) if busy else None,
            "plugin_sites": {site: round(n / busy, 4) for site, n in sites.most_common(12)} if busy else {}}


def crawls(mode: str, count: int, pages: int) -> None:
    """The profiled child: a warm-up crawl, then ``count`` catalog crawls in ``mode`` (harness.run_mode)."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from bench_spiders import Catalog
    from harness import Crawl, run_mode, stop_reactor

    from pytest_crawlmem.harness.site import start_site

    with start_site() as site, tempfile.TemporaryDirectory(prefix="crawlmem-profile-") as tmp:
        run_mode(mode, Crawl(Catalog, {"start_urls": [site.url("/catalog/?pages=5&per_page=40")]}, {}), Path(tmp))
        for _ in range(count):
            run_mode(mode, Crawl(Catalog, {"start_urls": [site.url(f"/catalog/?pages={pages}&per_page=40")]}, {}), Path(tmp))
    stop_reactor()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--crawls", type=int, default=3)
    parser.add_argument("--pages", type=int, default=50, help="listing pages of 40 products each")
    parser.add_argument("--mode", default="default", help="a mode of harness.MODES")
    parser.add_argument("--rate", type=int, default=250, help="py-spy samples a second")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)  # the crawls py-spy profiles
    args = parser.parse_args()
    if args.child:
        crawls(args.mode, args.crawls, args.pages)
        return
    with tempfile.TemporaryDirectory(prefix="crawlmem-profile-") as tmp:
        raw = Path(tmp) / "profile.raw"
        subprocess.run(["py-spy", "record", "--idle", "-r", str(args.rate), "-f", "raw", "-o", str(raw), "--",
                        sys.executable, __file__, "--child", "--mode", args.mode, "--crawls", str(args.crawls),
                        "--pages", str(args.pages)], check=True, capture_output=True)
        result = {"mode": args.mode, "crawls": args.crawls, "responses": args.pages * 41, **shares(raw.read_text())}
    print(f"{args.mode}: the plugin's own code took {result['plugin_share']:.1%} of the reactor thread's busy samples"
          f" ({result['busy']:,}); idle {result['idle_share']:.1%}")
    for site, share in result["plugin_sites"].items():
        print(f"  {share:6.2%}  {site}")
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n")
    latest.save("overhead_profile", "default", result)


if __name__ == "__main__":
    main()
