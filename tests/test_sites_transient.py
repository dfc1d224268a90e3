"""Growth sites net of transient and queued objects (issue 27 item 2): the scheduler's lines and what a drained
checkpoint frees never lead (core/sites.py, pure; and the window's every-interval rule over real snapshots)."""

from __future__ import annotations

import tracemalloc
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from pytest_crawlmem.core.models import GrowthSite, Holder
from pytest_crawlmem.core.sites import QUEUED_SITE_SHARE, is_queued_growth, keeping_first, net_of_queue
from pytest_crawlmem.probes import snapshots


def site(location: str, size: int, source: str = "text = response.css('p').get()") -> GrowthSite:
    file, _, line = location.rpartition(":")
    return GrowthSite(location, size, 1, size / 100, (f'File "/srv/{file}", line {line}', f"    {source}"), True)


FOLLOW = site("spider.py:20", 90_000, 'yield from response.follow_all(css="a.product", callback=self.parse_product)')
BUILD = site("spider.py:30", 40_000, "meta = {'page': response.url, 'trail': trail + [response.url]}")
KEPT = site("spider.py:40", 30_000, "self.kept.append(text)")


def test_a_request_creation_line_the_queue_holds_is_left_out_not_ranked_last():
    sites = net_of_queue([FOLLOW, BUILD, KEPT], {"spider.py:20": 1_000})
    assert [s.location for s in sites] == ["spider.py:30", "spider.py:40"]


def test_a_line_whose_growth_is_mostly_queued_request_meta_is_left_out():
    # BUILD's raw growth was 40,000 + 60,000: the queued requests' meta holds 60% of it
    assert [s.location for s in net_of_queue([BUILD, KEPT], {"spider.py:30": 60_000})] == ["spider.py:40"]
    # the queue holding a third of it leaves a growth of the line's own
    assert [s.location for s in net_of_queue([BUILD, KEPT], {"spider.py:30": 20_000})] == ["spider.py:30", "spider.py:40"]


def test_a_request_creation_line_the_queue_does_not_hold_stays_as_evidence():
    assert net_of_queue([FOLLOW, KEPT], {}) == (FOLLOW, KEPT)


def test_without_a_holder_the_scheduler_line_does_not_lead_the_named_sites():
    queued = {"spider.py:20": 5_000}
    first = keeping_first(net_of_queue([FOLLOW, KEPT], queued), [Holder("spider.kept -> list[900]", 900, 1000, None)])
    assert first[0].location == "spider.py:40"


sizes = st.integers(min_value=-10_000, max_value=1_000_000)


@given(st.lists(st.tuples(sizes, st.integers(min_value=0, max_value=1_000_000), st.booleans()), max_size=12))
def test_no_site_left_is_mostly_the_queues(rows):
    sites, queued = [], {}
    for i, (size, share, follows) in enumerate(rows):
        source = "yield response.follow(url)" if follows else "x = y * 2"
        sites.append(site(f"spider.py:{i + 1}", size, source))
        queued[f"spider.py:{i + 1}"] = share
    kept = net_of_queue(sites, queued)
    assert set(kept) <= set(sites)
    for s in kept:
        share = queued[s.location]
        assert share == 0 or share < QUEUED_SITE_SHARE * (max(s.size_diff_bytes, 0) + share)
        assert not (share and "follow" in s.traceback[1])
    assert all(is_queued_growth(s, queued[s.location]) for s in sites if s not in kept)


def test_objects_a_drained_checkpoint_freed_never_grew_in_every_interval():
    """The window's sites grew in each of its intervals (opening, middle, close): what the crawl allocated before the
    middle checkpoint and mostly freed by the closing one is no site, though what is left of it is twice what was kept."""
    kept: list[str] = []
    transient: list[str] = []
    tracemalloc.start(4)
    try:
        taken = [None]
        for step in range(2):
            for i in range(100):
                kept.append("k" * 500 + str(i))  # KEPT
                if step == 0:
                    transient.append("t" * 5_000 + str(i))  # TRANSIENT
            if step == 0:
                taken.append(snapshots.take_snapshot())
        del transient[:60]  # most freed before the closing checkpoint: still twice what was kept over the window
        taken.append(snapshots.take_snapshot())
    finally:
        tracemalloc.stop()
    found, _ = snapshots.site_growth(taken, [0, 100, 200])
    lines = Path(__file__).read_text().splitlines()
    kept_line = next(i for i, text in enumerate(lines, 1) if text.endswith("# KEPT"))
    transient_line = next(i for i, text in enumerate(lines, 1) if text.endswith("# TRANSIENT"))
    locations = [s.location for s in found]
    assert any(loc.endswith(f":{kept_line}") for loc in locations), locations
    assert not any(loc.endswith(f":{transient_line}") for loc in locations), locations
