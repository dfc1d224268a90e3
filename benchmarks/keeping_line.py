"""Which line the leak verdict names first, over repeated real crawls of each holder shape (issue 27).

    python benchmarks/keeping_line.py [--runs 10] [--responses 1000] [--verify 2] [--shapes depth2 lxml ...]
                                      [--verify-shapes lxml depth2]
                                      [--json /tmp/keeping_line.json]

Every crawl runs in this one process against the fixture site, measured as the ``crawl`` fixture measures it
(``run_crawl``, default mode). Per shape (``keeping_spiders.SHAPES``) it reports: flagged k/n (``retained-objects``),
the named line is the keeping line k/flagged (the first line of the reason, the summary's ``where``, report.json's
first growth site and report.html's "where" row all read it), runs in which a request-creation line leads (0 wanted),
and the native share the reason states beside the measured one: ``--verify`` more crawls of the shape with tracemalloc
on for the whole crawl (``tracemalloc_frames=1``), where glibc's heap (mallinfo2, less tracemalloc's own tables) and
tracemalloc's total are both read at every drained checkpoint after the warm-up: measured native share = 1 - traced
growth / heap growth. The Pillow and numpy shapes run only when their package is importable (it says so otherwise).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import re
from pathlib import Path
from typing import Any

import latest
from bench_spiders import catalog_path
from harness import Crawl, machine_info, measured, progress, stop_reactor
from keeping_spiders import NATIVE, NEEDS, SHAPES, marked

from pytest_crawlmem.core.models import CrawlResult, heap_estimate
from pytest_crawlmem.core.sites import is_request_creation, named_line
from pytest_crawlmem.harness.site import start_site
from pytest_crawlmem.measure.runner import CrawlOptions

NATIVE_STATED = re.compile(r"(\d+)% of the growth is native")
REQUEST_LINE = re.compile(r"\.(follow|follow_all)\s*\(|\bRequest\s*\(")


def stated_share(result: CrawlResult) -> float | None:
    """The native share the verdict's reason states (0-1), ``None`` when it states none."""
    match = NATIVE_STATED.search(result.growth.reason)
    return int(match.group(1)) / 100 if match else None


