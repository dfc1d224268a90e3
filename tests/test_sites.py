"""Growth sites and holders: which frame is a site, which container keeps a leak, which line stores into it (pure)."""

from __future__ import annotations

import os
import sys
import sysconfig
import tracemalloc
import types
from pathlib import Path

import pytest

from pytest_crawlmem.attribution import holders
from pytest_crawlmem.core.models import GrowthSite
from pytest_crawlmem.probes import snapshots
from pytest_crawlmem.probes.snapshots import _site_of

STDLIB = sysconfig.get_paths()["stdlib"]
PURELIB = sysconfig.get_paths()["purelib"]
PLUGIN = os.path.dirname(snapshots.__file__)


def stack(*frames: tuple[str, int]) -> list[tracemalloc.Frame]:
    """Frames oldest first, as a tracemalloc.Traceback iterates."""
    return [tracemalloc.Frame(frame) for frame in frames]  # type: ignore[arg-type]


def test_the_first_user_frame_is_the_site_below_stdlib_and_packages():
    site = _site_of(stack(("/srv/app/spiders/shop.py", 31), (f"{PURELIB}/scrapy/http/response/text.py", 90),
                          (f"{STDLIB}/weakref.py", 466)))
    assert site == ("/srv/app/spiders/shop.py:31", True)


def test_a_stdlib_frame_called_by_the_plugin_is_never_a_site():
    """Issue 14 item 3: weakref.py:466 under the plugin's probes.py was reported as the leak."""
    assert _site_of(stack((f"{PLUGIN}/probes.py", 200), (f"{STDLIB}/weakref.py", 466))) is None


def test_without_a_user_frame_the_package_line_stands_in_and_says_so():
    site = _site_of(stack((f"{PURELIB}/twisted/internet/endpoints.py", 12), (f"{STDLIB}/weakref.py", 466)))
    assert site == (os.path.join("twisted", "internet", "endpoints.py") + ":12", False)


def test_the_stdlib_alone_is_never_a_site():
    assert _site_of(stack((f"{STDLIB}/asyncio/base_events.py", 1), (f"{STDLIB}/weakref.py", 466))) is None


def test_user_code_under_the_base_prefix_is_still_user_code():
    """A venv's base Python lives under sys.base_prefix (/usr): /usr/src/app is not the standard library."""
    assert snapshots.is_user_file(os.path.join(sys.base_prefix, "src", "app", "spiders.py"))
    assert not snapshots.is_user_file(f"{STDLIB}/weakref.py")
    assert not snapshots.is_user_file(f"{PLUGIN}/probes.py")


def test_every_subpackage_of_the_plugin_is_the_plugins_code_never_a_site():
    """core/, reports/, harness/ too: the package root, not the probes/ directory snapshots.py sits in."""
    import pytest_crawlmem
    from pytest_crawlmem.core import distribution
    from pytest_crawlmem.harness import fixtures

    for module in (pytest_crawlmem, distribution, fixtures, snapshots):
        assert not snapshots.is_user_file(module.__file__), module.__file__
    assert _site_of(stack((distribution.__file__, 44), (f"{STDLIB}/weakref.py", 466))) is None


def test_a_window_too_short_gives_no_per_response_figure():
    assert snapshots.growing_sites([None, None], [100, 110]) == []


SPIDER_SOURCE = """
KEPT = []
SEEN = {}


class Shop:
    kept = []

    def __init__(self):
        self.buffers = {"items": []}
        self.small = []

    def parse(self, response):
        self.small.append(1)
        self.kept.append(response)
        self.buffers["items"].append(response)

    def other(self, response):
        KEPT.append(response)
        SEEN[response] = 1
"""


@pytest.fixture()
def shop(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> types.ModuleType:
    (tmp_path / "shop_spiders.py").write_text(SPIDER_SOURCE)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.chdir(tmp_path)
    import shop_spiders

    yield shop_spiders
    sys.modules.pop("shop_spiders", None)


def test_containers_that_grew_with_the_responses_are_the_holders_with_their_storing_lines(shop):
    spider = shop.Shop()
    roots = {"spider": spider, "module shop_spiders": shop}
    before = holders.container_lengths(roots)
    for i in range(100):
        spider.parse(f"r{i}")
        shop.KEPT.append(i)
    spider.small.clear()
    found = {h.path: h for h in holders.find_holders(roots, before, 100, limit=5)}
    assert set(found) == {
        "spider.kept -> list[100]", "spider.buffers['items'] -> list[100]", "module shop_spiders.KEPT -> list[100]"}
    assert found["spider.kept -> list[100]"].line == "shop_spiders.py:15"
    assert found["spider.buffers['items'] -> list[100]"].line == "shop_spiders.py:16"
    assert found["module shop_spiders.KEPT -> list[100]"].line == "shop_spiders.py:19"
    assert found["spider.kept -> list[100]"].describe() == (
        "spider.kept -> list[100] gained 100 entries in 100 responses, stored at shop_spiders.py:15")


def test_a_container_that_did_not_keep_up_with_the_responses_is_no_holder(shop):
    spider = shop.Shop()
    before = holders.container_lengths({"spider": spider})
    for i in range(10):
        spider.parse(i)
    assert holders.find_holders({"spider": spider}, before, 1000) == ()


def test_the_keeping_line_prefers_a_growth_site(shop):
    assert holders.keeping_line(shop, ".SEEN") == "shop_spiders.py:20"
    assert holders.keeping_line(shop.Shop(), ".kept", prefer=["x.py:1", "shop_spiders.py:15"]) == "shop_spiders.py:15"


def test_the_requests_a_callback_queued_are_netted_out_of_its_growth_site():
    """Issue 14 item 4: a growing queue's URLs and cookies must not outrank the line whose objects are kept."""
    import scrapy

    kept: list[str] = []
    queued: list[scrapy.Request] = []
    tracemalloc.start(8)
    try:
        for i in range(200):
            url, token = f"http://127.0.0.1/catalog/product/{i}", str(i) + "q" * 2000  # QUEUED
            queued.append(scrapy.Request(url, cookies={"session": token}))  # QUEUED
            kept.append("k" * 1000 + str(i))  # KEPT
        last = snapshots.take_snapshot()
        share = snapshots.queued_share(queued)
    finally:
        tracemalloc.stop()
    source = Path(__file__).read_text().splitlines()
    queued_lines = {f":{i}" for i, line in enumerate(source, 1) if line.endswith("# QUEUED")}
    kept_line = next(i for i, line in enumerate(source, 1) if line.endswith("# KEPT"))
    assert sum(size for site, size in share.items() if site[site.rindex(":"):] in queued_lines) >= 200 * 2000
    raw = snapshots.growing_sites([None, last], [0, 200])
    assert raw[0].location[raw[0].location.rindex(":"):] in queued_lines  # unnetted, the queue's lines lead
    netted = snapshots.growing_sites([None, last], [0, 200], queued=share)
    assert netted[0].location.endswith(f":{kept_line}")

    def queued_growth(sites: list[GrowthSite]) -> int:
        return sum(site.size_diff_bytes for site in sites if site.location[site.location.rindex(":"):] in queued_lines)

    # what is left of the queue's lines is not the requests' (urllib's bounded cache of parsed URLs, the list)
    assert queued_growth(netted) < queued_growth(raw) / 3
    assert netted[0].bytes_per_response >= 1000


def test_nothing_queued_nets_nothing():
    assert snapshots.queued_share([]) == {}
