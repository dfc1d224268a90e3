"""Soak benchmark: a long catalog crawl with the extension at its production defaults, against a bare crawl.

Each crawl runs in a fresh process as a production crawl does (a ``CrawlerProcess`` script, the
extension enabled by ``EXTENSIONS`` + ``CRAWLMEM_ENABLED`` with every other setting at its default,
``CRAWLMEM_JSONL`` set), against the fixture site in its own process. An observer extension of this
script records, every ``--every`` seconds: responses, process RSS and CPU time, and for the measured
crawl the extension's own heap (a walk of the objects its recording and histograms hold), its CPU
time (sampler thread + status), its stream's size on disk, the timeline's length and span, and the
checkpoints' pauses. Modes run interleaved (bare, production, bare, ...) so the machine's load hits
both alike.

    python benchmarks/soak.py --responses 100000                  # the full soak (~15 min a crawl on this busy machine)
    python benchmarks/soak.py --responses 12000                   # what fits in ~5 minutes here
    python benchmarks/soak.py --responses 6000 --modes bare,production,no-checkpoints --pairs 2
    python benchmarks/soak.py --responses 15000 --modes production --set CRAWLMEM_INTERVAL_SECONDS=0.05 \
        --set CRAWLMEM_TIMELINE_SAMPLES=256 --every 10    # time-compressed: the timeline halves several times

Writes the ``<responses>`` part of ``benchmarks/results/soak.json`` and prints a table.
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import latest

ROOT = Path(__file__).resolve().parent.parent
#: bare: no extension; production: the extension at its defaults; no-checkpoints: the same with CRAWLMEM_CHECKPOINTS off.
MODES = ("bare", "production", "no-checkpoints")

CHILD = r'''
import gc, json, os, sys, time
sys.path.insert(0, sys.argv[4])
import scrapy
from scrapy import signals
from scrapy.crawler import CrawlerProcess
from twisted.internet import task
from bench_spiders import BASE_SETTINGS, Catalog, catalog_path
from pytest_crawlmem.measure.extension import CrawlMemExtension


def heap_bytes(roots):
    """Bytes of every object reachable from roots (not following into modules, types or functions)."""
    seen, stack, total = set(), list(roots), 0
    skip = (type, type(sys), type(heap_bytes))
    while stack:
        obj = stack.pop()
        if id(obj) in seen or isinstance(obj, skip):
            continue
        seen.add(id(obj))
        total += sys.getsizeof(obj)
        stack.extend(gc.get_referents(obj))
    return total


class Observer:
    def __init__(self, crawler, every, out):
        self.crawler, self.every, self.out, self.rows = crawler, every, out, []
        self.started = time.monotonic()
        crawler.signals.connect(self.opened, signal=signals.spider_opened)
        crawler.signals.connect(self.closed, signal=signals.spider_closed)

    @classmethod
    def from_crawler(cls, crawler):
        return cls(crawler, crawler.settings.getfloat("SOAK_EVERY"), crawler.settings.get("SOAK_OUT"))

    def ext(self):
        return next((m for m in self.crawler.extensions.middlewares if isinstance(m, CrawlMemExtension)), None)

    def opened(self, spider):
        self.started = time.monotonic()
        self.call = task.LoopingCall(self.row)
        self.call.start(self.every, now=False)

    def row(self):
        ext, cpu = self.ext(), os.times()
        stats = self.crawler.stats
        row = {"t": round(time.monotonic() - self.started, 2),
               "responses": stats.get_value("response_received_count", 0),
               "rss": int(open("/proc/self/statm").read().split()[1]) * os.sysconf("SC_PAGE_SIZE"),
               "cpu": round(cpu.user + cpu.system, 3)}
        try:
            row["scheduled"] = len(self.crawler.engine.scheduler)  # the crawl's own backlog, in every mode
        except Exception:
            pass
        if ext is not None:
            walk = time.process_time()
            rec = ext.recording
            row.update(
                ext_heap=heap_bytes([rec.timeline, rec.errors, rec.last_sample, ext.response_sizes, ext.latency_us, ext.ledger]),
                ext_cpu=round(ext.sampler_cpu_seconds + (ext.ticker.cpu_seconds if ext.ticker else 0.0), 4),
                stream=rec.stream_bytes, kept=len(rec.timeline), span=rec.timeline.span,
                checkpoints=rec.timeline.checkpoints_added, pause_total=round(rec.checkpoint_pause_total_seconds, 3),
                pause_max=round(rec.checkpoint_pause_max_seconds, 3))
            row["cpu"] = round(row["cpu"] - (time.process_time() - walk), 3)  # the walk is the benchmark's, not the crawl's
        self.rows.append(row)

    def closed(self, spider):
        self.call.stop()
        self.row()
        ext = self.ext()
        summary = {"rows": self.rows, "wall": round(time.monotonic() - self.started, 2),
                   "stats": {k: v for k, v in self.crawler.stats.get_stats().items()
                             if isinstance(v, (int, float)) and (k.startswith("crawlmem/") or k in (
                                 "response_received_count", "item_scraped_count"))}}
        if ext is not None:
            summary["ext_samples"] = ext.recording.timeline.raw_samples
        with open(self.out, "w") as f:
            json.dump(summary, f)


mode, responses, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
settings = dict(BASE_SETTINGS, LOG_LEVEL="WARNING", SOAK_EVERY=float(sys.argv[5]), SOAK_OUT=out,
                EXTENSIONS={"__main__.Observer": 1}, CONCURRENT_REQUESTS=16)
if mode != "bare":
    settings["EXTENSIONS"]["pytest_crawlmem.extension.CrawlMemExtension"] = 0
    settings.update(CRAWLMEM_ENABLED=True, CRAWLMEM_JSONL=out + ".samples.jsonl")
if mode == "no-checkpoints":
    settings["CRAWLMEM_CHECKPOINTS"] = False
if mode != "bare":
    settings.update(json.loads(sys.argv[7]))
process = CrawlerProcess(settings)
process.crawl(Catalog, start_urls=[sys.argv[6] + catalog_path(responses)])
process.start()
'''


def run_one(mode: str, responses: int, every: float, base_url: str, workdir: Path,
            overrides: dict[str, Any] | None = None) -> dict[str, Any]:
    """Run one crawl in a fresh process; return the observer's rows and summary."""
    out = workdir / f"{mode}-{time.monotonic_ns()}.json"
    started = time.monotonic()
    proc = subprocess.run([sys.executable, "-c", CHILD, mode, str(responses), str(out), str(ROOT / "benchmarks"),
                           str(every), base_url, json.dumps(overrides or {})], capture_output=True, text=True, cwd=ROOT)
    if proc.returncode != 0 or not out.exists():
        raise SystemExit(f"{mode} crawl failed ({proc.returncode}): {proc.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(out.read_text())
    result["mode"], result["process_wall"] = mode, round(time.monotonic() - started, 2)
    stream = Path(str(out) + ".samples.jsonl")
    result["stream_files_bytes"] = sum(p.stat().st_size for p in stream.parent.glob(stream.name + "*"))
    return result


def summarize(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Throughput, CPU per response and the extension's own figures, per mode (medians over runs)."""
    table: dict[str, Any] = {}
    for mode in MODES:
        mine = [r for r in runs if r["mode"] == mode]
        if not mine:
            continue
        last = [r["rows"][-1] for r in mine]
        entry = {
            "runs": len(mine),
            "responses": statistics.median(row["responses"] for row in last),
            "responses_per_second": statistics.median(row["responses"] / r["wall"] for row, r in zip(last, mine, strict=True)),
            "cpu_ms_per_response": statistics.median(1000 * row["cpu"] / row["responses"] for row in last),
            "rss_end_mib": statistics.median(row["rss"] / 2**20 for row in last),
        }
        if mode != "bare":
            entry.update(
                ext_heap_max_kib=max(max(row["ext_heap"] for row in r["rows"]) for r in mine) / 1024,
                ext_heap_end_kib=statistics.median(row["ext_heap"] for row in last) / 1024,
                ext_cpu_share=statistics.median(row["ext_cpu"] / row["cpu"] for row in last),
                stream_mib=statistics.median(r["stream_files_bytes"] for r in mine) / 2**20,
                checkpoints=statistics.median(row["checkpoints"] for row in last),
                pause_total_s=statistics.median(row["pause_total"] for row in last),
                pause_max_s=max(row["pause_max"] for row in last),
                samples=statistics.median(r.get("ext_samples", 0) for r in mine),
            )
        table[mode] = entry
    for mode in MODES[1:]:
        if "bare" in table and mode in table:
            table[f"ratios_{mode}"] = {
                "throughput": table[mode]["responses_per_second"] / table["bare"]["responses_per_second"],
                "cpu_per_response": table[mode]["cpu_ms_per_response"] / table["bare"]["cpu_ms_per_response"],
            }
    return table


def parse_overrides(items: list[str]) -> dict[str, Any]:
    """``--set CRAWLMEM_NAME=VALUE`` options (JSON values) as settings; a malformed one exits naming it."""
    overrides = {}
    for item in items:
        name, _, value = item.partition("=")
        if not name.startswith("CRAWLMEM_") or not value:
            raise SystemExit(f"invalid --set {item!r}: expected CRAWLMEM_NAME=VALUE")
        overrides[name] = json.loads(value)
    return overrides


def main() -> None:
    """Run the soak and write its results."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--responses", type=int, default=100_000)
    parser.add_argument("--pairs", type=int, default=1, help="bare/production pairs, interleaved")
    parser.add_argument("--every", type=float, default=5.0, help="seconds between observer rows")
    parser.add_argument("--set", action="append", default=[], metavar="CRAWLMEM_NAME=VALUE",
                        help="a CRAWLMEM_ setting of the measured crawls (JSON value), e.g. to compress time")
    parser.add_argument("--modes", default="bare,production", help=f"comma-separated, run in turn: {', '.join(MODES)}")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    from pytest_crawlmem.harness.site import start_site

    overrides = parse_overrides(args.set)
    runs = []
    with start_site() as site, tempfile.TemporaryDirectory() as tmp:
        for _ in range(args.pairs):
            for mode in args.modes.split(","):
                if mode not in MODES:
                    raise SystemExit(f"unknown mode {mode!r} in --modes: expected {', '.join(MODES)}")
                gc.collect()
                run = run_one(mode, args.responses, args.every, site.base_url, Path(tmp), overrides)
                runs.append(run)
                last = run["rows"][-1]
                print(f"{mode:>10}: {last['responses']:,} responses in {run['wall']:.0f} s, cpu {last['cpu']:.0f} s,"
                      f" rss {last['rss'] / 2**20:.0f} MiB" + (
                          f", extension heap {last['ext_heap'] / 1024:.0f} KiB, cpu {last['ext_cpu']:.2f} s,"
                          f" stream {run['stream_files_bytes'] / 2**20:.1f} MiB, timeline {last['kept']}x{last['span']},"
                          f" pauses {last['pause_total']:.2f} s (max {last['pause_max']:.3f} s)"
                          if mode != "bare" else ""), flush=True)
    table = summarize(runs)
    print(json.dumps(table, indent=2))
    out = latest.save("soak", f"{args.responses}{'-compressed' if overrides else ''}", {"summary": table, "runs": runs})
    print(f"written: {out}")


if __name__ == "__main__":
    main()
