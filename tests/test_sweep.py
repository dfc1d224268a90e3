"""Tuning sweeps: the pure table and pick (sweep.py), and real sweeps through ``crawl_sweep`` in a subprocess."""

from __future__ import annotations

import json
import math
import warnings
from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_crawlmem.core.budgets import Violation
from pytest_crawlmem.core.models import CrawlResult, DroppedResponse, Growth, Peaks
from pytest_crawlmem.core.sweep import Pick, SweepResult, SweepRow, derived_name, name_variants
from pytest_crawlmem.harness.session import CrawlMemWarning, CrawlRecord, sweep_failures

MiB = 2**20


def row(variant: str, *, rps: float = 10.0, peak_mib: float = 100, items: int = 100, **changes: object) -> SweepRow:
    """A row of 100 responses whose duration gives ``rps`` responses/s."""
    base = SweepRow(
        variant=variant, settings={"CONCURRENT_REQUESTS": 8}, peak_rss=int(peak_mib * MiB), start_rss=80 * MiB,
        rss_growth=2 * MiB, per_response_bytes=None, responses=100, items=items, dropped=0, gave_up=0,
        status_429=0, status_503=0, duration_seconds=100 / rps, verdict="steady", finish_reason="finished",
    )
    return replace(base, **changes)  # type: ignore[arg-type]


def sweep_of(*rows: SweepRow) -> SweepResult:
    return SweepResult("tests/test_x.py::test_it", rows, isolated=True)


# -- naming variants ------------------------------------------------------------------------


def test_named_variants_keep_their_names_and_order():
    named = name_variants({"b": {"CONCURRENT_REQUESTS": 2}, "a": {}})
    assert named == [("b", {"CONCURRENT_REQUESTS": 2}), ("a", {})]


def test_a_list_of_settings_is_named_from_its_keys_and_values():
    named = name_variants([{"CONCURRENT_REQUESTS": 4, "SCRAPER_SLOT_MAX_ACTIVE_SIZE": 1024}, {}])
    assert [name for name, _ in named] == ["CONCURRENT_REQUESTS=4 SCRAPER_SLOT_MAX_ACTIVE_SIZE=1024", "defaults"]


@pytest.mark.parametrize(
    ("variants", "error", "message"),
    [
        ({}, ValueError, "at least one variant"),
        ([], ValueError, "at least one variant"),
        ([{"CONCURRENT_REQUESTS": 4}, {"CONCURRENT_REQUESTS": 4}], ValueError, "'CONCURRENT_REQUESTS=4' is used twice"),
        ({"a": [("CONCURRENT_REQUESTS", 4)]}, TypeError, "variant 'a' must be a dict of settings, not list"),
        ("CONCURRENT_REQUESTS=4", TypeError, "not str"),
        ({"": {}}, TypeError, "non-empty strings"),
    ],
)
def test_a_bad_sweep_is_refused_before_any_crawl(variants, error, message):
    with pytest.raises(error, match=message):
        name_variants(variants)


# -- picking --------------------------------------------------------------------------------


def test_best_is_the_fastest_variant_within_the_memory_budget():
    sweep = sweep_of(row("lean", rps=10, peak_mib=90), row("mid", rps=20, peak_mib=120), row("fat", rps=40, peak_mib=200))
    assert sweep.best().variant == "fat"
    assert sweep.best(max_peak_rss="150 MiB").variant == "mid"
    assert sweep.best(max_peak_rss=100 * MiB).variant == "lean"
    assert sweep.best(max_peak_rss="50 MiB") is None
    assert sweep.rejections(max_peak_rss="150 MiB") == {"fat": "peak RSS 200.0 MiB is over 150.0 MiB"}


def test_a_variant_that_lost_data_is_never_picked_however_fast():
    sweep = sweep_of(
        row("complete", rps=10),
        row("capped", rps=90, items=80, dropped=20),
        row("gave-up", rps=80, gave_up=3, status_429=40),
        row("short", rps=70, items=99),
    )
    assert sweep.best().variant == "complete"
    why = sweep.rejections()
    assert why["capped"] == ("20 responses were dropped by a size limit; it scraped 80 items,"
                             " 20 fewer than the most complete variant")
    assert why["gave-up"] == "3 requests were given up after retries"
    assert why["short"] == "it scraped 99 items, 1 fewer than the most complete variant"
    assert sweep.best(require_complete=False).variant == "capped"


