"""All benchmarks of pytest-crawlmem in one run: its cost and its detection power, side by side.

    python benchmarks/run.py [--json /tmp/run.json]                        # the full run, 25-45 minutes on 2 cores
    python benchmarks/run.py --quick                                       # smoke run, 3-4 minutes
    python benchmarks/run.py --parts overhead fixed --pairs 9              # some parts only
    python benchmarks/run.py --render /tmp/run.json                        # the Markdown table of a saved run

Parts (each figure a ratio or a rate within this one run, so machine noise cancels):

- ``overhead``: a 2,050-response catalog crawl bare (Scrapy's CrawlerRunner) and through the
  plugin in each mode, interleaved; median ratios of wall and CPU time (``overhead.py``).
- ``detection``: leaks of 0.5-10 KiB per response in crawls of 500-2,000 responses, and clean
  scenarios: the share of runs flagged ``retained-objects`` (``detection.py``).
- ``site``: the fixture site's throughput against a concurrent client (``site_throughput.py``)
  and its share of the CPU during a crawl.
- ``fixed``: the fixed cost of one crawl test with the site already running, setup to result,
  for a 10-response crawl: bare, in-process, isolated.

Prints a table per part and, at the end, the summary as a Markdown table (the README's).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import datetime
import json
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

import detection
import latest
import overhead
import site_throughput
from bench_spiders import Catalog, catalog_path
from harness import (
    MODES,
    Crawl,
    bare,
    load_average,
    machine_info,
    measured,
    median,
    progress,
    rounds,
    run_mode,
    stop_reactor,
    timed,
)

from pytest_crawlmem.harness.site import RunningSite, start_site
from pytest_crawlmem.measure.runner import CrawlOptions

PARTS = ("overhead", "detection", "site", "fixed")
FULL: dict[str, Any] = {"pairs": 7, "pages": 50, "runs": 10, "clean_runs": 20, "sizes": detection.SIZES, "leaks": detection.LEAKS,
        "extra": detection.EXTRA, "requests": 20_000, "share_crawls": 3, "fixed_rounds": 10}
QUICK: dict[str, Any] = {"pairs": 2, "pages": 25, "runs": 1, "clean_runs": 1, "sizes": [1000], "leaks": [2048],
         "extra": [], "requests": 2_000, "share_crawls": 1, "fixed_rounds": 2}


def git_state() -> dict[str, Any] | None:
    """The commit measured and the files of the package, the site and the benchmarks that differ from it."""
    root = Path(__file__).resolve().parent.parent

    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, timeout=30).stdout

    try:
        head = git("rev-parse", "HEAD").strip()
        changed = git("status", "--porcelain", "--", "pytest_crawlmem", "fixture_sites", "benchmarks").splitlines()
    except (OSError, subprocess.SubprocessError):
        return None
    return {"commit": head or None, "uncommitted": [line[3:] for line in changed]}


def site_part(site: RunningSite, *, requests: int, crawls: int, pages: int) -> dict[str, Any]:
    """The site's throughput (a client in a thread of its own, with its own event loop) and its CPU share in crawls."""
    with concurrent.futures.ThreadPoolExecutor(1) as pool:  # asyncio.run cannot run beside the reactor's loop
        rows = pool.submit(site_throughput.measure_all, site, requests, 10.0).result()
    print(site_throughput.format_table(rows))
    crawl = Crawl(Catalog, {"start_urls": [site.url(f"/catalog/?pages={pages}&per_page=40")]}, {})
    bare(crawl)  # warm-up
    shares = []
    for i in range(crawls):
        with timed(site.pid) as t:
            bare(crawl)
        responses = pages * 41
        shares.append({"wall": round(t.wall, 3), "crawler_cpu": round(t.cpu, 3), "site_cpu": round(t.site_cpu, 3),
                       "responses": responses, "responses_per_second": round(responses / t.wall, 1),
                       "site_cpu_share": round(t.site_cpu / (t.site_cpu + t.cpu), 4)})
        progress(f"  crawl {i + 1}/{crawls}: {responses / t.wall:,.0f} responses/s, crawler CPU {t.cpu:.2f} s,"
                 f" site CPU {t.site_cpu:.3f} s ({shares[-1]['site_cpu_share']:.1%})")
    keep_alive = [r for r in rows if r.keep_alive and r.concurrency > 1]
    crawl_rate = median([s["responses_per_second"] for s in shares])
    site_cpu_ms = median([s["site_cpu"] * 1e6 / s["responses"] for s in shares])
    return {
        "throughput": [asdict(r) for r in rows],
        "keep_alive_requests_per_second": [min(r.requests_per_second for r in keep_alive),
                                           max(r.requests_per_second for r in keep_alive)],
        "refused": sum(r.refused for r in rows),
        "errors": sum(r.errors for r in rows),
        "crawls": shares,
        "crawl_responses_per_second": crawl_rate,
        "site_cpu_share": median([s["site_cpu_share"] for s in shares]),
        "site_cpu_ms_per_1000_in_crawl": round(site_cpu_ms, 1),
        "site_capacity_over_crawl_rate": round(1e6 / site_cpu_ms / crawl_rate, 1) if site_cpu_ms and crawl_rate else None,
    }


