"""Growth declared by design (``expected_growth``): parsing and its errors, the subtraction before the verdict, a holder
named as a leak past its declaration, what a leak's reason names, and the crawl side's measurement (pure units; the
real crawls are in test_declared_crawls.py)."""

from __future__ import annotations

import random
import sys
import types

import pytest

from pytest_crawlmem.attribution.declared import DeclaredMeter, find_holder
from pytest_crawlmem.attribution.deepsize import SAMPLE_ENTRIES, deep_size
from pytest_crawlmem.core.assemble import judge
from pytest_crawlmem.core.budgets import SPECS, BudgetError, parse_budget, resolve_budgets
from pytest_crawlmem.core.declared import DeclaredGrowth, parse_expected_growth, setting_text
from pytest_crawlmem.core.models import Checkpoint, Growth, GrowthSite, Holder
from pytest_crawlmem.core.rules import decided_by
from pytest_crawlmem.core.schedule import checkpoint_schedule
from pytest_crawlmem.core.setaside import leak_evidence_of, ordered_holders
from pytest_crawlmem.core.units import UnitError

BASE = 60 * 2**20
MARKER = "crawl_memory marker of t.py::t"
INI = "ini crawlmem_expected_growth"


# -- parsing -----------------------------------------------------------------------------------------------------------


def test_a_marker_dict_and_the_ini_text_declare_the_same_holders():
    from_marker = parse_budget("expected_growth", {"spider.seen_ids": "600 B", "pipeline DuplicatesPipeline.ids_seen":
                                                   1024, "module mypkg.cache._MEMO": "2 KiB"}, source=MARKER)
    from_ini = parse_budget("expected_growth", "spider.seen_ids=600 B, pipeline DuplicatesPipeline.ids_seen = 1 KiB\n"
                            "  module mypkg.cache._MEMO=2KiB", source=INI)
    assert from_marker == from_ini == (("spider.seen_ids", 600), ("pipeline DuplicatesPipeline.ids_seen", 1024),
                                       ("module mypkg.cache._MEMO", 2048))


def test_a_holder_may_be_written_as_the_verdict_prints_it():
    assert parse_expected_growth("spider.seen_ids -> set[907]=1 KiB, spider.groups['a,b']=2") == (
        ("spider.seen_ids", 1024), ("spider.groups['a,b']", 2))
    assert parse_expected_growth({"class shop.spiders.Shop.seen": "1 kB"}) == (("class shop.spiders.Shop.seen", 1000),)


def test_the_setting_text_reads_back_as_the_same_declaration():
    declared = parse_expected_growth({"spider.seen_ids": "1.5 KiB", "extension Stats.kept": 10})
    assert parse_expected_growth(setting_text(declared)) == declared


@pytest.mark.parametrize(("value", "expected"), [
    ("seen_ids=600 B", "the holder 'seen_ids' is not named as a verdict names one: expected spider.ATTR"),
    ("spider=600 B", "the holder 'spider' is not named as a verdict names one"),
    ("spider.seen_ids: 600 B", "invalid entry 'spider.seen_ids: 600 B'"),
    ("spider.seen_ids=lots", "invalid size 'lots' for spider.seen_ids: expected a number and a unit"),
    ("spider.seen_ids=0", "the size of spider.seen_ids must be above 0"),
    ("spider.seen_ids=-5 B", "must not be negative"),
    ("spider.a=1, spider.a=2", "'spider.a' is declared twice"),
    (600, "expected a dict {HOLDER: SIZE} or text 'HOLDER=SIZE, ...'"),
])
def test_a_bad_declaration_names_the_value_and_where_it_came_from(value, expected):
    with pytest.raises(BudgetError) as raised:
        parse_budget("expected_growth", value, source=INI)
    assert expected in str(raised.value)
    assert INI in str(raised.value) and repr(value).strip("'") in str(raised.value)


def test_the_marker_overrides_the_ini_declaration_and_an_empty_one_declares_nothing():
    ini = {"expected_growth": parse_expected_growth("spider.seen_ids=600 B")}
    assert resolve_budgets([], ini).expected_growth == (("spider.seen_ids", 600),)
    assert resolve_budgets([({"expected_growth": {}}, MARKER)], ini).expected_growth == ()
    assert resolve_budgets([({"expected_growth": {"spider.x": 9}}, MARKER)], ini).expected_growth == (("spider.x", 9),)


def test_report_html_shows_the_declaration_as_written_or_read_back():
    spec = SPECS["expected_growth"]
    assert spec.show_limit((("spider.seen_ids", 600),)) == "spider.seen_ids up to 600 B/response"
    assert spec.show_limit([["spider.seen_ids", 600]]) == "spider.seen_ids up to 600 B/response"


def test_a_bad_setting_raises_in_the_crawl_process_too():
    with pytest.raises(UnitError, match="CRAWLMEM_EXPECTED_GROWTH"):
        parse_expected_growth("seen=1", source="CRAWLMEM_EXPECTED_GROWTH")


