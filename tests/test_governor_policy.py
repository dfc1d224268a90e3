"""The governor's controller and the cgroup parsing, on synthetic samples (pure, no crawl)."""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from pytest_crawlmem.core.cgroup import CgroupPaths, auto_budget, limit_files, parse_limit, parse_proc_cgroup, smallest_limit
from pytest_crawlmem.governor.policy import (
    BACKLOG,
    CLOSE,
    IN_FLIGHT,
    ITEMS,
    RESTORE,
    RETAINED,
    CostModel,
    Policy,
    PolicyConfig,
    Sample,
    coming_item_bytes,
    promised_items,
)

MIB = 2**20
settings.register_profile("crawlmem-governor", deadline=None, max_examples=60)
settings.load_profile("crawlmem-governor")

V1_TEXT = """12:pids:/
4:memory:/process_api/f18e2c92
3:cpu,cpuacct:/
0::/
"""


def test_proc_cgroup_names_the_v1_memory_path_and_the_v2_path():
    assert parse_proc_cgroup(V1_TEXT) == CgroupPaths(v2="/", v1_memory="/process_api/f18e2c92")
    assert parse_proc_cgroup("0::/user.slice/crawl.scope\n") == CgroupPaths(v2="/user.slice/crawl.scope", v1_memory=None)
    assert parse_proc_cgroup("garbage\n") == CgroupPaths(None, None)


def test_limit_files_are_the_inner_cgroup_first_then_the_mount_root():
    files = limit_files(CgroupPaths(v2="/a/b", v1_memory="/c"), root="/sys/fs/cgroup")
    assert files == ["/sys/fs/cgroup/a/b/memory.max", "/sys/fs/cgroup/memory.max",
                     "/sys/fs/cgroup/memory/c/memory.limit_in_bytes", "/sys/fs/cgroup/memory/memory.limit_in_bytes"]


def test_no_limit_is_spelled_max_or_a_huge_number():
    assert parse_limit("max\n") is None
    assert parse_limit("9223372036854771712\n") is None  # v1's "no limit"
    assert parse_limit("419430400\n") == 400 * MIB
    assert parse_limit("") is None and parse_limit("x") is None and parse_limit("0") is None
    assert smallest_limit([None, "max", "419430400", "838860800"]) == 400 * MIB
    assert smallest_limit([None, "max"]) is None


def test_auto_is_80_percent_of_the_limit():
    assert auto_budget(400 * MIB) == 320 * MIB
    assert auto_budget(None) is None


def config(**kw: int) -> PolicyConfig:
    return PolicyConfig(**{"budget_bytes": 300 * MIB, "base_concurrency": 64, "base_active_size": 5_000_000, **kw})


def test_nothing_changes_while_the_budget_is_not_approached():
    policy = Policy(config())
    for i in range(50):
        assert policy.step(Sample(rss_bytes=(100 + i % 7) * MIB, in_flight=64, queued=500)) == []
    assert not policy.governing


def test_the_learned_costs_follow_the_samples():
    model = CostModel(prior_in_flight=256 * 1024, prior_queued=2048)
    for f in range(1, 40):
        for q in (0, 1000, 3000):
            model.update(Sample(rss_bytes=80 * MIB + f * 3 * MIB + q * 10_000, in_flight=f, queued=q))
    cost_f, cost_q = model.costs()
    assert abs(cost_f - 3 * MIB) < 0.3 * MIB  # the prior pulls it a little
    assert abs(cost_q - 10_000) < 1_000


@given(rss=st.integers(0, 2**40), f=st.integers(0, 10_000), q=st.integers(0, 10**6),
       active=st.integers(0, 2**32), held=st.integers(0, 1000))
