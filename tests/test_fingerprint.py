"""A leak's fingerprint (core/fingerprint.py): the same leak gives the same id across line moves, sizes and runs; another
holder or another storing statement gives another (no crawl)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_crawlmem.attribution.sourcecode import read_keeping_code
from pytest_crawlmem.core import verdicts
from pytest_crawlmem.core.assemble import RunFacts, assemble
from pytest_crawlmem.core.fingerprint import KeepingCode, fingerprint_of, holder_shape, keeping_code, leak_basis, normalized_code
from pytest_crawlmem.core.models import CrawlResult, Growth, GrowthSite, Holder, RetentionPath

SPIDER = '''import functools


class Hoarder(Catalog):
    kept = []

    def parse_product(self, response):
        # keeps every page
        self.kept.append(b"x" * 4096 + response.url.encode())
        yield {"url": response.url}

    @functools.lru_cache(maxsize=None)
    def lookup(self, url):
        return url * 2

    def parse(self, response):
        self.groups.setdefault(
            response.url, {"items": []}
        )["items"].append(response.body)

        def remember(item):
            REGISTRY.append(item)
        Page.registry[response.url] = self
'''


def line_of(source: str, text: str) -> int:
    """The line number (from 1) of the first line of ``source`` containing ``text``."""
    return next(i for i, line in enumerate(source.splitlines(), 1) if text in line)


def test_the_keeping_code_is_the_statement_without_comments_whitespace_or_numbers() -> None:
    code = keeping_code(SPIDER, line_of(SPIDER, "self.kept.append"))
    assert code == KeepingCode("Hoarder.parse_product", 'self.kept.append(b"x"*#+response.url.encode())')


def test_a_statement_over_several_lines_reads_the_same_from_any_of_them() -> None:
    first = line_of(SPIDER, "self.groups.setdefault(")
    codes = {keeping_code(SPIDER, line) for line in (first, first + 1, first + 2)}
    code = 'self.groups.setdefault(response.url, {"items":[]})["items"].append(response.body)'
    assert codes == {KeepingCode("Hoarder.parse", code)}


def test_a_decorated_def_is_its_header_with_the_decorators_and_its_own_name() -> None:
    at_def = keeping_code(SPIDER, line_of(SPIDER, "def lookup"))
    at_decorator = keeping_code(SPIDER, line_of(SPIDER, "@functools.lru_cache"))
    assert at_def == at_decorator == KeepingCode("Hoarder.lookup", "@functools.lru_cache(maxsize=None) def lookup(self, url):")


def test_qualified_names_follow_python_for_nested_functions_and_module_level() -> None:
    assert keeping_code(SPIDER, line_of(SPIDER, "REGISTRY.append")).function == "Hoarder.parse.<locals>.remember"
    assert keeping_code(SPIDER, line_of(SPIDER, "Page.registry")).function == "Hoarder.parse"
    assert keeping_code(SPIDER, 1) == KeepingCode("<module>", "import functools")


def test_unparsable_source_or_a_line_without_a_statement_has_no_keeping_code() -> None:
    assert keeping_code("def broken(:\n", 1) is None
    assert keeping_code(SPIDER, 2) is None  # a blank line at module level


def test_comments_and_layout_do_not_change_the_normalized_code() -> None:
    assert normalized_code("x.append( a ,b )  # note") == normalized_code("x.append(a, b)") == "x.append(a, b)"
    assert normalized_code("x.append(1024)") == normalized_code("x.append(4096)")
    assert normalized_code("x.append(a)") != normalized_code("x.add(a)")


def test_holder_shapes_drop_sizes_indices_counts_and_addresses() -> None:
    assert holder_shape("spider.kept -> list[907]") == holder_shape("spider.kept -> list[12]") == "spider.kept -> list"
    assert holder_shape("spider.groups[…]['items'] -> 10 lists[1,200]") == "spider.groups[]['items'] -> list"
    assert holder_shape("spider.groups[…]['items'] -> 3 lists[40]") == "spider.groups[]['items'] -> list"
    retained = "class m.Kept .trees -> list[1,000] [999] -> SelectorList[1] [0] -> Selector"
    assert holder_shape(retained) == holder_shape(retained.replace("[999]", "[3]").replace("1,000", "4"))
    assert "0x" in holder_shape("closure at 0x7f3a2b -> dict[3]") and "7f3a2b" not in holder_shape("closure at 0x7f3a2b")
    assert holder_shape("spider.kept -> list[9]") != holder_shape("spider.seen -> list[9]")


@given(st.integers(0, 10**7), st.integers(0, 10**7), st.integers(2, 10**4))
def test_no_size_or_count_reaches_the_shape(entries: int, other: int, containers: int) -> None:
    a = holder_shape(f"spider.cache[…]['rows'] -> {containers:,} dicts[{entries:,}]")
    b = holder_shape(f"spider.cache[…]['rows'] -> {containers + 1:,} dicts[{other:,}]")
    assert a == b == "spider.cache[]['rows'] -> dict"


def write_spider(directory: Path, blank_lines_above: int = 0, statement: str = "self.kept.append(response.body)") -> str:
    """Write a spider module storing with ``statement``; return its keeping line as ``file:line``."""
    source = "\n" * blank_lines_above + f"class S:\n    def parse(self, response):\n        {statement}\n"
    (directory / "spider.py").write_text(source)
    return f"{directory / 'spider.py'}:{blank_lines_above + 3}"


def basis_of(line: str, path: str = "spider.kept -> list[500]") -> tuple[str, ...]:
    return leak_basis(verdicts.RETAINED_OBJECTS, "s", holders=[Holder(path, gained=400, responses=500, line=line)],
                      read=read_keeping_code)


def test_an_edit_above_the_leak_keeps_its_fingerprint(tmp_path: Path) -> None:
    before = basis_of(write_spider(tmp_path))
    after = basis_of(write_spider(tmp_path, blank_lines_above=7))
    assert before == after == ("holder spider.kept -> list", "function S.parse", "code self.kept.append(response.body)")
    assert fingerprint_of(before) == fingerprint_of(after)


def test_another_holder_or_another_storing_statement_changes_the_fingerprint(tmp_path: Path) -> None:
    line = write_spider(tmp_path)
    same = fingerprint_of(basis_of(line))
    assert fingerprint_of(basis_of(line, path="spider.seen -> list[500]")) != same
    assert fingerprint_of(basis_of(write_spider(tmp_path, statement="self.kept.append(response.url)"))) != same


def test_a_relative_line_is_read_from_the_working_directory_and_an_unreadable_one_is_named_by_its_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_spider(tmp_path)
    monkeypatch.chdir(tmp_path)
    assert read_keeping_code("spider.py:3") == KeepingCode("S.parse", "self.kept.append(response.body)")
    assert read_keeping_code(f"{tmp_path}/missing.py:3") is None
    assert read_keeping_code("no line here") is None
    assert basis_of(f"{tmp_path}/missing.py:3")[1:] == ("file missing.py",)
    without_reader = leak_basis(verdicts.RETAINED_OBJECTS, "s", holders=[Holder("spider.kept -> list[5]", 5, 5, "a/b.py:3")])
    assert without_reader == ("holder spider.kept -> list", "file b.py")


def test_without_a_holder_the_retention_path_and_top_user_site_stand_in_then_the_verdict(tmp_path: Path) -> None:
    line = write_spider(tmp_path)
    site = GrowthSite(line, 1000, 10, 2.0)
    library = GrowthSite("/venv/scrapy/x.py:9", 5000, 10, 9.0, in_user_code=False)
    retained = RetentionPath("HtmlResponse", 12, "class m.S .kept -> list[12] [11] -> HtmlResponse")
    with_path = leak_basis(verdicts.RETAINED_OBJECTS, "s", retention=[retained], sites=[library, site],
                           read=read_keeping_code)
    assert with_path == ("retained HtmlResponse via class m.S .kept -> list[] [] -> HtmlResponse", "function S.parse",
                         "code self.kept.append(response.body)")
    assert leak_basis(verdicts.RETAINED_OBJECTS, "s", sites=[library, site], read=read_keeping_code) == with_path[1:]
    assert leak_basis(verdicts.BROWSER_STATE, "shots") == ("verdict browser-state", "spider shots")


def test_the_holder_a_verdict_names_first_is_the_first_with_a_keeping_line(tmp_path: Path) -> None:
    line = write_spider(tmp_path)
    holders = [Holder("spider.a -> list[9]", 9, 9), Holder("spider.kept -> list[9]", 9, 9, line)]
    assert leak_basis(verdicts.RETAINED_OBJECTS, "s", holders=holders, read=read_keeping_code)[:2] == (
        "holder spider.kept -> list", "function S.parse")


def test_fingerprints_are_sixteen_hex_digits_and_differ_with_the_basis() -> None:
    one = fingerprint_of(("holder spider.kept -> list",))
    assert len(one) == 16 and int(one, 16) >= 0
    assert one == fingerprint_of(("holder spider.kept -> list",)) != fingerprint_of(("holder spider.kept -> dict",))


def result_with(verdict: str, holders: tuple[Holder, ...] = ()) -> CrawlResult:
    facts = RunFacts(spider="s", duration_seconds=1.0, finish_reason="finished", start_rss=0, end_rss=0, peak_rss=0,
                     responses=600, items_scraped=0, interval_seconds=0.1)
    return assemble(facts, (), (), Growth(verdict=verdict, reason="r"), holders=holders, read_code=read_keeping_code)


def test_every_leak_verdict_carries_a_fingerprint_and_no_other_does(tmp_path: Path) -> None:
    holders = (Holder("spider.kept -> list[500]", 400, 500, write_spider(tmp_path)),)
    for name in verdicts.VERDICTS:
        result = result_with(name, holders)
        assert bool(result.leak_fingerprint) == verdicts.is_leak(name), name
        assert bool(result.growth.fingerprint_basis) == verdicts.is_leak(name), name


def test_the_fingerprint_is_written_to_report_json_and_read_back_as_it_was(tmp_path: Path) -> None:
    line = write_spider(tmp_path)
    result = result_with(verdicts.RETAINED_OBJECTS, (Holder("spider.kept -> list[500]", 400, 500, line),))
    data = result.to_json()
    assert data["growth"]["fingerprint"] == result.leak_fingerprint
    assert data["growth"]["fingerprint_basis"][0] == "holder spider.kept -> list"
    write_spider(tmp_path, statement="self.other.add(1)")  # the source changed since: the report keeps its id
    again = assemble(RunFacts(spider="s", duration_seconds=1.0, finish_reason="finished", start_rss=0, end_rss=0,
                              peak_rss=0, responses=600, items_scraped=0, interval_seconds=0.1),
                     (), (), CrawlResult.from_json(data).growth, holders=result.holders, read_code=read_keeping_code)
    assert again.leak_fingerprint == result.leak_fingerprint
    fresh = assemble(RunFacts(spider="s", duration_seconds=1.0, finish_reason="finished", start_rss=0, end_rss=0,
                              peak_rss=0, responses=600, items_scraped=0, interval_seconds=0.1),
                     (), (), replace(result.growth, fingerprint=""), holders=result.holders, read_code=read_keeping_code)
    assert fresh.leak_fingerprint != result.leak_fingerprint  # judged again on the new source: another statement
