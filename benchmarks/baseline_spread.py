"""Run-to-run spread of the figures a baseline keeps, and what the default tolerances catch.

    python benchmarks/baseline_spread.py [--saves 10] [--clean 10] [--leaky 3] [--pages 50]
    python benchmarks/baseline_spread.py --examples [--saves 5]

Runs a catalog crawl test through pytest in a subprocess ``--saves`` times with
``--crawlmem-save spread``, prints the median, min, max and relative spread of each figure,
then compares ``--clean`` unchanged runs and ``--leaky`` runs of a spider that keeps 2 KiB
more per response against that baseline with the default tolerances. ``--examples`` saves the
example suite (three crawls in one pytest process) instead and prints the spread per test.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import latest

from pytest_crawlmem.core.units import format_size
from pytest_crawlmem.harness.baseline import DEFAULT_TOLERANCES, FIGURES

SPIDERS = '''
import os

import scrapy

RETAIN = int(os.environ.get("SPREAD_RETAIN_BYTES", "0"))


class Catalog(scrapy.Spider):
    name = "catalog"
    kept = []

    async def start(self):
        for url in self.start_urls:
            yield scrapy.Request(url)

    def keep(self, response):
        if RETAIN:
            self.kept.append(b"x" * RETAIN + response.url.encode())

    def parse(self, response):
        self.keep(response)
        yield from response.follow_all(css="a.product", callback=self.parse_product)
        yield from response.follow_all(css="a.next")

    def parse_product(self, response):
        self.keep(response)
        yield {"name": response.css("h1.name::text").get(), "price": response.css("span.price::text").get()}
'''

TEST = '''
from spiders import Catalog


def test_catalog(crawl, fixture_site):
    crawl(Catalog, start_urls=[fixture_site.url("/catalog/?pages={pages}&per_page=20")],
          settings={{"CONCURRENT_REQUESTS": 16}})
'''


def run_pytest(workdir: Path, *args: str, retain: int = 0, cwd: Path | None = None) -> tuple[int, str]:
    """Run the suite once in a fresh interpreter; return its exit code and output."""
    env = {**__import__("os").environ, "SPREAD_RETAIN_BYTES": str(retain)}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-rA", "-W", "ignore::DeprecationWarning",
         "--crawlmem-report-dir", str(workdir / ".crawlmem"), *args],
        cwd=cwd or workdir, env=env, capture_output=True, text=True, timeout=600,
    )
    return done.returncode, done.stdout + done.stderr


def spread_table(runs: list[dict[str, object]]) -> list[str]:
    """Markdown rows: figure, median, min, max, (max - min) / median."""
    rows = ["| figure | median | min | max | spread (max-min)/median |", "|---|---|---|---|---|"]
    for figure, kind in FIGURES.items():
        values = [float(v) for r in runs if isinstance(v := r.get(figure), (int, float))]
        if not values:
            continue
        median = statistics.median(values)
        fmt = format_size if kind == "size" else (lambda v: f"{v:.2f} s") if kind == "seconds" else (lambda v: f"{v:,.0f}")
        spread = f"{(max(values) - min(values)) / abs(median) * 100:.1f}%" if median else "-"
        rows.append(f"| {figure} | {fmt(median)} | {fmt(min(values))} | {fmt(max(values))} | {spread} |")
    return rows


def main() -> None:
    """Save, measure the spread, then check the default tolerances on clean and leaky runs."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--saves", type=int, default=10)
    parser.add_argument("--clean", type=int, default=10)
    parser.add_argument("--leaky", type=int, default=3)
    parser.add_argument("--pages", type=int, default=50)
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--examples", action="store_true", help="save the example suite instead")
    args = parser.parse_args()
    if args.examples:
        examples(args.saves)
        return
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="crawlmem-spread-") as tmp:
        workdir = Path(tmp)
        (workdir / "spiders.py").write_text(SPIDERS)
        (workdir / "test_spread.py").write_text(TEST.format(pages=args.pages))
        for i in range(args.saves):
            code, out = run_pytest(workdir, "--crawlmem-save", "spread")
            print(f"save {i + 1}/{args.saves}: exit {code}", flush=True)
            if code != 0:
                sys.exit(out)
        path = next((workdir / ".crawlmem" / "baselines").glob("*/spread.json"))
        runs = json.loads(path.read_text())["tests"]["test_spread.py::test_catalog"]
        table = spread_table(runs)
        print("\n".join(table), flush=True)
        clean_failures = []
        for i in range(args.clean):
            code, out = run_pytest(workdir, "--crawlmem-compare", "spread")
            print(f"unchanged {i + 1}/{args.clean}: exit {code}", flush=True)
            if code != 0:
                clean_failures.append([line for line in out.splitlines() if "regressed" in line])
        leaky_caught = []
        for i in range(args.leaky):
            code, out = run_pytest(workdir, "--crawlmem-compare", "spread", retain=2048)
            lines = [line for line in out.splitlines() if "regressed" in line]
            print(f"2 KiB/response retained {i + 1}/{args.leaky}: exit {code}", *lines, sep="\n  ", flush=True)
            leaky_caught.append(code != 0)
    summary = {
        "tolerances": DEFAULT_TOLERANCES,
        "saves": args.saves,
        "responses_per_crawl": 21 * args.pages,
        "table": table,
        "unchanged_failed": len(clean_failures),
        "unchanged_runs": args.clean,
        "unchanged_failures": clean_failures,
        "leaky_caught": sum(leaky_caught),
        "leaky_runs": args.leaky,
        "minutes": round((time.monotonic() - started) / 60, 1),
    }
    print(f"default tolerances {DEFAULT_TOLERANCES}: unchanged runs failed {len(clean_failures)}/{args.clean},"
          f" 2 KiB/response leaks caught {sum(leaky_caught)}/{args.leaky} ({summary['minutes']} min)")
    if args.json:
        args.json.write_text(json.dumps(summary, indent=2))
    latest.save("baseline_spread", "latest", summary)


def examples(saves: int) -> None:
    """Save the example suite ``saves`` times and print the spread per test."""
    root = Path(__file__).resolve().parent.parent
    with tempfile.TemporaryDirectory(prefix="crawlmem-spread-") as tmp:
        workdir = Path(tmp)
        for i in range(saves):
            code, out = run_pytest(workdir, "examples", "--crawlmem-save", "examples", cwd=root)
            print(f"save {i + 1}/{saves}: exit {code}", flush=True)
            if code != 0:
                sys.exit(out)
        path = next((workdir / ".crawlmem" / "baselines").glob("*/examples.json"))
        for test_id, runs in json.loads(path.read_text())["tests"].items():
            print(f"\n{test_id}", *spread_table(runs), sep="\n")


if __name__ == "__main__":
    main()