def fixed_part(site: RunningSite, *, rounds_: int) -> dict[str, Any]:
    """Setup to result of a 10-response crawl: bare, in-process through the plugin (reports included), isolated."""
    crawl = Crawl(Catalog, {"start_urls": [site.url(catalog_path(10, per_page=9))]}, {})
    modes = ["bare", "no-reports", "default", "isolated"]
    runs: dict[str, list[dict[str, float]]] = {m: [] for m in modes}

    def run(mode: str, tmp: Path) -> None:
        if mode == "no-reports":  # run_crawl alone: what the reports cost is the difference to "default"
            measured(crawl, CrawlOptions(), reports=False)
        else:
            run_mode(mode, crawl, tmp)

    with tempfile.TemporaryDirectory(prefix="crawlmem-bench-") as tmp:
        for mode in modes:  # warm-up
            run(mode, Path(tmp))
        for i, mode in rounds(modes, rounds_):
            with timed() as t:
                run(mode, Path(tmp))
            runs[mode].append({"round": i, "wall": round(t.wall, 4), "cpu": round(t.cpu, 4)})
    rows = {}
    for mode in modes:
        bare_by_round = {r["round"]: r for r in runs["bare"]}
        rows[mode] = {
            "runs": len(runs[mode]),
            "wall_seconds": round(median([r["wall"] for r in runs[mode]]), 3),
            "cpu_seconds": round(median([r["cpu"] for r in runs[mode]]), 3),
            "wall_seconds_range": [min(r["wall"] for r in runs[mode]), max(r["wall"] for r in runs[mode])],
            "extra_wall_seconds": round(median([r["wall"] - bare_by_round[r["round"]]["wall"] for r in runs[mode]]), 3),
        }
        progress(f"  {mode:9} wall {rows[mode]['wall_seconds']:.3f} s  cpu {rows[mode]['cpu_seconds']:.3f} s"
                 f"  (+{rows[mode]['extra_wall_seconds']:.3f} s over bare)")
    return {"responses": 10, "rounds": rounds_, "rows": rows, "runs": runs}


