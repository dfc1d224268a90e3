"""The docs: generated tables match the code and the benchmarks' latest results, links resolve, the docs and the
README stay short and free of development-round numbers, benchmarks/results stays small (pure, no crawl)."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from pytest_crawlmem.core.budgets import SPECS
from pytest_crawlmem.reports import docgen, figures

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
RESULTS = ROOT / "benchmarks" / "results"
#: A development round, session or issue number, as a diary names them ("session 12", "round 25", "-s10", "s25/").
ROUND_NUMBERS = re.compile(r"(?i)\b(?:session|round|issue) \d+\b|-s\d+\b|\bs\d{1,2}/"
                           r"|\b(?:fourth|fifth|sixth|seventh|eighth|ninth|tenth|eleventh|twelfth|\d+(?:st|nd|rd|th)) session\b")


def test_the_generated_tables_match_the_code():
    stale = docgen.stale_files(DOCS)
    assert not stale, (f"{', '.join(str(p.relative_to(ROOT)) for p in stale)}: the generated tables differ from the code;"
                       f" run `{docgen.COMMAND}` to regenerate them")


def test_every_enforced_budget_is_in_the_budget_table():
    text = (DOCS / "budgets.md").read_text()
    for name, spec in SPECS.items():
        assert (f"| `{name}` |" in text) == spec.enforced, name


def test_a_table_that_drifted_is_found_and_rewritten(tmp_path, capsys):
    page = tmp_path / "budgets.md"
    page.write_text("# Budgets\n\n<!-- generated: budgets -->\n| `peak_rss` | old |\n<!-- end generated -->\n\nmore\n")
    assert docgen.main([str(tmp_path), "--check"]) == 1
    assert f"run `{docgen.COMMAND}` to regenerate them" in capsys.readouterr().out
    assert docgen.main([str(tmp_path)]) == 0
    assert docgen.main([str(tmp_path), "--check"]) == 0
    text = page.read_text()
    assert "| `max_scheduled` |" in text and text.endswith("<!-- end generated -->\n\nmore\n")


def test_an_unknown_block_is_an_error_naming_it(tmp_path):
    with pytest.raises(ValueError, match=r"unknown generated block 'colours' in page.md"):
        docgen.render("<!-- generated: colours -->\nx\n<!-- end generated -->\n", source="page.md")
    assert docgen.main([str(tmp_path / "missing")]) == 2


def test_the_readme_is_a_short_guide_with_the_two_commands_at_the_top():
    readme = (ROOT / "README.md").read_text()
    assert len(readme.encode()) <= 8 * 1024, f"README.md is {len(readme.encode()):,} bytes: move reference to docs/"
    head = readme[:600]
    assert "python3 -m pytest -n 2 --dist loadfile -p no:cacheprovider" in head  # what .ci/run runs
    assert "pip install" in head


def _anchors(page: Path) -> set[str]:
    """The anchors GitHub gives a page's headings: lower case, punctuation dropped, spaces as hyphens."""
    headings = re.findall(r"^#+\s+(.+?)\s*$", re.sub(r"```.*?```", "", page.read_text(), flags=re.S), flags=re.M)
    return {re.sub(r"[^\w\- ]", "", h.lower()).replace(" ", "-") for h in headings}


@pytest.mark.parametrize("page", [ROOT / "README.md", *sorted(DOCS.glob("*.md"))], ids=lambda p: p.name)
def test_every_relative_link_resolves(page):
    for target, anchor in re.findall(r"\]\(([^)#\s]*)(?:#([^)\s]*))?\)", page.read_text()):
        if "://" in target or target.startswith("mailto:") or (not target and not anchor):
            continue
        path = (page.parent / target).resolve() if target else page
        assert path.exists(), f"{page.name} links to {target}, which does not exist"
        if anchor and path.suffix == ".md" and path.exists():
            assert anchor in _anchors(path), f"{page.name} links to {target}#{anchor}: no such heading in {path.name}"


