"""Writes a cluster's report dir: ``report.json`` (kind ``cluster``) and ``report.html`` with the Redis panel,
the ledger and one row per worker linking to its own report (pytest process)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pytest_crawlmem.core.budgets import Budgets, Violation
from pytest_crawlmem.core.cluster import ClusterResult
from pytest_crawlmem.core.models import SCHEMA_VERSION
from pytest_crawlmem.reports.markup import Safe, count, esc, page, section, size, table
from pytest_crawlmem.reports.report import environment, write_text_atomic
from pytest_crawlmem.reports.svgchart import Panel, Series, XAxis, render_timeline, seconds_tick

LOST_SHOWN = 200


def cluster_document(
    result: ClusterResult, *, test_id: str, budgets: Budgets | None, violations: Sequence[Violation]
) -> dict[str, Any]:
    """The content of the cluster's ``report.json``."""
    return {
        "schema_version": SCHEMA_VERSION,
        "kind": "cluster",
        "test": test_id,
        "environment": environment(),
        "budgets": budgets.set_values() if budgets else {},
        "violations": [{"budget": v.budget, "measured": v.measured, "limit": v.limit, "message": v.message,
                        "fails": v.fails} for v in violations],
        "result": {
            "spider": result.spider,
            "workers": len(result.workers),
            "verdict": result.verdict,
            "reason": result.reason,
            "duration_seconds": result.duration_seconds,
            "responses": result.responses,
            "items_scraped": result.items_scraped,
            "cluster_rss": result.cluster_rss,
            "max_queue": result.max_queue,
            "max_dupefilter": result.max_dupefilter,
            "redis_peak_memory": result.redis_peak_memory,
            "kill": None if result.kill is None else {"worker": result.kill.worker, "signal": result.kill.signal,
                                                       "after_responses": result.kill.after_responses},
            "errors": list(result.errors),
        },
        "ledger": result.ledger.to_json(),
        "workers": [
            {"worker": i, "report_dir": None if w.report_dir is None else str(w.report_dir), "responses": w.responses,
             "items_scraped": w.items_scraped, "peak_rss": w.peak_rss, "verdict": w.verdict, "reason": w.growth.reason,
             "finish_reason": w.finish_reason, "share": round(share, 4),
             "end": {"how": e.how, "detail": e.detail, "exit_code": e.exit_code},
             "rss": [[s.t_seconds, s.rss_bytes] for s in w.samples]}
            for (i, w), share, e in zip(enumerate(result.workers), result.work_shares, result.ends, strict=True)
        ],
        "redis_samples": [s.to_json() for s in result.redis_samples],
    }


def write_cluster_report(
    report_dir: Path, result: ClusterResult, *, test_id: str, budgets: Budgets | None, violations: Sequence[Violation]
) -> None:
    """Write ``report.json`` then ``report.html`` of the cluster into ``report_dir``."""
    document = cluster_document(result, test_id=test_id, budgets=budgets, violations=violations)
    write_text_atomic(report_dir / "report.json", json.dumps(document, indent=2, default=str))
    write_text_atomic(report_dir / "report.html", render_cluster_html(document, report_dir))


def _redis_chart(samples: Sequence[Mapping[str, Any]]) -> str:
    def points(key: str) -> list[tuple[float, float | None]]:
        return [(float(s["t_seconds"]), float(s[key])) for s in samples]

    panels = [
        Panel("Redis memory (used_memory, less the ledger's keys)", "bytes",
              [Series("redis", "used memory", "#0072b2", points("used_memory_bytes"))]),
        Panel("Shared queue and dupefilter", "count",
              [Series("queue", "requests in the queue", "#e69f00", points("queue")),
               Series("dupefilter", "fingerprints in the dupefilter", "#009e73", points("dupefilter"))]),
        Panel("Work done", "count",
              [Series("responses", "responses (all workers)", "#56b4e9", points("responses")),
               Series("processed", "requests processed", "#7b61a8", points("processed"))]),
    ]
    return render_timeline(panels, XAxis("seconds since the workers started", seconds_tick), caption="Redis over time")


WORKER_COLORS = ("#0072b2", "#e69f00", "#009e73", "#cc79a7", "#56b4e9", "#d55e00", "#7b61a8", "#999999")


def _workers_chart(workers: Sequence[Mapping[str, Any]]) -> str:
    series = [Series(f"w{w['worker']}", f"worker {w['worker']}", WORKER_COLORS[i % len(WORKER_COLORS)],
                     [(float(t), float(rss)) for t, rss in w.get("rss", [])]) for i, w in enumerate(workers)]
    return render_timeline([Panel("RSS of each worker", "bytes", series)],
                           XAxis("seconds since each worker's crawl started", seconds_tick), caption="Workers' RSS")


