"""A production job judged from its Scrapy stats at the close: the leak verdict, a budget that stopped it, a governor
close (pure). The Spidermon monitors (``pytest_crawlmem/spidermon.py``) fail a job on these findings.

The crawl process's extension writes the stats (``crawlmem/verdict``, ``crawlmem/growth_per_response``,
``crawlmem/peak_rss``, ``crawlmem/governor/*``; docs/production.md); Scrapy's ``finish_reason`` says why the job ended.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pytest_crawlmem.core import stops, verdicts
from pytest_crawlmem.core.defaults import name_of
from pytest_crawlmem.core.stops import MEMORY_BUDGET
from pytest_crawlmem.core.units import format_size

#: The stops of a budget in a production crawl: the hard ceiling and the timeout (their finish reasons).
BUDGET_STOPS = {stops.KILL_AT: f"kill_at ({name_of('kill_at_bytes')})", stops.TIMEOUT: f"timeout ({name_of('timeout_seconds')})",
                stops.UNCLOSED_PAGES: "unclosed pages (a browser crawl stalled on pages never closed)"}


@dataclass(frozen=True, slots=True)
class JobFinding:
    """Why a job fails a memory monitor, in one sentence with its figures."""

    kind: str  # "leak", "budget", "governor"
    message: str


def _size(stats: Mapping[str, Any], key: str) -> str:
    value = stats.get(key)
    return format_size(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else "?"


def leak_finding(stats: Mapping[str, Any]) -> JobFinding | None:
    """The job's leak verdict (``retained-objects``, ``browser-state``) with its growth per response and peak RSS."""
    verdict = str(stats.get("crawlmem/verdict") or "")
    if not verdicts.is_leak(verdict):
        return None
    per = stats.get("crawlmem/growth_per_response")
    growth = f"{format_size(per)}/response" if isinstance(per, (int, float)) else "an unmeasured amount per response"
    responses = stats.get("response_received_count")
    over = f" over {responses:,} responses" if isinstance(responses, int) else ""
    return JobFinding("leak", f"crawlmem leak verdict {verdict}: memory grew {growth}{over} while the queues stayed flat"
                              f" (peak RSS {_size(stats, 'crawlmem/peak_rss')}); fix: {verdicts.fix_of(verdict)}")


def budget_finding(stats: Mapping[str, Any]) -> JobFinding | None:
    """The budget that stopped the job (its finish reason), with the peak RSS."""
    reason = str(stats.get("finish_reason") or "")
    if reason not in BUDGET_STOPS:
        return None
    return JobFinding("budget", f"crawlmem stopped the job: budget {BUDGET_STOPS[reason]} broken (finish reason {reason},"
                                f" peak RSS {_size(stats, 'crawlmem/peak_rss')})")


def governor_finding(stats: Mapping[str, Any]) -> JobFinding | None:
    """A close by the memory governor (finish reason ``memory_budget``), with its budget and the peak RSS."""
    if stats.get("finish_reason") != MEMORY_BUDGET:
        return None
    return JobFinding("governor", f"the crawlmem memory governor closed the job (finish reason {MEMORY_BUDGET}): RSS held"
                                  f" near its budget of {_size(stats, 'crawlmem/governor/budget_bytes')} (peak RSS"
                                  f" {_size(stats, 'crawlmem/peak_rss')}); JOBDIR resumes it")


def job_findings(stats: Mapping[str, Any]) -> list[JobFinding]:
    """Every finding of a job's stats, in the order leak, budget, governor."""
    return [f for f in (leak_finding(stats), budget_finding(stats), governor_finding(stats)) if f is not None]