def test_the_costs_are_never_negative(rss: int, f: int, q: int, active: int, held: int):
    model = CostModel(prior_in_flight=256 * 1024, prior_queued=2048)
    model.update(Sample(rss, f, q, active, held))
    model.update(Sample(rss // 2, f // 2, q // 3, active, held))
    cost_f, cost_q = model.costs()
    assert cost_f >= 1 and cost_q >= 0


def simulate(policy: Policy, *, base: int, cost: int, body: int, ticks: int, queued: int = 0,
             queue_cost: int = 0) -> list[int]:
    """A crawl whose RSS is base + cost x in-flight (+ its queue): the RSS of each tick."""
    rss_seen = []
    spilled = 0
    for _ in range(ticks):
        in_flight = policy.levers.concurrency
        in_memory = 0 if policy.levers.spill else queued - spilled
        rss = base + cost * in_flight + queue_cost * in_memory
        rss_seen.append(rss)
        for decision in policy.step(Sample(rss, in_flight, in_memory, body * 2, 2)):
            spilled += decision.spill_now
            if decision.close:
                return rss_seen
    return rss_seen


@given(base_mib=st.integers(40, 150), cost_kib=st.integers(256, 8192), extra_mib=st.integers(100, 600))
def test_a_crawl_that_fits_at_concurrency_one_settles_under_the_budget(base_mib: int, cost_kib: int, extra_mib: int):
    cfg = config(budget_bytes=(base_mib + extra_mib) * MIB)
    cost = cost_kib * 1024
    policy = Policy(cfg)
    seen = simulate(policy, base=base_mib * MIB, cost=cost, body=cost // 3, ticks=120)
    assert len(seen) == 120, "it closed a crawl that fits"
    assert max(seen[-40:]) < cfg.budget_bytes
    assert 1 <= policy.levers.concurrency <= 64


@given(base_mib=st.integers(40, 100), cost_kib=st.integers(1024, 8192))
def test_concurrency_settles_near_what_the_headroom_allows(base_mib: int, cost_kib: int):
    cfg = config()
    cost = cost_kib * 1024
    fits = int((cfg.low_share * cfg.budget_bytes - base_mib * MIB) // cost)
    policy = Policy(cfg)
    simulate(policy, base=base_mib * MIB, cost=cost, body=cost // 2, ticks=200)
    assert policy.levers.concurrency >= min(64, max(1, int(0.8 * fits)))


def test_a_lowering_names_the_in_flight_lever_and_says_the_numbers():
    policy = Policy(config())
    decisions = policy.step(Sample(400 * MIB, 64, 0, 10 * MIB, 5))
    assert [d.kind for d in decisions] == [IN_FLIGHT]
    assert policy.levers.concurrency < 64
    assert "400.0 MiB over 85% of the 300.0 MiB budget with 64 in flight" in decisions[0].message


def test_a_growing_backlog_is_spilled_and_gated_without_touching_concurrency():
    policy = Policy(config(), baseline_bytes=80 * MIB)
    for q in range(0, 20_000, 2000):
        policy.step(Sample(80 * MIB + 8 * MIB + q * 10_000, 4, q))
    assert policy.levers.spill and policy.levers.gate_start
    assert policy.levers.concurrency == 64


def test_the_gate_opens_when_the_queue_runs_low_so_the_crawl_never_starves():
    policy = Policy(config())
    policy.step(Sample(290 * MIB, 4, 5000))
    assert policy.levers.gate_start
    decisions = policy.step(Sample(290 * MIB, 4, 3))
    assert not policy.levers.gate_start and decisions[0].kind == BACKLOG


def test_restoring_waits_for_calm_ticks_and_then_gives_back():
    policy = Policy(config())
    policy.step(Sample(400 * MIB, 64, 0, 10 * MIB, 5))
    low = policy.levers.concurrency
    assert policy.step(Sample(240 * MIB, low, 0)) == []  # between the thresholds: hold
    assert policy.step(Sample(100 * MIB, low, 0)) == []
    assert policy.step(Sample(100 * MIB, low, 0)) == []
    decisions = policy.step(Sample(100 * MIB, low, 0))
    assert [d.kind for d in decisions] == [RESTORE] and policy.levers.concurrency > low


def test_memory_neither_in_flight_nor_queued_is_called_retained_once():
    policy = Policy(config(), baseline_bytes=60 * MIB)
    kinds = []
    for _ in range(5):
        kinds += [d.kind for d in policy.step(Sample(270 * MIB, 1, 0, 100_000, 1))]
    assert kinds.count(RETAINED) == 1
    assert CLOSE not in kinds


def test_a_leak_hovering_at_the_close_share_stays_paused_and_closes_after_the_close_time():
    """Once memory was called retained, a trim's dip under the close share neither restarts the close's clock nor lifts
    the pause while RSS stays over the act share (a leak flapped at the line and closed after 9 s instead of 3); a crawl
    with no retained memory starts the clock again, and a dip under the act share stops it."""
    cfg = config(close_after_seconds=3.0)
    for leak, dip, closes in ((True, 284, True), (False, 284, False), (True, 250, False)):
        policy = Policy(cfg, baseline_bytes=60 * MIB)
        policy.open(60 * MIB)
        if leak:
            assert RETAINED in [d.kind for d in policy.step(Sample(270 * MIB, 1, 0, 100_000, 1, t_seconds=99.0))]
        closed, paused = [], []
        for k in range(24):  # 6 s: over, under, over, under...
            sample = Sample((286 if k % 2 == 0 else dip) * MIB, 1, 0, 100_000, 1, collected=False,
                            t_seconds=100.0 + 0.25 * k)
            closed += [d for d in policy.step(sample) if d.close]
            paused.append(policy.paused(sample))
        assert bool(closed) is closes, (leak, dip)
        if closes:
            assert all(paused) and "passed 95% and, with memory retained, stayed over 85%" in closed[0].message
        else:
            assert not all(paused)


def test_it_closes_only_after_staying_over_the_hard_share():
    cfg = config()
    policy = Policy(cfg)
    kinds = []
    for _ in range(cfg.close_ticks - 1):
        kinds += [d.kind for d in policy.step(Sample(295 * MIB, 1, 0))]
    assert CLOSE not in kinds
    policy.step(Sample(200 * MIB, 1, 0))
    for _ in range(cfg.close_ticks):
        decisions = policy.step(Sample(295 * MIB, 1, 0))
    assert decisions[-1].close and "memory_budget" in decisions[-1].message


def test_it_ramps_up_from_the_start_concurrency_only_once_a_response_showed_its_size():
    policy = Policy(config(start_concurrency=8))
    assert policy.levers.concurrency == 8
    assert policy.step(Sample(90 * MIB, 8, 500)) == []  # downloads under way, no body seen: hold
    decisions = policy.step(Sample(90 * MIB, 8, 500, 50_000, 5))  # small pages
    assert [d.kind for d in decisions] == [RESTORE] and policy.levers.concurrency == 16
    policy.step(Sample(90 * MIB, 16, 500, 50_000, 5))
    policy.step(Sample(90 * MIB, 32, 500, 50_000, 5))
    assert policy.levers.concurrency == 64


def test_the_ramp_stops_where_the_headroom_ends():
    policy = Policy(config(start_concurrency=8))
    for _ in range(10):
        policy.step(Sample(100 * MIB + policy.levers.concurrency * 8 * MIB, policy.levers.concurrency, 0,
                           8 * MIB, 2))  # pages of 4 MiB: 8 MiB each in flight
    assert policy.levers.concurrency < 64
    assert 100 * MIB + policy.levers.concurrency * 8 * MIB <= 0.85 * 300 * MIB


def test_the_start_concurrency_comes_from_the_headroom_at_the_open():
    policy = Policy(config())
    (decision,) = policy.open(100 * MIB)
    assert decision.kind == IN_FLIGHT and "at the open" in decision.message
    assert policy.levers.concurrency == int((config().setpoint_bytes - 100 * MIB) // (8 * MIB)) == 16
    roomy = Policy(config(budget_bytes=64 * 2**30))
    assert roomy.open(100 * MIB) == [] and roomy.levers.concurrency == 64  # the whole burst fits: nothing moves
    assert Policy(config(start_concurrency=8)).open(100 * MIB) == []  # a set start is kept


@given(open_mib=st.integers(40, 200), body_kib=st.integers(256, 8192), early_mib=st.integers(0, 40))
@example(open_mib=66, body_kib=1332, early_mib=0)  # 63.99998 requests of headroom: the cost model's rounding gave 64
def test_downloads_whose_bodies_have_not_arrived_make_no_room(open_mib: int, body_kib: int, early_mib: int):
    """Before the bodies land, RSS barely moved: the ramp must not read the in-flight cost as already paid."""
    cfg = config()
    policy = Policy(cfg)
    policy.open(open_mib * MIB)
    body = body_kib * 1024
    for _ in range(10):
        in_flight = policy.levers.concurrency
        policy.step(Sample((open_mib + early_mib) * MIB, in_flight, 100, body_bytes=body))
    cost = max(2 * body, 1)
    headroom = (cfg.setpoint_bytes - open_mib * MIB) * (1 + 1e-6)  # the fitted cost model rounds at a millionth
    assert policy.levers.concurrency <= max(cfg.min_concurrency, headroom // cost, headroom // (8 * MIB))


def test_ticks_out_of_turn_do_not_shorten_the_time_over_the_hard_share_before_closing():
    """Over the act share the governor ticks on responses' signals (up to 50 a second): 12 ticks came in 1 s in a
    loaded full run, so a crawl that had just spilled 1,953 requests was closed (490 of 8,000 items) before its RSS
    could come down. The ticks must also span ``close_after_seconds``."""
    cfg = config(close_after_seconds=3.0)
    policy = Policy(cfg)
    decisions = []
    for k in range(5 * cfg.close_ticks):  # 60 ticks in 1.2 s
        decisions += policy.step(Sample(295 * MIB, 1, 0, t_seconds=100.0 + 0.02 * k))
    assert not any(d.close for d in decisions)
    closing = policy.step(Sample(295 * MIB, 1, 0, t_seconds=103.1))
    assert closing[-1].close and "3.1 s" in closing[-1].message


def test_a_start_the_shown_sizes_do_not_fit_is_lowered_before_any_pressure():
    """Files of 16 MiB at a start guessed at 8 MiB a request: the first size shown lowers it, under the act share."""
    policy = Policy(config())
    policy.open(60 * MIB)
    start = policy.levers.concurrency
    decisions = policy.step(Sample(80 * MIB, 2, 0, body_bytes=16 * MIB))
    assert [d.kind for d in decisions] == [IN_FLIGHT] and "does not fit" in decisions[0].message
    assert policy.levers.concurrency < start
    assert 60 * MIB + policy.levers.concurrency * 2 * 16 * MIB <= config().setpoint_bytes


def test_items_piling_up_in_the_pipelines_are_capped_before_the_act_share():
    """50 items of 128 KiB a response, 16 downloads under way: the cap leaves room for what they will yield."""
    policy = Policy(config(base_concurrency=16))
    sample = Sample(160 * MIB, 16, 0, items=400, item_bytes=128 * 1024, items_per_response=50.0, downloading=16)
    (decision,) = policy.step(sample)
    assert decision.kind == ITEMS and "inside the item pipelines" in decision.message
    cap = policy.levers.item_cap
    # the cap counts the items inside and those the requests pulled will yield: at the cap, the items' payload
    # stays under the setpoint
    assert cap > 400 and 160 * MIB + (cap - 400) * 128 * 1024 <= config().setpoint_bytes
    assert promised_items(400, 16, 50.0) >= cap  # the 16 downloads under way already promise more: pulls wait
    assert policy.step(sample) == []  # a standing cap is not raised by pressure, only lowered


def test_the_items_forecast_counts_a_full_concurrency_of_responses_not_only_the_downloads_under_way():
    """Small pages of 50 items of 128 KiB arrive one every 10 ms with 1-3 downloads under way: counted alone, those
    let the crawl reach 1,600 items (289-308 MiB of 300) before the cap; at concurrency 16 the forecast caps at once."""
    policy = Policy(config(base_concurrency=16))
    sample = Sample(160 * MIB, 2, 0, items=600, item_bytes=128 * 1024, items_per_response=50.0, downloading=2)
    (decision,) = policy.step(sample)
    assert decision.kind == ITEMS
    assert 160 * MIB + (policy.levers.item_cap - 600) * 128 * 1024 <= config().setpoint_bytes
    assert coming_item_bytes(2, 16, 50.0, 128 * 1024) == 16 * 50 * 128 * 1024
    assert coming_item_bytes(20, 16, 50.0, 128 * 1024) == 20 * 50 * 128 * 1024  # the responses pulled, when more
    # the responses received and not yet parsed count too, beyond a (lowered) concurrency
    lowered = Policy(config(base_concurrency=16, start_concurrency=1))
    unparsed = replace(sample, rss_bytes=210 * MIB, downloading=0, unparsed=8)
    assert [d.kind for d in lowered.step(unparsed)] == [ITEMS]
    assert Policy(config(base_concurrency=16, start_concurrency=1)).step(replace(unparsed, unparsed=0)) == []


def test_a_standing_item_cap_is_not_lowered_as_the_items_drain_and_rss_holds_their_freed_heap():
    """RSS holds the freed heap of the items that drained (the next items reuse it): the cap follows the most items
    inside since it was set, not those inside now; more RSS than those explain still lowers it."""
    policy = Policy(config(base_concurrency=16))
    item = 128 * 1024
    policy.step(Sample(160 * MIB, 2, 0, items=600, item_bytes=item, items_per_response=50.0, downloading=2))
    cap = policy.levers.item_cap
    full = Sample(231 * MIB, 0, 0, items=cap, item_bytes=item, items_per_response=50.0, downloading=0)
    assert policy.step(full) == []
    drained = replace(full, rss_bytes=int(231.1 * MIB), items=cap - 400)  # 400 items drained, RSS a little up
    assert policy.step(drained) == [] and policy.levers.item_cap == cap
    grown = replace(drained, rss_bytes=250 * MIB)  # 19 MiB that the items do not explain
    (decision,) = policy.step(grown)
    assert decision.kind == ITEMS and policy.levers.item_cap < cap


def test_in_flight_is_not_lowered_for_memory_the_capped_items_carry():
    """Small pages whose 50 items carry 6.4 MiB: what a request in flight costs is its items', and the item cap holds
    those; lowering concurrency on it took the crawl to concurrency 1 as it ended (4 s to ramp back)."""
    policy = Policy(config(base_concurrency=16))
    item = 128 * 1024
    policy.step(Sample(160 * MIB, 2, 0, items=600, item_bytes=item, items_per_response=50.0, downloading=2))
    assert policy.levers.item_cap > 0
    for k in range(30):  # responses held in the scraper while their items are inside the pipelines: RSS follows them
        held = 4 + k % 20
        sample = Sample(120 * MIB + held * 4 * MIB, held, 0, active_responses=held, body_bytes=8 * 1024,
                        items=held * 50, item_bytes=item, items_per_response=50.0, downloading=0)
        assert all(d.kind != IN_FLIGHT for d in policy.step(sample))
    assert policy.levers.concurrency == 16


def test_the_items_promised_count_the_responses_on_their_way():
    assert promised_items(100, 0, 50.0) == 100
    assert promised_items(100, 3, 50.4) == 100 + 152  # rounded up: a response yields whole items
    assert promised_items(0, -1, 50.0) == 0


def test_small_items_are_never_capped():
    policy = Policy(config(base_concurrency=16))
    assert policy.step(Sample(150 * MIB, 16, 0, items=400, item_bytes=200, items_per_response=50.0)) == []
    assert policy.levers.item_cap == 0


def test_restoring_doubles_the_item_cap_and_then_lifts_it():
    policy = Policy(config(base_concurrency=16))
    policy.step(Sample(260 * MIB, 4, 0, items=900, item_bytes=128 * 1024, items_per_response=50.0, downloading=4))
    cap = policy.levers.item_cap
    assert cap > 0
    caps = []
    for _ in range(60):
        policy.step(Sample(100 * MIB, 1, 0))
        caps.append(policy.levers.item_cap)
    assert 2 * cap in caps and caps[-1] == 0 and not policy.governing


def test_restoring_raises_the_item_cap_only_as_far_as_the_headroom_allows():
    """Under the restore share with the items' payload making up RSS, the cap grows by the headroom, not by doubling:
    a doubling cap let 1,728 items of 128 KiB into the pipelines at 207 MiB of a 300 MiB budget (peak 1.10x)."""
    policy = Policy(config(base_concurrency=16))
    policy.step(Sample(260 * MIB, 4, 0, items=900, item_bytes=128 * 1024, items_per_response=50.0, downloading=4))
    cap = policy.levers.item_cap
    assert cap > 0
    calm = Sample(205 * MIB, 4, 0, items=cap, item_bytes=128 * 1024, items_per_response=50.0, downloading=4)
    restores = []
    for _ in range(30):
        restores += [d for d in policy.step(calm) if d.kind == RESTORE]
        item_cap = policy.levers.item_cap
        assert item_cap > 0  # never lifted while the headroom holds fewer than ITEM_CAP_LIFT items
        # at the cap (which counts what the requests pulled will yield) the items stay under the act share
        assert 205 * MIB + (item_cap - cap) * 128 * 1024 <= config().high_share * config().budget_bytes
    assert len(restores) == 1  # once the headroom gives nothing more, a restore moves nothing and says nothing


def test_a_spike_between_two_readings_counts_as_pressure_but_never_closes():
    """VmHWM rose to 290 MiB between two readings of 120 MiB (a parse): lower, but do not close on a spike."""
    policy = Policy(config())
    decisions = []
    for k in range(40):
        decisions += policy.step(Sample(120 * MIB, 40, 0, body_bytes=2 * MIB, high_bytes=290 * MIB,
                                        t_seconds=100.0 + 0.25 * k))
    assert any(d.kind == IN_FLIGHT for d in decisions)
    assert not any(d.close for d in decisions)


def test_the_close_says_what_it_leaves_uncrawled_start_requests_included():
    from pytest_crawlmem.governor.policy import undone_sentence

    assert undone_sentence({"queued_requests": 37, "spilled_requests": 12, "unread_start_requests": 400,
                            "start_counted": 1, "downloads": 2, "items_in_pipelines": 80}) == (
        "37 queued requests (12 of them spilled to disk) and 400 unread start requests are not crawled;"
        " 2 downloads under way and 80 items inside the item pipelines finish first")
    assert "at least 5 unread" in undone_sentence({"queued_requests": 1, "unread_start_requests": 5, "start_counted": 0})


def test_over_the_close_share_new_downloads_pause_and_items_draining_do_not_close():
    cfg = config(base_concurrency=16, close_after_seconds=3.0)
    policy = Policy(cfg)
    policy.open(60 * MIB)
    assert policy.paused(Sample(290 * MIB, 4, 0)) and not policy.paused(Sample(280 * MIB, 4, 0))
    opened_over = Policy(cfg)
    opened_over.open(290 * MIB)
    assert not opened_over.paused(Sample(295 * MIB, 4, 0))  # it never grew into it: pausing would start nothing
    held = Sample(290 * MIB, 0, 0, items=1500, item_bytes=128 * 1024, items_per_response=50.0, downloading=0)
    policy.step(held)
    assert policy.levers.item_cap > 0  # the engine's pulls are held while the items drain
    decisions = []
    for k in range(40):  # 10 s over the close share, with the items' payload explaining the excess
        decisions += policy.step(replace(held, t_seconds=100.0 + 0.25 * k))
    assert not any(d.close for d in decisions)


# -- admission by cost, before the parse ------------------------------------------------

def test_the_parse_amplification_takes_a_higher_reading_at_once_and_a_lower_one_slowly() -> None:
    from pytest_crawlmem.governor.policy import PARSE_PRIOR, ParseCost

    parse = ParseCost()
    assert parse.amplification == PARSE_PRIOR
    parse.observe(100_000, 10_000_000)  # a small body teaches nothing
    assert parse.readings == 0
    parse.observe(10 * MIB, 68 * MIB)
    assert parse.amplification == pytest.approx(6.8)
    parse.observe(10 * MIB, 0)  # the allocator reused freed memory: a lower bound, taken slowly
    assert 5.0 < parse.amplification < 6.8
    parse.observe(10 * MIB, 90 * MIB)
    assert parse.amplification == pytest.approx(9.0)
    assert parse.cost(MIB) == pytest.approx(10 * MIB)


def test_a_download_is_held_back_while_the_bodies_under_way_and_one_parse_would_pass_the_limit() -> None:
    from pytest_crawlmem.governor.policy import Outstanding, ParseCost, admits_by_cost, projected_bytes

    parse = ParseCost(amplification=6.0, readings=1)
    quiet = Outstanding(downloading=1, announced_count=1, announced_bytes=10 * MIB, mean_body_bytes=10 * MIB,
                        largest_body_bytes=10 * MIB)
    # 60 MiB + two bodies of 10 MiB twice + one parse of 10 MiB at 6x = 160 MiB
    assert projected_bytes(60 * MIB, quiet, parse, one_more=True) == pytest.approx(160 * MIB)
    assert admits_by_cost(60 * MIB, quiet, parse, 255 * MIB)
    busy = Outstanding(downloading=6, announced_count=2, announced_bytes=40 * MIB, mean_body_bytes=10 * MIB,
                       largest_body_bytes=20 * MIB)
    # 60 + 2 x (40 + 5 x 10) + 6 x 20 = 360 MiB
    assert projected_bytes(60 * MIB, busy, parse, one_more=True) == pytest.approx(360 * MIB)
    assert not admits_by_cost(60 * MIB, busy, parse, 255 * MIB)
    unseen = Outstanding(downloading=30, announced_count=0, announced_bytes=0, mean_body_bytes=0.0,
                         largest_body_bytes=0.0)
    assert admits_by_cost(60 * MIB, unseen, parse, 255 * MIB)  # no size shown yet: the cautious start governs


def test_a_request_whose_cost_alone_passes_the_headroom_is_unmeetable_and_names_the_budget_that_fits() -> None:
    from pytest_crawlmem.governor.policy import ParseCost, unmeetable

    parse = ParseCost(amplification=6.0, readings=1)
    assert unmeetable("http://x/a", 10 * MIB, "announced", 60 * MIB, 300 * MIB, parse) is None  # 70 MiB fits 240
    found = unmeetable("http://x/big", 40 * MIB, "announced", 60 * MIB, 300 * MIB, parse)
    assert found is not None and found.cost_bytes == 280 * MIB and found.fits_bytes == 340 * MIB
    assert "http://x/big alone costs 280.0 MiB" in found.sentence()
    assert "a budget of at least 340.0 MiB would fit it" in found.sentence()
    measured = unmeetable("http://x/big", 40 * MIB, "measured", 100 * MIB, 300 * MIB, parse)  # the body is in RSS
    assert measured is not None and measured.cost_bytes == 240 * MIB and measured.basis == "measured"
    assert unmeetable("http://x/none", 0, "announced", 60 * MIB, 300 * MIB, parse) is None


def test_what_a_download_will_yield_as_items_counts_in_its_cost() -> None:
    from pytest_crawlmem.governor.policy import Outstanding, ParseCost, admits_by_cost, projected_bytes

    parse = ParseCost()
    pages = Outstanding(downloading=15, announced_count=15, announced_bytes=15 * 30_000, mean_body_bytes=30_000,
                        largest_body_bytes=30_000, yield_bytes=50 * 128 * 1024)  # 50 items of 128 KiB a page
    # 16 pages yield 100 MiB of items: over the act share from 200 MiB, though their bodies are 0.5 MiB
    assert projected_bytes(200 * MIB, pages, parse, one_more=True) > 300 * MIB
    assert not admits_by_cost(200 * MIB, pages, parse, 255 * MIB)
    assert admits_by_cost(200 * MIB, replace(pages, yield_bytes=0.0), parse, 255 * MIB)


class _Stats:
    """The two stats calls the cost admission makes."""

    def __init__(self) -> None:
        self.values: dict[str, int] = {}

    def set_value(self, key: str, value: int) -> None:
        self.values[key] = value

    def max_value(self, key: str, value: int) -> None:
        self.values[key] = max(value, self.values.get(key, value))


class _Request:
    def __init__(self, url: str) -> None:
        self.url = url
        self.body = b""


def test_a_small_request_is_not_unmeetable_when_the_crawl_itself_is_over_its_budget() -> None:
    """One request alone is judged over the crawl's RSS with nothing in flight, not over RSS now (310 MiB of 300)."""
    from pytest_crawlmem.governor.admit import CostAdmission

    stats = _Stats()
    admission = CostAdmission(300 * MIB, 255 * MIB, lambda: 310 * MIB, stats, base_rss=lambda: 80 * MIB)
    admission.headers(_Request("http://x/small"), 20 * 1024)
    assert admission.unmet_count == 0
    admission.headers(_Request("http://x/big"), 200 * MIB)
    assert admission.unmet_count == 1 and stats.values["crawlmem/governor/unmeetable"] == 1
    assert "RSS 80.0 MiB with nothing else in flight" in admission.unmet[0].sentence()


@given(st.lists(st.integers(1, 64 * MIB), max_size=40), st.integers(0, 60), st.integers(1, 8 * MIB),
       st.integers(0, 4 * MIB), st.floats(1.0, 8.0), st.integers(50 * MIB, 400 * MIB), st.integers(100 * MIB, 600 * MIB))
def test_the_admissions_quick_bound_never_admits_what_the_full_count_refuses(
        announced: list[int], downloading: int, mean: int, yield_bytes: int, amplification: float, rss: int,
        limit: int) -> None:
    from pytest_crawlmem.governor.admit import CostAdmission
    from pytest_crawlmem.governor.policy import ParseCost, admits_by_cost

    admission = CostAdmission(10 * limit, limit, lambda: rss, _Stats(), base_rss=lambda: 0)
    requests = [_Request(f"http://x/{n}") for n in range(len(announced))]  # kept alive: the admission holds weakrefs
    for request, size in zip(requests, announced, strict=True):
        admission.headers(request, size)
    admission.mean_body_bytes, admission.yielded = float(mean), lambda: float(yield_bytes)
    admission.parse = ParseCost(amplification=amplification, readings=1)
    admission.downloading = lambda: downloading
    full = admits_by_cost(rss, admission.outstanding(), admission.parse, limit)
    assert admission.fits() == full


@given(st.lists(st.floats(-1e3, 1e3), min_size=9, max_size=9), st.lists(st.floats(-1e3, 1e3), min_size=3, max_size=3),
       st.floats(0.1, 100.0))
def test_the_closed_form_solve_satisfies_the_system(entries: list[float], b: list[float], ridge: float) -> None:
    """The cost model's 3x3 solve (Cramer's rule): A x = b on the symmetric positive definite systems it is given."""
    from pytest_crawlmem.governor.policy import _solve3

    m = [entries[0:3], entries[3:6], entries[6:9]]
    a = [[sum(m[i][k] * m[j][k] for k in range(3)) + (ridge if i == j else 0.0) for j in range(3)] for i in range(3)]
    x = _solve3(a, b)
    assert x is not None
    scale = max(1.0, *(abs(v) for row in a for v in row)) * max(1.0, *(abs(v) for v in x))
    for i in range(3):
        assert abs(sum(a[i][j] * x[j] for j in range(3)) - b[i]) <= 1e-6 * scale


def test_the_closed_form_solve_says_a_singular_system_has_no_answer() -> None:
    from pytest_crawlmem.governor.policy import _solve3

    assert _solve3([[1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [1.0, 1.0, 1.0]], [1.0, 2.0, 3.0]) is None


@given(st.integers(1, 512 * MIB), st.integers(0, 400 * MIB), st.integers(1 * MIB, 600 * MIB), st.floats(1.0, 12.0),
       st.sampled_from(["announced", "measured"]))
def test_the_unmeetable_checks_quick_pass_is_what_unmeetable_says(body: int, base: int, budget: int,
                                                                   amplification: float, basis: str) -> None:
    """The admission skips the full statement when body x (1 + amplification) fits over the base: unmeetable() agrees."""
    from pytest_crawlmem.governor.policy import ParseCost, unmeetable

    parse = ParseCost(amplification=amplification, readings=1)
    if body * (1.0 + amplification) <= budget - base:
        assert unmeetable("u", body, basis, base + (body if basis == "measured" else 0), budget, parse) is None


def test_parses_are_sampled_once_learnt_and_a_larger_body_is_always_measured() -> None:
    """The first PARSE_LEARN large parses are measured (two RSS reads each), then one in PARSE_SAMPLE_EVERY of a body
    no larger than any measured, and every parse of a larger body."""
    from pytest_crawlmem.governor.admit import CostAdmission
    from pytest_crawlmem.governor.policy import PARSE_LEARN, PARSE_SAMPLE_EVERY

    reads = []

    def rss() -> int:
        reads.append(1)
        return 100 * MIB

    admission = CostAdmission(300 * MIB, 255 * MIB, rss, _Stats(), base_rss=lambda: 80 * MIB)

    def parse(body: int) -> int:
        response = _Request(f"http://x/{len(reads)}")
        response.body = b"x" * body
        before = len(reads)
        admission.parse_phase(response, 0)
        admission.parse_phase(response, 2)
        return len(reads) - before

    assert [parse(512 * 1024) for _ in range(PARSE_LEARN)] == [2] * PARSE_LEARN
    assert admission.parse.readings == PARSE_LEARN
    later = [parse(512 * 1024) for _ in range(8 * PARSE_SAMPLE_EVERY)]
    assert later.count(2) == 8 and later.count(0) == 8 * (PARSE_SAMPLE_EVERY - 1)
    assert parse(2 * MIB) == 2  # larger than any measured: measured at once
    assert parse(64 * 1024) == 0  # too small to teach anything


def test_the_high_water_mark_is_read_from_the_file_only_when_getrusage_says_it_moved() -> None:
    """``_Status.high_bytes``: VmHWM as the file says, without reading it while ru_maxrss stands (in a subprocess: it
    grows its own peak by 64 MiB)."""
    import subprocess
    import sys

    script = """
import resource
from pytest_crawlmem.governor.setup import _Status

kept = []

def grow(nbytes):
    block = bytearray(nbytes)
    block[::4096] = b"x" * len(block[::4096])
    kept.append(block)

status = _Status()
# ru_maxrss starts at the parent's peak (exec records it): while it is above VmHWM, every call reads the file
inherited = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
first = status.high_bytes()
if inherited > first:
    reads = status.reads
    status.high_bytes()
    assert status.reads == reads + 1
    grow(inherited - first + 16 * 2**20)
first = status.high_bytes()
reads = status.reads
for _ in range(50):
    assert status.high_bytes() == first
assert status.reads == reads, (status.reads, reads)  # ru_maxrss stood: no read
grow(64 * 2**20)
high = status.high_bytes()
assert status.reads == reads + 1 and high == status.peak_bytes() and high >= first + 60 * 2**20, (first, high)
print("ok")
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert done.stdout.strip() == "ok", done.stderr



def test_the_downloads_a_gate_release_starts_are_not_counted_as_the_governors_cpu() -> None:
    """A release runs the waiting download's start inside the governor's call (a parse's end, a tick): its CPU is the
    crawl's, kept apart in ``released_seconds`` (in a subprocess: it installs a reactor)."""
    import subprocess
    import sys

    script = """
from twisted.internet import reactor  # installed, not run: the gate awaits plain Deferreds under it
import time
from typing import Any
from twisted.internet.defer import Deferred
from pytest_crawlmem.governor.gates import DownloadGate

class Downloader:
    def __init__(self):
        self.finish = []
    async def _enqueue_request(self, request):
        began = time.thread_time()
        while time.thread_time() - began < 0.02:  # the download's own start: 20 ms of CPU
            pass
        done = Deferred()
        self.finish.append(done)
        return await done

downloader = Downloader()
gate = DownloadGate(downloader)
gate.set_limit(1)
first = Deferred.fromCoroutine(downloader._enqueue_request("a"))
second = Deferred.fromCoroutine(downloader._enqueue_request("b"))
assert gate.waiting == 1 and gate.released_seconds == 0.0, (gate.waiting, gate.released_seconds)
downloader.finish[0].callback("a done")  # the first ends: the gate releases the second, whose start runs inside
assert gate.waiting == 0 and len(downloader.finish) == 2
assert 0.015 <= gate.released_seconds <= 0.5, gate.released_seconds
print("ok")
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert done.stdout.strip() == "ok", done.stderr


def test_a_crawl_that_loads_the_governor_loads_only_the_governors_modules() -> None:
    """A governed crawl that fits its budget must not peak above the same crawl ungoverned: the governor's import
    loads its own modules, not the package's verdicts, budgets, models, browser reader or psutil (85 MiB against 82
    on the fits workload when the package loaded them all). In a subprocess: a fresh interpreter."""
    import subprocess
    import sys

    script = """
import sys
import scrapy.crawler, scrapy.core.engine, scrapy.core.scheduler
before = set(sys.modules)
import pytest_crawlmem.governor
for name in ("GovernorAddon", "MemoryGovernor", "StartGate", "SpillingScheduler"):
    getattr(pytest_crawlmem.governor, name)
new = sorted(set(sys.modules) - before)
print(" ".join(new))
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    loaded = done.stdout.split()
    unwanted = ("psutil", "tracemalloc", "pytest_crawlmem.core.budgets", "pytest_crawlmem.core.cluster",
                "pytest_crawlmem.core.models", "pytest_crawlmem.core.assemble", "pytest_crawlmem.probes.danger",
                "pytest_crawlmem.browser", "pytest_crawlmem.governor.contextlever", "pytest_crawlmem.governor.metrics")
    assert not [m for m in loaded if m.startswith(unwanted)], loaded
    assert len([m for m in loaded if m.startswith("pytest_crawlmem")]) <= 20, loaded


def test_the_packages_public_names_load_on_first_use() -> None:
    import pytest_crawlmem
    from pytest_crawlmem.core.budgets import Budgets

    assert pytest_crawlmem.Budgets is Budgets
    assert all(getattr(pytest_crawlmem, name) is not None for name in pytest_crawlmem.__all__)
    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        pytest_crawlmem.Nope  # noqa: B018


def bare_governor() -> Any:
    """A governor of a 300 MiB budget on a crawler with settings, a spider and stats, and no engine: its own
    bookkeeping alone."""
    from types import SimpleNamespace

    from scrapy.settings import Settings

    from pytest_crawlmem.governor import MemoryGovernor

    crawler = SimpleNamespace(settings=Settings({"CONCURRENT_REQUESTS": 16}), spider=SimpleNamespace(name="shop"),
                              extensions=SimpleNamespace(middlewares=[]), stats=SimpleNamespace(set_value=lambda *a: None))
    return MemoryGovernor(crawler, budget_bytes=300 * MIB, interval_seconds=0.25)


def test_a_call_the_governor_makes_inside_another_is_counted_once() -> None:
    """A parse's end wakes the download gate, which asks the cost admission: the question runs inside the parse
    signal's call, whose timing already holds it. Counted on its own too, the answers to woken gates were counted
    twice (with every other call an inner one, the estimate read 2x)."""
    governor = bare_governor()
    burned = 0.0

    def inner() -> bool:  # the admission's answer: 2 ms of CPU
        nonlocal burned
        began = time.thread_time()
        while time.thread_time() - began < 0.002:
            pass
        burned += time.thread_time() - began
        return True

    def outer() -> None:  # the parse's end, waking the gate
        assert governor._signal(inner) is True

    for _ in range(70):
        governor._signal(outer)
    assert governor.signal_calls == 70
    assert 0.7 * burned <= governor.signal_seconds <= 1.4 * burned, (governor.signal_seconds, burned)


def test_a_reclaim_trims_first_and_collects_only_when_the_trim_was_not_enough(monkeypatch) -> None:
    """Before a close is judged the governor wants a fresh reading. Items a slow pipeline let go are freed heap, not
    garbage: a trim gives them back, and the full collection (12-16 ms on that crawl's heap) decided nothing more."""
    from types import SimpleNamespace

    from pytest_crawlmem.governor import extension
    from pytest_crawlmem.governor.policy import Sample

    engine = SimpleNamespace(scraper=SimpleNamespace(slot=None), downloader=SimpleNamespace(active=set()))
    rss = {"now": 290 * MIB, "trimmed": 0}
    collections: list[int] = []
    monkeypatch.setattr(extension.probes, "malloc_trim", lambda: rss.update(now=rss["trimmed"] or rss["now"]) or True)
    monkeypatch.setattr(extension.gc, "collect", lambda: collections.append(1) or 0)
    for trimmed, collects in ((150 * MIB, False), (0, True)):  # the trim gives back 140 MiB; then nothing
        governor = bare_governor()
        governor._statm = SimpleNamespace(rss_bytes=lambda: rss["now"])
        governor.policy.open(80 * MIB)
        rss.update(now=290 * MIB, trimmed=trimmed)
        collections.clear()
        sample = Sample(rss_bytes=290 * MIB, in_flight=0, queued=0, t_seconds=1.0, collected=False)
        assert governor.policy.wants_fresh_reading(sample)  # over the close share: a close would be judged
        fresh = governor._reclaim(engine, sample)
        assert fresh is not None and fresh.rss_bytes == (150 * MIB if trimmed else 290 * MIB)
        assert bool(collections) is collects and fresh.collected is collects
        assert governor.reclaims == int(collects)


def test_an_items_payload_is_its_text_and_bytes_one_container_deep() -> None:
    import scrapy

    from pytest_crawlmem.governor.admit import payload_bytes

    class Product(scrapy.Item):
        name = scrapy.Field()
        images = scrapy.Field()

    assert payload_bytes({"id": 7, "attachment": b"x" * 1000}) == 1000
    assert payload_bytes(Product(name="abc", images=[b"12", "345", {"deeper": "not counted"}])) == 3 + 5
    assert payload_bytes([b"ab", ("cd", "ef")]) == 6
    assert payload_bytes("plain") == 5 and payload_bytes(42) == 0 and payload_bytes(object()) == 0
    assert payload_bytes({"values": 1}) == 0  # a dict whose values() is a method, not a key


def test_the_start_gate_hands_the_governor_items_by_what_they_carry() -> None:
    """One item in 16 until an item's payload is known; then one in as many as carry 8 MiB, 16 to 64: 375 calls on
    6,000 items of 128 KiB were a seventh of the governor's CPU on that crawl."""
    import scrapy

    from pytest_crawlmem.governor.pacing import OUTPUT_EVERY, OUTPUT_EVERY_MAX, output_every
    from pytest_crawlmem.governor.spill import StartGate

    assert output_every(0.0) == OUTPUT_EVERY == 16
    assert output_every(128 * 1024) == OUTPUT_EVERY_MAX == 64 and output_every(200) == 64
    assert output_every(2 * MIB) == 16  # large items: never fewer calls than at first (the burst guard's grain)
    assert output_every(256 * 1024) == 32
    gate = StartGate()
    seen: list[int] = []
    gate.on_output = lambda item: seen.append(item["n"])
    for n in range(40):
        gate._count_output({"n": n})
        gate._count_output(scrapy.Request("http://example.com/"))  # requests are not items
    gate.output_every = 64
    for n in range(40, 200):
        gate._count_output({"n": n})
    assert gate.items_out == 200
    assert seen == [0, 16, 32, 48, 112, 176]  # the countdown in course ends at its old length, then one in 64


def test_a_paused_crawl_whose_items_drain_is_read_at_the_quiet_pace() -> None:
    """Over the close share with the items inside the pipelines explaining it, the close's clock does not run: a tick
    that read the same figures as the last is followed by the next QUIET_TICKS intervals later (17 ticks in 4 s
    read the same figures on a slow-pipeline crawl). Over the close share with nothing draining, it keeps the pace."""
    from types import SimpleNamespace

    from pytest_crawlmem.governor.pacing import QUIET_TICKS

    item = 128 * 1024
    for items, interval in ((1_800, 0.25 * QUIET_TICKS), (0, 0.25)):
        governor = bare_governor()
        governor._task = SimpleNamespace(interval=0.25)
        governor.policy.open(80 * MIB)
        governor.policy.levers = replace(governor.policy.levers, item_cap=1_100)
        sample = Sample(289 * MIB, 32, 0, items=items, item_bytes=item, items_per_response=50.0, t_seconds=1.0)
        governor.policy.step(sample)
        assert governor.policy.close_clock is (items == 0)
        governor._pace(sample)
        assert governor._task.interval == interval