# -- the subtraction and the verdict -----------------------------------------------------------------------------------

SET_PER_RESPONSE = 1536  # a by-design set: 1.5 KiB a response
LEAK_PER_RESPONSE = 4096


def crawl(total: int = 1000, *, kept: int = 0, by_design: int = SET_PER_RESPONSE, seed: int = 3,
          holder: str = "spider.seen_ids") -> list[Checkpoint]:
    """Checkpoints of a crawl whose heap holds a by-design set (measured as a declared holder) and ``kept`` bytes a
    response of something else, with 24 KiB of noise."""
    rng = random.Random(seed)
    points = []
    for n in checkpoint_schedule(total):
        heap = BASE + (by_design + kept) * n + rng.randint(-12 * 1024, 12 * 1024)
        held = {holder: 232 + by_design * n}
        points.append(Checkpoint(responses=n, t_seconds=n / 100, rss_bytes=heap + 40 * 2**20, heap_bytes=heap,
                                 traced_bytes=None, scheduled=0, declared_bytes=held, declared_heap_bytes=held))
    return points


def test_growth_of_a_declared_holder_is_set_aside_and_said_so():
    points = crawl()
    undeclared = judge(points, (), leak_per_response=None)
    assert undeclared.verdict == "retained-objects", undeclared.reason  # the same crawl fails without the declaration
    growth = judge(points, (), leak_per_response=None, expected_growth=(("spider.seen_ids", 2048),))
    assert growth.verdict == "steady", growth.reason
    assert "set aside as declared: spider.seen_ids 1.5 KiB/response (declared up to 2.0 KiB)" in growth.reason
    assert growth.declared == (DeclaredGrowth("spider.seen_ids", 2048, pytest.approx(1536), over=False,
                                              set_aside_bytes=1536 * 1000),)
    assert growth.checkpoints == tuple(points)  # the report keeps what was measured
    assert abs(growth.per_response_bytes or 0) < 256


def test_a_leak_beside_a_declared_holder_is_still_a_leak():
    growth = judge(crawl(kept=LEAK_PER_RESPONSE), (), leak_per_response=None,
                   expected_growth=(("spider.seen_ids", 2048),))
    assert growth.verdict == "retained-objects", growth.reason
    assert growth.per_response_bytes == pytest.approx(LEAK_PER_RESPONSE, rel=0.1)
    assert decided_by(growth) == "memory"
    assert "set aside as declared: spider.seen_ids 1.5 KiB/response" in growth.reason
    assert "over its declared" not in growth.reason


def test_a_declared_holder_that_grows_beyond_its_declaration_is_a_leak_named_as_such():
    growth = judge(crawl(), (), leak_per_response=None, expected_growth=(("spider.seen_ids", 400),))
    assert growth.verdict == "retained-objects", growth.reason
    assert growth.reason.startswith("spider.seen_ids grew 1.5 KiB/response, over its declared 400 B/response"), (
        growth.reason)
    assert decided_by(growth) == "declared"
    assert growth.declared[0].over and growth.per_response_bytes == pytest.approx(1536)
    assert "Fix: " in growth.reason


def test_a_holder_over_its_declaration_fails_under_the_leak_threshold_too():
    """What counts is the declaration: 1.5 KiB/response against 1 KiB declared, with leak_per_response at 8 KiB."""
    growth = judge(crawl(), (), leak_per_response=8192, expected_growth=(("spider.seen_ids", 1024),))
    assert growth.verdict == "retained-objects" and growth.declared[0].over, growth.reason


def test_a_declared_holder_found_nowhere_is_said_so_and_nothing_is_set_aside():
    growth = judge(crawl(), (), leak_per_response=None, expected_growth=(("spider.seen_idz", 2048),))
    assert growth.verdict == "retained-objects"
    assert "spider.seen_idz not found at any checkpoint (nothing set aside" in growth.reason
    assert growth.declared == (DeclaredGrowth("spider.seen_idz", 2048, found=False),)


def test_the_declared_outcome_reads_back_from_report_json():
    growth = judge(crawl(), (), leak_per_response=None, expected_growth=(("spider.seen_ids", 2048),))
    again = Growth.from_json(growth.to_json())
    assert again.declared == growth.declared
    assert again.checkpoints[-1].declared_heap_bytes == growth.checkpoints[-1].declared_heap_bytes


def test_judging_the_measured_checkpoints_again_sets_aside_once():
    growth = judge(crawl(), (), leak_per_response=None, expected_growth=(("spider.seen_ids", 2048),))
    again = judge(growth.checkpoints, (), leak_per_response=None, expected_growth=(("spider.seen_ids", 2048),))
    assert (again.verdict, again.per_response_bytes) == (growth.verdict, growth.per_response_bytes)


