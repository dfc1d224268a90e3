"""Readings of a running crawl: the process, the engine, tracemalloc, and the recording they go into (crawl process).

Owns the readings of /proc, glibc and Scrapy's engine (``readings``), the sampling loop and drained checkpoint shared
by crawls and browser jobs (``meter``), the recording and its ``samples.jsonl`` stream (``recording``, ``stream``),
tracemalloc snapshots (``snapshots``), the danger snapshot (``danger``), parse amplification (``amplification``),
JOBDIR's disk use (``jobdir``) and the reactor's cancelled timers (``timers``).
May import: ``core``.
"""
