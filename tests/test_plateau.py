"""The plateau rule: growth that stopped reads ``steady`` with where it levelled off; a leak that goes on never does (pure)."""

from __future__ import annotations

import random

from hypothesis import assume, given, settings
from hypothesis import strategies as st
from test_growth import clean_baseline, landed, recorded, series

from pytest_crawlmem.core import verdicts as V
from pytest_crawlmem.core.defaults import DEFAULT_LEAK_PER_RESPONSE
from pytest_crawlmem.core.evidence import Limits, gather, judged_checkpoints
from pytest_crawlmem.core.growth import analyze
from pytest_crawlmem.core.plateau import PLATEAU_MIN_POINTS, PLATEAU_MIN_SHARE, find_plateau

# analyze() is pure but not instant: on 2 shared cores an example can take longer than hypothesis' 200 ms deadline
settings.register_profile("crawlmem-plateau", deadline=None, max_examples=60)
settings.load_profile("crawlmem-plateau")


def jitter(n: int, sd: int, seed: int) -> int:
    """Deterministic allocator noise at a checkpoint (Gaussian, ``sd`` bytes)."""
    return int(random.Random(n * 7919 + seed).gauss(0, sd))


def judged_counts(total: int) -> list[int]:
    """The response counts of the checkpoints a ``total``-response crawl judges (after its warm-up)."""
    return [c.responses for c in judged_checkpoints(series(total, lambda n: 0))]


#: Where the checkpoints of a 620-response crawl land when its attribution window closed at 300: every 25 responses up
#: to 300, every 40 after it (the schedule is dense after a window; its traced checkpoints are not judged).
DENSE_AFTER_WINDOW = [*range(0, 301, 25), 340, 380, 420, 460, 500, 540, 580, 620]


def test_a_cache_full_after_the_windows_middle_reads_steady_with_where_it_levelled_off():
    """A cache filling at 10 KiB/response until response 460 of 620 (Scrapy's LocalCache(limit=200) keeping responses
    fills this way): its rise reaches into the later half of the window, which the old rule read as still growing, and
    the whole window's trend as a leak."""
    memory = lambda n: clean_baseline(n) + 10 * 1024 * min(n, 460) + jitter(n, 2048, 1)
    growth = analyze(landed(DENSE_AFTER_WINDOW, memory))
    assert growth.verdict == V.STEADY, growth.reason
    assert "traced memory filled to " in growth.reason and " and levelled off at response 460" in growth.reason
    assert "after it (at most " in growth.reason and "at 95%" in growth.reason
    assert growth.per_response_bytes is not None and growth.per_response_bytes < DEFAULT_LEAK_PER_RESPONSE
    assert growth.detectable_per_response_bytes is not None
    # the same crawl whose cache goes on filling to the end is a leak, and says nothing of levelling off
    leak = analyze(landed(DENSE_AFTER_WINDOW, lambda n: clean_baseline(n) + 10 * 1024 * n + jitter(n, 2048, 1)))
    assert leak.verdict == V.RETAINED_OBJECTS and "levelled off" not in leak.reason, leak.reason


#: An SQLite page cache of 1 MiB (a row of ~2 KiB a response) filling over the first ~450 of 1,197 responses, its
#: database closed when the spider closed (benchmarks/plateau_spiders.py, sqlite_cache_1200): it read ``inconclusive``,
#: "could only have caught a leak of 10.5 KiB/response ... crawl at least 2,400 responses".
SQLITE_1200 = [
    [0, 60295152, 0, True, 0, 0], [34, 60448864, 30, True, 0, 0], [58, 60512880, 27, True, 0, 0],
    [90, 60638896, 37, True, 0, 0], [114, 60683360, 34, True, 0, 0], [139, 60760736, 51, True, 0, 0],
    [163, 60820048, 48, True, 0, 0], [187, 60889200, 45, True, 0, 0], [211, 60919632, 42, True, 0, 0],
    [235, 60973792, 39, True, 0, 0], [299, 61626304, 38, True, 379536, 0], [347, 62230768, 32, True, 545264, 0],
    [412, 61384733, 30, True, 0, 399859], [460, 61429821, 24, True, 0, 399859], [510, 61472861, 37, True, 0, 399859],
    [558, 61477309, 31, True, 0, 399859], [744, 61543837, 34, True, 0, 399859], [983, 61627405, 26, True, 0, 399859],
    [1197, 60498013, 0, True, 0, 399859]]