def test_a_leak_reason_names_the_undeclared_holder_and_not_the_declared_one():
    seen = Holder("spider.seen_ids -> set[600]", 600, 600, "spiders/shop.py:20")
    kept = Holder("spider.kept -> list[600]", 590, 600, "spiders/shop.py:31")
    sites = (GrowthSite("spiders/shop.py:20", 900_000, 600, 1500.0), GrowthSite("spiders/shop.py:31", 2_400_000, 600,
                                                                                4000.0))
    within = (DeclaredGrowth("spider.seen_ids", 2048, 1536.0),)
    holders, named_sites = leak_evidence_of((seen, kept), sites, within)
    assert holders == (kept,) and [s.location for s in named_sites] == ["spiders/shop.py:31"]
    assert ordered_holders((seen, kept), within) == (kept, seen)
    over = (DeclaredGrowth("spider.seen_ids", 400, 1536.0, over=True),)
    assert leak_evidence_of((kept, seen), sites, over)[0] == (seen, kept)


# -- the crawl side: finding a holder and measuring it -----------------------------------------------------------------


class Pipe:
    def __init__(self) -> None:
        self.ids_seen = {f"SKU-{i:06d}" * 30 for i in range(5000)}


def test_a_holder_is_found_on_the_spider_a_component_and_a_module():
    module = types.ModuleType("crawlmem_declared_probe.cache")
    module._MEMO = {"a": 1}  # type: ignore[attr-defined]
    sys.modules["crawlmem_declared_probe.cache"] = module
    try:
        pipe = Pipe()
        spider = types.SimpleNamespace(seen_ids={"x"})
        engine = types.SimpleNamespace(scraper=types.SimpleNamespace(itemproc=types.SimpleNamespace(middlewares=[pipe])))
        crawler = types.SimpleNamespace(spider=spider, _engine=engine)
        assert find_holder(crawler, "spider.seen_ids") == [spider.seen_ids]
        assert find_holder(crawler, "pipeline Pipe.ids_seen") == [pipe.ids_seen]
        assert find_holder(crawler, "module crawlmem_declared_probe.cache._MEMO") == [module._MEMO]  # type: ignore[attr-defined]
        assert find_holder(crawler, "spider.missing") == find_holder(crawler, "pipeline Other.ids_seen") == []
        read = DeclaredMeter((("spider.seen_ids", 1), ("spider.missing", 1))).read(crawler)
        assert set(read["declared_bytes"]) == {"spider.seen_ids"}
    finally:
        del sys.modules["crawlmem_declared_probe.cache"]


def test_the_deep_size_of_a_large_set_is_sampled_within_a_few_percent():
    values = {f"{i:08d}" + "x" * (600 + i % 200) for i in range(20 * SAMPLE_ENTRIES)}
    exact = sys.getsizeof(values) + sum(sys.getsizeof(v) for v in values)
    traced, heap = deep_size([values])
    assert traced == pytest.approx(exact, rel=0.03)
    assert heap == pytest.approx(exact, rel=0.03)  # strings over 512 B: the heap estimate counts them at their size


def test_small_objects_count_as_the_heap_estimate_counts_them():
    values = [f"{i:06d}" for i in range(100)]
    traced, heap = deep_size([values])
    assert traced == sys.getsizeof(values) + sum(sys.getsizeof(v) for v in values)
    assert heap == sys.getsizeof(values) + 96 * 100


def test_what_a_holder_refers_to_but_does_not_hold_is_not_counted():
    spider = types.SimpleNamespace(big=b"x" * 10_000_000)
    entries = [{"spider": spider, "id": "a" * 1000}]
    traced, _ = deep_size([entries], [spider])
    assert traced < 10_000


# -- where a bad declaration is reported ---------------------------------------------------------------------------------


def test_a_bad_ini_declaration_stops_the_run_with_a_usage_error_naming_it(pytester):
    pytester.makeini("[pytest]\ncrawlmem_expected_growth = seen_ids=600 B\n")
    pytester.makepyfile(test_a="def test_a():\n    pass\n")
    outcome = pytester.runpytest_subprocess("-p", "no:cacheprovider", timeout=120)
    assert outcome.ret == pytest.ExitCode.USAGE_ERROR
    outcome.stderr.fnmatch_lines(["*invalid value 'seen_ids=600 B' for expected_growth in ini crawlmem_expected_growth:"
                                  " the holder 'seen_ids' is not named as a verdict names one*"])


def test_a_bad_marker_declaration_errors_its_own_test_naming_it(pytester):
    pytester.makepyfile(test_a="""
import pytest

@pytest.mark.crawl_memory(expected_growth={"spider.seen_ids": "lots"})
def test_bad(crawl):
    pass

def test_other():
    pass
""")
    outcome = pytester.runpytest_subprocess("-p", "no:cacheprovider", timeout=120)
    outcome.assert_outcomes(passed=1, errors=1)
    outcome.stdout.fnmatch_lines(["*invalid value {'spider.seen_ids': 'lots'} for expected_growth in crawl_memory marker"
                                  " of test_a.py::test_bad: invalid size 'lots' for spider.seen_ids*"])
