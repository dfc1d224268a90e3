"""take_snapshot keeps exactly the traces tracemalloc's own filter_traces keeps, deciding once per file."""

from __future__ import annotations

import tracemalloc

import pytest

from pytest_crawlmem.probes import snapshots


def _raw(filename: str, size: int) -> tuple[int, int, tuple[tuple[str, int], ...], int]:
    return (0, size, ((filename, 1), ("/srv/project/spiders.py", 9)), 2)  # newest frame first, as CPython keeps them


RAW = [
    _raw("/srv/project/spiders.py", 100),
    _raw(tracemalloc.__file__, 200),
    _raw("/venv/lib/python3.11/site-packages/_pytest/runner.py", 300),
    _raw("/venv/lib/python3.11/site-packages/pluggy/_hooks.py", 400),
    _raw("<frozen importlib._bootstrap>", 500),
    _raw("/usr/lib/python3.11/linecache.py", 600),
    _raw("/venv/lib/python3.11/site-packages/scrapy/http/response/text.py", 700),
    _raw("/srv/project/items.pyc", 800),
]


def test_take_snapshot_keeps_what_filter_traces_keeps(monkeypatch: pytest.MonkeyPatch) -> None:
    snapshot = tracemalloc.Snapshot(list(RAW), 8)
    monkeypatch.setattr(snapshots.tracemalloc, "take_snapshot", lambda: snapshot)
    expected = snapshot.filter_traces(snapshots._filters()).traces._traces  # type: ignore[attr-defined]
    kept = snapshots.take_snapshot()
    assert kept.traces._traces == expected  # type: ignore[attr-defined]
    assert [t[1] for t in expected] == [100, 700, 800]  # the harness's files left out, the user's and Scrapy's kept
    assert kept.traceback_limit == 8


def test_without_cpythons_raw_traces_it_falls_back_to_filter_traces(monkeypatch: pytest.MonkeyPatch) -> None:
    snapshot = tracemalloc.Snapshot(list(RAW), 8)
    monkeypatch.setattr(snapshot.traces, "_traces", None, raising=False)
    monkeypatch.setattr(snapshots.tracemalloc, "take_snapshot", lambda: snapshot)
    called = []
    monkeypatch.setattr(snapshot, "filter_traces", lambda filters: called.append(filters) or snapshot)
    assert snapshots.take_snapshot() is snapshot
    assert called and all(not f.inclusive for f in called[0])