def test_a_variant_that_broke_a_test_budget_or_was_stopped_is_not_picked():
    sweep = sweep_of(row("ok", rps=1), row("broken", rps=9, broken=("peak_rss",)),
                     row("killed", rps=9, finish_reason="crawlmem_kill_at", items=10))
    assert sweep.best().variant == "ok"
    assert sweep.rejections()["broken"] == "it broke the test's budgets: peak_rss"
    assert sweep.rejections()["killed"] == ("the harness stopped it (crawlmem_kill_at);"
                                            " it scraped 10 items, 90 fewer than the most complete variant")
    assert sweep.best(within_budgets=False).variant == "broken"


def test_a_variant_that_got_no_response_is_never_picked_whatever_the_rule():
    empty = row("refused", peak_mib=60, items=0, responses=0, duration_seconds=0.5, broken=("min_responses",))
    sweep = sweep_of(row("ok", rps=5), empty)
    assert sweep.rejections()["refused"].startswith("it got no responses, so nothing was measured")
    assert sweep.best(key="peak_rss", within_budgets=False, require_complete=False).variant == "ok"
    assert sweep.best(key="duration_seconds", within_budgets=False, require_complete=False).variant == "ok"
    assert sweep_of(replace(empty, broken=())).best(within_budgets=False, require_complete=False) is None


def test_a_stopped_variant_does_not_set_the_item_count_others_must_reach():
    sweep = sweep_of(row("ok", items=50), row("killed", items=500, finish_reason="crawlmem_timeout"))
    assert sweep.best().variant == "ok"


def test_best_ranks_by_the_key_asked_for_and_ties_go_to_the_first_run():
    sweep = sweep_of(row("a", rps=10, peak_mib=120), row("b", rps=20, peak_mib=100), row("c", rps=20, peak_mib=100))
    assert sweep.best().variant == "b"
    assert sweep.best(key="peak_rss").variant == "b"
    assert sweep.best(key="duration_seconds").variant == "b"
    assert sweep.best(key=lambda r: r.peak_rss).variant == "a"
    with pytest.raises(ValueError, match="unknown sweep key 'speed'"):
        sweep.best(key="speed")


def test_every_pick_is_reported_with_its_rule():
    picks: list[Pick] = []
    sweep = replace(sweep_of(row("a", rps=1), row("b", rps=2, peak_mib=300)), on_pick=picks.append)
    sweep.best(max_peak_rss="200 MiB")
    assert picks == [Pick("a", "the most responses/s among the variants that ran to the end, kept the test's budgets,"
                               " peaked at or under 200.0 MiB RSS and lost no data",
                          {"b": "peak RSS 300.0 MiB is over 200.0 MiB"})]


@given(st.lists(
    st.tuples(st.floats(0.1, 1000), st.integers(50, 500), st.integers(0, 100), st.integers(0, 3), st.integers(0, 3),
              st.booleans()),
    min_size=1, max_size=8,
))
def test_the_pick_is_complete_within_budget_and_no_candidate_is_faster(specs):
    rows = [row(f"v{i}", rps=rps, peak_mib=peak, items=items, dropped=dropped, gave_up=gave_up,
                broken=("peak_rss",) if broken else ())
            for i, (rps, peak, items, dropped, gave_up, broken) in enumerate(specs)]
    sweep = sweep_of(*rows)
    best = sweep.best(max_peak_rss="300 MiB")
    rejected = sweep.rejections(max_peak_rss="300 MiB")
    most_items = max(r.items for r in rows)
    if best is None:
        assert set(rejected) == {r.variant for r in rows}
        return
    assert best.variant not in rejected
    assert best.dropped == 0 and best.gave_up == 0 and best.items == most_items and not best.broken
    assert best.peak_rss <= 300 * MiB
    assert all(best.responses_per_second >= r.responses_per_second for r in rows if r.variant not in rejected)


# -- table and JSON -------------------------------------------------------------------------


