"""The step summary for GitHub Actions (reports/github_summary.py): GFM tables a Markdown parser reads as tables, and
under GitHub's 1 MiB limit however many crawls and failures a run has (pure), plus the plugin writing it."""

from __future__ import annotations

from pathlib import Path

import pytest
from markdown_it import MarkdownIt
from markdown_it.token import Token

from pytest_crawlmem.harness.session import table_header
from pytest_crawlmem.reports.github_summary import (
    FAILURE_BYTES,
    HEADROOM,
    STEP_SUMMARY_LIMIT,
    append_step_summary,
    cell,
    step_summary,
)

HEADER = table_header(True)


def row(i: int, verdict: str = "steady") -> list[str]:
    """A crawl's cells as the ``-v`` summary makes them, in the header's order."""
    cells = {"test": f"tests/test_shop.py::test_spider[case-{i}]", "responses": "2,050", "peak RSS": "106.2 MiB",
             "RSS growth": "4.2 MiB", "max sched": "1,026", "max inflight": "16", "duration": "20.4s",
             "parse amp p95/max": "-", "leak caught (95%)": ">= 1.4 KiB", "growth/resp": "1.9 KiB", "verdict": verdict,
             "outcome": "passed", "fingerprint": f"{i:016x}" if verdict == "retained-objects" else "-",
             "where": "spiders/shop.py:40"}
    assert set(cells) == set(HEADER)
    return [cells[name] for name in HEADER]


def tables(markdown: str) -> list[list[list[str]]]:
    """Every table markdown-it (GFM tables enabled) finds: rows of cell texts, the header row first."""
    tokens = MarkdownIt("commonmark").enable("table").parse(markdown)
    found: list[list[list[str]]] = []
    current: list[str] | None = None
    for token in tokens:
        if token.type == "table_open":
            found.append([])
        elif token.type == "tr_open":
            current = []
        elif token.type == "inline" and current is not None:
            current.append(token.content)
        elif token.type == "tr_close" and current is not None:
            found[-1].append(current)
            current = None
    return found


def of_type(markdown: str, kind: str) -> list[Token]:
    return [t for t in MarkdownIt("commonmark").enable("table").parse(markdown) if t.type == kind]


def test_the_crawl_table_parses_as_one_gfm_table_with_a_row_a_crawl():
    rows = [row(i, "retained-objects" if i % 2 else "steady") for i in range(5)]
    text = step_summary(HEADER, rows, [], report_dir=".crawlmem")
    (table,) = tables(text)
    assert table[0] == HEADER
    assert len(table) == 6 and all(len(r) == len(HEADER) for r in table)
    assert table[2][HEADER.index("fingerprint")] == "0000000000000001"
    assert "5 crawls; reports under `.crawlmem`." in text


def test_pipes_line_breaks_and_html_in_a_test_id_stay_inside_their_cell():
    awkward = ["t.py::test[a|b <script>]\nsecond line", *row(0)[1:]]
    (table,) = tables(step_summary(HEADER, [awkward], []))
    assert len(table[1]) == len(HEADER)
    assert table[1][0] == "t.py::test[a|b &lt;script&gt;]<br>second line"  # one cell: the pipe escaped, HTML inert
    assert cell("") == "-"


def test_every_failure_is_a_fenced_block_even_when_it_holds_backticks():
    failures = [("t.py::test_a", "crawl_memory budget broken: heap grew\n```\nnot the end\n"), ("t.py::test_b", "E  boom")]
    text = step_summary(HEADER, [row(0)], failures)
    fences = of_type(text, "fence")
    assert [f.content.strip() for f in fences] == ["crawl_memory budget broken: heap grew\n```\nnot the end", "E  boom"]
    assert "### Failures (2)" in text


def test_a_thousand_crawls_and_their_failures_stay_under_githubs_limit_and_say_what_was_left_out():
    rows = [row(i, "retained-objects") for i in range(1000)]
    failures = [(f"tests/test_shop.py::test_spider[case-{i}]", ("E   " + "x" * 120 + "\n") * 60) for i in range(1000)]
    text = step_summary(HEADER, rows, failures)
    size = len(text.encode("utf-8"))
    assert size <= STEP_SUMMARY_LIMIT - HEADROOM < STEP_SUMMARY_LIMIT
    (table,) = tables(text)
    assert len(table) == 1001  # every crawl: 1,000 rows fit in three quarters of the budget
    assert "more failures not shown: GitHub keeps 1 MiB of a step's summary" in text
    assert "(cut here: the whole text is in the job's log)" in text  # each failure is cut at FAILURE_BYTES
    assert all(len(f.content.encode()) <= FAILURE_BYTES + 100 for f in of_type(text, "fence"))


def test_a_table_too_long_for_the_budget_is_cut_with_a_line_saying_so():
    rows = [row(i) for i in range(1000)]
    text = step_summary(HEADER, rows, [], limit_bytes=64 * 1024, report_dir=".crawlmem")
    (table,) = tables(text)
    shown = len(table) - 1
    assert 0 < shown < 1000
    assert f"{1000 - shown:,} more crawls not shown ({shown:,} of 1,000)" in text
    assert "under `.crawlmem`" in text
    assert len(text.encode()) <= 64 * 1024


def test_appending_counts_what_the_step_already_wrote(tmp_path: Path):
    target = tmp_path / "summary.md"
    target.write_text("# earlier step output\n" + "y" * (STEP_SUMMARY_LIMIT - HEADROOM - 4096))
    written = append_step_summary(target, HEADER, [row(i) for i in range(100)], [])
    assert written > 0 and target.stat().st_size <= STEP_SUMMARY_LIMIT - HEADROOM
    assert target.read_text().startswith("# earlier step output\n")
    full = tmp_path / "full.md"
    full.write_text("z" * STEP_SUMMARY_LIMIT)
    assert append_step_summary(full, HEADER, [row(0)], []) == 0 and full.stat().st_size == STEP_SUMMARY_LIMIT


def test_the_plugin_appends_its_table_and_failures_when_github_step_summary_is_set(pytester: pytest.Pytester):
    from spiders_source import SPIDERS

    pytester.makepyfile(spiders=SPIDERS)
    pytester.makepyfile(test_crawl='''
import pytest
from spiders import *


@pytest.mark.crawl_memory(peak_rss="2 GiB")
def test_within(crawl, fixture_site):
    crawl(Catalog, start_urls=[fixture_site.url("/catalog/?pages=2&per_page=20")])


@pytest.mark.crawl_memory(peak_rss="1 MiB")
def test_over(crawl, fixture_site):
    crawl(Catalog, start_urls=[fixture_site.url("/catalog/?pages=2&per_page=20")])


def test_not_a_crawl():
    assert 1 == 2
''')
    target = pytester.path / "step-summary.md"
    target.write_text("earlier\n")
    pytester._monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(target))
    outcome = pytester.runpytest_subprocess("-p", "no:cacheprovider", timeout=300)
    outcome.assert_outcomes(passed=1, failed=2)
    text = target.read_text()
    assert text.startswith("earlier\n\n## crawl memory")
    (table,) = tables(text)
    assert table[0] == HEADER
    assert [r[0] for r in table[1:]] == ["test_crawl.py::test_over", "test_crawl.py::test_within"]
    assert [r[HEADER.index("outcome")] for r in table[1:]] == ["failed", "passed, leak not judged"]
    blocks = [f.content for f in of_type(text, "fence")]
    assert len(blocks) == 2
    assert any("peak RSS was" in b and "over the budget peak_rss=1.0 MiB" in b for b in blocks), blocks
    assert any("assert 1 == 2" in b for b in blocks), blocks
