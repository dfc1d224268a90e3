"""The stated power keeps nothing per checkpoint count: a running crawl's heap would count it as the crawl's growth."""

from __future__ import annotations

import gc
import tracemalloc

from pytest_crawlmem.core.leaktrend import unit_power


def test_power_for_every_checkpoint_count_of_a_long_crawl_keeps_under_20_kib() -> None:
    unit_power.cache_clear()
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.take_snapshot()
        for n in range(4, 34):  # a production crawl's verdict so far, judged at each of its checkpoints
            unit_power(tuple(float(100 + 40 * i + i * i) for i in range(n)))
        gc.collect()
        kept = sum(stat.size_diff for stat in tracemalloc.take_snapshot().compare_to(before, "filename")
                   if stat.traceback[0].filename.endswith("leaktrend.py"))
    finally:
        tracemalloc.stop()
        unit_power.cache_clear()
    # the cached figures only (a float a schedule); a cache of the 400 draws per count kept ~150 KiB each (11 clean
    # test crawls read as leaks)
    assert kept < 20 * 1024, f"unit_power keeps {kept:,} B over 30 checkpoint counts"