def test_the_table_has_a_line_per_variant_the_pick_marked_and_a_legend_for_named_variants():
    sweep = sweep_of(row("lean", rps=12.34, per_response_bytes=2048.0),
                     replace(row("x", status_429=7, status_503=2, dropped=3), variant=derived_name({"CONCURRENT_REQUESTS": 8})))
    lines = sweep.table(mark="lean").splitlines()
    assert lines[0].split() == ["variant", "peak", "RSS", "RSS", "growth", "growth/resp", "resp/s", "items", "dropped",
                                "gave", "up", "429", "503", "verdict", "budgets", "duration"]
    assert lines[1].split() == ["*", "lean", "100.0", "MiB", "2.0", "MiB", "2.0", "KiB", "12.3", "100", "0", "0", "0", "0",
                                "steady", "ok", "8.1s"]
    assert lines[2].split()[:2] == ["CONCURRENT_REQUESTS=8", "100.0"] and lines[2].split()[8:12] == ["3", "0", "7", "2"]
    assert lines[3:] == ['lean: {"CONCURRENT_REQUESTS": 8}']  # the second variant is named by its settings


def test_a_sweep_survives_json_and_its_settings_become_plain_values():
    sweep = sweep_of(row("a", per_response_bytes=float("nan"), broken=("max_dropped",)), row("b", rps=3))
    document = sweep.to_json()
    text = json.dumps(document, allow_nan=False)
    again = SweepResult.from_json(json.loads(text))
    assert again.rows[1] == sweep.rows[1]
    assert again.rows[0].broken == ("max_dropped",) and again.rows[0].per_response_bytes is None
    assert document["best"] == "b" and document["rejected"] == {"a": "it broke the test's budgets: max_dropped"}
    assert document["variants"][1]["responses_per_second"] == 3.0


def test_a_row_summarizes_a_crawl_result():
    result = CrawlResult(
        spider="s", samples=(), start_rss=80 * MiB, end_rss=82 * MiB, peak_rss=120 * MiB, traced_peak=None,
        responses=50, items_scraped=40, duration_seconds=2.0, finish_reason="finished", peaks=Peaks(),
        growth=Growth("steady", "flat", per_response_bytes=float("inf")), status_counts={200: 40, 429: 6, 503: 4},
        dropped=(DroppedResponse("http://x/1", "download_maxsize (declared)", 10),), dropped_count=2,
        retries_max_reached=1,
    )
    settings = {"ITEM_PIPELINES": {"p.P": 300}, "SPIDER": CrawlResult, "RATIO": 0.5}
    r = SweepRow.of("v", settings, result, ["peak_rss"])
    assert (r.peak_rss, r.rss_growth, r.responses_per_second, r.items) == (120 * MiB, 2 * MiB, 25.0, 40)
    assert (r.dropped, r.gave_up, r.status_429, r.status_503) == (2, 1, 6, 4)
    assert r.per_response_bytes is None and r.broken == ("peak_rss",)
    assert r.settings == {"ITEM_PIPELINES": {"p.P": 300}, "SPIDER": repr(CrawlResult), "RATIO": 0.5}
    assert not math.isnan(SweepRow.from_json(json.loads(json.dumps(r.to_json()))).responses_per_second)


# -- budgets of variants --------------------------------------------------------------------


def record(variant: str, *messages: str, sweep: int = 1) -> CrawlRecord:
    violations = [Violation("peak_rss", 2, 1, message) for message in messages]
    return CrawlRecord("t.py::test", None, None, violations, variant=variant, sweep=sweep)  # type: ignore[arg-type]


def test_a_variant_over_budget_warns_and_the_test_fails_only_when_no_variant_kept_the_budgets():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert sweep_failures("t.py::test", [record("a", "peak RSS was 2 B"), record("b")]) == []
        records = [record("a", "peak RSS was 2 B"), record("d"),
                   record("b", "peak RSS was 3 B", sweep=2), record("c", "peak RSS was 4 B", sweep=2)]
        failures = sweep_failures("t.py::test", records)
    assert failures == ["no variant of the sweep kept the budgets: b: peak RSS was 3 B; c: peak RSS was 4 B"]
    assert [str(w.message) for w in caught if issubclass(w.category, CrawlMemWarning)] == [
        "t.py::test variant a: peak RSS was 2 B", "t.py::test variant a: peak RSS was 2 B",
        "t.py::test variant b: peak RSS was 3 B", "t.py::test variant c: peak RSS was 4 B",
    ]


# -- real sweeps ----------------------------------------------------------------------------

