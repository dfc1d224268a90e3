"""Do browser crawls that never close their pages end by their timeout? k of n runs, per concurrency.

    python benchmarks/browser_hang.py [--runs 10] [--timeout 25] [--concurrency 4 8 32] [--isolate] [--stall S]
                                      [--json out.json]

Each run is a fresh ``pytest`` process crawling scrapy-playwright's published example's shape
(``examples/playwright_books.py``: a context per listing page, a screenshot per book, 4 page slots a
context) with the ``await page.close()`` forgotten, under ``crawl_memory(timeout=...)``. A run counts
when the crawl ended within ``timeout + 10`` s (a run still going at ``timeout + 60`` s is killed: a hang).
``--isolate`` runs the crawl in its own process (``isolate=True``): the crawl's seconds are then the parent's
``crawl()`` call, child start and kill included. ``--stall 3600`` turns the stall check off in effect: the timeout's
stop and its escalation alone end the crawl. Each run also records the whole pytest process's seconds.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import latest

ROOT = Path(__file__).resolve().parents[1]
TEST = """
import time
import pytest
from playwright_books import ForgetfulBooksSpider, books_settings

@pytest.mark.crawl_memory(timeout={timeout})
def test_it(crawl, fixture_site):
    started = time.monotonic()
    try:
        crawl(ForgetfulBooksSpider, settings=books_settings({concurrency}{stall}), base_url=fixture_site.base_url,
              pages=3{isolate})
    finally:
        print("CRAWL_SECONDS", round(time.monotonic() - started, 1))
"""


def one_run(concurrency: int, timeout: float, isolate: bool = False, stall: float | None = None) -> tuple[float | None, str]:
    """One crawl in a fresh pytest: its seconds (``None`` when it hung) and the stop's cause."""
    with tempfile.TemporaryDirectory(prefix="crawlmem-hang-") as tmp:
        directory = Path(tmp)
        (directory / "playwright_books.py").write_text((ROOT / "examples" / "playwright_books.py").read_text())
        (directory / "test_hang.py").write_text(TEST.format(
            timeout=timeout, concurrency=concurrency, isolate=", isolate=True" if isolate else "",
            stall="" if stall is None else f", CRAWLMEM_STALL_SECONDS={stall}"))
        try:
            done = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-s", "-q", "test_hang.py"],
                                  cwd=directory, capture_output=True, text=True, timeout=timeout + 60)
        except subprocess.TimeoutExpired:
            return None, "hung"
        found = re.search(r"CRAWL_SECONDS (\d+(?:\.\d+)?)", done.stdout)
        cause = re.search(r"crawl_memory budget broken: (.{0,120})", done.stdout)
        return (float(found.group(1)) if found else None), (cause.group(1) if cause else done.stdout[-200:])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--timeout", type=float, default=25.0)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[4, 8, 32])
    parser.add_argument("--isolate", action="store_true", help="each crawl in its own process (isolate=True)")
    parser.add_argument("--stall", type=float, help="CRAWLMEM_STALL_SECONDS (3600: the timeout alone ends the crawl)")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--part", default='default', help="the part of benchmarks/results/browser_hang.json this run replaces")
    args = parser.parse_args()
    table = {}
    for concurrency in args.concurrency:
        seconds, causes, process_seconds = [], [], []
        for _ in range(args.runs):
            started = time.monotonic()
            crawl_seconds, cause = one_run(concurrency, args.timeout, args.isolate, args.stall)
            seconds.append(crawl_seconds)
            causes.append(cause)
            process_seconds.append(round(time.monotonic() - started, 1))
            print(f"concurrency {concurrency}: crawl {crawl_seconds} s (run {time.monotonic() - started:.1f} s): {cause}",
                  flush=True)
        ended = sum(1 for s in seconds if s is not None and s <= args.timeout + 10)
        table[concurrency] = {"ended_in_time": ended, "runs": args.runs, "crawl_seconds": seconds,
                              "pytest_seconds": process_seconds, "causes": causes}
        print(f"concurrency {concurrency}: {ended}/{args.runs} ended within timeout + 10 s "
              f"(max {max((s for s in seconds if s is not None), default=None)} s)", flush=True)
        document = {"timeout_seconds": args.timeout, "isolate": args.isolate, "stall": args.stall, "by_concurrency": table}
        if args.json:  # after each concurrency: a series cut short keeps what it measured
            args.json.write_text(json.dumps(document, indent=2))
        latest.save("browser_hang", args.part, document)


if __name__ == "__main__":
    main()