def _headline(document: Mapping[str, Any]) -> str:
    """The verdict line: ``failed`` with the first broken budget when the test failed, the memory verdict beside it."""
    result = document["result"]
    broken = [v["message"] for v in document["violations"] if v["fails"]] + list(result["errors"])
    memory = f'{esc(result["verdict"])}: {esc(result["reason"])}'
    if not broken:
        return f'<p class="verdict"><strong>{esc(result["verdict"])}</strong>: {esc(result["reason"])}</p>'
    more = f" (and {len(broken) - 1} more below)" if len(broken) > 1 else ""
    return (f'<p class="verdict"><strong>failed</strong>: {esc(broken[0])}{esc(more)}</p>'
            f'<p class="note">memory verdict: {memory}</p>')


def render_cluster_html(document: Mapping[str, Any], report_dir: Path) -> str:
    """The cluster's report.html: verdict, violations, Redis panel, ledger, workers, lost URLs."""
    result, ledger = document["result"], document["ledger"]
    head = Safe(
        f'<header><p class="kicker">crawl_cluster · {esc(result["workers"])} scrapy-redis workers</p>'
        f'<h1>{esc(document["test"])}</h1>'
        + _headline(document)
        + f'<p class="note">{esc(result["responses"])} responses, {esc(result["items_scraped"])} items in'
        f' {esc(result["duration_seconds"])} s; workers\' peak RSS summed {esc(size(result["cluster_rss"]))};'
        f' Redis peak {esc(size(result["redis_peak_memory"]))}; queue up to {esc(count(result["max_queue"]))}</p></header>'
    )
    problems = [v["message"] for v in document["violations"] if v["fails"]] + list(result["errors"])
    warnings = [v["message"] for v in document["violations"] if not v["fails"]]
    broken = "".join(
        section(title, '<ul class="violations">' + "".join(f"<li>{esc(m)}</li>" for m in messages) + "</ul>")
        for title, messages in (("Budgets broken and problems", problems), ("Warnings", warnings)) if messages
    )
    chart = section("Redis", _redis_chart(document["redis_samples"]),
                    note="sampled by the coordinator every 0.2 s") if document["redis_samples"] else ""
    ledger_rows = [
        ("scheduled (pushed to the shared queue)", count(ledger["scheduled"])),
        ("taken (popped by a worker)", count(ledger["taken"])),
        ("processed (downloaded, callback and its output done)", count(ledger["processed"])),
        ("lost in a worker (taken, never finished)", count(ledger["lost_in_workers"])),
        ("deleted from the queue (a scheduler flush)", count(ledger["removed_from_queue"])),
        ("left in the queue", count(ledger["left_in_queue"])),
        ("start URLs popped and never scheduled", count(ledger["lost_start_urls"])),
        ("lost (all of the above)", count(ledger["lost"])),
        ("URLs processed twice (retries not counted)", count(ledger["processed_twice"])),
        ("balanced", "yes" if ledger["balanced"] else "NO"),
    ]
    ledger_html = section("Ledger", table(["", ""], ledger_rows, cls="counts"),
                          note="taken = processed + lost in a worker; scheduled = taken + deleted + left")
    worker_rows = []
    for w in document["workers"]:
        link = w["report_dir"]
        rel = Path(link).relative_to(report_dir) if link and Path(link).is_relative_to(report_dir) else None
        name: str = f"worker {w['worker']}"
        if rel is not None:
            name = Safe(f'<a href="{esc(rel.as_posix())}/report.html">{esc(name)}</a>')
        worker_rows.append((name, count(w["responses"]), f"{w['share']:.0%}", count(w["items_scraped"]), size(w["peak_rss"]),
                            w["verdict"], f"{w['end']['how']} {w['end']['detail']}".strip(), w["reason"]))
    chart_html = _workers_chart(document["workers"]) if any(w.get("rss") for w in document["workers"]) else ""
    headers = ["worker", "responses", "share", "items", "peak RSS", "verdict", "end", "why"]
    workers_html = section("Workers", Safe(chart_html + table(headers, worker_rows)))
    lost = ledger["lost_urls"][:LOST_SHOWN]
    lost_html = section(f"Lost requests ({ledger['lost']:,})", table(
        ["URL", "where", "worker"], [(r["url"], r["where"], "" if r["worker"] is None else r["worker"]) for r in lost]),
        note=f"first {LOST_SHOWN} shown; all are in report.json") if lost else ""
    return page(f"crawlmem cluster: {document['test']}", "\n".join([head, broken, chart, ledger_html, workers_html, lost_html]))