def test_a_native_page_cache_that_filled_and_levelled_off_reads_steady_and_leaves_out_what_its_close_released():
    growth = analyze(recorded(SQLITE_1200))
    assert growth.verdict == V.STEADY, growth.reason
    assert "heap memory filled to " in growth.reason and "levelled off at response 412" in growth.reason, growth.reason
    assert "the crawl's end released 1,0" in growth.reason and "left out of the flat part" in growth.reason
    assert "crawl at least" not in growth.reason
    assert growth.detectable_per_response_bytes is not None and growth.detectable_per_response_bytes < 2 * 1024
    # judged while it ran (no close to leave out), the same checkpoints so far level off as well
    assert analyze(recorded(SQLITE_1200[:-1]), running=True).verdict == V.STEADY
    # the same flat part growing by 1.5 KiB/response more to the end is no plateau, and not steady
    rows = [[n, h + (1536 * (n - 412) if n >= 412 else 0), *rest] for n, h, *rest in SQLITE_1200]
    rows[-1][1] = rows[-2][1] + 1536 * (1197 - 983)  # and its close let go of nothing
    leaky = analyze(recorded(rows))
    assert "levelled off" not in leaky.reason and leaky.verdict == V.RETAINED_OBJECTS, leaky.reason


#: A dict two levels below the spider keeping 1 KiB a product over 609 responses (benchmarks/detection.py): it grew
#: 2.0 KiB/response in its warm-up (its leak and the crawl's own warm-up) and 0.7 KiB/response after, under the threshold
#: as measured, so its verdict is ``steady``; its growth slowed, it never stopped.
NESTED_1K_SLOWED = [
    [0, 70230960, 0, True, 0, 0], [36, 70413808, 28, True, 0, 0], [61, 70511328, 45, True, 0, 0],
    [86, 70599216, 62, True, 0, 0], [111, 70654896, 79, True, 0, 0], [127, 70672336, 84, True, 0, 0],
    [159, 70763248, 94, True, 0, 0], [183, 70803680, 91, True, 0, 0], [215, 70891856, 101, True, 0, 0],
    [239, 70925376, 98, True, 0, 0], [303, 71625264, 97, True, 404720, 0], [351, 72462176, 91, True, 593936, 0],
    [464, 71333924, 83, True, 0, 457340], [609, 71335028, 0, True, 0, 457340], [609, 71329492, 0, True, 0, 457340]]


def test_a_leak_under_the_threshold_after_a_faster_warm_up_slowed_and_is_no_plateau():
    growth = analyze(recorded(NESTED_1K_SLOWED))
    assert gather(recorded(NESTED_1K_SLOWED), (), Limits()).plateau is None
    assert "levelled off at response" not in growth.reason and "filled to" not in growth.reason, growth.reason


