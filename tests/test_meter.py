"""The shared drained checkpoint (meter.py) and the attribution window (attribution.py), driven without a crawl.

Both collect garbage, read the process and start tracemalloc, so each runs in a fresh interpreter.
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest

CHECKPOINT_SCRIPT = '''
import json, time, tracemalloc
from pytest_crawlmem.probes.meter import drained_checkpoint

started = time.monotonic()
time.sleep(0.05)  # the caller's drain wait: it counts in the checkpoint's cost
tracemalloc.start(1)
kept = [bytearray(4096) for _ in range(64)]
traced = drained_checkpoint(7, started_at=started - 1.0, cost_started=started, scheduled=3, drained=False,
                            read=lambda: {"live_refs": {"HtmlResponse": 2}})
untraced = drained_checkpoint(7, started_at=started, cost_started=time.monotonic(), traced=False, scheduled=0)
tracemalloc.stop()
print(json.dumps({"traced": traced.to_json(), "untraced": untraced.to_json()}))
'''

WINDOW_SCRIPT = '''
import json, tracemalloc
from pytest_crawlmem.core.schedule import next_checkpoint_at
from pytest_crawlmem.core.models import Checkpoint
from pytest_crawlmem.attribution.window import AttributionWindow
from pytest_crawlmem.probes.recording import Recording

BASE = 100 * 2**20
recording = Recording(None)
window = AttributionWindow(recording, frames=1, max_responses=150, enabled=True, leak_per_response=2048)
steps, planned = [], 0
while planned < 2000:
    checkpoint = Checkpoint(responses=planned, t_seconds=planned / 100, rss_bytes=BASE + 10240 * planned,
                            heap_bytes=BASE + 10240 * planned, traced_bytes=None, scheduled=0, allocated_blocks=0)
    recording.add_checkpoint(checkpoint)
    scheduled = next_checkpoint_at(planned, 100) if planned else 100
    planned = window.at_checkpoint(None, checkpoint, scheduled)
    steps.append({"at": checkpoint.responses, "scheduled": scheduled, "next": planned, "open": window.is_open,
                  "tracing": tracemalloc.is_tracing(), "owns_tracing": window.adopt_tracing()})
print(json.dumps({"steps": steps, "errors": recording.errors}))
'''

SHORT_WINDOW_SCRIPT = '''
import json, tracemalloc
from pytest_crawlmem.core.models import Checkpoint
from pytest_crawlmem.attribution.window import AttributionWindow
from pytest_crawlmem.probes.recording import Recording

BASE = 100 * 2**20
recording = Recording(None)
window = AttributionWindow(recording, frames=1, max_responses=100, enabled=True, leak_per_response=1024)
steps = []
for at, scheduled in [(0, 34), (34, 58), (58, 82), (90, 114), (114, 138), (138, 162)]:  # a 147-response crawl's layout
    checkpoint = Checkpoint(responses=at, t_seconds=at / 100, rss_bytes=BASE + 5120 * at, heap_bytes=BASE + 5120 * at,
                            traced_bytes=None, scheduled=0, allocated_blocks=0)
    recording.add_checkpoint(checkpoint)
    planned = window.at_checkpoint(None, checkpoint, scheduled)
    steps.append({"at": at, "scheduled": scheduled, "next": planned, "open": window.is_open,
                  "tracing": tracemalloc.is_tracing()})
print(json.dumps({"steps": steps, "errors": recording.errors}))
'''


def run(script: str) -> Any:
    """Run a script in a fresh interpreter and return the JSON it prints."""
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


@pytest.mark.slow  # starts a crawl or a browser in a subprocess of its own
def test_a_drained_checkpoint_reads_the_process_and_counts_the_callers_drain_in_its_cost():
    out = run(CHECKPOINT_SCRIPT)
    traced, untraced = out["traced"], out["untraced"]
    assert traced["responses"] == 7 and traced["scheduled"] == 3 and traced["drained"] is False
    assert traced["live_refs"] == {"HtmlResponse": 2}
    assert traced["cost_seconds"] >= 0.05 and traced["t_seconds"] >= 1.05
    assert traced["traced_bytes"] >= 64 * 4096 and traced["tracer_bytes"] > 0
    assert traced["rss_bytes"] > 0 and traced["allocated_blocks"] > 0
    # a browser job records no traced figures even while tracemalloc runs, and nothing it was not given
    assert untraced["traced_bytes"] is None and untraced["tracer_bytes"] == 0 and untraced["live_refs"] == {}
    assert untraced["cost_seconds"] < traced["cost_seconds"]


@pytest.mark.slow  # starts a crawl or a browser in a subprocess of its own
def test_the_window_opens_once_on_a_leaky_crawl_closes_halfway_and_the_schedule_resumes():
    out = run(WINDOW_SCRIPT)
    steps = out["steps"]
    opened = [s for s in steps if s["open"]]
    # one window: its opening checkpoint and, at most, the middle one it takes to see a site grow in both halves
    assert 1 <= len(opened) <= 2, steps
    first = steps.index(opened[0])
    assert steps[first:first + len(opened)] == opened, steps  # contiguous
    at, scheduled, extra = opened[0]["at"], opened[0]["scheduled"], opened[0]["next"]
    assert opened[0]["tracing"]  # the window started tracemalloc itself
    assert at < extra <= at + max(scheduled - at, 2) // 2 and extra - at <= 150
    closing = steps[first + len(opened)]
    assert closing["at"] - at <= 150  # the window's room
    assert closing["next"] == scheduled  # the extra checkpoints do not shift the schedule
    assert not closing["open"] and not closing["tracing"]  # and it stopped the tracing it started
    # only an open window keeps tracing someone else started (the danger snapshot's): a closed one owns none
    assert [s["owns_tracing"] for s in steps] == [s["open"] for s in steps]
    assert all(s["next"] == s["scheduled"] for s in steps if not s["open"] and s is not closing)
    assert out["errors"] == []


@pytest.mark.slow  # starts a crawl or a browser in a subprocess of its own
def test_a_short_crawls_window_waits_for_the_fourth_strong_checkpoint_and_keeps_the_schedule():
    """5 KiB/response from the start looks leaky at 114 responses (58, 90, 114 after the strong warm-up), but the short
    crawl's verdict needs a fourth point: the window opens at 138, and 114's next checkpoint is the scheduled one."""
    out = run(SHORT_WINDOW_SCRIPT)
    steps = {s["at"]: s for s in out["steps"]}
    assert not any(s["open"] or s["tracing"] for at, s in steps.items() if at <= 114), steps
    assert steps[114]["next"] == 138
    assert steps[138]["open"] and steps[138]["tracing"], steps
    assert out["errors"] == []  # the containers measured at 114, before tracing, without a complaint
