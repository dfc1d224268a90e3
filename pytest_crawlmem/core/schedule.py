"""When drained checkpoints are taken and which of them a verdict judges: the schedule and the warm-up (pure).

Dense checkpoints early, sparser later; the warm-up that is never judged; how many responses a verdict needs.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import lru_cache
from itertools import pairwise

from pytest_crawlmem.core.defaults import CHECKPOINT_MIN_RESPONSES
from pytest_crawlmem.core.leaktrend import (
    TREND_MIN_POINTS,
)

#: Judged checkpoints closer than this are merged (the later one kept).
MIN_INTERVAL_RESPONSES = 20


DENSE_UNTIL_RESPONSES = 300


STRONG_WARMUP_RESPONSES = 50


#: The strong trend's checkpoints may be this close: a checkpoint lands up to CONCURRENT_REQUESTS responses after it
#: was due, so checkpoints due 25 apart landed 16-17 apart and, merged at 20, left a 147-response crawl 3 of its 5.
#: The least-squares fit weighs a close pair by its leverage and the stated power is simulated at the very counts.
STRONG_MIN_GAP = 10


#: replay_copies="auto" serves the recording often enough for this many responses: a clean catalog crawl of 600
#: responses bounds a leak at 1.3-1.9 KiB/response (benchmarks/detection.py --stated 600).
AUTO_REPLAY_RESPONSES = 600


def next_checkpoint_at(responses: int, min_interval: int = CHECKPOINT_MIN_RESPONSES, dense_until: int = 0) -> int:
    """Return the response count of the checkpoint after one taken at ``responses``.

    Every ``min_interval`` responses up to DENSE_UNTIL_RESPONSES (a short crawl gets the checkpoints a trend needs:
    a 300-response crawl has 9 after its warm-up), then a third of the responses so far apart, so a crawl of N responses
    pays for O(log N) of them. The queue does not move it: requests waiting are no promise of responses to come
    (CLOSESPIDER_*, a frontier cut short), and a checkpoint skipped for a warm-up the crawl never reached left a
    1,505-response frontier crawl with 2 judged checkpoints. Up to ``dense_until`` (an attribution window closed:
    POST_WINDOW_DENSE_RESPONSES after it) they come every POST_WINDOW_STEPS x ``min_interval``: see POST_WINDOW_DENSE_RESPONSES.
    """
    if responses < DENSE_UNTIL_RESPONSES:
        return responses + min_interval
    if responses < dense_until:
        return responses + POST_WINDOW_STEPS * min_interval
    return responses + max(min_interval, responses // 3)


POST_WINDOW_STEPS = 2


#: Responses after which a short crawl is assumed warm (a long one: after a quarter of it).
WARMUP_RESPONSES = 100


def warmup_responses(total: int) -> int:
    """Responses after which the crawl is assumed warm: max(100, N/4)."""
    return max(WARMUP_RESPONSES, total // 4)


def checkpoint_schedule(total: int, min_interval: int = CHECKPOINT_MIN_RESPONSES) -> list[int]:
    """Response counts of the checkpoints a crawl of ``total`` responses takes: opening, scheduled, closing."""
    points = [0]
    at = min_interval
    while at < total:
        points.append(at)
        at = next_checkpoint_at(at, min_interval)
    return [*points, total] if total > 0 else points


def merged_points(counts: Sequence[int], warmup: int, min_gap: int = MIN_INTERVAL_RESPONSES) -> list[int]:
    """Indexes of the counts at or after ``warmup``, dropping one closer than ``min_gap`` responses to the last kept.

    The closing count is always kept (it replaces the one just before it when they are close).
    """
    kept: list[int] = []
    warm = [i for i, n in enumerate(counts) if n >= warmup]
    for i in warm:
        if kept and counts[i] - counts[kept[-1]] < min_gap:
            if i == warm[-1] and (len(kept) == 1 or counts[i] > counts[kept[-2]]):
                kept[-1] = i
            continue
        kept.append(i)
    return kept if all(b > a for a, b in pairwise(counts[i] for i in kept)) else []  # never an empty interval


def scheduled_points(
    total: int, min_interval: int, warmup: int | None = None, min_gap: int = MIN_INTERVAL_RESPONSES
) -> list[int]:
    """The response counts the schedule of a ``total``-response crawl judges (after ``warmup``, by default the regular one)."""
    counts = checkpoint_schedule(total, min_interval)
    return [counts[i] for i in merged_points(counts, warmup_responses(total) if warmup is None else warmup, min_gap)]


@lru_cache(maxsize=8)
def responses_to_judge(min_interval: int = CHECKPOINT_MIN_RESPONSES) -> int:
    """The fewest responses whose checkpoint schedule gives TREND_MIN_POINTS judged checkpoints (any leak size)."""
    total = 1
    while len(scheduled_points(total, min_interval)) < TREND_MIN_POINTS:
        total += 1
    return total


@lru_cache(maxsize=8)
def responses_to_judge_strong(min_interval: int = CHECKPOINT_MIN_RESPONSES) -> int:
    """The fewest responses that give TREND_MIN_POINTS checkpoints after STRONG_WARMUP_RESPONSES."""
    total = 1
    while len(scheduled_points(total, min_interval, STRONG_WARMUP_RESPONSES, STRONG_MIN_GAP)) < TREND_MIN_POINTS:
        total += 1
    return total


def auto_replay_copies(entries: int, responses: int = AUTO_REPLAY_RESPONSES, most: int = 10_000) -> int:
    """The copies of a recording of ``entries`` responses that give a crawl ``responses`` of them (1 to ``most``)."""
    return max(1, min(most, math.ceil(responses / max(entries, 1))))


def round_up(n: int) -> int:
    """``n`` rounded up to two significant figures (a count to tell people)."""
    step: int = 10 ** max(len(str(n)) - 2, 0)
    return -(-n // step) * step
