"""What a replayed crawl with copies tells the tester: its figures per copy, what ``replay_copies="auto"`` got, and a
warning for copies that fell short of the original (pytest process)."""

from __future__ import annotations

import pytest

from pytest_crawlmem.core.models import CrawlResult
from pytest_crawlmem.core.replay import ReplayTarget
from pytest_crawlmem.core.replay_copies import auto_line, copies_warning, per_copy_line
from pytest_crawlmem.core.schedule import AUTO_REPLAY_RESPONSES
from pytest_crawlmem.harness.session import CrawlMemSession, CrawlMemWarning


def note_replay_copies(item: pytest.Item, session: CrawlMemSession, target: ReplayTarget | None, result: CrawlResult,
                       asked: object) -> None:
    """Lines under the summary (responses and items per copy; what ``"auto"`` chose and got) and a CrawlMemWarning
    naming the likely cause when a copy fell short of the original."""
    if target is None:
        return
    per_copy = result.replay_per_copy
    if asked == "auto":
        entries = int(target.summary.get("entries") or 0)
        session.notes.append(f"{item.nodeid}: {auto_line(target.copies, entries, per_copy, wanted=AUTO_REPLAY_RESPONSES)}")
    if target.copies < 2 or not per_copy:
        return
    session.notes.append(f"{item.nodeid}: replay: {per_copy_line(per_copy)}")
    warning = copies_warning(per_copy, patterns=result.replay_rules, hosts=tuple(target.summary.get("hosts") or ()),
                             finish_reason=result.finish_reason)
    if warning is not None:
        item.warn(CrawlMemWarning(warning))
