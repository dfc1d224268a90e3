"""Leak traces (pure): a holder's or retention path read into hops, the fingerprint's references marked, text and HTML."""

from __future__ import annotations

import json
import re

from hypothesis import given
from hypothesis import strategies as st

from pytest_crawlmem.core.fingerprint import leak_basis
from pytest_crawlmem.core.leaktrace import FINGERPRINT_MARK, LeakTrace, TraceHop, trace_lines
from pytest_crawlmem.core.models import CrawlResult, Growth, GrowthSite, Holder, Peaks, RetentionPath
from pytest_crawlmem.core.tracebuild import build_trace, leak_lines, split_root, trace_of
from pytest_crawlmem.reports.tracehtml import trace_html

CODE = 'self.seen_pages.append(response.body[:2048])  # kept'
KEEPING = GrowthSite("examples/spiders.py:40", 280_000, 107, 2_500.0,
                     ('File "/work/examples/spiders.py", line 40', f"    {CODE}"))
HOLDER = Holder("spider.seen_pages -> list[495]", 107, 112, "examples/spiders.py:40")
BASIS = ("holder spider.seen_pages -> list", "function Hoarder.parse_product", "code self.seen_pages.append(response.body[:#])")


def test_a_holder_becomes_one_reference_a_line_with_the_fingerprints_references_marked():
    trace = build_trace(BASIS, holders=[HOLDER], sites=[KEEPING])
    assert [hop.reference for hop in trace.hops] == ["spider", ".seen_pages", "[*]"]
    assert [hop.in_fingerprint for hop in trace.hops] == [True, True, False]  # the entries' size is not hashed
    assert trace.hops[1].holds == "list, +107 entries in 112 responses"
    assert trace.hops[2].holds == "2.6 KiB each (traced at the keeping line)"  # 280,000 B / 107 blocks
    assert (trace.line, trace.line_label, trace.function, trace.code) == (
        "examples/spiders.py:40", "stored at", "Hoarder.parse_product", CODE)
    assert trace.code_in_fingerprint and trace.source == "holder"
    lines = trace_lines(trace)
    assert lines[0].startswith("spider ") and lines[0].endswith(FINGERPRINT_MARK)
    assert re.fullmatch(r"  \.seen_pages  list, \+107 entries in 112 responses +<- fingerprint", lines[1]), lines[1]
    assert lines[2] == "  [*]          2.6 KiB each (traced at the keeping line)"  # no mark
    assert lines[3].startswith(f"stored at examples/spiders.py:40 in Hoarder.parse_product: {CODE}")
    assert lines[3].endswith(FINGERPRINT_MARK) and len(lines) == 4
    assert lines[0].index(FINGERPRINT_MARK) == lines[1].index(FINGERPRINT_MARK)  # the marks in one column


def test_nested_holders_several_containers_and_module_and_class_roots():
    nested = build_trace(("holder x",), holders=[Holder("spider.groups[…]['items'] -> 10 lists[415]", 82, 86, None)])
    assert [(h.reference, h.holds) for h in nested.hops] == [
        ("spider", ""), (".groups", ""), ("[…]", ""), ("['items']", "10 lists, 415 entries, +82 entries in 86 responses")]
    assert nested.line == "" and nested.line_label == "allocated at"  # no storing line, no site: nothing to name
    assert split_root("module test_suite.KEPT", "test_suite") == ("module test_suite", [".KEPT"])
    assert split_root("module shop.spiders.cache.PAGES[…]", "spiders.cache") == ("module shop.spiders.cache", [".PAGES", "[…]"])
    assert split_root("module a.b.KEPT") == ("module a.b", [".KEPT"])  # no hint: the last name is the attribute
    assert split_root("class m.Page.registry", "m") == ("class m.Page", [".registry"])
    assert split_root("pipeline Cache._store['pages']") == ("pipeline Cache", ["._store", "['pages']"])
    assert split_root("signal dispatcher.connections") == ("signal dispatcher", [".connections"])
    lru = build_trace(("holder module test_suite.priority_of -> _lru_cache_wrapper",),
                      holders=[Holder("module test_suite.priority_of -> _lru_cache_wrapper[236]", 136, 142, "test_suite.py:48")])
    assert [(h.reference, h.holds) for h in lru.hops] == [
        ("module test_suite", ""), (".priority_of", "_lru_cache_wrapper, +136 entries in 142 responses")]


def test_a_retention_path_names_each_reference_and_what_it_reaches():
    path = "class test_suite.MetaResponses .kept -> list[600] [596] -> HtmlResponse .request -> Request"
    retained = RetentionPath("Request", 630, path)
    site = GrowthSite("test_suite.py:50", 14_008, 132, 100.0)
    basis = leak_basis("retained-objects", "s", retention=[retained], sites=[site])
    trace = build_trace(basis, retention=[retained], sites=[site])
    assert [(h.reference, h.holds) for h in trace.hops] == [
        ("class test_suite.MetaResponses", ""), (".kept", "list[600]"), ("[596]", "HtmlResponse"), (".request", "Request")]
    assert all(h.in_fingerprint for h in trace.hops) and trace.source == "retention"
    assert (trace.line, trace.line_label, trace.code_in_fingerprint) == ("test_suite.py:50", "allocated at", True)
    cache = build_trace(("retained x",), retention=[RetentionPath(
        "Request", 280, "module t .priority_of -> _lru_cache_wrapper -> dict[280] (dict key) -> tuple[1] [0] -> Request")])
    assert [(h.reference, h.holds) for h in cache.hops] == [
        ("module t", ""), (".priority_of", "_lru_cache_wrapper"), ("->", "dict[280]"), ("(dict key)", "tuple[1]"),
        ("[0]", "Request")]