def measured_share(result: CrawlResult) -> float | None:
    """1 - traced growth / heap growth between the first checkpoint after the warm-up and the last (whole-crawl tracing)."""
    checkpoints = [c for c in result.growth.checkpoints or () if c.traced_bytes is not None and c.heap_bytes is not None]
    total = result.responses
    after = [c for c in checkpoints if c.responses >= max(150, total // 4)]
    if len(after) < 2:
        return None
    first, last = after[0], after[-1]
    heap = (heap_estimate(last) or 0) - (heap_estimate(first) or 0)
    traced = (last.traced_bytes or 0) - (first.traced_bytes or 0)
    return None if heap <= 0 else max(0.0, min(1.0, 1 - traced / heap))


def _source(location: str) -> str:
    file, _, line = location.rpartition(":")
    path = Path(__file__).with_name(Path(file).name)
    try:
        return path.read_text().splitlines()[int(line) - 1]
    except (OSError, IndexError, ValueError):
        return ""


def one_run(shape: str, url: str, options: CrawlOptions) -> dict[str, Any]:
    """One crawl of ``shape``: its verdict, the line it names first, whether that is the keeping line."""
    spider, settings = SHAPES[shape]
    result = measured(Crawl(spider, {"start_urls": [url]}, settings), options, reports=False)
    first = named_line(result.top_growth, result.holders)
    lines = re.findall(r"[\w./-]+\.py:\d+", result.growth.reason)
    keeps = marked(shape, "KEEPS")
    top = result.top_growth[0] if result.top_growth else None
    return {
        "verdict": result.verdict, "flagged": result.verdict == "retained-objects", "named": first,
        "keeping": first.endswith(keeps) and bool(lines) and lines[0].endswith(keeps)
        and top is not None and top.location.endswith(keeps),
        "request_leads": bool(top) and (is_request_creation(top) or bool(REQUEST_LINE.search(_source(first)))),
        "stated_native": stated_share(result), "measured_native": measured_share(result),
        "per_response_bytes": result.growth.per_response_bytes, "responses": result.responses,
        "holder": result.holders[0].path if result.holders else "", "seconds": result.duration_seconds,
        "reason": result.growth.reason, "sites": [s.location for s in result.top_growth[:3]],
    }


def summarize(runs: dict[str, list[dict[str, Any]]], verify: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """Per shape: flagged k/n, keeping line k/flagged, request-creation leads, stated and measured native shares."""
    table = {}
    for shape, rows in runs.items():
        flagged = [r for r in rows if r["flagged"]]
        stated = [r["stated_native"] for r in flagged if r["stated_native"] is not None]
        truth = [r["measured_native"] for r in verify.get(shape, []) if r["measured_native"] is not None]
        table[shape] = {
            "runs": len(rows), "flagged": len(flagged), "keeping": sum(r["keeping"] for r in flagged),
            "request_leads": sum(r["request_leads"] for r in flagged),
            "stated_native_runs": len(stated),
            "stated_native_median": sorted(stated)[len(stated) // 2] if stated else None,
            "measured_native_median": sorted(truth)[len(truth) // 2] if truth else None,
        }
    return table


def format_markdown(table: dict[str, Any], missing: list[str]) -> str:
    """The table of docs/verdicts.md."""
    lines = ["| shape | flagged | named line is the keeping line | request-creation line leads | native share stated"
             " (runs saying so; median) | native share measured (heap - traced, whole-crawl tracing) |",
             "|---|---|---|---|---|---|"]
    for shape, row in table.items():
        stated = (f"{row['stated_native_runs']}/{row['flagged']}; {row['stated_native_median']:.0%}"
                  if row["stated_native_median"] is not None else f"0/{row['flagged']}")
        truth = "-" if row["measured_native_median"] is None else f"{row['measured_native_median']:.0%}"
        lines.append(f"| {shape} | {row['flagged']}/{row['runs']} | {row['keeping']}/{row['flagged']} |"
                     f" {row['request_leads']} | {stated} | {truth} |")
    if missing:
        lines.append(f"\nNot importable here, so not run: {', '.join(missing)} (the `test` extra installs them).")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--responses", type=int, default=1000)
    parser.add_argument("--verify", type=int, default=2, help="whole-crawl traced runs a shape, for the measured share")
    parser.add_argument("--shapes", nargs="*", default=list(SHAPES))
    parser.add_argument("--verify-shapes", nargs="*", default=None, help="shapes given --verify runs (default: all)")
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--part", default='shapes', help="the part of benchmarks/results/keeping_line.json this run replaces")
    args = parser.parse_args()
    missing = [s for s in args.shapes if s in NEEDS and importlib.util.find_spec(NEEDS[s]) is None]
    shapes = [s for s in args.shapes if s not in missing]
    runs: dict[str, list[dict[str, Any]]] = {}
    verify: dict[str, list[dict[str, Any]]] = {}
    with start_site() as site:
        url = site.url(catalog_path(args.responses, per_page=20))
        for shape in shapes:
            runs[shape] = []
            for i in range(args.runs):
                runs[shape].append(one_run(shape, url, CrawlOptions()))
                if args.json:  # after every run: a cut-off benchmark keeps what it measured
                    args.json.write_text(json.dumps({"machine": machine_info(), "runs": runs, "verify": verify,
                                                     "table": summarize(runs, verify)}, indent=1, default=str))
                progress(f"    {shape} run {i + 1}: {runs[shape][-1]['verdict']}, named {runs[shape][-1]['named']},"
                         f" native {runs[shape][-1]['stated_native']}, {runs[shape][-1]['seconds']:.0f} s")
            checked = args.verify if args.verify_shapes is None or shape in args.verify_shapes else 0
            verify[shape] = [one_run(shape, url, CrawlOptions(tracemalloc_frames=1)) for _ in range(checked)]
            row = summarize({shape: runs[shape]}, verify)[shape]
            progress(f"  {shape:16} flagged {row['flagged']}/{row['runs']}, keeping line {row['keeping']}/{row['flagged']},"
                     f" request line leads {row['request_leads']}, native stated {row['stated_native_median']}"
                     f" measured {row['measured_native_median']}" + (" (native shape)" if shape in NATIVE else ""))
            if args.json:
                args.json.write_text(json.dumps({"machine": machine_info(), "runs": runs, "verify": verify,
                                                 "table": summarize(runs, verify)}, indent=1, default=str))
    stop_reactor()
    table = summarize(runs, verify)
    print(format_markdown(table, missing))
    latest.save("keeping_line", args.part, {"machine": machine_info(), "runs": runs, "verify": verify, "table": table})


if __name__ == "__main__":
    main()