def targets_of(parts: dict[str, Any]) -> list[dict[str, Any]]:
    """Every target of the issue with the measured figure and whether it was met."""
    out = []
    for unit, row in parts.get("overhead", {}).get("rows", {}).items():
        if "target_ratio" in row:
            out.append({"target": f"{unit.split('/')[1]} mode overhead <= {row['target_ratio']}x (wall and CPU)",
                        "measured": f"{row['wall_ratio']:.3f}x wall, {row['cpu_ratio']:.3f}x CPU", "met": row["target_met"]})
        frozen = row.get("vs_frozen") or {}
        if "target_ratio" in frozen:
            out.append({"target": f"{unit.split('/')[1]} mode overhead <= {frozen['target_ratio']:.2f}x of bare-frozen"
                        " (wall and CPU, median of the rounds)",
                        "measured": f"{_frozen_cell(frozen)}", "met": frozen["target_met"]})
    for name, target in parts.get("detection", {}).get("targets", {}).items():
        if name == "false_positives":
            out.append({"target": "0 false positives on clean scenarios",
                        "measured": f"{target['measured']} in {target['of']} runs", "met": target["met"]})
        elif target["measured"] is not None:
            out.append({"target": f"2 KiB/response flagged in >= {target['target']:.0%} of 1,000-response runs",
                        "measured": f"{target['measured']:.0%}", "met": target["met"]})
    return out


def _frozen_cell(frozen: dict[str, Any]) -> str:
    """``1.061x wall (1.02-1.09, 95%), ...``: the medians against bare-frozen with their intervals."""
    cells = []
    for key in ("wall", "cpu"):
        interval = frozen.get(f"{key}_ratio_interval")
        within = f" ({interval[0]:.2f}-{interval[1]:.2f}, {overhead.CONFIDENCE:.0%})" if interval else ""
        cells.append(f"{frozen[f'{key}_ratio']:.3f}x {'CPU' if key == 'cpu' else key}{within}")
    return ", ".join(cells)


def _ratio_cell(row: dict[str, Any]) -> str:
    return (f"{row['wall_ratio']:.3f}x wall ({row['wall_ratio_range'][0]:.2f}-{row['wall_ratio_range'][1]:.2f}),"
            f" {row['cpu_ratio']:.3f}x CPU ({row['cpu_ratio_range'][0]:.2f}-{row['cpu_ratio_range'][1]:.2f})")


