"""The danger snapshot: the crawl's state when RSS first crosses ``snapshot_at``, and what it allocates next (crawl process).

The sampler thread (a blocked reactor cannot delay it) notices the crossing, records RSS,
the engine's queues and the live Scrapy objects at once, writes ``danger.json`` (so a crawl
the kernel kills still leaves it), and asks for a short traced window. When the window closes
(``window_seconds`` later and after 10 responses, at most 10 times as long; or when the spider
closes) the allocation sites whose live memory grew in it are added to ``danger.json`` and
written to ``danger-diff.txt``. Under the crawl, the window's tracing (its start, its snapshots
and their grouping) runs on the reactor thread, as every other use of tracemalloc does: a
crawl whose sampler thread grouped a snapshot while the reactor thread had just stopped tracing
died of a segfault (2 of 5 CI runs of ``tests/test_danger.py``'s kill_at crawl; the cause is not proven).
"""

from __future__ import annotations

import contextlib
import json
import linecache
import os
import time
import tracemalloc
from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from pytest_crawlmem.core.models import DangerSnapshot, GrowthSite, Sample, format_sites
from pytest_crawlmem.probes.snapshots import group_by_site, start_tracing, take_snapshot

DANGER_JSON = "danger.json"
DANGER_DIFF = "danger-diff.txt"
DEFAULT_WINDOW_SECONDS = 1.0
#: The window stays open past its seconds until this many responses came (a slow crawl), up to 10 times its seconds.
WINDOW_MIN_RESPONSES = 10
SITES_KEPT = 10
MIN_SITE_BYTES = 1024


def window_sites(
    first: tracemalloc.Snapshot | None, last: tracemalloc.Snapshot, responses: int, *, limit: int = SITES_KEPT,
) -> tuple[GrowthSite, ...]:
    """Sites whose live traced memory grew from ``first`` (``None``: tracing started empty) to ``last``.

    Sites in the user's code first, then those without a user frame (a library's line), each by growth,
    as :func:`snapshots.growing_sites` orders them.
    """
    before, after = group_by_site(first), group_by_site(last)
    grown = []
    for site, group in after.items():
        previous = before.get(site)
        size_diff = group.size - (previous.size if previous else 0)
        if size_diff >= MIN_SITE_BYTES:
            count_diff = group.count - (previous.count if previous else 0)
            grown.append((group.in_user_code, size_diff, count_diff, site, group.traceback))
    grown.sort(key=lambda entry: (entry[0], entry[1]), reverse=True)
    cached = set(linecache.cache)  # drop the source files read for the tracebacks: the crawl must not grow for it
    sites = tuple(
        GrowthSite(site, size_diff, count_diff, round(size_diff / max(responses, 1), 1),
                   tuple(line.strip() for line in traceback.format(most_recent_first=True)[:16]) if traceback else (),
                   in_user_code=in_user_code)
        for in_user_code, size_diff, count_diff, site, traceback in grown[:limit]
    )
    for filename in set(linecache.cache) - cached:
        linecache.cache.pop(filename, None)
    return sites


def write_danger(report_dir: Path, snapshot: DangerSnapshot) -> None:
    """Write ``danger.json`` and ``danger-diff.txt`` atomically (any thread)."""
    report_dir.mkdir(parents=True, exist_ok=True)
    text = format_danger(snapshot)
    for name, content in ((DANGER_JSON, json.dumps(snapshot.to_json(), indent=2, default=str)), (DANGER_DIFF, text)):
        tmp = report_dir / (name + ".tmp")
        tmp.write_text(content, encoding="utf-8")
        os.replace(tmp, report_dir / name)


def format_danger(snapshot: DangerSnapshot) -> str:
    """The text of ``danger-diff.txt``: the summary, the state, then the window's allocation sites."""
    lines = [snapshot.describe(), ""]
    lines.append(f"start RSS {snapshot.start_rss_bytes:,} B; RSS at the crossing {snapshot.rss_bytes:,} B;"
                 f" threshold {snapshot.threshold_bytes:,} B; {snapshot.items:,} items")
    lines.append(f"queues: scheduled={snapshot.scheduled} in_flight={snapshot.inflight} slot_queued={snapshot.slot_queued}"
                 f" active_size_bytes={snapshot.active_size_bytes} backout={snapshot.backout}")
    alive = ", ".join(f"{name}={count:,}" for name, count in sorted(snapshot.live_refs.items(), key=lambda p: -p[1]))
    lines.append(f"live Scrapy objects: {alive or 'none'}")
    if snapshot.window_seconds:
        rss = f", RSS then {snapshot.window_rss_bytes:,} B" if snapshot.window_rss_bytes is not None else ""
        lines.append(f"traced window: {snapshot.window_seconds:.2f} s, {snapshot.window_responses:,} responses{rss}")
    else:
        lines.append("traced window: still open (the process ended before it closed?)")
    if snapshot.note:
        lines.append(f"note: {snapshot.note}")
    lines += ["", "allocation sites live at the end of the window and allocated in it (most recent user frame):", ""]
    return "\n".join(lines) + "\n" + format_sites(snapshot.sites)


