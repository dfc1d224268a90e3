"""tracemalloc is started, stopped and snapshotted only under snapshots.TRACING_LOCK (the sampler thread snapshots
while the reactor thread may stop tracing: on CPython 3.11 that can free what the snapshot is being built from)."""

from __future__ import annotations

import ast
import threading
import tracemalloc
from pathlib import Path

from pytest_crawlmem.probes import snapshots

PACKAGE = Path(snapshots.__file__).resolve().parents[1]
GUARDED = {"start", "stop", "take_snapshot", "clear_traces"}


def _calls_outside_the_lock() -> list[str]:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path == Path(snapshots.__file__).resolve():
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in GUARDED
                    and isinstance(node.func.value, ast.Name) and node.func.value.id == "tracemalloc"):
                found.append(f"{path.relative_to(PACKAGE)}:{node.lineno}: tracemalloc.{node.func.attr}()")
    return found


def test_no_module_but_snapshots_starts_stops_or_snapshots_tracemalloc() -> None:
    assert _calls_outside_the_lock() == []


def test_stopping_waits_for_a_snapshot_under_way() -> None:
    was_tracing = tracemalloc.is_tracing()
    snapshots.start_tracing(1)
    stopped = threading.Event()
    try:
        with snapshots.TRACING_LOCK:  # as take_snapshot() holds it
            stopper = threading.Thread(target=lambda: (snapshots.stop_tracing(), stopped.set()))
            stopper.start()
            assert not stopped.wait(0.2)
            assert tracemalloc.is_tracing()
        stopper.join(10)
        assert stopped.is_set() and not tracemalloc.is_tracing()
    finally:
        if was_tracing and not tracemalloc.is_tracing():
            tracemalloc.start()
