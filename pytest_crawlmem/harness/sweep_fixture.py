"""The ``crawl_sweep`` fixture: one workload under several settings variants (pytest process).

Each variant is one call of the ``crawl`` fixture, so it is measured, reported and
checked against the test's budgets exactly like any crawl; this module only names the
variants, merges their settings, tags their records and writes the sweep's table.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from pytest_crawlmem.core.protocols import CrawlFunction, SweepFunction
from pytest_crawlmem.core.sweep import DEFAULT_ISOLATE, Pick, SweepResult, SweepRow, Variants, name_variants
from pytest_crawlmem.harness.fixtures import SWEEPING_KEY, keyword_options, refuse_misspelt_options
from pytest_crawlmem.harness.session import RECORDS_KEY, SESSION_KEY
from pytest_crawlmem.reports.sweep_report import write_sweep_files


@pytest.fixture
def crawl_sweep(request: pytest.FixtureRequest, crawl: CrawlFunction) -> SweepFunction:
    """Run the same crawl once per settings variant; return the :class:`SweepResult` table.

    ``variants`` maps a name to settings overrides (or is a list of overrides, named from
    their keys and values); each variant's settings are ``settings`` updated with its
    overrides. Variants run in order, isolated by default.
    """
    item = request.node
    session = request.config.stash[SESSION_KEY]
    records = item.stash.setdefault(RECORDS_KEY, [])
    sweeps_run = [0]

    def run(
        spider_cls: type | str,
        variants: Variants,
        *,
        start_urls: list[str] | None = None,
        settings: Mapping[str, Any] | None = None,
        isolate: bool = DEFAULT_ISOLATE,
        replay: str | Path | None = None,
        replay_copies: int = 1,
        **spider_kwargs: Any,
    ) -> SweepResult:
        # crawl()'s own options (project_settings, replay_latency, ...) pass through; a near miss of either is refused
        refuse_misspelt_options("crawl_sweep", spider_kwargs, keyword_options(run) + keyword_options(crawl), spider_cls)
        named = name_variants(variants)  # a bad sweep fails before the first crawl
        sweeps_run[0] += 1
        rows, results = [], {}
        for name, overrides in named:
            item.stash[SWEEPING_KEY] = True
            try:
                result = crawl(spider_cls, start_urls=start_urls, settings={**(settings or {}), **overrides},
                               isolate=isolate, replay=replay, replay_copies=replay_copies, **spider_kwargs)
            finally:
                item.stash[SWEEPING_KEY] = False
            record = records[-1]
            assert record.result is result, "the crawl fixture records each crawl it runs"
            record.variant, record.sweep = name, sweeps_run[0]
            rows.append(SweepRow.of(name, overrides, result, [v.budget for v in record.violations if v.fails]))
            results[name] = result
        test_dir, index = session.report_dir_for(item.nodeid, 1), sweeps_run[0]
        entry: dict[str, Any] = {}  # this sweep's line in the summary, updated by the test's picks

        def picked(pick: Pick) -> None:  # the test's last best() is what the summary and sweep.json show
            entry.update(write_sweep_files(test_dir, sweep, index, pick))

        sweep = SweepResult(item.nodeid, tuple(rows), isolated=isolate or session.settings.isolate, results=results,
                            on_pick=picked)
        entry.update(write_sweep_files(test_dir, sweep, index))
        session.sweeps.append(entry)
        return sweep

    return run