def danger_from_json(data: Mapping[str, Any]) -> DangerSnapshot:
    """Rebuild a snapshot from ``danger.json`` (an isolated crawl that was killed)."""
    return DangerSnapshot.from_json(data)


def load_danger(report_dir: Path | None) -> DangerSnapshot | None:
    """The danger snapshot in ``report_dir``, if one was written and can be read."""
    path = report_dir / DANGER_JSON if report_dir is not None else None
    if path is None or not path.is_file():
        return None
    try:
        return danger_from_json(json.loads(path.read_text(encoding="utf-8")))
    except (OSError, ValueError, TypeError):
        return None


class DangerWatch:
    """Takes the danger snapshot once, from the samples, and closes its traced window (sampler or reactor thread)."""

    def __init__(
        self, threshold_bytes: int, *, report_dir: Path | None, window_seconds: float = DEFAULT_WINDOW_SECONDS,
        frames: int = 8, open_later: Callable[[Callable[[], None]], None] | None = None,
    ) -> None:
        self.threshold_bytes = threshold_bytes
        self.report_dir = report_dir
        self.window_seconds = window_seconds
        self.frames = max(frames, 1)
        #: Runs the window's opening on the thread that owns tracing (the reactor's ``callFromThread``); ``None``: at once.
        self.open_later = open_later
        self.snapshot: DangerSnapshot | None = None
        self.started_tracing = False  # the window started tracemalloc: whoever closes it must stop it
        self._first: tracemalloc.Snapshot | None = None
        self._opened_at = 0.0
        self._open = False
        self._ended = False  # closed (or the crawl ended) before an opening asked for ran: it does not open

    def adopt_tracing(self) -> bool:
        """Whether the window is open: it then takes over the tracing another window started, and stops it at its
        close (the attribution window may end first: stopping tracing then left this window no sites)."""
        if not self._open:
            return False
        self.started_tracing = True
        return True

    def observe(self, sample: Sample, *, start_rss: int, live_refs: Callable[[], Mapping[str, int]]) -> bool:
        """Take the snapshot at the first sample over the threshold; return True when the window is due to close."""
        if self.snapshot is None and sample.rss_bytes >= self.threshold_bytes:
            self._take(sample, start_rss, live_refs)
            return False
        if not self._open or self.snapshot is None:
            return False
        elapsed = time.monotonic() - self._opened_at
        enough = sample.responses - self.snapshot.responses >= WINDOW_MIN_RESPONSES
        return elapsed >= self.window_seconds and (enough or elapsed >= 10 * self.window_seconds)

    def _take(self, sample: Sample, start_rss: int, live_refs: Callable[[], Mapping[str, int]]) -> None:
        alive: dict[str, int] = {}
        note = ""
        for _ in range(3):  # trackref's dicts may change size under the sampler thread: try again
            try:
                alive, note = dict(live_refs()), ""
                break
            except RuntimeError as exc:
                note = f"live objects not read: {exc!r}"
        self.snapshot = DangerSnapshot(
            threshold_bytes=self.threshold_bytes, t_seconds=sample.t_seconds, rss_bytes=sample.rss_bytes,
            start_rss_bytes=start_rss, responses=sample.responses, items=sample.items, scheduled=sample.scheduled,
            inflight=sample.inflight, slot_queued=sample.slot_queued, active_size_bytes=sample.active_size_bytes,
            backout=sample.backout, live_refs=alive, note=note,
        )
        self._write()
        if self.open_later is not None:
            self.open_later(self.open_window)
        else:
            self.open_window()

    def open_window(self) -> None:
        """Open the traced window (on the thread that owns tracing), unless it was closed first."""
        if self._open or self._ended or self.snapshot is None:
            return
        if tracemalloc.is_tracing():
            self._first = take_snapshot()
        else:
            start_tracing(self.frames)
            self.started_tracing = True
            self._first = None
        self._opened_at = time.monotonic()
        self._open = True

    def close(self, *, responses: int, rss_bytes: int | None) -> None:
        """Close the traced window: add the sites that grew in it and rewrite the files (once)."""
        self._ended = True
        if not self._open or self.snapshot is None:
            return
        self._open = False
        seconds = round(time.monotonic() - self._opened_at, 3)
        window_responses = max(responses - self.snapshot.responses, 0)
        try:
            last = take_snapshot()
        except RuntimeError:  # the attribution window stopped tracing first
            sites: tuple[GrowthSite, ...] = ()
            note = "tracing stopped before the window closed: no allocation sites"
        else:
            sites = window_sites(self._first, last, window_responses)
            note = "" if sites else f"no allocation site grew by {MIN_SITE_BYTES:,} B or more in the window"
        self._first = None
        self.snapshot = replace(self.snapshot, window_seconds=seconds, window_responses=window_responses,
                                window_rss_bytes=rss_bytes, sites=sites,
                                note="; ".join(n for n in (self.snapshot.note, note) if n))
        self._write()

    def _write(self) -> None:
        if self.report_dir is None or self.snapshot is None:
            return
        with contextlib.suppress(OSError):  # a full disk must not stop the crawl; the result still has the snapshot
            write_danger(self.report_dir, self.snapshot)
