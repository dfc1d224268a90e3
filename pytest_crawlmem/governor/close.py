"""The memory governor's close without JOBDIR: what it leaves uncrawled, counted, and the evidence (crawl process).

:func:`undone_counts` reads what a close leaves (the queue, spilled requests, ``start()`` read to its end, downloads and
items that still finish); :func:`danger_snapshot` is the crawl's state as the governor closes it; :func:`write_record`
writes governor.json as the crawl ends. They read the engine and the governor's levers; none imports the governor
(``governor/extension.py`` calls them).
"""

from __future__ import annotations

import contextlib
import json
import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_crawlmem.core.stops import MEMORY_BUDGET
from pytest_crawlmem.governor.gates import is_spilling
from pytest_crawlmem.governor.spill import SpillingScheduler, StartGate
from pytest_crawlmem.probes import readings as probes

if TYPE_CHECKING:
    from pytest_crawlmem.core.models import DangerSnapshot

logger = logging.getLogger("pytest_crawlmem.governor")


async def undone_counts(engine: Any, scheduler: Any, gate: StartGate | None) -> dict[str, int]:
    """What a close without JOBDIR leaves uncrawled: the queue (spilled requests with it), ``start()`` read to its end
    through the start gate, and the downloads and items inside the pipelines that finish first."""
    unread, counted = await gate.count_unread() if gate is not None else (0, False)
    slot = getattr(engine.scraper, "slot", None)
    return {
        "queued_requests": len(scheduler or ()),
        "spilled_requests": scheduler.on_disk if is_spilling(scheduler, SpillingScheduler) else 0,
        "unread_start_requests": unread, "start_counted": int(counted),
        "downloads": len(engine.downloader.active), "items_in_pipelines": int(getattr(slot, "itemproc_size", 0) or 0),
    }


def danger_snapshot(crawler: Any, engine: Any, *, queued: int, threshold_bytes: int, t_seconds: float, rss_bytes: int,
                    start_rss_bytes: int, record_dir: Path | None, governor: object) -> DangerSnapshot:
    """The crawl's state as the governor closes it without JOBDIR: the evidence of what the budget could not hold.

    Written as ``danger.json`` in ``record_dir`` unless the measuring extension took one in this crawl.
    """
    from pytest_crawlmem.core.models import DangerSnapshot  # at a close: the evidence's modules are not loaded before
    from pytest_crawlmem.probes.danger import write_danger

    stats = crawler.stats
    slot = getattr(engine.scraper, "slot", None)
    try:
        alive, note = probes.live_ref_counts(), ""
    except RuntimeError as exc:  # trackref's dicts changed size under us
        alive, note = {}, f"live objects not read: {exc!r}; "
    snapshot = DangerSnapshot(
        threshold_bytes=threshold_bytes, t_seconds=round(t_seconds, 3), rss_bytes=rss_bytes,
        start_rss_bytes=start_rss_bytes, responses=int(stats.get_value("response_received_count", 0) or 0),
        items=int(stats.get_value("item_scraped_count", 0) or 0), scheduled=queued,
        inflight=len(engine.downloader.active), active_size_bytes=int(getattr(slot, "active_size", 0) or 0),
        live_refs=alive,
        note=note + f"taken by the memory governor as it closed the crawl ({MEMORY_BUDGET}) without JOBDIR:"
                    " no traced window",
    )
    if record_dir is not None and not measured_danger(crawler, governor):
        with contextlib.suppress(OSError):
            write_danger(record_dir, snapshot)
    return snapshot


def measured_danger(crawler: Any, governor: object) -> bool:
    """Whether the measuring extension (an extension other than ``governor``) took its danger snapshot in this crawl."""
    for extension in getattr(getattr(crawler, "extensions", None), "middlewares", ()):
        watch = getattr(extension, "danger", None)
        if extension is not governor and getattr(watch, "snapshot", None) is not None:
            return True
    return False


def write_record(governor: Any, path: Path, reason: str) -> None:
    """Write governor.json: the budget, the decisions, the learned costs (crawl process, at the close)."""
    cost_f, cost_q = governor.policy.model.costs()
    record: dict[str, Any] = {
        "budget_bytes": governor.config.budget_bytes, "finish_reason": reason,
        "peak_rss_bytes": governor.peak_rss_bytes, "ticks": governor.ticks, "cpu_seconds": governor.cpu_seconds,
        "cost_in_flight_bytes": int(cost_f), "cost_queued_bytes": int(cost_q), "decisions": governor.records()}
    if governor.danger is not None:
        record["danger"] = governor.danger.to_json()
    if governor.undone:
        record["undone"] = governor.undone
    admission = governor.admission
    if admission is not None:
        record["parse_amplification"] = admission.parse.amplification
        record["unmeetable"] = admission.records()
        record["unmeetable_count"] = admission.unmet_count
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(record, indent=1), encoding="utf-8")
    except OSError as exc:
        logger.warning("crawlmem governor: could not write %s: %s", path, exc)