SPIDERS = '''
import scrapy


class Pages(scrapy.Spider):
    """Six small pages and two of 1 MiB from ``base``, one item each."""

    name = "pages"

    async def start(self):
        for i in range(8):
            yield scrapy.Request(f"{self.base}/large/{i}?kb={1024 if i in (3, 6) else 4}")

    def parse(self, response):
        yield {"url": response.url, "size": len(response.body)}
'''

TESTS = '''
import json
import pytest
from sweep_spiders import Pages

VARIANTS = {
    "throttled": {"DOWNLOAD_DELAY": 0.5, "RANDOMIZE_DOWNLOAD_DELAY": False},  # complete, and slow
    "full": {"CONCURRENT_REQUESTS": 8},
    "capped": {"DOWNLOAD_MAXSIZE": 64 * 1024},  # loses the two 1 MiB pages
}


@pytest.mark.crawl_memory(max_dropped=0)
def test_sweep(crawl_sweep, fixture_site):
    sweep = crawl_sweep(Pages, VARIANTS, base=fixture_site.base_url)
    assert [r.variant for r in sweep] == ["throttled", "full", "capped"]
    assert sweep.results["capped"].dropped_count == 2 and sweep["capped"].dropped == 2
    assert sweep["capped"].broken == ("max_dropped",) and sweep["full"].broken == ()
    fewest_items_first = lambda r: -r.items
    assert sweep.best(key=fewest_items_first, require_complete=False, within_budgets=False).variant == "capped"
    assert sweep.best(key=fewest_items_first).variant == "throttled"
    assert "dropped by a size limit" in sweep.rejections()["capped"]
    assert sweep.best().variant == "full"  # the last pick: what the summary and sweep.json show


@pytest.mark.crawl_memory(max_dropped=0)
def test_no_variant_keeps_the_budgets(crawl_sweep, fixture_site):
    sweep = crawl_sweep(Pages, [{"DOWNLOAD_MAXSIZE": 64 * 1024}, {"DOWNLOAD_MAXSIZE": 128 * 1024}],
                        base=fixture_site.base_url, isolate=False)
    assert sweep.best() is None
'''


def test_a_real_sweep_prints_its_table_writes_sweep_json_and_never_picks_a_variant_that_dropped_data(pytester):
    pytester.makepyfile(sweep_spiders=SPIDERS, test_sweeps=TESTS)
    outcome = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-n", "2", "-rA", timeout=300)
    outcome.assert_outcomes(passed=1, failed=1)
    out = outcome.stdout.str()
    outcome.stdout.fnmatch_lines([
        "*crawl_memory budget broken: no variant of the sweep kept the budgets: DOWNLOAD_MAXSIZE=65536: 2 responses were"
        " dropped, over the budget max_dropped=0*; DOWNLOAD_MAXSIZE=131072: 2 responses were dropped*",
    ])
    outcome.stdout.fnmatch_lines(["*CrawlMemWarning: test_sweeps.py::test_sweep variant capped: 2 responses were dropped*"])
    outcome.stdout.fnmatch_lines(["*test_sweeps.py::test_sweep (capped) * 6 * over budget"])
    outcome.stdout.fnmatch_lines([
        "*crawl sweep: test_sweeps.py::test_no_variant_keeps_the_budgets (2 variants, in-process)*",
        "variant * peak RSS * RSS growth * growth/resp * resp/s * items * dropped * gave up * 429 * 503 * verdict * budgets *",
        "  DOWNLOAD_MAXSIZE=65536 * MiB * 6 * 2 * 0 * broken: max_dropped *s",
        "  DOWNLOAD_MAXSIZE=131072 * MiB * 6 * 2 * 0 * broken: max_dropped *s",
        "no variant qualified for the most responses/s among the variants that ran to the end, kept the test's budgets"
        " and lost no data",
        "*crawl sweep: test_sweeps.py::test_sweep (3 variants, isolated)*",
        "variant *",
        "  throttled * MiB * 8 * 0 * 0 * 0 * 0 * ok *s",
        "[*] full * MiB * 8 * 0 * 0 * 0 * 0 * ok *s",
        "  capped * MiB * 6 * 2 * 0 * 0 * 0 * broken: max_dropped *s",
        'throttled: {"DOWNLOAD_DELAY": 0.5, "RANDOMIZE_DOWNLOAD_DELAY": false}',
        'full: {"CONCURRENT_REQUESTS": 8}',
        'capped: {"DOWNLOAD_MAXSIZE": 65536}',
        "[*] full: the most responses/s among the variants that ran to the end, kept the test's budgets and lost no data",
    ])
    assert out.count("crawl sweep:") == 2
    test_dir = pytester.path / ".crawlmem" / "test_sweeps.py__test_sweep"
    document = json.loads((test_dir / "sweep.json").read_text())
    assert document["schema_version"] == 1 and document["isolated"] is True
    assert document["test"] == "test_sweeps.py::test_sweep"
    assert document["best"] == "full"
    assert set(document["rejected"]) == {"capped"}
    rows = {r["variant"]: r for r in document["variants"]}
    assert list(rows) == ["throttled", "full", "capped"]
    assert rows["capped"]["dropped"] == 2 and rows["capped"]["items"] == 6 and rows["full"]["items"] == 8
    assert rows["capped"]["broken"] == ["max_dropped"]
    assert rows["full"]["settings"] == {"CONCURRENT_REQUESTS": 8}
    assert rows["full"]["peak_rss"] > rows["full"]["start_rss"] > 0
    for variant in rows.values():  # each variant is an ordinary crawl with its own reports
        report = json.loads((test_dir.parent / variant["report_dir"] / "report.json").read_text())
        assert report["result"]["peak_rss"] == variant["peak_rss"]
    assert sorted(p.name for p in test_dir.iterdir() if p.name.startswith("crawl-")) == ["crawl-2", "crawl-3"]
    page = (test_dir / "sweep.html").read_text()
    assert "capped" in page and "crawl-3/report.html" in page and "dropped by a size limit" in page
    failed = json.loads((test_dir.parent / "test_sweeps.py__test_no_variant_keeps_the_budgets" / "sweep.json").read_text())
    assert failed["best"] is None and failed["isolated"] is False and len(failed["rejected"]) == 2