def test_live_scrapy_objects_rising_at_every_checkpoint_still_decide_over_a_plateau():
    refs = lambda n: {"HtmlResponse": n // 10}
    memory = lambda n: 10 * 1024 * min(n, 300)
    growth = analyze(series(420, memory, refs=refs))
    assert growth.verdict == V.RETAINED_OBJECTS, growth.reason
    assert "HtmlResponse +" in growth.reason


def test_a_leak_after_a_cache_filled_is_still_a_leak():
    memory = lambda n: 3 * 2**20 * min(n, 500) // 500 + 2048 * n
    growth = analyze(series(2000, memory))
    assert growth.verdict == V.RETAINED_OBJECTS, growth.reason
    assert gather(series(2000, memory), (), Limits()).plateau is None


def test_the_flat_part_must_span_a_third_of_the_window_and_four_checkpoints():
    xs = [100.0, 200.0, 300.0, 400.0, 500.0, 600.0, 700.0]
    rising_until = lambda knot: [float(min(x, knot) * 5000) for x in xs]
    found = find_plateau(xs, rising_until(300.0), DEFAULT_LEAK_PER_RESPONSE)
    assert found is not None and found.at_responses == 300 and found.flat_responses == 400
    assert found.rise_per_response == 5000 and found.flat.slope == 0
    assert find_plateau(xs, rising_until(500.0), DEFAULT_LEAK_PER_RESPONSE) is None  # three checkpoints flat
    assert (PLATEAU_MIN_POINTS, PLATEAU_MIN_SHARE) == (4, 1 / 3)
    assert find_plateau(xs, [float(x * 5000) for x in xs], DEFAULT_LEAK_PER_RESPONSE) is None  # never levelled off
    assert find_plateau(xs, [0.0] * len(xs), DEFAULT_LEAK_PER_RESPONSE) is None  # flat throughout: the trend's case
    # a close that fell by what the crawl let go of is left out only when it released that much
    fell = [*rising_until(300.0)[:-1], rising_until(300.0)[-1] - 200 * 1024]
    assert find_plateau(xs, fell, DEFAULT_LEAK_PER_RESPONSE, close_released=128 * 1024).released_bytes == 200 * 1024


@given(st.integers(600, 20000), st.integers(2048, 32 * 1024), st.integers(0, 2048), st.integers(0, 300),
       st.integers(0, 5), st.data())
def test_memory_that_rose_and_stayed_flat_long_enough_reads_steady_and_says_where_it_levelled_off(
    total, fill, noise, creep, seed, data,
):
    """Rising at ``fill`` bytes/response until a judged checkpoint, then flat (a creep under a third of the threshold,
    noise within the trend's floor) over at least four checkpoints and a third of the window."""
    counts = judged_counts(total)
    window = counts[-1] - counts[0]
    knots = [k for k in range(1, len(counts) - PLATEAU_MIN_POINTS + 1) if counts[-1] - counts[k] >= PLATEAU_MIN_SHARE * window]
    assume(knots)
    knot = counts[data.draw(st.sampled_from(knots))]
    memory = lambda n: clean_baseline(n, creep=creep) + fill * min(n, knot) + jitter(n, noise, seed)
    growth = analyze(series(total, memory))
    assert growth.verdict == V.STEADY, growth.reason
    assert f"levelled off at response {knot:,}" in growth.reason and "memory filled to " in growth.reason, growth.reason


@given(st.integers(600, 20000), st.integers(DEFAULT_LEAK_PER_RESPONSE, 20 * 1024), st.integers(0, 5 * 2**20),
       st.floats(0.0, 0.5), st.integers(0, 2048), st.integers(0, 5))
def test_a_leak_that_goes_on_to_the_end_is_never_called_a_plateau(total, leak, filled, fill_share, noise, seed):
    """Whatever filled before it (up to 5 MiB, over any share of the crawl up to half), memory still rising at the
    threshold or more to the end is never a plateau, and never steady with a place it levelled off."""
    fill_until = max(1, int(total * fill_share))
    memory = lambda n: (clean_baseline(n) + filled * min(n, fill_until) // fill_until + leak * n
                        + jitter(n, noise, seed))
    checkpoints = series(total, memory)
    assert gather(checkpoints, (), Limits()).plateau is None
    growth = analyze(checkpoints)
    assert "levelled off at response" not in growth.reason, growth.reason
    if total >= 1000:
        assert growth.verdict == V.RETAINED_OBJECTS, growth.reason


def test_a_plateau_found_while_the_crawl_runs_keeps_its_last_checkpoint():
    """A production crawl's last checkpoint is no close: a fall there is judged with the rest, never left out."""
    plateau = gather(recorded(SQLITE_1200), (), Limits(running=True)).plateau
    assert plateau is None or plateau.released_bytes == 0