def test_a_holder_without_a_storing_line_names_where_its_growth_was_allocated_unmarked():
    library = GrowthSite("/x/site-packages/lib/cache.py:12", 90_000, 20, 800.0, in_user_code=False)
    holder = Holder("pipeline Cache._store -> dict[300]", 120, 130, None)
    basis = leak_basis("retained-objects", "s", holders=[holder], sites=[library])
    trace = build_trace(basis, holders=[holder], sites=[library])
    assert basis == ("holder pipeline Cache._store -> dict",)
    assert (trace.line, trace.line_label, trace.code_in_fingerprint) == (library.location, "allocated at", False)
    assert trace_lines(trace)[-1] == f"allocated at {library.location}"


_NAME = st.from_regex(r"[a-z_][a-z0-9_]{0,8}", fullmatch=True)
_STEP = st.one_of(_NAME.map(lambda n: f".{n}"), st.just("[…]"), _NAME.map(lambda n: f"['{n}']"))
_ROOT = st.one_of(st.just("spider"), st.just("stats"), _NAME.map(lambda n: f"pipeline {n.title()}"),
                  st.lists(_NAME, min_size=1, max_size=3).map(lambda ns: "module " + ".".join(ns)))


@given(root=_ROOT, steps=st.lists(_STEP, min_size=1, max_size=4), kind=st.sampled_from(["list", "dict", "set"]),
       containers=st.integers(1, 30), entries=st.integers(0, 10**6), gained=st.integers(1, 10**4),
       hashed=st.booleans())
def test_any_holder_path_reads_back_as_its_root_and_steps_each_marked_as_its_basis_says(
        root, steps, kind, containers, entries, gained, hashed):
    if root.startswith("module ") and not steps[0].startswith("."):
        steps = [".attr", *steps]  # a module root holds names: its first step is one
    many = f"{containers:,} {kind}s" if containers > 1 else kind
    path = f"{root}{''.join(steps)} -> {many}[{entries:,}]"
    module = root.removeprefix("module ") if root.startswith("module ") else ""
    holder = Holder(path, gained, gained + 5, "spiders.py:9")
    trace = build_trace(("holder shape",) if hashed else ("file spiders.py",), holders=[holder])
    assert "".join(hop.reference for hop in trace.hops) == path.split(" -> ")[0]  # nothing lost or added
    assert split_root(path.split(" -> ")[0], module) == (root, steps)
    assert all(hop.in_fingerprint is hashed for hop in trace.hops)
    assert f"+{gained:,} entries in {gained + 5:,} responses" in trace.hops[-1].holds
    lines = trace_lines(trace)
    assert len(lines) == len(trace.hops) + 1
    assert all(line.endswith(FINGERPRINT_MARK) is hashed for line in lines[:-1])


@given(st.text(max_size=30), st.text(max_size=30), st.text(max_size=60))
def test_every_string_of_a_trace_is_escaped_in_html(reference, holds, code):
    trace = LeakTrace((TraceHop(reference, holds, True), TraceHop(f"<b>{reference}", holds)), "a.py:1", "stored at", code,
                      "<f>", True)
    markup = trace_html(trace, "<fp>")
    text = re.sub(r"<[^>]+>", "", markup)  # every tag left is one trace_html wrote
    assert "<" not in text and ">" not in text
    assert set(re.findall(r"<(/?[a-z]+)", markup)) <= {"span", "/span", "ol", "/ol", "li", "/li", "code", "/code"}


def test_the_trace_and_the_known_leak_are_in_report_json_and_read_back():
    trace = build_trace(BASIS, holders=[HOLDER], sites=[KEEPING])
    growth = Growth("retained-objects", "memory rose", fingerprint="9c0f1e2a7b3d4c55", fingerprint_basis=BASIS,
                    leak_trace=trace)
    data = json.loads(json.dumps(growth.to_json()))
    assert data["leak_trace"]["hops"][1] == {"reference": ".seen_pages", "holds": "list, +107 entries in 112 responses",
                                             "in_fingerprint": True}
    assert Growth.from_json(data) == growth
    assert Growth.from_json({k: v for k, v in data.items() if k != "leak_trace"}).leak_trace is None  # an older report


def test_a_report_without_a_trace_gets_one_built_from_its_basis_and_a_clean_crawl_none():
    result = CrawlResult(spider="s", samples=(), start_rss=0, end_rss=0, peak_rss=0, traced_peak=None, responses=112,
                         items_scraped=0, duration_seconds=1.0, finish_reason="finished", peaks=Peaks(),
                         growth=Growth("retained-objects", "r", fingerprint="9c0f1e2a7b3d4c55", fingerprint_basis=BASIS),
                         top_growth=(KEEPING,), holders=(HOLDER,))
    trace = trace_of(result)
    assert trace is not None and trace == build_trace(BASIS, holders=[HOLDER], sites=[KEEPING])
    lines = leak_lines(result)
    assert lines[0] == f"leak trace ({FINGERPRINT_MARK}: what fingerprint 9c0f1e2a7b3d4c55 is built from):"
    assert lines[1].startswith("  spider")
    clean = CrawlResult(**{**result.__dict__, "growth": Growth("steady", "flat")})
    assert trace_of(clean) is None and leak_lines(clean) == []