def markdown(report: dict[str, Any]) -> str:
    """The summary table of the README's performance section."""
    parts = report["parts"]
    lines = ["| figure | measured | target |", "|---|---|---|"]
    over = parts.get("overhead")
    labels = {"sampling": "sampling only", "default": "default (checkpoints + attribution)",
              "traced-1": "tracemalloc for the whole crawl, 1 frame (`traced_peak` budget)",
              "traced-10": "tracemalloc for the whole crawl, 10 frames", "isolated": "isolated (`isolate=True`)",
              "bare-frozen": "bare CrawlerRunner with pre-crawl objects frozen out of the GC (`gc.freeze()`, as the plugin does)"}
    if over:
        bare_row = over["rows"]["clean/bare"]
        lines.append(f"| overhead, clean crawl of {over['responses']:,} responses: bare CrawlerRunner |"
                     f" {bare_row['wall_seconds']:.2f} s wall, {bare_row['cpu_seconds']:.2f} s CPU (median of {over['pairs']})"
                     " | |")
        for unit, row in over["rows"].items():
            workload, mode = unit.split("/")
            if mode == "bare":
                continue
            if workload == "leaky":
                flagged = row["verdicts"].get("retained-objects", 0)
                label = (f"overhead, LEAKY crawl ({over['leak_per_response'] / 1024:g} KiB/response): default mode;"
                         f" attribution window opened in {row['attribution_windows']}/{row['runs']} runs,"
                         f" flagged in {flagged}/{row['runs']}")
            else:
                label = f"overhead: {labels.get(mode, mode)}"
            target = row.get("target_ratio")
            verdict = f"<= {target:.2f}x: **{'met' if row['target_met'] else 'missed'}**" if target else ""
            split = "".join(f"; {row[k]['runs']} runs {k.replace('_', ' ')}: {row[k]['wall_ratio']:.2f}x wall,"
                            f" {row[k]['cpu_ratio']:.2f}x CPU" for k in ("window_opened", "window_not_opened") if k in row)
            frozen = row.get("vs_frozen")
            against = f"; against bare-frozen {_frozen_cell(frozen)}" if frozen else ""
            if frozen and "target_ratio" in frozen:
                verdict += (f"{'; ' if verdict else ''}<= {frozen['target_ratio']:.2f}x of bare-frozen:"
                            f" **{'met' if frozen['target_met'] else 'missed'}**")
            lines.append(f"| {label} | {_ratio_cell(row)}{against}{split} | {verdict} |")
    det = parts.get("detection")
    if det:
        matrix = [v for v in det["leaks"].values() if v["per_page"] == 20]
        sizes = sorted({v["size"] for v in matrix})
        responses = sorted({v["responses"] for v in matrix})
        for leak in sorted({v["leak_bytes"] for v in matrix}):
            cells = [f"{row['flagged']}/{row['runs']}" for size in sizes if (row := det["leaks"].get(f"{leak}@{size}"))]
            target_row = det["targets"].get(f"{leak}@1000")
            target = ""
            if target_row and target_row["measured"] is not None:
                target = f">= 95% at 1,000: **{'met' if target_row['met'] else 'missed'}** ({target_row['measured']:.0%})"
            lines.append(f"| leak of {leak / 1024:g} KiB/response: runs flagged at {', '.join(f'{n:,}' for n in responses)}"
                         f" responses | {', '.join(cells)} | {target} |")
        for row in det["leaks"].values():
            if row["per_page"] != 20:
                lines.append(f"| leak of {row['leak_bytes'] / 1024:g} KiB/response, {row['responses']:,} responses with"
                             f" {row['per_page']} products per listing page (a backlog that drains late) |"
                             f" {row['flagged']}/{row['runs']} flagged ("
                             + ", ".join(f"{n} {v}" for v, n in row["verdicts"].items() if v != "retained-objects")
                             + ") | |")
        attributed = sum(v["flagged_and_attributed"] for v in det["leaks"].values())
        flagged = sum(v["flagged"] for v in det["leaks"].values())
        lines.append(f"| flagged leaks whose top growth site is the leaking line | {attributed} of {flagged} | |")
        fp = det["targets"]["false_positives"]
        scenarios = ", ".join(f"{name} {row['false_positives']}/{row['runs']}" for name, row in det["clean"].items())
        lines.append(f"| false positives on clean scenarios | {fp['measured']} in {fp['of']} runs ({scenarios}) |"
                     f" 0: **{'met' if fp['met'] else 'missed'}** |")
    site = parts.get("site")
    if site:
        low, high = site["keep_alive_requests_per_second"]
        closing = next((r for r in site["throughput"] if not r["keep_alive"]), None)
        lines.append(f"| fixture site throughput, small pages, keep-alive, 16-256 connections | {low:,.0f}-{high:,.0f} req/s,"
                     f" {site['refused']} refused, {site['errors']} errors | |")
        if closing:
            lines.append(f"| fixture site, 256 clients opening a connection per request |"
                         f" {closing['requests_per_second']:,.0f} req/s | |")
        lines.append(f"| fixture site's share of CPU during a crawl ({site['crawl_responses_per_second']:,.0f} responses/s) |"
                     f" {site['site_cpu_share']:.1%} ({site['site_cpu_ms_per_1000_in_crawl']:.0f} ms per 1,000 responses;"
                     f" it could serve {site['site_capacity_over_crawl_rate']:g}x the crawl's rate on one core) | |")
    fixed = parts.get("fixed")
    if fixed:
        rows = fixed["rows"]
        lines.append(f"| fixed cost of a {fixed['responses']}-response crawl test, setup to result"
                     f" (median of {fixed['rounds']}) |"
                     f" bare {rows['bare']['wall_seconds']:.2f} s; in-process {rows['default']['wall_seconds']:.2f} s"
                     f" (+{rows['default']['extra_wall_seconds']:.2f} s; without the reports"
                     f" {rows['no-reports']['wall_seconds']:.2f} s);"
                     f" isolated {rows['isolated']['wall_seconds']:.2f} s (+{rows['isolated']['extra_wall_seconds']:.2f} s) | |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Run the selected parts; print the tables; write the JSON. Exit 1 when a full run missed a target."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--json", type=Path, help="write every figure and the machine info here")
    parser.add_argument("--render", type=Path, metavar="JSON", help="print the Markdown table of a saved run and exit")
    parser.add_argument("--quick", action="store_true", help="a fast smoke run: few rounds, small crawls, one run each")
    parser.add_argument("--parts", nargs="+", choices=PARTS, default=list(PARTS), help="the parts to run (default: all)")
    parser.add_argument("--pairs", type=int, help="overhead rounds (default 7; quick 2)")
    parser.add_argument("--modes", nargs="+", default=overhead.DEFAULT_MODES, choices=[*overhead.EXTRA_MODES, *MODES],
                        help=f"plugin modes of the overhead part (default: {' '.join(overhead.DEFAULT_MODES)})")
    parser.add_argument("--leak", type=int, default=overhead.LEAK, help="overhead: bytes kept per product by the leaky"
                        f" workload (default {overhead.LEAK})")
    parser.add_argument("--runs", type=int, help="detection: runs per leak and size (default 10; quick 1)")
    parser.add_argument("--clean-runs", type=int, help="detection: runs per clean scenario (default 20; quick 1)")
    args = parser.parse_args(argv)
    if args.render:
        print(markdown(json.loads(args.render.read_text())))
        return 0
    config = dict(QUICK if args.quick else FULL)
    for key in ("pairs", "runs", "clean_runs"):
        if getattr(args, key) is not None:
            config[key] = getattr(args, key)
    started = time.monotonic()
    report: dict[str, Any] = {
        "schema_version": 1,
        "created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "command": " ".join(["python", "benchmarks/run.py", *(sys.argv[1:] if argv is None else argv)]),
        "quick": args.quick,
        "config": {**config, "modes": args.modes},
        "machine": machine_info(),
        "git": git_state(),
        "parts": {},
        "load_average": {},
    }
    parts: dict[str, Any] = report["parts"]
    try:
        with start_site() as site:
            for part in PARTS:
                if part not in args.parts:
                    continue
                progress(f"== {part}")
                part_started = time.monotonic()
                if part == "overhead":
                    parts[part] = overhead.run_overhead(site, pairs=config["pairs"], pages=config["pages"],
                                                        modes=args.modes, leak=args.leak)
                    print(overhead.format_table(parts[part]))
                elif part == "detection":
                    parts[part] = detection.run_detection(site, runs=config["runs"], clean_runs=config["clean_runs"],
                                                          sizes=config["sizes"], leaks=config["leaks"],
                                                          extra=config["extra"])
                    print(detection.format_table(parts[part]))
                elif part == "site":
                    parts[part] = site_part(site, requests=config["requests"], crawls=config["share_crawls"],
                                            pages=config["pages"])
                else:
                    parts[part] = fixed_part(site, rounds_=config["fixed_rounds"])
                parts[part]["seconds"] = round(time.monotonic() - part_started, 1)
                report["load_average"][part] = load_average()
    finally:
        stop_reactor()
    report["targets"] = targets_of(parts)
    report["seconds"] = round(time.monotonic() - started, 1)
    report["markdown"] = markdown(report)
    print(f"\n{report['markdown']}\n")
    for target in report["targets"]:
        print(f"{'met   ' if target['met'] else 'MISSED'} {target['target']}: {target['measured']}")
    print(f"{report['seconds']:.0f} s; load average after each part: {report['load_average']}")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(report, indent=2) + "\n")
        print(f"wrote {args.json}")
    part = "+".join(sorted(report["parts"])) + ("-quick" if args.quick else "")
    print(f"wrote {latest.save('run', part, report)} (part {part})")
    if args.quick:  # a smoke run: too few runs, too small crawls to judge a target
        print("quick run: the figures check the plumbing; targets are judged on a full run only")
        return 0
    return 0 if all(t["met"] for t in report["targets"] if t["met"] is not None) else 1


if __name__ == "__main__":
    raise SystemExit(main())
