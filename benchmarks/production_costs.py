"""What the extension's production machinery costs per operation, and a day's heap bounded vs unbounded.

Synthetic samples (no crawl), fed through the extension's own Recording, timeline, stream and status
code in this process:

- per sample: keeping it and streaming it (CPU microseconds), bounded (the defaults) and unbounded;
- per status: building the status and its log line (microseconds);
- per rotation: rewriting the history of a full timeline (milliseconds);
- a day: the heap held after 24 hours of samples at 1 s (and 2.4 hours at 0.1 s, the same 86,400
  samples), bounded vs unbounded (tracemalloc), and the stream's size.

    python benchmarks/production_costs.py [--hours 24] [--quick]

Writes the ``full`` part of ``benchmarks/results/production_costs.json`` (the ``quick`` part with --quick).
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
import tracemalloc
from pathlib import Path
from typing import Any

import latest

from pytest_crawlmem.core.defaults import CRAWLMEM_DEFAULTS, CrawlMemConfig
from pytest_crawlmem.core.models import Sample
from pytest_crawlmem.measure.extension import CrawlMemExtension
from pytest_crawlmem.measure.status import read_status

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = int(CRAWLMEM_DEFAULTS["CRAWLMEM_TIMELINE_SAMPLES"])
BUDGET = int(CRAWLMEM_DEFAULTS["CRAWLMEM_JSONL_MAX_BYTES"])


def sample(i: int, interval: float) -> Sample:
    """A plausible sample of a busy crawl."""
    return Sample(t_seconds=round(i * interval, 4), responses=i * 10, items=i * 5, rss_bytes=300 * 2**20 + (i % 600) * 4096,
                  scheduled=(i * 31) % 5000, inflight=16, slot_queued=3, active_size_bytes=(i * 13) % 5_000_000,
                  backout=i % 5 == 0)


def extension(path: Path | None, *, bounded: bool, interval: float) -> CrawlMemExtension:
    """An extension as from_crawler builds it (no crawler: its recording, histograms and status only)."""
    config = CrawlMemConfig.of(interval_seconds=interval, jsonl=str(path) if path else None,
                               timeline_samples=SAMPLES if bounded else 0, jsonl_max_bytes=BUDGET if bounded else 0)
    ext = CrawlMemExtension(None, config)
    ext.started_at = time.monotonic()
    ext.recording.header(spider="costs", interval_seconds=interval, crawl_id="costs")
    return ext


def per_sample_us(tmp: Path, *, bounded: bool, stream: bool, n: int = 50_000) -> float:
    """CPU microseconds to keep (and stream) one sample."""
    ext = extension(tmp / f"per-{bounded}-{stream}.jsonl" if stream else None, bounded=bounded, interval=1.0)
    samples = [sample(i, 1.0) for i in range(n)]
    started = time.process_time()
    for s in samples:
        ext.recording.add_sample(s)
    cost = (time.process_time() - started) / n * 1e6
    ext.recording.close()
    return round(cost, 2)


def per_status_us(tmp: Path, n: int = 2000) -> float:
    """CPU microseconds to build one status and its line (1,000 distinct response sizes and latencies)."""
    ext = extension(tmp / "status.jsonl", bounded=True, interval=1.0)
    for i in range(1000):
        ext.recording.add_sample(sample(i, 1.0))
        ext.response_sizes.add(1000 + i * 997)
        ext.latency_us.add(2000 + i * 1009)
    started = time.process_time()
    for _ in range(n):
        read_status(ext).line()
    ext.recording.close()
    return round((time.process_time() - started) / n * 1e6, 1)


def rotation_ms(tmp: Path) -> float:
    """Milliseconds to write the history of a full timeline (the rotation's cost)."""
    ext = extension(tmp / "rotate.jsonl", bounded=True, interval=1.0)
    for i in range(SAMPLES - 1):
        ext.recording.add_sample(sample(i, 1.0))
    stream = ext.recording._stream
    assert stream is not None
    started = time.perf_counter()
    stream.rotate(ext.recording._history())
    cost = (time.perf_counter() - started) * 1000
    ext.recording.close()
    return round(cost, 1)


def day_heap(tmp: Path, *, bounded: bool, interval: float, hours: float) -> dict[str, Any]:
    """Heap the recording holds after ``hours`` of samples (tracemalloc, 1 frame), and the stream's size."""
    path = tmp / f"day-{bounded}-{interval}.jsonl"
    tracemalloc.start(1)
    before = tracemalloc.get_traced_memory()[0]
    ext = extension(path, bounded=bounded, interval=interval)
    n = int(hours * 3600 / interval)
    for i in range(n):
        ext.recording.add_sample(sample(i, interval))
    held, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    ext.recording.close()
    disk = sum(p.stat().st_size for p in tmp.glob(path.name + "*"))
    result = {"samples": n, "held_mib": round((held - before) / 2**20, 2), "peak_mib": round((peak - before) / 2**20, 2),
              "kept": len(ext.recording.timeline), "stream_mib": round(disk / 2**20, 1),
              "rotations": ext.recording.stream_rotations}
    for p in tmp.glob(path.name + "*"):
        p.unlink()
    return result


def main() -> None:
    """Measure and write the results."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hours", type=float, default=24.0)
    parser.add_argument("--quick", action="store_true", help="per-operation costs only, no day runs")
    args = parser.parse_args()
    results: dict[str, Any] = {"cpus": os.cpu_count(), "load": os.getloadavg()}
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        results["per_sample_us"] = {
            "bounded_streamed": per_sample_us(tmp, bounded=True, stream=True),
            "unbounded_streamed": per_sample_us(tmp, bounded=False, stream=True),
            "bounded_memory_only": per_sample_us(tmp, bounded=True, stream=False),
        }
        results["per_status_us"] = per_status_us(tmp)
        results["rotation_ms"] = rotation_ms(tmp)
        for interval in () if args.quick else (1.0, 0.1):
            for bounded in (True, False):
                key = f"day_{'bounded' if bounded else 'unbounded'}_{interval:g}s"
                # at 0.1 s a tenth of the hours: the same sample count (a day at 0.1 s is 10x this, linear when unbounded)
                results[key] = day_heap(tmp, bounded=bounded, interval=interval, hours=args.hours * interval)
                print(key, results[key], flush=True)
    print(json.dumps(results, indent=1))
    out = latest.save("production_costs", "quick" if args.quick else "full", results)
    print(f"written: {out}")


if __name__ == "__main__":
    main()