ZERO_TESTS = '''
import pytest
from scrapy.exceptions import IgnoreRequest
from sweep_spiders import Pages


class Refuse:
    """A downloader middleware that lets no request through: the variant gets no response."""

    def process_request(self, request, spider=None):
        raise IgnoreRequest("refused by the variant")


REFUSE = {"DOWNLOADER_MIDDLEWARES": {"test_zero_sweeps.Refuse": 1}}


def test_one_variant_gets_nothing(crawl_sweep, fixture_site):
    sweep = crawl_sweep(Pages, {"refused": REFUSE, "open": {}}, base=fixture_site.base_url, isolate=False)
    assert sweep["refused"].responses == 0 and sweep["refused"].broken == ("min_responses",)
    assert sweep["open"].responses == 8 and sweep["open"].broken == ()
    assert sweep.best().variant == "open"
    assert sweep.best(key="peak_rss", within_budgets=False).variant == "open"
    assert sweep.rejections()["refused"].startswith("it got no responses, so nothing was measured")


def test_every_variant_gets_nothing(crawl_sweep, fixture_site):
    sweep = crawl_sweep(Pages, {"refused": REFUSE, "also refused": REFUSE}, base=fixture_site.base_url, isolate=False)
    assert len(sweep) == 2 and sweep.best() is None
'''


def test_a_variant_that_gets_no_response_is_a_losing_row_and_fails_the_test_only_when_every_variant_does(pytester):
    pytester.makepyfile(sweep_spiders=SPIDERS, test_zero_sweeps=ZERO_TESTS)
    outcome = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-rA", timeout=300)
    outcome.assert_outcomes(passed=1, failed=1)
    outcome.stdout.fnmatch_lines([
        "*crawl_memory budget broken: no variant of the sweep kept the budgets: refused: the crawl got 0 responses,"
        " fewer than min_responses=1*; also refused: the crawl got 0 responses*",
    ])
    outcome.stdout.fnmatch_lines(["*CrawlMemWarning: test_zero_sweeps.py::test_one_variant_gets_nothing variant refused:"
                                  " the crawl got 0 responses*"])
    outcome.stdout.fnmatch_lines([
        "*crawl sweep: test_zero_sweeps.py::test_one_variant_gets_nothing (2 variants, in-process)*",
        "variant *",
        "  refused * 0 * broken: min_responses *s",
        "[*] open * 8 * ok *s",
    ])
