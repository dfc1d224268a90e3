"""The ``crawl_cluster`` fixture: a scrapy-redis crawl on several measured workers (pytest process)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from pytest_crawlmem.cluster.redisserver import RedisStartError
from pytest_crawlmem.cluster.report import write_cluster_report
from pytest_crawlmem.cluster.run import ClusterOptions, run_cluster
from pytest_crawlmem.core.budgets import Budgets, tracemalloc_frames
from pytest_crawlmem.core.cluster import ClusterError, ClusterResult, check_cluster, check_worker, cluster_summary, parse_kill
from pytest_crawlmem.core.protocols import ClusterFunction
from pytest_crawlmem.harness.failing import fail
from pytest_crawlmem.harness.fixtures import (
    fail_if_nothing_measured,
    fail_if_replay_found_nothing,
    fail_if_site_died,
    interrupt_crawls,
    keyword_options,
    refuse_misspelt_options,
    replaying,
    resolve_project_settings,
    spider_by_name,
)
from pytest_crawlmem.harness.interrupts import graceful_interrupts
from pytest_crawlmem.harness.session import BUDGETS_KEY, RECORDS_KEY, SESSION_KEY, CrawlRecord
from pytest_crawlmem.measure.runner import CrawlOptions
from pytest_crawlmem.reports.report import write_reports


@pytest.fixture
def crawl_cluster(request: pytest.FixtureRequest) -> ClusterFunction:
    """Run a spider on ``workers`` scrapy-redis workers sharing a private Redis; return a :class:`ClusterResult`.

    Each worker is an isolated child measured like ``crawl(isolate=True)``; the ``crawl_memory``
    budgets apply per worker, ``lost``, ``redis_memory``, ``cluster_rss`` (and ``max_scheduled``,
    read from the shared queue) to the cluster, when the test ends.
    """
    item = request.node
    session = request.config.stash[SESSION_KEY]
    budgets = item.stash.get(BUDGETS_KEY, None)
    records = item.stash.setdefault(RECORDS_KEY, [])

    def run(
        spider_cls: type | str,
        *,
        workers: int = 3,
        start_urls: list[str] | None = None,
        settings: Mapping[str, Any] | None = None,
        kill: Mapping[str, Any] | None = None,
        project_settings: bool | str | None = None,
        replay: str | Path | None = None,
        replay_copies: int = 1,
        **spider_kwargs: Any,
    ) -> ClusterResult:
        project = resolve_project_settings(item, session, project_settings)
        spider_cls = spider_by_name(spider_cls, project)
        refuse_misspelt_options("crawl_cluster", spider_kwargs, keyword_options(run), spider_cls)
        if not isinstance(workers, int) or isinstance(workers, bool) or workers < 1:
            raise ClusterError(f"invalid workers {workers!r} in crawl_cluster() of {item.nodeid}: expected a count >= 1")
        plan = parse_kill(kill, workers, source=f"crawl_cluster(kill=...) of {item.nodeid}")
        report_dir = session.report_dir_for(item.nodeid, len(records) + 1)
        options = ClusterOptions(
            workers=workers,
            worker_options=CrawlOptions(
                interval_seconds=session.settings.interval_seconds,
                tracemalloc_frames=tracemalloc_frames(budgets, session.settings.tracemalloc_frames),
                budgets=budgets or Budgets(),
                project_settings=project,
            ),
            report_dir=report_dir,
            kill=plan,
        )
        with replaying(replay, replay_copies, (None, None, None), spider_cls, start_urls) as target, \
                graceful_interrupts(interrupt_crawls) as interrupt:
            options = replace(options, worker_options=replace(options.worker_options, replay=target))
            try:
                result = run_cluster(spider_cls, start_urls=start_urls, settings=settings,
                                     spider_kwargs=spider_kwargs, options=options)
            except RedisStartError as exc:
                fail(f"crawl_cluster could not start its Redis: {exc}")
        _record_cluster(item.nodeid, result, budgets, records)
        if interrupt.interrupted:
            raise KeyboardInterrupt(f"{interrupt.message}; report: {result.report_dir}")
        summary = cluster_summary(result)
        fail_if_site_died(request, summary)
        fail_if_replay_found_nothing(target, result)
        fail_if_nothing_measured(summary, budgets, session)
        _fail_if_a_worker_failed(result)
        return result

    return run


def _fail_if_a_worker_failed(result: ClusterResult) -> None:
    """A worker that crashed, a planned failure that never happened, a cluster stopped at its deadline: fail saying so."""
    problems = []
    for end in result.ends:
        if end.how == "crashed":
            tail = [line for line in result.workers[end.worker].errors[-6:] if line]
            problems.append(f"worker {end.worker} of the cluster crashed ({end.detail})" + "".join(f"\n{t}" for t in tail))
    problems += result.errors
    if problems:
        pytest.fail("\n".join(problems) + f"\nreport: {result.report_dir}", pytrace=False)


def _record_cluster(nodeid: str, result: ClusterResult, budgets: Any, records: list[CrawlRecord]) -> None:
    """Check budgets, write the worker and cluster reports, keep a summary row for the cluster and one per worker."""
    cluster_violations = check_cluster(budgets, result) if budgets is not None else []
    records.append(CrawlRecord(f"{nodeid} [cluster]", cluster_summary(result), budgets, cluster_violations))
    for index, worker in enumerate(result.workers):
        violations = check_worker(budgets, index, worker) if budgets is not None else []
        test_id = f"{nodeid} [worker {index}]"
        if worker.report_dir is not None:
            write_reports(worker.report_dir, worker, test_id=test_id, budgets=budgets, violations=violations)
        records.append(CrawlRecord(test_id, worker, budgets, violations))
    if result.report_dir is not None:
        every = cluster_violations + [v for r in records[-len(result.workers):] for v in r.violations]
        write_cluster_report(result.report_dir, result, test_id=nodeid, budgets=budgets, violations=every)
