"""The verdict of checkpoints taken so far (production's running verdict): pure core logic, no crawl."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from pytest_crawlmem.core.evidence import suspicious
from pytest_crawlmem.core.growth import analyze
from pytest_crawlmem.core.models import Checkpoint

MIB = 2**20


def checkpoint(responses: int, rss: int, *, drained: bool = True, browser: bool = False) -> Checkpoint:
    return Checkpoint(responses=responses, t_seconds=responses / 10, rss_bytes=rss, heap_bytes=rss // 2,
                      traced_bytes=None, scheduled=0, live_refs={}, drained=drained,
                      browser_uss_bytes=300 * MIB if browser else None, open_pages=0 if browser else None,
                      open_contexts=1 if browser else None)


@given(st.lists(st.tuples(st.integers(0, 3), st.integers(0, 64 * MIB)), min_size=1, max_size=12))
def test_suspicious_never_divides_by_zero_on_checkpoints_of_equal_response_counts(steps):
    responses, points = 150, []
    for step, grown in steps:  # steps of 0 responses: checkpoints at the same count (a stalled or stopped crawl)
        responses += step * 25
        points.append(checkpoint(responses, 80 * MIB + grown))
    assert suspicious([checkpoint(0, 80 * MIB), *points]) in (True, False)


def test_suspicious_judges_repeated_counts_by_their_last_reading():
    leaking = [checkpoint(0, 80 * MIB)] + [checkpoint(n, 80 * MIB + n * 32 * 1024) for n in range(50, 301, 50)]
    assert suspicious([*leaking, checkpoint(300, 80 * MIB + 300 * 32 * 1024)])


def test_a_verdict_says_when_checkpoints_did_not_drain_and_what_would_make_them():
    # the crawl: 149 responses, every mid-crawl checkpoint hit the drain timeout (32 in flight, screenshots)
    counts = [0, 20, 42, 65, 86, 106, 149]
    checkpoints = [checkpoint(n, 90 * MIB, drained=n in (0, 149), browser=True) for n in counts]
    reason = analyze(checkpoints, min_interval=20).reason
    assert "the checkpoints did not drain: 5 of 5 hit the drain timeout" in reason, reason
    assert "PLAYWRIGHT_MAX_PAGES_PER_CONTEXT" in reason and "CRAWLMEM_DRAIN_TIMEOUT_SECONDS" in reason


def test_a_plain_crawl_whose_checkpoints_did_not_drain_is_told_what_would_make_them():
    counts = [0, 100, 200, 300, 450, 675, 1000, 1500]
    checkpoints = [checkpoint(n, 80 * MIB, drained=n not in (450, 675)) for n in counts]
    reason = analyze(checkpoints).reason
    assert reason.count("did not drain") == 1, reason
    assert "2 of 6" in reason or "2 checkpoints after the warm-up did not drain" in reason, reason


def test_a_verdict_of_drained_checkpoints_says_nothing_of_draining():
    checkpoints = [checkpoint(n, 80 * MIB) for n in (0, 100, 200, 300, 450, 675, 1000, 1500)]
    assert "drain" not in analyze(checkpoints).reason
