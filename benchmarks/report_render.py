"""How long ``crawlmem report`` takes on a long production stream: read samples.jsonl, build the report, render it.

    python benchmarks/report_render.py [--samples 100000] [--rounds 3]

Writes a bare ``samples.jsonl`` of N samples (a checkpoint every 5,000) into a temporary directory and
times ``load_report`` (reading, typed records, the assembled result) and ``write_html`` separately;
prints the median of each over the rounds. Runs in one process, no crawl.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

from pytest_crawlmem.reports.loading import load_report, write_html


def write_stream(path: Path, samples: int) -> None:
    """A production crawl's stream of ``samples`` samples growing 100 B per response, a checkpoint every 5,000."""
    with path.open("w", encoding="utf-8") as out:
        out.write(json.dumps({"kind": "header", "spider": "big", "interval_seconds": 0.1}) + "\n")
        for n in range(samples):
            out.write(json.dumps({"kind": "sample", "t_seconds": n / 10, "responses": n, "items": n // 2,
                                  "rss_bytes": 2**26 + n * 100, "traced_bytes": None, "scheduled": n % 300,
                                  "inflight": 8, "active_size_bytes": 4096, "backout": False}) + "\n")
            if n % 5000 == 0:
                out.write(json.dumps({"kind": "checkpoint", "responses": n, "t_seconds": n / 10,
                                      "rss_bytes": 2**26 + n * 100, "heap_bytes": 2**24 + n * 50,
                                      "traced_bytes": None, "scheduled": 3}) + "\n")


def main() -> None:
    """Time reading and rendering; print the medians."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        stream = Path(tmp) / "samples.jsonl"
        write_stream(stream, args.samples)
        loads, renders = [], []
        for _ in range(args.rounds):
            start = time.perf_counter()
            report = load_report(stream)
            loaded = time.perf_counter()
            write_html(report, Path(tmp) / "report.html")
            loads.append(loaded - start)
            renders.append(time.perf_counter() - loaded)
    print(f"{args.samples:,} samples ({stream.name}): load_report {statistics.median(loads):.2f} s,"
          f" write_html {statistics.median(renders):.2f} s (median of {args.rounds})")


if __name__ == "__main__":
    main()
