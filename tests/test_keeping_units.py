"""The keeping line, found by source analysis, and the ordering and native share of core/sites.py (no crawl)."""

from __future__ import annotations

import functools
import sys
import types
import zlib
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_crawlmem.attribution import holders, keeping
from pytest_crawlmem.core.models import GrowthSite, Holder
from pytest_crawlmem.core.sites import (
    KeptEvidence,
    is_request_creation,
    keeping_first,
    leak_native_share,
    named_line,
    native_sentence,
    rank_sites,
    source_line,
)

SOURCE = '''
import functools

RECEIVED = []


class Page:
    registry = {}

    def __init__(self, url):
        Page.registry[url] = self


class Shop:
    def __init__(self):
        self.groups = {}
        self.shop = {"groups": {}}

    def parse(self, response, crawler):
        text = response * 3
        self.groups.setdefault(response[-1], {"items": []})
        self.groups[response[-1]]["items"].append(text)
        self.shop["groups"].setdefault(response[-1], {"items": []})["items"].append(text)
        crawler.stats.set_value(f"seen/{response}", text)
        RECEIVED.append(text)

    @functools.lru_cache(maxsize=None)
    def details(self, url):
        return len(url)
'''


@pytest.fixture()
def shop(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[types.ModuleType]:
    (tmp_path / "keep_spiders.py").write_text(SOURCE)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.chdir(tmp_path)
    import keep_spiders

    yield keep_spiders
    sys.modules.pop("keep_spiders", None)


def line_of(text: str) -> str:
    return f"keep_spiders.py:{next(i for i, line in enumerate(SOURCE.splitlines(), 1) if text in line)}"


def test_the_storing_line_matches_the_holders_depth_not_the_setdefault_above_it(shop):
    spider = shop.Shop()
    assert keeping.keeping_line(spider, ".groups[…]['items']") == line_of('self.groups[response[-1]]["items"].append')
    assert keeping.keeping_line(spider, ".groups") == line_of("self.groups.setdefault")


def test_a_subscript_of_setdefault_counts_as_one_level_down(shop):
    spider = shop.Shop()
    assert keeping.keeping_line(spider, ".shop['groups'][…]['items']") == line_of('self.shop["groups"].setdefault')


def test_a_class_registry_a_module_list_and_a_stats_key_have_their_storing_lines(shop):
    assert keeping.keeping_line(shop.Page, ".registry") == line_of("Page.registry[url] = self")
    assert keeping.keeping_line(shop, ".RECEIVED") == line_of("RECEIVED.append")

    import scrapy.statscollectors

    stats = scrapy.statscollectors.MemoryStatsCollector.__new__(scrapy.statscollectors.MemoryStatsCollector)
    assert keeping.keeping_line(stats, "._stats", files=[str(Path("keep_spiders.py").resolve())]) == line_of("set_value")


def test_an_lru_cache_is_kept_by_its_decorated_def(shop):
    wrapper = vars(shop.Shop)["details"]
    assert keeping.keeping_line(shop.Shop(), ".details", wrapper) == line_of("def details")


def test_holders_are_found_at_depth_with_their_lines(shop):
    spider = shop.Shop()

    class Crawler:
        class stats:
            @staticmethod
            def set_value(key: str, value: object) -> None:
                pass

    for i in range(10):
        spider.parse(f"u{i}", Crawler)
    roots = {"spider": spider}
    before = holders.container_lengths(roots)
    for i in range(100):
        spider.parse(f"v{i}", Crawler)
        spider.details(f"v{i}")
    found = {h.path.split(" -> ")[0]: h for h in holders.find_holders(roots, before, 100, limit=5)}
    assert found["spider.groups[…]['items']"].line == line_of('self.groups[response[-1]]["items"].append')
    assert found["spider.shop['groups'][…]['items']"].line == line_of('self.shop["groups"].setdefault')
    assert found["spider.details"].line == line_of("def details")
    assert found["spider.details"].path.startswith("spider.details -> _lru_cache_wrapper[")


def test_c_extension_types_own_native_memory_python_builtin_and_standard_library_ones_do_not():
    assert not keeping.is_native_type(type(zlib.decompressobj()))  # its state comes from PyMem_RawMalloc: traced
    assert not keeping.is_native_type(dict)
    assert not keeping.is_native_type(type(iter([])))
    assert not keeping.is_native_type(GrowthSite)
    lxml = pytest.importorskip("lxml.html")
    assert keeping.is_native_type(type(lxml.fromstring("<p>x</p>")))  # Python's HtmlElement over a C base


def test_a_c_type_is_native_even_when_its_name_says_builtins():
    image = pytest.importorskip("PIL.Image").new("RGB", (4, 4))
    core = type(image.im)
    assert core.__module__ == "builtins"  # Pillow's ImagingCore has no module in its name
    assert keeping.is_native_type(core)
    numpy = pytest.importorskip("numpy")
    assert keeping.is_native_type(numpy.ndarray)


def test_the_entries_evidence_names_the_python_objects_that_own_c_memory():
    assert not keeping.entry_evidence([[zlib.decompressobj() for _ in range(5)]]).owners
    image = pytest.importorskip("PIL.Image")
    images = [image.new("RGB", (8, 8)) for _ in range(5)]
    evidence = keeping.entry_evidence([{f"p{i}": im for i, im in enumerate(images)}])
    assert evidence.owners == {"PIL.Image.Image": 5}, evidence.owners  # the image, not its ImagingCore
    numpy = pytest.importorskip("numpy")
    assert keeping.entry_evidence([[(i, numpy.zeros(4)) for i in range(3)]]).owners == {"numpy.ndarray": 3}


def site(location: str, size: int, source: str = "", user: bool = True, trace: tuple[str, ...] = ()) -> GrowthSite:
    file, _, line = location.rpartition(":")
    traceback = trace or (f'File "/srv/{file}", line {line}', f"    {source}")
    return GrowthSite(location, size, 1, size / 100, traceback, user)


def test_a_request_creation_line_never_leads():
    follow = site("spider.py:20", 90_000, 'yield from response.follow_all(css="a.product", callback=self.parse_product)')
    css = site("spider.py:30", 30_000, 'text = response.css("p").get() * 8')
    assert [s.location for s in rank_sites([follow, css])] == ["spider.py:30", "spider.py:20"]
    assert is_request_creation(follow) and not is_request_creation(css)


@given(st.lists(st.tuples(st.integers(1, 10**6), st.booleans(), st.booleans()), min_size=1, max_size=8))
def test_ranked_sites_put_the_users_first_and_request_creation_lines_last_within_each(specs):
    sites = [site(f"s.py:{i}", size, "yield response.follow(url)" if follows else "x = y * 2", user)
             for i, (size, follows, user) in enumerate(specs)]
    ranked = rank_sites(sites)
    assert [s.in_user_code for s in ranked] == sorted((s.in_user_code for s in ranked), reverse=True)
    for user in (True, False):
        flags = [is_request_creation(s) for s in ranked if s.in_user_code is user]
        assert flags == sorted(flags)


def test_the_where_source_is_the_sites_own_frame_not_the_innermost():
    trace = ('File "/usr/lib/parsel/selector.py", line 144', "    result = xpathev(root, **kwargs)",
             'File "/srv/tests/leaky_spiders.py", line 19', '    node = response.xpath("//main")[0]')
    assert source_line(site("tests/leaky_spiders.py:19", 1, trace=trace)) == 'node = response.xpath("//main")[0]'


def test_the_keeping_line_leads_with_what_its_holder_keeps_and_allocation_sites_follow():
    alloc = site("spider.py:30", 30_000, "text = response.css('p').get() * 8")
    follow = site("spider.py:20", 90_000, "yield from response.follow_all(css='a')")
    holder = Holder("spider.kept -> list[100]", 100, 100, "spider.py:31")
    kept = KeptEvidence(100, None, holder.path, holder.line, allocated_at=("spider.py:30",))
    ordered = keeping_first([follow, alloc], [holder], kept, "self.kept.append(text)")
    assert [s.location for s in ordered] == ["spider.py:31", "spider.py:30", "spider.py:20"]
    assert ordered[0].size_diff_bytes == 30_000 and source_line(ordered[0]) == "self.kept.append(text)"
    assert named_line(ordered, [holder]) == "spider.py:31"


def test_native_share_is_said_only_when_something_backs_it():
    native = KeptEvidence(100, 900_000, "spider.nodes -> list[100]", "spider.py:40", (("lxml.etree._Element", 64),), 64,
                          kept_per_response=400.0)
    sentence = native_sentence(leak_native_share(6000.0, native), native)
    assert sentence.startswith("; 93% of the growth is native: memory allocated by C extensions, invisible to tracemalloc")
    owners = "lxml.etree._Element (64 of its 64 newest entries) held in spider.nodes -> list[100], stored at spider.py:40"
    assert owners in sentence
    python = KeptEvidence(100, 300_000, "spider.kept -> list[100]", "spider.py:31", (), 64, kept_per_response=0.0)
    assert native_sentence(leak_native_share(3000.0, python), python) == ""  # no C type, the window saw it all


def test_a_bound_lru_cache_is_resolved_as_the_wrapper_not_the_method():
    class Spider:
        @functools.cache  # noqa: B019
        def details(self, url: str) -> int:
            return len(url)

    found = holders.resolve(Spider(), ".details")
    assert found and hasattr(found[0], "cache_info") and not isinstance(found[0], types.MethodType)


def test_receivers_connected_per_response_are_held_by_the_signal_dispatcher_at_the_connect_line():
    from pydispatch import dispatcher
    from scrapy.signalmanager import SignalManager

    signals = SignalManager()
    kept: list[object] = []
    roots = {"signal dispatcher": dispatcher}
    before = holders.container_lengths(roots)
    for i in range(100):
        signals.connect(lambda i=i, **kwargs: kept.append(i), signal=object(), weak=False)  # the connect line
    found = holders.find_holders(roots, before, 100, library=["signal dispatcher"])
    assert found and found[0].path.startswith("signal dispatcher.connections"), found
    assert found[0].line is not None and found[0].line.endswith(f"test_keeping_units.py:{connect_line()}"), found
    signals.disconnect_all(signal=None)


def connect_line() -> int:
    return next(i for i, line in enumerate(Path(__file__).read_text().splitlines(), 1) if line.endswith("# the connect line"))


def test_a_component_written_into_directly_is_kept_by_that_line(shop):
    class StatsCollector:
        def __init__(self) -> None:
            self._stats: dict[str, list[int]] = {}

        def keep(self, value: int) -> None:
            self._stats.setdefault("debug/requests", []).append(value)  # the direct store

    stats = StatsCollector()
    before = holders.container_lengths({"stats": stats})
    for i in range(100):
        stats.keep(i)
    found = holders.find_holders({"stats": stats}, before, 100, library=["stats"])
    direct = next(i for i, line in enumerate(Path(__file__).read_text().splitlines(), 1) if line.endswith("# the direct store"))
    assert found and found[0].line is not None and found[0].line.endswith(f"test_keeping_units.py:{direct}"), found