def test_the_browser_page_states_the_pss_read_interval_the_code_defaults_to():
    from pytest_crawlmem.core.defaults import CRAWLMEM_DEFAULTS

    seconds = CRAWLMEM_DEFAULTS["CRAWLMEM_BROWSER_DETAIL_SECONDS"]
    text = " ".join((DOCS / "browser.md").read_text().split())
    assert f"at most every {seconds:g} s (`CRAWLMEM_BROWSER_DETAIL_SECONDS`, default {seconds})" in text
    assert not re.search(r"PSS[^.]*once a second", text), "the page says PSS is read once a second"


def test_every_figures_block_renders_from_the_latest_results():
    for name, render in figures.FIGURES.items():
        table = render(RESULTS)
        assert table.startswith("| ") and "benchmarks/results/" in table, name


def test_a_figures_table_left_behind_by_a_newer_benchmark_run_is_stale(tmp_path, capsys):
    docs, results = tmp_path / "docs", tmp_path / "benchmarks" / "results"
    docs.mkdir()
    shutil.copytree(RESULTS, results)
    page = docs / "cluster.md"
    page.write_text("# Cluster\n\n<!-- generated: figures-cluster -->\n<!-- end generated -->\n")
    assert docgen.main([str(docs)]) == 0 and docgen.main([str(docs), "--check"]) == 0
    data = json.loads((results / "cluster_cost.json").read_text())
    data["parts"]["latest"]["summary"]["summary"]["ledger"]["redis_bytes_per_request"] = 1234.0  # a newer run
    (results / "cluster_cost.json").write_text(json.dumps(data))
    assert docgen.main([str(docs), "--check"]) == 1
    assert "the benchmarks' results" in capsys.readouterr().out
    assert docgen.main([str(docs)]) == 0 and "| 1234 B |" in page.read_text()


def test_a_results_file_without_a_figure_its_table_needs_fails_naming_file_and_key(tmp_path, capsys):
    docs, results = tmp_path / "docs", tmp_path / "benchmarks" / "results"
    docs.mkdir()
    results.mkdir(parents=True)
    (docs / "governor.md").write_text("<!-- generated: figures-governor -->\n<!-- end generated -->\n")
    (results / "governor.json").write_text(json.dumps({"budget_mib": 300, "runs": [{"workload": "large"}]}))
    with pytest.raises(figures.FiguresError, match=r"benchmarks/results/governor.json: no 'runs.0.mode'"):
        figures.governor(results)
    assert docgen.main([str(docs), "--check"]) == 2
    assert "governor.json: no 'runs.0.mode'" in capsys.readouterr().err
    (results / "governor.json").unlink()
    with pytest.raises(figures.FiguresError, match=r"no such file; run the benchmark \(benchmarks/governor.py\)"):
        figures.governor(results)


def test_benchmark_results_are_one_small_latest_file_per_benchmark():
    files = sorted(RESULTS.rglob("*"))
    assert all(path.is_file() and path.suffix == ".json" for path in files), "only one JSON file per benchmark"
    assert sum(path.stat().st_size for path in files) <= 2 * 1024 * 1024
    for path in files:
        assert not ROUND_NUMBERS.search(path.name) and not re.search(r"(?i)session|round|-s\d", path.name), path.name
        data = json.loads(path.read_text())
        if path.name == "governor.json":  # as its own benchmark writes it
            assert isinstance(data.get("runs"), list), path.name
            continue
        if path.name == "backpressure.json":  # one entry per shape, each with its runs
            assert all(isinstance(shape.get("runs"), list) for shape in data["shapes"].values()), path.name
            continue
        assert data["format"] == 1 and data["benchmark"] == path.stem, path.name
        for name, part in data["parts"].items():
            assert {"written", "command", "machine", "summary"} <= set(part), f"{path.name}: part {name}"


def test_the_docs_are_short_reference_pages_without_round_numbers():
    pages = sorted(DOCS.glob("*.md"))
    sizes = {page.name: len(page.read_bytes()) for page in pages}
    assert sum(sizes.values()) <= 150 * 1024, f"docs/ holds {sum(sizes.values()):,} bytes: cut history, keep reference"
    assert max(sizes.values()) <= 20 * 1024, max(sizes.items(), key=lambda item: item[1])
    for page in [ROOT / "README.md", *pages]:
        found = ROUND_NUMBERS.findall(page.read_text())
        assert not found, f"{page.name} names development rounds: {found[:5]}"
